"""The pure steps of every Neo4j operation: what to send, and what a result means.

Example:
    from chatledger import Message, MessageWindow
    from chatledger.adapters import StoredWindow, plan_append
    from chatledger_neo4j.steps import (
        append_parameters,
        fresh_messages,
        probe_parameters,
        stored_window,
    )

    window = MessageWindow(20)
    batch = [Message.user("hi")]
    probe_parameters("c1", batch, window)     # the parameters of Statements.probe
    state = {                                 # what the probe of a new one returns
        "next_seq": 0, "message_count": 0, "size_total": None,
        "size_counter": None, "known": [], "evicted": [], "system": [], "page": [],
    }
    fresh = fresh_messages(batch, state)      # the batch less stored or evicted ids
    stored = stored_window(StoredWindow, state, window, 0, lambda n: iter([]))
    plan = plan_append(stored, fresh, window)
    append_parameters("c1", plan, state, window)["next_seq"]   # 1

The sync and the async repository run the same statements
(:class:`chatledger_neo4j.cypher.Statements`) in the same order; only the way
they reach the server differs. Everything between two statements (the
parameters of the next one, what the planner is told, what a read result
means, when a paged read stops, whether a commit was confirmed) is here, so
both call the same code and neither decides anything of its own.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, LiteralString, TypeVar

from neo4j.exceptions import ClientError, IncompleteCommit

from chatledger.adapters import (
    EVICTED_IDS_KEPT,
    AppendPlan,
    AppendResult,
    ConversationPage,
    Message,
    Role,
    StoredEntry,
    Window,
    codec,
    system_key,
)
from chatledger_neo4j.cypher import Statements

__all__ = [
    "EMPTIED",
    "FIRST_PAGE",
    "MAX_PAGE",
    "PURGE_BATCH",
    "SNAPSHOT_ATTEMPTS",
    "SYSTEM",
    "append_parameters",
    "append_result",
    "checked_payloads",
    "confirm_commit",
    "conversation_page",
    "decoded",
    "fresh_messages",
    "ids_page_query",
    "is_schema_race",
    "kept_total",
    "list_ids_query",
    "listed_ids",
    "measured_total",
    "message_row",
    "next_page",
    "page_entries",
    "page_parameters",
    "probe_parameters",
    "purge_done",
    "replace_parameters",
    "schema_object",
    "sizes_parameters",
    "snapshot_payloads",
    "stored_window",
]

W = TypeVar("W")
#: The role value of system messages, a parameter of the reads.
SYSTEM = Role.SYSTEM.value
#: Rows of the oldest messages read by the first page of an eviction; a window
#: that overflows by a turn rarely needs more.
FIRST_PAGE = 32
#: Later pages double up to this many rows.
MAX_PAGE = 1024
#: Reads of a conversation that writes keep interleaving with before the
#: read takes the conversation's write lock instead.
SNAPSHOT_ATTEMPTS = 8
#: Nodes deleted per transaction by ``drop_schema``.
PURGE_BATCH = 5000
#: Errors a concurrent ``CREATE ... IF NOT EXISTS`` of the same schema may raise.
_SCHEMA_RACES = frozenset(
    {
        "Neo.ClientError.Schema.EquivalentSchemaRuleAlreadyExists",
        "Neo.ClientError.Schema.ConstraintAlreadyExists",
        "Neo.ClientError.Schema.IndexAlreadyExists",
    }
)
#: The kind and the name a schema statement of ``Statements.schema`` creates.
_CREATED = re.compile(r"CREATE (CONSTRAINT|INDEX) `([^`]+)`")


# -- schema -------------------------------------------------------------------


def is_schema_race(error: ClientError) -> bool:
    """Whether ``error`` is a concurrent creator's same schema rule, not a fault."""
    return error.code in _SCHEMA_RACES


def schema_object(statement: str) -> str:
    """What a schema statement creates: ``index <name>`` or ``constraint <name>``."""
    created = _CREATED.match(statement)
    assert created is not None, statement
    return f"{created.group(1).lower()} {created.group(2)}"


def purge_done(deleted: int) -> bool:
    """Whether a ``drop_schema`` batch that deleted ``deleted`` nodes was the last."""
    return deleted < PURGE_BATCH


def confirm_commit(bookmarks: Iterable[str]) -> None:
    """Raise unless the commit came back with a bookmark.

    Every commit the server confirms carries a bookmark. A server that killed
    the connection (``dbms.killConnection``) can still answer the pending
    COMMIT with an empty SUCCESS and then close: the driver reports success,
    yet nothing was committed.

    Raises:
        neo4j.exceptions.IncompleteCommit: ``bookmarks`` is empty.
    """
    if not any(True for _ in bookmarks):
        raise IncompleteCommit(
            "Neo4j answered the commit without a bookmark and closed the "
            "connection; the write may not be stored (retrying the same "
            "write is safe)"
        )


