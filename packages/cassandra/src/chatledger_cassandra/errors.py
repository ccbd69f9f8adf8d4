"""Errors the Cassandra adapter raises for problems it detects itself.

Example (needs a Cassandra server):
    from chatledger import Message, MessageWindowChatMemory
    from chatledger_cassandra import CassandraChatMemoryRepository, ContentionError

    repository = CassandraChatMemoryRepository.from_url("cassandra://127.0.0.1/chat")
    memory = MessageWindowChatMemory(repository)

    try:
        memory.add("c1", Message.user("hi"))
    except ContentionError:
        ...  # every attempt lost its compare-and-set; nothing was written

Driver exceptions (``cassandra.*``) propagate unchanged, but one: a statement
refused because the keyspace does not exist raises
:class:`~chatledger.StoreNotFoundError` from it, naming ``create_keyspace``.
"""

from __future__ import annotations

import re

from chatledger.adapters import (
    ContentionError,
    InvalidTTLError,
    InvalidUrlError,
    StoreNotFoundError,
)

__all__ = ["ContentionError", "InvalidTTLError", "InvalidURLError", "missing_keyspace"]


class InvalidURLError(InvalidUrlError):
    """A ``cassandra://`` URL cannot be parsed or holds an unknown option.

    It is core's :class:`~chatledger.InvalidUrlError` (so a ``ChatLedgerError``
    and a ``ValueError``), as every adapter's refused URL is.
    """


def missing_keyspace(error: Exception, keyspace: str) -> StoreNotFoundError | None:
    """The error to raise instead of ``error`` when it says ``keyspace`` is missing.

    The server says so in two ways: ``Keyspace 'chat' doesn't exist`` to a
    ``CREATE TABLE``, ``keyspace chat does not exist`` to a statement prepared
    on one of its tables. ``None`` for any other error.
    """
    said = rf"keyspace '?{re.escape(keyspace)}'? (?:doesn't|does not) exist"
    if re.search(said, str(error), re.IGNORECASE) is None:
        return None
    return StoreNotFoundError(
        f"the Cassandra keyspace {keyspace!r} does not exist: create it, or let "
        "the repository create it with create_keyspace=True (in a URL, "
        "?create_keyspace=true; replication=... sets its replication)"
    )
