"""The most bytes one argument of a command may take, checked before sending.

Example:
    from chatledger_redis.bulk_limit import (
        check_arguments,
        limit_from_reply,
        may_pass_smallest_limit,
    )

    args = ["header", "a message", "another message"]   # an APPEND's ARGV
    if may_pass_smallest_limit(args):        # only then is the server asked
        limit = limit_from_reply({"proto-max-bulk-len": "1048576"})
        check_arguments(args, limit, first=1, per_message=1)

Redis reads each argument of a command as one bulk string of at most
``proto-max-bulk-len`` bytes (512 MiB by default, 1 MiB at the least). A
longer one makes the server close the connection, and redis-py, which
retries a command on a lost connection, sends it again. The repositories
send every message as an argument of its own (or, for ``save_all``, as
four), so it is each argument, not the batch, that must fit: Redis does not
count large arguments against ``client-query-buffer-limit``.

A repository asks the server for the setting (``CONFIG GET``) once, and only
when an argument could be longer than the smallest value a server allows;
a server that refuses ``CONFIG`` (an ACL, a managed service) is taken to
have the default.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from chatledger.adapters import RequestLimit, encoded_size

__all__ = [
    "DEFAULT_MAX_BULK_BYTES",
    "MIN_MAX_BULK_BYTES",
    "PROTO_MAX_BULK_LEN",
    "check_arguments",
    "limit_from_reply",
    "may_pass_smallest_limit",
]

#: The server setting, as ``CONFIG GET`` names it.
PROTO_MAX_BULK_LEN = "proto-max-bulk-len"
#: Its default: 512 MiB.
DEFAULT_MAX_BULK_BYTES = 512 * 1024 * 1024
#: The smallest value a server accepts for it: 1 MiB.
MIN_MAX_BULK_BYTES = 1024 * 1024

# UTF-8 takes at most four bytes a character.
_MAX_BYTES_PER_CHAR = 4


def may_pass_smallest_limit(args: Sequence[Any]) -> bool:
    """Whether an argument may be longer than any server's limit allows.

    Cheap (no encoding): a text argument of at most a quarter of
    :data:`MIN_MAX_BULK_BYTES` characters fits every server.
    """
    return any(
        isinstance(arg, str | bytes)
        and len(arg) * _MAX_BYTES_PER_CHAR > MIN_MAX_BULK_BYTES
        for arg in args
    )


def limit_from_reply(reply: Any) -> int:
    """The setting from a ``CONFIG GET`` reply: a mapping of its name to its
    value (keys and values as text or bytes), or one such mapping per node of
    a cluster, which gives the smallest. :data:`DEFAULT_MAX_BULK_BYTES` when
    the reply holds none (``None`` for a refused ``CONFIG``)."""
    found: list[int] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, bytes | str) and value.strip().isdigit():
            found.append(int(value))
        elif isinstance(value, int) and not isinstance(value, bool):
            found.append(value)

    walk(reply)
    return min(found) if found else DEFAULT_MAX_BULK_BYTES


def check_arguments(
    args: Sequence[Any],
    limit: int,
    *,
    first: int,
    per_message: int,
    item: str = "messages",
) -> None:
    """Refuse a command one of whose arguments is longer than ``limit`` bytes.

    Args:
        args: The script's ARGV.
        limit: The server's ``proto-max-bulk-len``.
        first: The position of the first message's first argument.
        per_message: How many arguments each message takes.
        item: What the error calls the caller's list (``message_ids[3]``).

    Raises:
        MessageTooLargeError: naming the message, its size and the limit.
    """
    bulk = RequestLimit(limit, 0, f"Redis {PROTO_MAX_BULK_LEN}, for one argument")
    for position, arg in enumerate(args):
        if isinstance(arg, str) and len(arg) * _MAX_BYTES_PER_CHAR <= limit:
            continue
        size = encoded_size([arg])
        if not bulk.fits(size):
            index = (position - first) // per_message
            what = f"{item}[{index}]" if position >= first else "the script header"
            bulk.check(size, what)
