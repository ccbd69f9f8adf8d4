"""What a repository remembers of the conversations it wrote last.

Example:
    from chatledger import Message, MessageWindow
    from chatledger.validation import stamp_messages
    from chatledger_cassandra.steps import Snapshot, plan_append_batch
    from chatledger_cassandra.snapshots import SnapshotCache, after_commit

    snapshot = Snapshot(None, [])
    plan = plan_append_batch(
        "c1", snapshot, stamp_messages([Message.user("hi")]), MessageWindow(20), 0
    )
    cache = SnapshotCache(capacity=128)
    cache.remember("c1", after_commit(snapshot, plan))
    cache.recall("c1", plan.condition.params[1])   # the snapshot: nobody wrote since

An append decides on the index columns of the whole conversation, so reading
them costs a round trip whose size grows with the conversation. The writers
of one process take turns (:mod:`chatledger_cassandra.locks`), so after its own
commit a repository knows exactly what the partition holds: the snapshot it
read with the plan it committed applied (its record of evicted ids included).
The next append of that conversation then only reads ``next_seq``: if it is
still the version this repository wrote, nobody else wrote since and the
remembered snapshot is the partition.
Any other version (another process wrote, the conversation was deleted or
expired) means a full read, as without the cache.

Versions never repeat within a conversation's life, because every change of
its rows advances ``next_seq``. A conversation deleted and written again
starts a new life; its sequence numbers start at a random offset
(:func:`first_sequence_number`), so a new life does not meet an old version by
accident and a stale snapshot is never taken for the current one.
"""

from __future__ import annotations

import random
import threading
from collections import OrderedDict
from dataclasses import replace
from typing import cast

from cassandra.query import UNSET_VALUE

from chatledger_cassandra.statements import LANE_EVICTED, LANE_SYSTEM
from chatledger_cassandra.steps import Plan, Snapshot, StoredRow

__all__ = ["SnapshotCache", "after_commit", "first_sequence_number"]

#: Sequence numbers of a new conversation start below this bound, leaving
#: room for 2**62 more messages in its life before ``bigint`` overflows.
_FIRST_SEQUENCE_BOUND = 2**62

# The values of the "insert" statement: the conversation id, the StoredRow
# fields lane to payload, then the TTL.
_InsertValues = tuple[str, int, int, str, str, str | None, int | None, str | None, int]
# The values of the "insert_evicted" statement: the conversation id, the lane,
# the row's number, the evicted id, then the TTL.
_RecordValues = tuple[str, int, int, str, int]


def first_sequence_number() -> int:
    """Return where the sequence numbers of a new conversation start."""
    return random.randrange(_FIRST_SEQUENCE_BOUND)


def after_commit(snapshot: Snapshot, plan: Plan) -> Snapshot:
    """Return what the partition holds once ``plan``, read at ``snapshot``, applied.

    The statements of a conditional batch share one timestamp, and the plans
    never insert a row their own deletes cover, so applying the deletes first
    and the inserts after is what Cassandra does. Payloads are kept for system
    messages only, as an index read would return them.
    """
    if plan.condition is None:
        return replace(snapshot, rows=[_as_indexed(row) for row in snapshot.rows])
    if plan.condition.statement not in ("start", "advance"):
        return Snapshot(None, [])
    rows = {(row.lane, row.seq): row for row in snapshot.rows}
    evicted = dict(snapshot.evicted)
    system_batch, indexed = snapshot.system_batch, snapshot.indexed
    for write in plan.writes:
        if write.statement == "delete_before":
            _, lane, bound = cast(tuple[str, int, int], write.params)
            rows = {k: r for k, r in rows.items() if k[0] != lane or k[1] >= bound}
            if lane == LANE_EVICTED:
                evicted = {i: seq for i, seq in evicted.items() if seq >= bound}
        elif write.statement == "delete_partition":
            return Snapshot(None, [])
    for write in plan.writes:
        if write.statement == "insert":
            row = StoredRow(*cast(_InsertValues, write.params)[1:8])
            rows[(row.lane, row.seq)] = row
        elif write.statement == "insert_evicted":
            _, _, seq, msg_id, _ = cast(_RecordValues, write.params)
            evicted[msg_id] = seq
        elif write.statement == "mark":
            _, batch, flag, _ = write.params
            if batch is not UNSET_VALUE:
                system_batch = cast(int | None, batch)
            if flag is not UNSET_VALUE:
                indexed = bool(flag)
    version = cast(int, plan.condition.params[1])
    kept = [_as_indexed(row) for row in rows.values()]
    return Snapshot(version, kept, evicted, system_batch, indexed)


def _as_indexed(row: StoredRow) -> StoredRow:
    if row.payload is None or row.lane == LANE_SYSTEM:
        return row
    return replace(row, payload=None)


class SnapshotCache:
    """The last known snapshot of up to ``capacity`` conversations, most recent kept."""

    def __init__(self, capacity: int) -> None:
        """Remember at most ``capacity`` conversations (``0`` remembers none)."""
        self._capacity = capacity
        self._guard = threading.Lock()
        self._snapshots: OrderedDict[str, Snapshot] = OrderedDict()

    def remember(self, conversation_id: str, snapshot: Snapshot) -> None:
        """Keep ``snapshot`` as what the conversation holds now."""
        if self._capacity == 0 or snapshot.version is None:
            self.forget(conversation_id)
            return
        with self._guard:
            self._snapshots[conversation_id] = snapshot
            self._snapshots.move_to_end(conversation_id)
            while len(self._snapshots) > self._capacity:
                self._snapshots.popitem(last=False)

    def recall(self, conversation_id: str, version: int | None) -> Snapshot | None:
        """Return the kept snapshot if it is at ``version``, else forget it."""
        with self._guard:
            snapshot = self._snapshots.get(conversation_id)
            if snapshot is None:
                return None
            if version is None or snapshot.version != version:
                del self._snapshots[conversation_id]
                return None
            self._snapshots.move_to_end(conversation_id)
            return snapshot

    def knows(self, conversation_id: str) -> bool:
        """True when a snapshot of the conversation is kept."""
        with self._guard:
            return conversation_id in self._snapshots

    def forget(self, conversation_id: str) -> None:
        """Drop what is kept of the conversation."""
        with self._guard:
            self._snapshots.pop(conversation_id, None)
