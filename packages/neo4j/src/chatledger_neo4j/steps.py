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

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, LiteralString, TypeVar

from neo4j.exceptions import ClientError, IncompleteCommit

from chatledger.adapters import (
    EVICTED_IDS_KEPT,
    UNSET,
    AppendPlan,
    AppendResult,
    ConversationInfo,
    ConversationInfoPage,
    ConversationInfoUpdate,
    ConversationPage,
    ConversationQuery,
    Message,
    Role,
    StoredEntry,
    Window,
    codec,
    listing_key,
    system_key,
)
from chatledger_neo4j.cypher import Statements

__all__ = [
    "EMPTIED",
    "FILL_BATCH",
    "FIRST_PAGE",
    "MAX_PAGE",
    "PURGE_BATCH",
    "RECORD_KEYS",
    "SNAPSHOT_ATTEMPTS",
    "SYSTEM",
    "Listing",
    "append_parameters",
    "append_result",
    "checked_payloads",
    "confirm_commit",
    "conversation_page",
    "decoded",
    "fresh_messages",
    "ids_page_query",
    "info_parameters",
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
    "record_info",
    "record_parameters",
    "replace_parameters",
    "schema_object",
    "sizes_parameters",
    "snapshot_payloads",
    "stored_window",
    "time_fills",
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
#: The names of the record's properties that no index names, which the record
#: statements take as ``$keys`` (see ``Statements.get_info``).
RECORD_KEYS = {
    "created_at": "created_at",
    "metadata": "metadata",
    "message_count": "message_count",
}
#: Conversations an upgrade reads and fills the record times of per statement.
FILL_BATCH = 1000
#: The most records one read of a listing asks for, when a metadata filter
#: leaves rows out.
_MAX_LISTING_BATCH = 1024
#: The largest integer Neo4j stores: no bound on ``updated_at``.
_NO_BOUND = 2**63 - 1
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MILLISECOND = timedelta(milliseconds=1)
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
        # Whether the messages change, which moves the record's updated_at.
        "moved": bool(plan.insert or plan.delete_ids),
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


# -- conversation records -------------------------------------------------------


def info_parameters(update: ConversationInfoUpdate) -> dict[str, Any]:
    """The parameters of ``Statements.set_info`` for a checked update.

    Metadata is stored as its compact JSON text, ``{}`` as no property.
    """
    metadata = update.metadata_json
    return {
        "cid": update.conversation_id,
        "set_owner": update.owner is not UNSET,
        "owner": None if update.owner is UNSET else update.owner,
        "set_metadata": metadata is not UNSET,
        "metadata": None if metadata is UNSET or metadata == "{}" else metadata,
        **record_parameters(),
    }


def record_parameters() -> dict[str, Any]:
    """What every statement that reads records takes beside its own."""
    return {"system": SYSTEM, "keys": RECORD_KEYS}


def _moment(milliseconds: int) -> datetime:
    return _EPOCH + int(milliseconds) * _MILLISECOND


def _milliseconds(moment: datetime) -> int:
    return (moment - _EPOCH) // _MILLISECOND


def _written_at(payloads: Sequence[Any] | None) -> int | None:
    """The ``created_at`` of the one message of ``payloads``, in epoch ms."""
    if not payloads:
        return None
    created = codec.from_json(payloads[0]).created_at
    return None if created is None else _milliseconds(created)


def record_info(
    record: Mapping[str, Any],
) -> tuple[ConversationInfo, dict[str, Any] | None]:
    """The record of a row of ``Statements.record``, and the times to store.

    A node an earlier release wrote lacks ``created_at`` (or both times):
    ``created_at`` is then its oldest message's, ``updated_at`` its newest
    message's (those the store stamped when they were written), and a node
    without a message (a window emptied it) reads as made and updated at the
    epoch. The second item is then ``{id, created_at, updated_at}`` for
    ``Statements.fill_times``; ``None`` when the node has both times.
    """
    created, updated = record["created_at"], record["updated_at"]
    fill = None
    if created is None or updated is None:
        if created is None:
            created = _written_at(record["oldest"])
        if updated is None:
            updated = _written_at(record["newest"])
        known = [t for t in (created, updated) if t is not None]
        created = min(known, default=0)
        updated = max(known, default=0)
        fill = {"id": record["id"], "created_at": created, "updated_at": updated}
    metadata = record["metadata"]
    info = ConversationInfo(
        id=record["id"],
        created_at=_moment(created),
        updated_at=_moment(updated),
        message_count=int(record["message_count"]),
        owner=record["owner"],
        metadata={} if metadata is None else json.loads(metadata),
    )
    return info, fill


def time_fills(records: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The ``rows`` of ``Statements.fill_times`` for records of ``times_missing``."""
    fills = (record_info(record)[1] for record in records)
    return [fill for fill in fills if fill is not None]


def _comparable(conversation_id: str) -> bool:
    """Whether Neo4j orders ``conversation_id`` against any id as Python does.

    Neo4j compares strings by UTF-16 code unit, the listing by code point;
    the two differ only where one id has a character from U+E000 on and the
    other a character past U+FFFF, so an id without either compares alike.
    """
    return all(ord(character) < 0xE000 for character in conversation_id)


#: A listing's bound: updated_at at most this (epoch ms), and at that time
#: only ids below the second item (``None``: every id).
_Bound = tuple[int, str | None]


def _tighter(a: _Bound, b: _Bound) -> _Bound:
    if a[0] != b[0]:
        return a if a[0] < b[0] else b
    if a[1] is None:
        return b
    if b[1] is None:
        return a
    return a if a[1] < b[1] else b


def _bound(milliseconds: int, after_id: str | None) -> _Bound:
    """A bound Neo4j compares right: an id it may order otherwise is left to
    the client, which drops what it reads past the bound."""
    if after_id is not None and not _comparable(after_id):
        return milliseconds, None
    return milliseconds, after_id


class Listing:
    """One ``find_conversations`` call: the reads it sends and the page it makes.

    Each read is ``Statements.list_owned`` or ``list_all``: the next records
    in the listing's order below a bound, ``limit + 1`` of them. Every record
    read is checked again here against the whole request
    (:meth:`ConversationQuery.matches`: the metadata filter, which only the
    client compares, and the bounds, since a record a concurrent write moved
    may be read at its old place) and kept once; while a full read leaves
    the page short, the next read continues below the last record read,
    twice as many rows at a time up to 1,024.

    Args:
        statements: The repository's statements.
        query: The checked request.
    """

    def __init__(self, statements: Statements, query: ConversationQuery) -> None:
        """Start below the cursor's record and ``updated_before``."""
        self._statements = statements
        self._query = query
        bound: _Bound = (_NO_BOUND, None)
        if query.updated_before is not None:
            # Strictly before: the last whole millisecond before the moment.
            micros = (query.updated_before - _EPOCH) // timedelta(microseconds=1)
            bound = (-(-micros // 1000) - 1, None)
        if query.after is not None:
            moment, after_id = query.after
            micros = (moment - _EPOCH) // timedelta(microseconds=1)
            cursor = (micros // 1000, after_id if micros % 1000 == 0 else None)
            bound = _tighter(bound, _bound(*cursor))
        self._bound = bound
        self._size = query.limit + 1
        self._seen: set[str] = set()
        self._kept: list[ConversationInfo] = []
        self.done = False

    def read(self) -> tuple[LiteralString, dict[str, Any]]:
        """The statement and parameters of the next read."""
        top, after_id = self._bound
        parameters: dict[str, Any] = {
            "top": top,
            "after_id": after_id,
            "limit": self._size,
            **record_parameters(),
        }
        if self._query.owner is None:
            return self._statements.list_all, parameters
        return self._statements.list_owned, {**parameters, "owner": self._query.owner}

    def feed(self, records: Sequence[Mapping[str, Any]]) -> None:
        """Take the records of the last read; ``done`` says whether to read on."""
        for record in records:
            info, _ = record_info(record)
            if info.id in self._seen:
                continue
            self._seen.add(info.id)
            if self._query.matches(info):
                self._kept.append(info)
        if len(records) < self._size or len(self._kept) > self._query.limit:
            self.done = True
            return
        last = records[-1]
        bound = _bound(int(last["updated_at"]), str(last["id"]))
        if self._query.metadata:
            # A filter that leaves rows out: read more at a time.
            self._size = max(self._size, min(self._size * 2, _MAX_LISTING_BATCH))
        if bound == self._bound:
            # Ties the server cannot tell apart fill the read: only a longer
            # one gets past them.
            self._size *= 2
        self._bound = bound

    def page(self) -> ConversationInfoPage:
        """The page of what was kept, in the listing's order."""
        self._kept.sort(key=listing_key, reverse=True)
        return self._query.page(self._kept)
