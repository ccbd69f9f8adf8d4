"""What each write of a conversation sends and what each answer means, in pure Python.

Example:
    from chatledger import Message, MessageWindow
    from chatledger_cassandra.steps import Snapshot, plan_append_batch

    plan = plan_append_batch(
        "c1", Snapshot(None, []), [Message.user("hi")], MessageWindow(20), ttl=0
    )
    plan.condition   # the conditional UPDATE that creates the conversation
    plan.writes      # the INSERT of the message

The repository reads the rows of a partition, turns them into a
:class:`Snapshot` (:func:`to_snapshot`), asks this module for a :class:`Plan`
and sends the plan as one conditional single-partition batch
(:func:`commit_statement`). What to keep is decided by core's planner,
:func:`chatledger.adapters.plan_append`, as for every adapter that plans in
Python; this module only turns its plan into statements, and says which
errors leave a write's outcome unknown, with no I/O, so the statements of a
batch can be checked without a server.

Rules the plans keep, so that one batch never shadows its own rows (every
statement of a batch carries the same write timestamp, and Cassandra lets a
deletion win a tie):

- new rows get sequence numbers at or above the version read, and every range
  delete stops below the version read or below the first surviving row;
- the record of evicted ids is trimmed below a bound, and only ids numbered
  above it are written beside the trim;
- a whole-partition delete is only ever sent beside its condition (a
  conditional delete of ``next_seq``), never beside inserts.

The record of evicted ids (:mod:`chatledger.evicted_ids`) is rows of lane
:data:`LANE_EVICTED`, read with the snapshot: an id found there is treated as
stored. Every id an append takes out of the window gets a row numbered by its
message's sequence number (a new message the window drops at once has one
too: every appended message takes a number). When the numbers the record
reached cross a multiple of :data:`chatledger.adapters.EVICTED_IDS_TRIM_STEP`
(:func:`chatledger.adapters.trim_due`), the rows numbered at or below
:func:`chatledger.adapters.trim_below` go, so the record holds at most
``EVICTED_IDS_KEPT + EVICTED_IDS_TRIM_STEP`` rows. A window that leaves no
message keeps the partition, marked ``emptied`` (not listed), for the record.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal

from cassandra import ConsistencyLevel, ReadTimeout, WriteTimeout, WriteType
from cassandra.query import UNSET_VALUE, BatchStatement, BatchType

from chatledger.adapters import (
    AppendResult,
    Message,
    Role,
    StoredEntry,
    StoredWindow,
    Window,
    codec,
    needs_stored_system,
    plan_append,
    to_ttl,
    trim_below,
    trim_due,
)
from chatledger_cassandra.statements import (
    LANE_EVICTED,
    LANE_IDS,
    LANE_OTHER,
    LANE_SYSTEM,
    ROW_COLUMNS,
    STATIC_COLUMNS,
)

__all__ = [
    "FULL_COLUMNS",
    "INDEX_COLUMNS",
    "MAX_TTL_SECONDS",
    "Plan",
    "Snapshot",
    "StoredRow",
    "Write",
    "backoff",
    "cells",
    "commit_statement",
    "condition_write",
    "configure_prepared",
    "insert_write",
    "is_retryable",
    "payloads_needed",
    "plan_append_batch",
    "plan_delete",
    "plan_replace",
    "record_floor",
    "record_writes",
    "rewrite_write",
    "to_snapshot",
    "ttl_seconds",
]

Phase = Literal["condition", "delete", "insert", "evict", "refresh", "index", "mark"]

#: Cassandra's largest TTL: 20 years.
MAX_TTL_SECONDS = 630_720_000
#: The columns of an append's read: the static ones and every index column of
#: the rows, no payload.
INDEX_COLUMNS = (*STATIC_COLUMNS, *ROW_COLUMNS[:-1])
#: The same with the payloads.
FULL_COLUMNS = (*STATIC_COLUMNS, *ROW_COLUMNS)


def ttl_seconds(ttl: timedelta | float | None) -> int:
    """Return ``ttl`` as whole seconds (rounded up), ``0`` for no TTL.

    Raises:
        InvalidTTLError: if ``ttl`` is not positive or exceeds 20 years.
    """
    value = to_ttl(ttl, maximum=timedelta(seconds=MAX_TTL_SECONDS))
    return 0 if value is None else math.ceil(value.total_seconds())


def cells(row: Any, names: Sequence[str]) -> tuple[Any, ...]:
    """The values of ``row`` (a tuple, named tuple or dict, as the session's
    row factory makes it), in the order of ``names``."""
    if isinstance(row, Mapping):
        return tuple(row[name] for name in names)
    return tuple(row)


def is_retryable(exc: Exception) -> bool:
    """A CAS that timed out or a serial read that did: the outcome is unknown."""
    if isinstance(exc, WriteTimeout):
        return bool(getattr(exc, "write_type", None) == WriteType.CAS)
    serial = (ConsistencyLevel.SERIAL, ConsistencyLevel.LOCAL_SERIAL)
    return isinstance(exc, ReadTimeout) and getattr(exc, "consistency", None) in serial


def backoff(attempt: int) -> float:
    """The jittered pause, in seconds, before attempt ``attempt + 1``."""
    return random.uniform(0, min(0.1, 0.002 * 2 ** min(attempt, 10)))


@dataclass(frozen=True, slots=True)
class StoredRow:
    """One stored message row, as read back.

    Attributes:
        lane: :data:`LANE_SYSTEM` or :data:`LANE_OTHER`.
        seq: Its sequence number.
        msg_id: The message id.
        role: The role's value (``"user"``...).
        size_counter: The ``counter_id`` its stored size was measured with.
        size: The stored size, or ``None``.
        payload: The codec JSON, or ``None`` when it was not read.
    """

    lane: int
    seq: int
    msg_id: str
    role: str
    size_counter: str | None = None
    size: int | None = None
    payload: str | None = None

    def message(self) -> Message:
        """Decode the payload (it must have been read)."""
        if self.payload is None:
            raise RuntimeError(f"payload of seq {self.seq} was not read")
        return codec.from_json(self.payload)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A conversation as read at one version.

    Attributes:
        version: ``next_seq``, or ``None`` when the conversation does not exist.
        rows: Its message rows, in any order.
        evicted: Its record of evicted ids: each id with the number of its row.
        system_batch: Where its current system messages start in lane 0
            (``None``: every row of lane 0 is one).
        indexed: Whether lane 3 indexes its ids (a log append wrote last).
    """

    version: int | None
    rows: list[StoredRow]
    evicted: dict[str, int] = field(default_factory=dict)
    system_batch: int | None = None
    indexed: bool = False

    def is_current_system(self, row: StoredRow) -> bool:
        """Whether ``row`` is one of the current system messages."""
        return row.lane == LANE_SYSTEM and (
            self.system_batch is None or row.seq >= self.system_batch
        )


