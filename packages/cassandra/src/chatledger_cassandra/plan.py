"""What one write of a conversation does, decided in pure Python before any I/O.

Example:
    from chatledger import Message, MessageWindow
    from chatledger_cassandra.plan import Snapshot, plan_append

    plan = plan_append("c1", Snapshot(None, []), [Message.user("hi")],
                       MessageWindow(20), ttl=0)
    plan.condition   # the conditional UPDATE that creates the conversation
    plan.writes      # the INSERT of the message

The repository reads a :class:`Snapshot` of the partition, asks this module for
a :class:`Plan`, and sends the plan as one conditional single-partition batch.
Keeping the decision here, with no driver in sight, means the window rules come
from :func:`chatledger.window.merge_system` and
:func:`chatledger.window.count_evictions` alone and the statements of a batch
can be checked without a server.

Rules the plans keep, so that one batch never shadows its own rows (every
statement of a batch carries the same write timestamp, and Cassandra lets a
deletion win a tie):

- new rows get sequence numbers at or above the version read, and every range
  delete stops below the version read or below the first surviving row;
- a whole-partition delete is only ever sent beside its condition (a
  conditional delete of ``next_seq``), never beside inserts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from chatledger import codec
from chatledger.messages import Message, Role
from chatledger.repository import AppendResult
from chatledger.window import Window, count_evictions, merge_system
from chatledger_cassandra.statements import LANE_OTHER, LANE_SYSTEM

__all__ = [
    "Plan",
    "Snapshot",
    "StoredRow",
    "Write",
    "payloads_needed",
    "plan_append",
    "plan_replace",
]

Phase = Literal["condition", "delete", "insert", "evict", "refresh"]


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
    """

    version: int | None
    rows: list[StoredRow]


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


def _lane(message: Message) -> int:
    return LANE_SYSTEM if message.role is Role.SYSTEM else LANE_OTHER


def _insert(
    conversation_id: str,
    seq: int,
    message: Message,
    window: Window | None,
    ttl: int,
    phase: Phase = "insert",
) -> Write:
    counter = None if window is None else window.counter_id
    size = None if counter is None or window is None else window.measure(message)
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


def _rewrite(conversation_id: str, row: StoredRow, ttl: int) -> Write:
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


def _condition(conversation_id: str, version: int | None, new: int, ttl: int) -> Write:
    if version is None:
        return Write("start", (ttl, new, conversation_id), "condition")
    return Write("advance", (ttl, new, conversation_id, version), "condition")


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


def plan_append(
    conversation_id: str,
    snapshot: Snapshot,
    batch: Sequence[Message],
    window: Window,
    ttl: int,
    start: int = 0,
) -> Plan:
    """Plan an atomic window append (the contract of ``SupportsWindowAppend``).

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
    fresh = [m for m in batch if m.id not in known]
    if not fresh:
        return Plan(None)
    system_rows = sorted(
        (r for r in snapshot.rows if r.lane == LANE_SYSTEM), key=lambda r: r.seq
    )
    other_rows = sorted(
        (r for r in snapshot.rows if r.lane == LANE_OTHER), key=lambda r: r.seq
    )
    stored_system = [row.message() for row in system_rows]
    merge = merge_system(stored_system, fresh)
    base = start if snapshot.version is None else snapshot.version
    new_seq = {m.id: base + i for i, m in enumerate(merge.new)}

    kept_system = [] if merge.replace_stored else stored_system
    new_system = [m for m in merge.new if m.role is Role.SYSTEM]
    new_other = [m for m in merge.new if m.role is not Role.SYSTEM]
    system_size = sum(window.measure(m) for m in kept_system + new_system)
    entries = [(Role(row.role), _row_size(row, window)) for row in other_rows]
    entries += [(m.role, window.measure(m)) for m in new_other]
    cut = count_evictions(
        window.limit, system_size, sum(size for _, size in entries), entries
    )

    evicted_rows = other_rows[:cut]
    surviving_rows = other_rows[cut:]
    evicted_new = new_other[: max(0, cut - len(other_rows))]
    surviving_new = new_other[max(0, cut - len(other_rows)) :]
    evicted_ids = [row.msg_id for row in system_rows] if merge.replace_stored else []
    evicted_ids += [row.msg_id for row in evicted_rows] + [m.id for m in evicted_new]
    result = AppendResult(list(merge.new), evicted_ids)

    next_seq = base + len(merge.new)
    survivors = len(kept_system) + len(new_system) + len(surviving_rows)
    if survivors + len(surviving_new) == 0:
        if snapshot.version is None:
            return Plan(None, [], result)
        return _delete_plan(conversation_id, snapshot.version, result)

    surviving_ids = {m.id for m in surviving_new}
    writes: list[Write] = []
    if merge.replace_stored and system_rows:
        writes.append(
            Write("delete_before", (conversation_id, LANE_SYSTEM, base), "delete")
        )
    for message in merge.new:
        if message.role is Role.SYSTEM or message.id in surviving_ids:
            writes.append(
                _insert(conversation_id, new_seq[message.id], message, window, ttl)
            )
    if evicted_rows:
        first_kept = (
            surviving_rows[0].seq
            if surviving_rows
            else (new_seq[surviving_new[0].id] if surviving_new else next_seq)
        )
        writes.append(
            Write("delete_before", (conversation_id, LANE_OTHER, first_kept), "evict")
        )
    if ttl:
        kept_rows = ([] if merge.replace_stored else system_rows) + surviving_rows
        writes.extend(_rewrite(conversation_id, row, ttl) for row in kept_rows)
    return Plan(
        _condition(conversation_id, snapshot.version, next_seq, ttl), writes, result
    )


def plan_replace(
    conversation_id: str,
    version: int | None,
    messages: Sequence[Message],
    ttl: int,
    start: int = 0,
) -> Plan:
    """Plan ``save_all``: replace every stored row with ``messages``.

    The old rows are range-deleted below the version read and the new ones are
    written from that version on, in one batch; an empty ``messages`` deletes
    the conversation.

    Args:
        conversation_id: The validated conversation id.
        version: The version read, ``None`` if the conversation does not exist.
        messages: The validated, stamped messages.
        ttl: The TTL in seconds, ``0`` for none.
        start: The first sequence number when the conversation is new.
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
            for lane in (LANE_SYSTEM, LANE_OTHER)
        ]
    writes += [
        _insert(conversation_id, base + i, m, None, ttl) for i, m in enumerate(messages)
    ]
    return Plan(
        _condition(conversation_id, version, base + len(messages), ttl),
        writes,
        AppendResult(list(messages), []),
    )
