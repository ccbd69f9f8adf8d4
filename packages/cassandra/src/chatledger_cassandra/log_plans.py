"""What a log append sends: one conditional batch, decided in pure Python.

Example:
    from chatledger import Message
    from chatledger_cassandra.id_index import SlotMap
    from chatledger_cassandra.log_plans import LogKnowledge, plan_log_append

    new = LogKnowledge(None, None, False, (), SlotMap())   # no such conversation
    planned = plan_log_append("c1", new, [Message.user("hi")], None, ttl=0, start=7)
    planned.plan.condition    # IF next_seq = null: the conversation starts at 7
    planned.plan.writes       # the message row, its id in the index, the statics
    planned.state             # what the conversation holds once it commits

A log append (``AsyncSupportsLog.append_to_log``) keeps every message, so it
evicts nothing and rewrites nothing: its batch inserts the new message rows
after the last one, with the next sequence numbers from the version read,
indexes their ids in lane 3 (:mod:`chatledger_cassandra.id_index`) and moves
the static columns: ``next_seq`` (the condition, ``IF next_seq = <version>``,
or ``IF next_seq = null`` for a new conversation), ``system_batch`` when it
stores system messages (rule 1: they supersede the current ones, which stay in
the log) and ``indexed``. Being one conditional single-partition batch, it is
atomic, isolated, gap-free and linearizable, as the window append is
(:mod:`chatledger_cassandra.repository`).

It decides on what :class:`LogKnowledge` holds, all read at the version the
condition names: which of its ids the index (or, before the conversation was
indexed, its rows) holds, and the current system messages when the batch has
one. Every index row it adds is a condition too (``IF NOT EXISTS``), so a slot
taken since the read, or an id the append did not read at all (the append
sent on a remembered state, :mod:`chatledger_cassandra.log_states`), fails
the batch instead of being stored twice.

A conversation written by a window append, by ``save_all`` or by release 0.2
is not indexed (and its lane 3 is empty): the first log append then reads the
ids of its rows and of its record of evicted ids, skips those, and indexes
them in its batch. With a TTL, every cell of the conversation must expire
together, and Cassandra's TTLs are per cell: such an append reads the whole
partition and rewrites every row (the index too) under the new TTL, as the
window append rewrites its window.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from cassandra.query import UNSET_VALUE

from chatledger.adapters import AppendResult, Message, Role, Window, merge_system
from chatledger_cassandra.id_index import SlotMap
from chatledger_cassandra.log_rows import Read, current_system
from chatledger_cassandra.log_states import LogState
from chatledger_cassandra.statements import (
    LANE_EVICTED,
    LANE_IDS,
    LANE_OTHER,
    LANE_SYSTEM,
)
from chatledger_cassandra.steps import (
    Plan,
    StoredRow,
    Write,
    condition_write,
    insert_write,
    rewrite_write,
)

__all__ = ["LogKnowledge", "LogPlan", "plan_log_append", "whole_partition"]


@dataclass(frozen=True, slots=True)
class LogKnowledge:
    """What a log append decides on, all at one version of the conversation.

    Attributes:
        version: ``next_seq``, ``None`` for a conversation not stored.
        system_batch: Where the current system messages start in lane 0.
        indexed: Whether lane 3 holds the id of every stored row.
        system: The current system rows, oldest first, with their payloads;
            ``None`` when not read (a batch without a system message needs
            none).
        slots: What reads of the id index found.
        stored_ids: The ids of the rows and the record of a conversation not
            indexed yet: held, and indexed by this append.
        rewrite: With a TTL, every message row, rewritten under it.
        index: With a TTL, every row of the id index (slot to id), rewritten.
    """

    version: int | None
    system_batch: int | None
    indexed: bool
    system: tuple[StoredRow, ...] | None
    slots: SlotMap
    stored_ids: tuple[str, ...] = ()
    rewrite: tuple[StoredRow, ...] = ()
    index: Mapping[int, str] = field(default_factory=dict)

    @classmethod
    def of_state(cls, state: LogState) -> LogKnowledge:
        """What a remembered state tells, nothing of the index read."""
        return cls(
            state.version, state.system_batch, state.indexed, state.system, SlotMap()
        )


@dataclass(frozen=True, slots=True)
class LogPlan:
    """A log append's batch and what the conversation holds once it commits.

    Attributes:
        plan: The conditional batch (no condition: nothing to append).
        state: The conversation after the commit, for the next append.
    """

    plan: Plan
    state: LogState


def whole_partition(read: Read) -> LogKnowledge:
    """What a read of every row of the partition (``select_partition``) tells.

    The index is read whole, so a slot it does not hold is free.
    """
    statics = read.statics
    if statics is None:
        return LogKnowledge(None, None, False, (), SlotMap(whole=True))
    messages = [r for r in read.rows if r.lane in (LANE_SYSTEM, LANE_OTHER)]
    index = {r.seq: r.msg_id for r in read.rows if r.lane == LANE_IDS}
    slots = SlotMap(whole=True)
    slots.learn(index, index)
    stored: tuple[str, ...] = ()
    if not statics.indexed:
        stored = tuple(r.msg_id for r in read.rows if r.lane <= LANE_EVICTED)
    system = current_system(
        sorted(messages, key=lambda r: -r.seq), statics.system_batch, whole=True
    )
    assert system is not None  # a whole read holds every system row
    return LogKnowledge(
        statics.version,
        statics.system_batch,
        statics.indexed,
        tuple(system),
        slots,
        stored,
        tuple(messages),
        index,
    )


def plan_log_append(
    conversation_id: str,
    knowledge: LogKnowledge,
    batch: Sequence[Message],
    window: Window | None,
    ttl: int,
    start: int,
) -> LogPlan:
    """Plan appending ``batch`` to the log, as ``knowledge`` shows it.

    Args:
        conversation_id: The validated conversation id.
        knowledge: The conversation, read at one version.
        batch: The validated, stamped messages.
        window: Sizes are stored under its ``counter_id``, when it has one.
        ttl: The TTL in seconds, ``0`` for none.
        start: The first sequence number when the conversation is new.

    Raises:
        RuntimeError: the batch has a system message and ``knowledge`` does
            not hold the current system messages.
    """
    held = set(knowledge.stored_ids) | knowledge.slots.held(m.id for m in batch)
    fresh = [m for m in batch if m.id not in held]
    has_system = any(m.role is Role.SYSTEM for m in fresh)
    if has_system and knowledge.system is None:
        raise RuntimeError("the current system messages were not read")
    current = [row.message() for row in knowledge.system or ()]
    merged = merge_system(current, fresh)
    before = LogState(
        knowledge.version, knowledge.system_batch, knowledge.indexed, knowledge.system
    )
    if not merged.new:
        return LogPlan(Plan(None), before)
    appended = merged.new
    base = start if knowledge.version is None else knowledge.version
    next_seq = base + len(appended)
    writes: list[Write] = []
    new_rows: list[StoredRow] = []
    for offset, message in enumerate(appended):
        write = insert_write(conversation_id, base + offset, message, window, ttl)
        writes.append(write)
        if message.role is Role.SYSTEM:
            new_rows.append(StoredRow(*write.params[1:8]))  # type: ignore[arg-type]
    to_index = [*(() if knowledge.indexed else knowledge.stored_ids)]
    to_index += [m.id for m in appended]
    for message_id, slot in knowledge.slots.place(to_index).items():
        writes.append(
            Write(
                "insert_id",
                (conversation_id, LANE_IDS, slot, message_id, ttl),
                "index",
            )
        )
    if ttl:
        writes += [
            rewrite_write(conversation_id, row, ttl) for row in knowledge.rewrite
        ]
        writes += [
            Write(
                "insert_evicted",
                (conversation_id, LANE_IDS, slot, message_id, ttl),
                "refresh",
            )
            for slot, message_id in knowledge.index.items()
        ]
    system_batch = base if new_rows else knowledge.system_batch
    mark = (
        ttl,
        system_batch if (new_rows or ttl) and system_batch is not None else UNSET_VALUE,
        True if ttl or not knowledge.indexed else UNSET_VALUE,
        conversation_id,
    )
    if mark[1] is not UNSET_VALUE or mark[2] is not UNSET_VALUE:
        writes.append(Write("mark", mark, "mark"))
    plan = Plan(
        condition_write(conversation_id, knowledge.version, next_seq, ttl),
        writes,
        AppendResult(list(appended)),
    )
    system = tuple(new_rows) if new_rows else knowledge.system
    return LogPlan(plan, LogState(next_seq, system_batch, True, system))