@dataclass(frozen=True, slots=True)
class Write:
    """One statement of a plan: a prepared statement's name and its values.

    Attributes:
        statement: A key of :meth:`Statements.prepared`.
        params: The bound values, in marker order.
        phase: Why it is there: the batch condition, deleting replaced rows,
            inserting new ones, evicting old ones or refreshing a TTL.
    """

    statement: str
    params: tuple[object, ...]
    phase: Phase


@dataclass(frozen=True, slots=True)
class Plan:
    """One atomic write: a condition and the statements sent with it.

    Attributes:
        condition: The lightweight transaction that checks the version, or
            ``None`` when there is nothing to write.
        writes: The other statements of the batch, in phase order.
        result: What the write does, for the caller.
    """

    condition: Write | None
    writes: list[Write] = field(default_factory=list)
    result: AppendResult = field(default_factory=AppendResult)


def to_snapshot(rows: Iterable[Any], names: Sequence[str]) -> Snapshot:
    """The snapshot that the rows of a read of ``names`` (one partition) show."""
    version: int | None = None
    system_batch: int | None = None
    indexed = False
    stored: list[StoredRow] = []
    evicted: dict[str, int] = {}
    for row in rows:
        values = dict(zip(names, cells(row, names), strict=True))
        version = values["next_seq"]
        system_batch = values["system_batch"]
        indexed = bool(values["indexed"])
        if values["seq"] is None or values["lane"] > LANE_EVICTED:
            continue  # a partition holding only its static columns, or the index
        if values["lane"] == LANE_EVICTED:
            evicted[values["msg_id"]] = values["seq"]
            continue
        stored.append(
            StoredRow(
                lane=values["lane"],
                seq=values["seq"],
                msg_id=values["msg_id"],
                role=values["role"],
                size_counter=values["size_counter"],
                size=values["size"],
                payload=values.get("payload"),
            )
        )
    return Snapshot(version, stored, evicted, system_batch, indexed)


def _lane(message: Message) -> int:
    return LANE_SYSTEM if message.role is Role.SYSTEM else LANE_OTHER