# -- reads --------------------------------------------------------------------


def listed_ids(values: Iterable[Any]) -> list[str]:
    """The ids of a ``list_ids`` result.

    A conversation deleted while the label is scanned reads as null.
    """
    return [value for value in values if isinstance(value, str)]


#: The property that marks a conversation its window emptied, which the
#: listings name as ``$emptied`` (see :attr:`Statements.list_ids`).
EMPTIED = "emptied"


def list_ids_query(statements: Statements) -> tuple[LiteralString, dict[str, Any]]:
    """The statement and parameters that list every conversation id."""
    return statements.list_ids, {"emptied": EMPTIED}


def ids_page_query(
    statements: Statements, after: str | None, limit: int
) -> tuple[LiteralString, dict[str, Any]]:
    """The statement and parameters of one page of ids: one more than ``limit``."""
    if after is None:
        return statements.first_ids_page, {"emptied": EMPTIED, "limit": limit + 1}
    return statements.ids_page_after, {
        "emptied": EMPTIED,
        "after": after,
        "limit": limit + 1,
    }


def conversation_page(ids: Sequence[Any], limit: int) -> ConversationPage:
    """The page of an :func:`ids_page_query` result: the extra id says "more"."""
    found = [str(value) for value in ids]
    if len(found) > limit:
        return ConversationPage(found[:limit], found[limit - 1])
    return ConversationPage(found, None)


def snapshot_payloads(record: Mapping[str, Any]) -> list[str] | None:
    """The payloads of a ``read_snapshot`` row, or ``None`` if a write interleaved.

    Neo4j reads at read committed, without read locks: one query can see a
    message that a concurrent append evicts as a null payload, and the
    messages that append adds further on. Every write sets a new version on
    the conversation before it touches its messages, so the same version read
    before and after the messages proves no write committed between.
    """
    before, payloads = record["before"], record["payloads"]
    # With no conversation node, only "no messages" is a state that held at
    # the first read; a null payload is a message deleted while it was read.
    settled = before == record["after"] and (bool(before) or not payloads)
    if (
        settled
        and len(payloads) == record["messages"]
        and all(isinstance(p, str) for p in payloads)
    ):
        return list(payloads)
    return None


def checked_payloads(payloads: Sequence[Any], conversation_id: str) -> list[str]:
    """The payloads of a ``read_all`` made under the lock, each a ``str``.

    Raises:
        RuntimeError: a message node has no payload (not written by chatledger).
    """
    if not all(isinstance(p, str) for p in payloads):
        raise RuntimeError(f"a message of {conversation_id!r} has no payload")
    return list(payloads)


def decoded(payloads: Iterable[str]) -> list[Message]:
    """The messages of stored payloads, in order."""
    return [codec.from_json(payload) for payload in payloads]


# -- replace ------------------------------------------------------------------


def message_row(
    message: Message, seq: int, batch: int, size: int | None, counter: str | None
) -> dict[str, Any]:
    """One message as the ``rows`` parameter of ``append`` or ``replace`` holds it.

    ``batch`` is the sequence number of the first message its write stored,
    and a system message carries its ``system_key``: what a log append's
    rule 1 reads (see :mod:`chatledger_neo4j.log_steps`).
    """
    system = message.role is Role.SYSTEM
    return {
        "id": message.id,
        "seq": seq,
        "batch": batch,
        "role": message.role.value,
        "payload": codec.to_json(message),
        "size": size,
        "size_counter": counter,
        "system_key": system_key(message) if system else None,
    }


def replace_parameters(
    conversation_id: str, batch: Sequence[Message]
) -> dict[str, Any]:
    """The parameters of ``Statements.replace`` for a stamped, non-empty batch."""
    return {
        "cid": conversation_id,
        "keep": [m.id for m in batch],
        # A replace is one batch, numbered 0 as stores before the log read.
        "rows": [message_row(m, seq, 0, None, None) for seq, m in enumerate(batch)],
        "next_seq": len(batch),
        "message_count": sum(1 for m in batch if m.role is not Role.SYSTEM),
        "size_total": None,
        "size_counter": None,
    }


# -- the window append --------------------------------------------------------


def probe_parameters(
    conversation_id: str, batch: Sequence[Message], window: Window
) -> dict[str, Any]:
    """The parameters of ``Statements.probe``, the append's first statement."""
    return {
        "cid": conversation_id,
        "ids": [m.id for m in batch],
        "system": SYSTEM,
        "counter": window.counter_id,
        "limit": FIRST_PAGE,
    }


