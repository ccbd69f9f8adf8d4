"""The pure steps of the log calls: what each statement is sent, what it answers.

Example:
    from chatledger import Message, MessageWindow
    from chatledger_neo4j.log_steps import log_append_parameters, view_parameters

    batch = [Message.system("Be brief."), Message.user("hi")]
    parameters = log_append_parameters("c1", batch, None, keys={})
    parameters["rows"][0]["key"]      # the system message's system_key text
    view_parameters("c1", MessageWindow(20), 28)["limit"]   # the newest 28 rows

A log call runs one statement per round trip (``Statements.log_append``,
``view``, ``view_older``, ``page_newest``, ``page_oldest``), the trim of a
bounded log one transaction after the append (``trim_start``, the view of
the append's window, ``trim``), and a removal one statement in a transaction
of its own (``remove_newest``, ``remove_named``); the sync and the async
repository send the same parameters and read the answers with the same
functions, all here.
Nothing here does I/O.

What the log keeps beside each message, and why:

- ``seq``: its place in the conversation's gap-free sequence; views and pages
  seek it (``(conversation_id, seq)``), newest first or oldest first.
- ``batch``: the sequence number of the first message the append that stored
  it stored. Rule 1 (:func:`chatledger.adapters.current_system`) shows the
  system messages of the latest batch that has any. A message written by
  ``save_all`` or by a release before the log has none, which counts as 0:
  what such a store holds is one window, whose system messages all show.
- ``system_key`` (system messages only): :func:`chatledger.adapters.system_key`
  of the message, the text rule 1 compares in the server. A system message
  written before the log has none: the first log append that needs it has
  the server answer its payload (``unkeyed``), computes the key here and
  sends it with the append again, which stores it.
- ``size`` and ``size_counter``: its size under the counter of the window
  the append was given, which a view of a window with that counter uses
  instead of measuring the message again.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, LiteralString

from chatledger.adapters import (
    EVICTED_IDS_KEPT,
    AppendResult,
    LogRow,
    Message,
    Role,
    Window,
    codec,
    current_system,
    system_key,
)
from chatledger_neo4j.cypher import Statements
from chatledger_neo4j.steps import SYSTEM

__all__ = [
    "KEY_ROUNDS",
    "NO_BOUND",
    "RETRY_TIME",
    "appended_numbers",
    "log_append_parameters",
    "log_append_result",
    "older_parameters",
    "page_query",
    "page_rows",
    "removal_parameters",
    "removed_messages",
    "retry_delays",
    "system_rows",
    "tail_rows",
    "trim_parameters",
    "trim_start_parameters",
    "unkeyed_keys",
    "view_parameters",
    "view_settled",
]

#: The largest integer Neo4j stores: the upper bound of a read from the newest.
NO_BOUND = 2**63 - 1
#: Log appends sent again with the keys of system messages stored without one.
KEY_ROUNDS = 8
#: Seconds a statement that keeps failing with a retryable error is retried
#: for, counted from its first failure (the driver's own default for the
#: managed transactions it retries).
RETRY_TIME = 30.0
_FIRST_RETRY_DELAY = 0.05
_MAX_RETRY_DELAY = 2.0


def retry_delays() -> Iterator[float]:
    """Seconds to wait before each retry of a statement: doubling, jittered.

    Deadlocks of writers creating one conversation at once clear in
    milliseconds, so the first wait is short; later ones double up to two
    seconds, each within 20% either way so that writers that failed together
    do not retry together.
    """
    delay = _FIRST_RETRY_DELAY
    while True:
        yield delay * random.uniform(0.8, 1.2)
        delay = min(delay * 2, _MAX_RETRY_DELAY)


# -- append -------------------------------------------------------------------


def log_append_parameters(
    conversation_id: str,
    batch: Sequence[Message],
    window: Window | None,
    keys: Mapping[str, str],
) -> dict[str, Any]:
    """The parameters of ``Statements.log_append`` for a stamped batch.

    Args:
        conversation_id: The conversation.
        batch: The messages, validated and stamped (a retry sends the same).
        window: Its counter, if any, names the sizes stored beside each.
        keys: The system_key of stored system messages that have none, by id.
    """
    counter = None if window is None else window.counter_id
    rows = [
        {
            "id": m.id,
            "role": m.role.value,
            "payload": codec.to_json(m),
            "key": system_key(m) if m.role is Role.SYSTEM else None,
            "size": None if window is None or counter is None else window.measure(m),
            "size_counter": counter,
        }
        for m in batch
    ]
    return {
        "cid": conversation_id,
        "ids": [m.id for m in batch],
        "rows": rows,
        "system": SYSTEM,
        "counter": counter,
        "keys": dict(keys),
    }


def unkeyed_keys(unkeyed: Sequence[Sequence[Any]]) -> dict[str, str]:
    """The system_key of each ``[id, payload]`` the append answered as unkeyed."""
    return {
        str(message_id): system_key(codec.from_json(payload))
        for message_id, payload in unkeyed
    }


def log_append_result(
    record: Mapping[str, Any], batch: Sequence[Message]
) -> AppendResult:
    """What ``append_to_log`` returns: the messages stored, in batch order."""
    stored = set(record["appended"])
    return AppendResult([m for m in batch if m.id in stored])


def appended_numbers(record: Mapping[str, Any]) -> tuple[int, int] | None:
    """The sequence numbers ``first..last`` the append stored, if it stored any."""
    appended = record["appended"]
    if not appended:
        return None
    first = int(record["first"])
    return first, first + len(appended) - 1


# -- the trim of a bounded log -------------------------------------------------


def trim_start_parameters(
    conversation_id: str, anchor: str, last: int, first_kept: int
) -> dict[str, Any]:
    """The parameters of ``Statements.trim_start``.

    Args:
        conversation_id: The conversation.
        anchor: The id of the append's last message, numbered ``last``.
        last: The number of the append's last message.
        first_kept: :meth:`Retention.first_kept` of ``last``: where the
            first user message is looked for.
    """
    return {
        "cid": conversation_id,
        "anchor": anchor,
        "last": last,
        "first_kept": first_kept,
        "user": Role.USER.value,
    }


def trim_parameters(conversation_id: str, cutoff: int) -> dict[str, Any]:
    """The parameters of ``Statements.trim``: everything below ``cutoff`` goes
    but the current system set."""
    return {
        "cid": conversation_id,
        "cutoff": cutoff,
        "system": SYSTEM,
        "evicted_kept": EVICTED_IDS_KEPT,
    }


# -- removals on request -------------------------------------------------------


def removal_parameters(
    conversation_id: str,
    *,
    count: int | None = None,
    message_ids: Sequence[str] = (),
) -> dict[str, Any]:
    """The parameters of ``Statements.remove_newest`` (given ``count``) or
    ``Statements.remove_named`` (given ``message_ids``)."""
    return {
        "cid": conversation_id,
        "count": count,
        "ids": list(message_ids),
        "system": SYSTEM,
    }


def removed_messages(record: Mapping[str, Any] | None) -> list[Message]:
    """What a removal returns: the payloads it answered, oldest first; none
    when there was no conversation (no record)."""
    if record is None:
        return []
    return [codec.from_json(payload) for payload in record["removed"]]


# -- views --------------------------------------------------------------------


def view_parameters(conversation_id: str, window: Window, rows: int) -> dict[str, Any]:
    """The parameters of ``Statements.view``: the newest ``rows`` rows."""
    return {
        "cid": conversation_id,
        "system": SYSTEM,
        "counter": window.counter_id,
        "below": NO_BOUND,
        "limit": rows,
    }


def older_parameters(
    conversation_id: str, window: Window, oldest: LogRow, rows: int
) -> dict[str, Any]:
    """The parameters of ``Statements.view_older``: ``rows`` rows below ``oldest``."""
    return {
        "cid": conversation_id,
        "system": SYSTEM,
        "counter": window.counter_id,
        "below": oldest.sequence,
        "anchor": oldest.message.id,
        "limit": rows,
    }


def view_settled(record: Mapping[str, Any]) -> bool:
    """Whether a view read shows the state one write committed.

    The conversation's version, read before and after the rows, is the same
    (every write sets a new one before it touches a message: see
    :func:`chatledger_neo4j.steps.snapshot_payloads`), and no row is a
    message deleted while it was read (its payload null). With no
    conversation node, only "no rows" held at the first read.
    """
    before = record["before"]
    payloads = [row[2] for row in record["system"]] + [row[1] for row in record["tail"]]
    if before != record["after"] or (not before and payloads):
        return False
    return all(isinstance(payload, str) for payload in payloads)


def system_rows(record: Mapping[str, Any]) -> list[LogRow]:
    """The system messages a view shows: ``[seq, batch, payload, size]`` rows.

    The statement reads the system rows of the latest batch already; this
    keeps that batch alone should it have read two.
    """
    return current_system(
        (int(batch), LogRow(int(seq), codec.from_json(payload), size))
        for seq, batch, payload, size in record["system"]
    )


def tail_rows(record: Mapping[str, Any]) -> list[LogRow]:
    """The non-system rows of a view read, newest first: ``[seq, payload, size]``."""
    return [
        LogRow(int(seq), codec.from_json(payload), size)
        for seq, payload, size in record["tail"]
    ]


# -- pages --------------------------------------------------------------------


def page_query(
    statements: Statements,
    conversation_id: str,
    after: int | None,
    limit: int,
    newest_first: bool,
) -> tuple[LiteralString, dict[str, Any]]:
    """The statement and parameters of one page: one row more than ``limit``."""
    if newest_first:
        below = NO_BOUND if after is None else after
        return statements.page_newest, {
            "cid": conversation_id,
            "below": below,
            "limit": limit + 1,
        }
    return statements.page_oldest, {
        "cid": conversation_id,
        "after": -1 if after is None else after,
        "limit": limit + 1,
    }


def page_rows(record: Mapping[str, Any]) -> list[tuple[int, Message]] | None:
    """The ``(seq, message)`` rows of a page, or ``None`` if one was being deleted.

    A message that a concurrent window append evicts can be read as a row
    whose payload is already gone; the page is read again then.
    """
    rows = record["rows"]
    if not all(isinstance(payload, str) for _, payload in rows):
        return None
    return [(int(seq), codec.from_json(payload)) for seq, payload in rows]