def insert_write(
    conversation_id: str,
    seq: int,
    message: Message,
    window: Window | None,
    ttl: int,
    measured: int | None = None,
    phase: Phase = "insert",
) -> Write:
    counter = None if window is None else window.counter_id
    size = None
    if counter is not None and window is not None:
        size = window.measure(message) if measured is None else measured
    return Write(
        "insert",
        (
            conversation_id,
            _lane(message),
            seq,
            message.id,
            message.role.value,
            counter,
            size,
            codec.to_json(message),
            ttl,
        ),
        phase,
    )


def rewrite_write(conversation_id: str, row: StoredRow, ttl: int) -> Write:
    if row.payload is None:
        raise RuntimeError(f"payload of seq {row.seq} is needed to refresh its TTL")
    return Write(
        "insert",
        (
            conversation_id,
            row.lane,
            row.seq,
            row.msg_id,
            row.role,
            row.size_counter,
            row.size,
            row.payload,
            ttl,
        ),
        "refresh",
    )


def condition_write(
    conversation_id: str,
    version: int | None,
    new: int,
    ttl: int,
    emptied: bool = False,
) -> Write:
    if version is None:
        return Write("start", (ttl, new, emptied, conversation_id), "condition")
    return Write("advance", (ttl, new, emptied, conversation_id, version), "condition")


def record_floor(
    newest: int | None, taken_out: Sequence[tuple[int, str]]
) -> int | None:
    """The number at or below which the record's rows go as ``taken_out`` joins it.

    ``None`` when adding them does not trim the record: only when their
    numbers, counted on from the record's ``newest`` row, cross a multiple of
    :data:`chatledger.adapters.EVICTED_IDS_TRIM_STEP`.
    """
    if not taken_out:
        return None
    last = max(seq for seq, _ in taken_out)
    first = newest + 1 if newest is not None else min(s for s, _ in taken_out)
    return trim_below(last) if trim_due(first, last) else None


def record_writes(
    conversation_id: str,
    evicted: dict[str, int],
    taken_out: list[tuple[int, str]],
    ttl: int,
) -> list[Write]:
    """The writes that add ``taken_out`` (numbers and ids) to the record.

    ``evicted`` is the record as read (each id with its number): its newest
    row, and every row at or below the trim bound should this add trim it.

    The record is trimmed when the numbers written since its newest row cross
    a multiple of the trim step; ids numbered at or below the trim bound are
    then not written at all, so no insert meets the range delete beside it.
    The range delete itself is only sent when a stored row falls under it:
    each one leaves a range tombstone.
    """
    if not taken_out:
        return []
    writes: list[Write] = []
    floor = record_floor(max(evicted.values(), default=None), taken_out)
    if floor is not None and any(seq <= floor for seq in evicted.values()):
        writes.append(
            Write("delete_before", (conversation_id, LANE_EVICTED, floor + 1), "evict")
        )
    writes.extend(
        Write(
            "insert_evicted", (conversation_id, LANE_EVICTED, seq, msg_id, ttl), "evict"
        )
        for seq, msg_id in taken_out
        if floor is None or seq > floor
    )
    return writes


def plan_delete(conversation_id: str) -> Plan:
    """Plan deleting a conversation's partition, applied only if it exists."""
    return Plan(
        Write("delete_any", (conversation_id,), "condition"),
        [Write("delete_partition", (conversation_id,), "delete")],
    )


def _delete_plan(conversation_id: str, version: int, result: AppendResult) -> Plan:
    return Plan(
        Write("delete_version", (conversation_id, version), "condition"),
        [Write("delete_partition", (conversation_id,), "delete")],
        result,
    )


def payloads_needed(
    snapshot: Snapshot, window: Window, ttl: int
) -> Literal["none", "system", "all"]:
    """Say which payloads an append must read beside the index columns.

    System messages are compared by value, so their payloads are always read;
    a refreshed TTL rewrites every surviving row, and a stored size counted by
    another measure must be counted again, so those need every payload.
    """
    if ttl:
        return "all"
    counter = window.counter_id
    if counter is not None and any(
        row.lane == LANE_OTHER and row.size_counter != counter for row in snapshot.rows
    ):
        return "all"
    if any(row.lane == LANE_SYSTEM for row in snapshot.rows):
        return "system"
    return "none"


def _row_size(row: StoredRow, window: Window) -> int:
    counter = window.counter_id
    if counter is None:
        return 1
    if row.size_counter == counter and row.size is not None:
        return row.size
    return window.measure(row.message())