def fresh_messages(batch: Sequence[Message], state: Mapping[str, Any]) -> list[Message]:
    """The messages of ``batch`` whose id the probed conversation does not know.

    Ids still stored and ids the window already took out (the record of
    evicted ids) alike: a late retry of either stores nothing.
    """
    known = {*state["known"], *state["evicted"]}
    return [m for m in batch if m.id not in known]


def kept_total(state: Mapping[str, Any], window: Window) -> int | None:
    """The stored non-system size in ``window``'s measure, if the node keeps it.

    ``None``: another measure was kept until now, and every message is to be
    sized once (``Statements.read_sizes``, then :func:`measured_total`); the
    append then stores this measure's total on the conversation.
    """
    counter = window.counter_id
    if counter is None:
        return int(state["message_count"])
    if state["size_counter"] == counter and state["size_total"] is not None:
        return int(state["size_total"])
    return None


def sizes_parameters(conversation_id: str, window: Window) -> dict[str, Any]:
    """The parameters of ``Statements.read_sizes``."""
    return {"cid": conversation_id, "system": SYSTEM, "counter": window.counter_id}


def measured_total(rows: Iterable[Mapping[str, Any]], window: Window) -> int:
    """The total size of the rows of ``Statements.read_sizes``."""
    return sum(
        _size(row["size"], row["size_counter"], row["payload"], window) for row in rows
    )


def stored_window(
    make: Callable[..., W],
    state: Mapping[str, Any],
    window: Window,
    total: int,
    read_oldest: Callable[[int], Any],
) -> W:
    """What the planner is told of the probed conversation.

    ``make`` is ``StoredWindow`` (sync) or ``AsyncStoredWindow`` (async), and
    ``read_oldest`` its matching reader of the oldest messages.
    """
    system = decoded(state["system"])
    return make(
        system_count=len(system),
        system_size=sum(window.measure(m) for m in system),
        count=int(state["message_count"]),
        total=total,
        read_oldest=read_oldest,
        system=system,
    )


def page_entries(page: Iterable[Sequence[Any]], window: Window) -> list[StoredEntry]:
    """A page of the oldest messages (``[id, seq, role, size, counter, payload]``)."""
    return [
        StoredEntry(str(mid), Role(role), _size(size, size_counter, payload, window))
        for mid, _, role, size, size_counter, payload in page
    ]


def next_page(page: Sequence[Sequence[Any]], limit: int) -> tuple[int, int] | None:
    """After a page read with ``limit``: (the last seq read, the next limit).

    ``None`` when the page came back short: there is nothing further.
    """
    if len(page) < limit:
        return None
    return int(page[-1][1]), min(limit * 2, MAX_PAGE)


def page_parameters(
    conversation_id: str, after: int, limit: int, window: Window
) -> dict[str, Any]:
    """The parameters of ``Statements.read_page``."""
    return {
        "cid": conversation_id,
        "after": after,
        "system": SYSTEM,
        "counter": window.counter_id,
        "limit": limit,
    }


def append_parameters(
    conversation_id: str,
    plan: AppendPlan,
    state: Mapping[str, Any],
    window: Window,
) -> dict[str, Any]:
    """The parameters of ``Statements.append``: every write of the plan at once.

    The new messages, the evictions, the record of evicted ids and the
    counters. A window that leaves nothing keeps the node, marked emptied,
    for the record.
    """
    counter = window.counter_id
    next_seq = int(state["next_seq"])
    rows = [
        message_row(
            m, next_seq + i, next_seq, None if counter is None else size, counter
        )
        for i, (m, size) in enumerate(zip(plan.insert, plan.insert_sizes, strict=True))
    ]
    return {
        "cid": conversation_id,
        "rows": rows,
        "delete_ids": plan.delete_ids,
        "evicted": plan.evicted_ids,
        "evicted_kept": EVICTED_IDS_KEPT,
        "emptied": True if plan.empty else None,
        "next_seq": next_seq + len(rows),
        "message_count": plan.message_count,
        "size_total": None if counter is None else plan.size_total,
        "size_counter": counter,
    }


def append_result(plan: AppendPlan) -> AppendResult:
    """What ``append_to_window`` returns for a plan it wrote."""
    return AppendResult(plan.appended, plan.evicted_ids)


def _size(size: Any, size_counter: Any, payload: Any, window: Window) -> int:
    """A stored message's size: kept beside it when measured the same way."""
    counter = window.counter_id
    if counter is None:
        return 1
    if size_counter == counter and size is not None:
        return int(size)
    return window.measure(codec.from_json(payload))