def plan_append_batch(
    conversation_id: str,
    snapshot: Snapshot,
    batch: Sequence[Message],
    window: Window,
    ttl: int,
    start: int = 0,
) -> Plan:
    """Turn core's window plan for ``batch`` into one conditional batch.

    What to keep is :func:`chatledger.adapters.plan_append`'s decision, fed
    with the snapshot; this function only numbers the new rows, picks the
    range deletes and adds the version condition (the contract of
    ``SupportsWindowAppend``).

    On a conversation a log append wrote, the window's system messages are
    the current ones (lane 0 from ``system_batch`` on); superseded ones are
    left as they are, and deleted with the current ones when new ones replace
    them. The append then drops the id index (lane 3): the window keeps its
    own record of evicted ids, and the next log append indexes what is stored
    (:mod:`chatledger_cassandra.log_plans`).

    Args:
        conversation_id: The validated conversation id.
        snapshot: The conversation as read, with the payloads
            :func:`payloads_needed` asked for.
        batch: The validated, stamped messages to add.
        window: The window to keep.
        ttl: The TTL in seconds, ``0`` for none.
        start: The first sequence number when the conversation is new.
    """
    known = {row.msg_id for row in snapshot.rows}
    fresh = [m for m in batch if m.id not in known and m.id not in snapshot.evicted]
    if not fresh:
        return Plan(None)
    system_rows = sorted(
        (r for r in snapshot.rows if snapshot.is_current_system(r)),
        key=lambda r: r.seq,
    )
    superseded = [
        r
        for r in snapshot.rows
        if r.lane == LANE_SYSTEM and not snapshot.is_current_system(r)
    ]
    other_rows = sorted(
        (r for r in snapshot.rows if r.lane == LANE_OTHER), key=lambda r: r.seq
    )
    other_sizes = [_row_size(row, window) for row in other_rows]
    stored = StoredWindow(
        system_count=len(system_rows),
        system_size=sum(_row_size(row, window) for row in system_rows),
        count=len(other_rows),
        total=sum(other_sizes),
        read_oldest=lambda expected: (
            StoredEntry(row.msg_id, Role(row.role), size, row.seq)
            for row, size in zip(other_rows, other_sizes, strict=True)
        ),
        system=[row.message() for row in system_rows]
        if needs_stored_system(fresh)
        else None,
    )
    plan = plan_append(stored, fresh, window)
    result = AppendResult(plan.appended, plan.evicted_ids)
    if not plan.appended:
        # Only system messages equal to stored ones: nothing changes, as for
        # a batch of ids already stored.
        return Plan(None, [], result)

    # Every appended message takes a number, kept or not, so the version
    # advances whenever the batch writes anything. A window that leaves no
    # message keeps the partition for its record of evicted ids (an emptying
    # append always takes some id out), marked as listing no conversation.
    base = start if snapshot.version is None else snapshot.version
    new_seq = {m.id: base + i for i, m in enumerate(plan.appended)}
    next_seq = base + len(plan.appended)
    writes: list[Write] = []
    if plan.replace_system and (system_rows or superseded):
        writes.append(
            Write("delete_before", (conversation_id, LANE_SYSTEM, base), "delete")
        )
    for message, size in zip(plan.insert, plan.insert_sizes, strict=True):
        writes.append(
            insert_write(
                conversation_id, new_seq[message.id], message, window, ttl, size
            )
        )
    surviving_rows = other_rows[len(plan.evicted) :]
    if plan.evicted:
        surviving_new = [m for m in plan.insert if m.role is not Role.SYSTEM]
        first_kept = (
            surviving_rows[0].seq
            if surviving_rows
            else (new_seq[surviving_new[0].id] if surviving_new else next_seq)
        )
        writes.append(
            Write("delete_before", (conversation_id, LANE_OTHER, first_kept), "evict")
        )
    numbers = {row.msg_id: row.seq for row in system_rows}
    numbers.update((entry.id, entry.position) for entry in plan.evicted)
    numbers.update(new_seq)
    taken_out = [(numbers[msg_id], msg_id) for msg_id in plan.evicted_ids]
    writes += record_writes(conversation_id, snapshot.evicted, taken_out, ttl)
    if ttl:
        kept_system = [] if plan.replace_system else superseded + system_rows
        kept_rows = kept_system + surviving_rows
        writes.extend(rewrite_write(conversation_id, row, ttl) for row in kept_rows)
    system_batch: object = UNSET_VALUE
    if plan.replace_system:
        system_batch = base
    elif ttl and snapshot.system_batch is not None:
        system_batch = snapshot.system_batch
    writes += _statics(conversation_id, ttl, system_batch, snapshot.indexed)
    return Plan(
        condition_write(conversation_id, snapshot.version, next_seq, ttl, plan.empty),
        writes,
        result,
    )


def _statics(
    conversation_id: str, ttl: int, system_batch: object, indexed: bool
) -> list[Write]:
    """The writes that set ``system_batch`` (unless unset) and drop the id index.

    A window append or ``save_all`` leaves a conversation its rows and record
    alone say everything about: the index of a conversation ``indexed`` goes
    (lane 3 and the flag, whose null is a cell tombstone, never a live cell
    that would keep an expired partition listed).
    """
    writes: list[Write] = []
    if indexed:
        writes.append(Write("delete_lane", (conversation_id, LANE_IDS), "delete"))
    if system_batch is not UNSET_VALUE or indexed:
        flag = None if indexed else UNSET_VALUE
        writes.append(Write("mark", (ttl, system_batch, flag, conversation_id), "mark"))
    return writes


def plan_replace(
    conversation_id: str,
    version: int | None,
    messages: Sequence[Message],
    ttl: int,
    start: int = 0,
    *,
    system_batch: int | None = None,
    indexed: bool = False,
) -> Plan:
    """Plan ``save_all``: replace every stored row with ``messages``.

    The old rows (the record of evicted ids too) are range-deleted below the
    version read and the new ones are written from that version on, in one
    batch; an empty ``messages`` deletes the conversation. Its system messages
    are all current (``system_batch`` is the first new number, or cleared
    when there are none) and the id index goes.

    Args:
        conversation_id: The validated conversation id.
        version: The version read, ``None`` if the conversation does not exist.
        messages: The validated, stamped messages.
        ttl: The TTL in seconds, ``0`` for none.
        start: The first sequence number when the conversation is new.
        system_batch: The ``system_batch`` read.
        indexed: The ``indexed`` read.
    """
    if not messages:
        if version is None:
            return Plan(None)
        return _delete_plan(conversation_id, version, AppendResult())
    base = start if version is None else version
    writes: list[Write] = []
    if version is not None:
        writes += [
            Write("delete_before", (conversation_id, lane, base), "delete")
            for lane in (LANE_SYSTEM, LANE_OTHER, LANE_EVICTED)
        ]
    writes += [
        insert_write(conversation_id, base + i, m, None, ttl)
        for i, m in enumerate(messages)
    ]
    batch: object = UNSET_VALUE
    if any(m.role is Role.SYSTEM for m in messages):
        batch = base
    elif system_batch is not None:
        batch = None
    writes += _statics(conversation_id, ttl, batch, indexed)
    return Plan(
        condition_write(conversation_id, version, base + len(messages), ttl),
        writes,
        AppendResult(list(messages), []),
    )


def configure_prepared(prepared: Any, consistency: int, serial: int) -> Any:
    """Give a freshly prepared statement the repository's consistency levels."""
    prepared.consistency_level = consistency
    prepared.serial_consistency_level = serial
    return prepared


def _values(write: Write) -> tuple[object, ...]:
    """The values to bind for ``write``: a missing one is unset, never null.

    A bound null writes a tombstone cell; an insert of a message without a
    stored size would leave two, and a long conversation's reads would wade
    through (and at 100,000 by default, abort on) tombstones nobody deleted.
    """
    if write.statement != "insert":
        return write.params
    return tuple(UNSET_VALUE if value is None else value for value in write.params)


def commit_statement(
    plan: Plan, prepared: Callable[[str], Any], consistency: int, serial: int
) -> Any:
    """The statement that sends ``plan``: its condition alone, or one batch.

    Args:
        plan: A plan whose condition is not ``None``.
        prepared: Returns the prepared statement of a name.
        consistency: The commit's consistency level.
        serial: The consistency level of its Paxos phase.
    """
    condition = plan.condition
    assert condition is not None
    if not plan.writes:
        return prepared(condition.statement).bind(condition.params)
    batch = BatchStatement(
        batch_type=BatchType.UNLOGGED,
        consistency_level=consistency,
        serial_consistency_level=serial,
    )
    batch.add(prepared(condition.statement), condition.params)
    for write in plan.writes:
        batch.add(prepared(write.statement), _values(write))
    return batch
