"""What a trim of a bounded log reads, removes and sends, decided in pure Python.

Example:
    from chatledger.adapters import Retention
    from chatledger_cassandra.log_trims import LaneScan, plan_log_trim
    from chatledger_cassandra.statements import LANE_OTHER
    from chatledger_cassandra.steps import StoredRow

    keep = Retention.last(4, slack=2)
    keep.trim_due(9, 10)          # True: the append that stored 9..10 trims
    rows = [StoredRow(LANE_OTHER, seq, f"m{seq}", "user") for seq in range(1, 11)]
    plan = plan_log_trim(
        "c1", 11, 0, keep.cutoff(10, user_from=7), None, rows, {}, []
    )
    plan.condition            # IF next_seq = 11: nothing was written since the reads
    plan.result.evicted_ids   # ['m1', ..., 'm6']: below the cutoff, 7

Under ``Retention.last(n)`` (:mod:`chatledger.retention`) a log append whose
numbers make a trim due runs one more write once its own batch committed:
one conditional batch on the conversation's partition, like every write of
it. Core decides what stays (:meth:`~chatledger.retention.Retention.cutoff`,
fed the first user message from ``first_kept`` on and, for an append given a
window, where that window's view starts); this module turns the decision into
statements:

- lane 1 below the cutoff goes in one range delete, and the superseded system
  messages below it (lane 0 below ``system_batch``: the current ones stay) in
  another: a range tombstone each, and none when the lane has nothing there;
- the ids removed join the record of evicted ids (lane 2) exactly as the
  window append's evictions do (:func:`chatledger_cassandra.steps.record_writes`:
  a row per id, numbered by its message, the record trimmed by one range
  delete about once per :data:`chatledger.adapters.EVICTED_IDS_TRIM_STEP`
  ids), so a late retry of their append stays a no-op;
- the id index (lane 3) keeps the ids of the rows and of the record; when
  the record trims, the index rows of the ids it drops go, a row tombstone
  each, where :meth:`chatledger_cassandra.id_index.SlotMap.freed` allows
  (beyond :data:`INDEX_ROWS_PER_BATCH` of them, in further batches on the
  same condition).

The batch's condition, ``IF next_seq = <version read>``, makes the reads
and the batch one atomic step: a write that came in between fails it, and
the trim reads again. It moves no version: the sequence numbers stay gap-free
(a bounded log keeps its newest ``n`` numbers), and nothing a remembered
state (:mod:`chatledger_cassandra.log_states`) holds changes. Its ``SET
emptied = false`` is written under the time the conversation has left, so
the trim never makes a partition outlive its rows. Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from chatledger.adapters import AppendResult, Role
from chatledger_cassandra.log_rows import Read, Statics
from chatledger_cassandra.statements import (
    LANE_IDS,
    LANE_OTHER,
    LANE_SYSTEM,
    STATIC_COLUMNS,
)
from chatledger_cassandra.steps import Plan, StoredRow, Write, cells, record_writes

__all__ = [
    "ANCHOR_COLUMNS",
    "IDS_COLUMNS",
    "INDEX_ROWS_PER_BATCH",
    "Anchor",
    "LaneScan",
    "anchor_of",
    "first_user",
    "ids_read",
    "index_batches",
    "plan_index_release",
    "plan_log_trim",
    "trimmed",
]

#: The columns of ``select_anchor``.
ANCHOR_COLUMNS = (*STATIC_COLUMNS, "ttl", "msg_id")
#: The columns of ``select_ids_after``.
IDS_COLUMNS = (*STATIC_COLUMNS, "seq", "msg_id", "role")
#: The most rows one read of a lane asks for.
_MOST_ROWS = 4096
#: The most id-index rows one batch of a trim deletes: a trim that removes
#: more (a slack of tens of thousands) sends the rest in further batches, so
#: no batch outgrows ``max_write_bytes``.
INDEX_ROWS_PER_BATCH = 2000
#: Below every sequence number: a scan from the start of a lane.
_BELOW_EVERY_SEQ = -(2**63)


@dataclass(frozen=True, slots=True)
class Anchor:
    """The last row the trimming append stored, as the trim finds it.

    Attributes:
        version: The version the read saw.
        statics: The static columns the read saw.
        ttl: The seconds ``next_seq`` has left to live, ``None`` when it
            does not expire.
        msg_id: The id the row holds.
    """

    version: int
    statics: Statics
    ttl: int | None
    msg_id: str


def anchor_of(rows: Iterable[Any]) -> Anchor | None:
    """Read ``select_anchor``: ``None`` when the row is not stored."""
    for row in rows:
        version, system_batch, indexed, ttl, msg_id = cells(row, ANCHOR_COLUMNS)
        if msg_id is None or version is None:
            return None
        statics = Statics(version, system_batch, bool(indexed))
        return Anchor(version, statics, ttl, msg_id)
    return None


def ids_read(rows: Iterable[Any], lane: int) -> Read:
    """Read ``select_ids_after`` of ``lane``: number, id and role of each row."""
    statics: Statics | None = None
    found: list[StoredRow] = []
    count = 0
    for row in rows:
        count += 1
        version, system_batch, indexed, seq, msg_id, role = cells(row, IDS_COLUMNS)
        if statics is None or version != statics.version:
            statics = Statics(version, system_batch, bool(indexed))
        if seq is not None:
            found.append(StoredRow(lane, seq, msg_id, role or ""))
    return Read(statics, found, count)


@dataclass(slots=True)
class LaneScan:
    """One lane read oldest first, page after page, from a number on.

    Attributes:
        lane: The lane read.
        after: The number it is read from (exclusive).
        first: How many rows the first read asks for (4,096 at most); each
            further one doubles, up to 4,096.
        rows: The rows read so far, oldest first.
        exhausted: The last page came back short: the lane was read to its end.
    """

    lane: int
    after: int = _BELOW_EVERY_SEQ
    first: int = 8
    rows: list[StoredRow] = field(default_factory=list)
    exhausted: bool = False
    _sizes: Iterator[int] | None = field(default=None, init=False, repr=False)
    _asked: int = field(default=0, init=False, repr=False)

    def params(self, conversation_id: str) -> tuple[object, ...]:
        """The values of the next ``select_ids_after``: on from the last row read."""
        if self._sizes is None:
            self._sizes = _doubling(self.first)
        self._asked = next(self._sizes)
        after = self.rows[-1].seq if self.rows else self.after
        return (conversation_id, self.lane, after, self._asked)

    def add(self, read: Read) -> None:
        """Take the answer of the read :meth:`params` described."""
        self.rows += read.rows
        self.exhausted = read.count < self._asked

    def reaches(self, seq: int) -> bool:
        """Whether every row of the lane numbered below ``seq`` was read."""
        return self.exhausted or (bool(self.rows) and self.rows[-1].seq >= seq - 1)


def _doubling(first: int) -> Iterator[int]:
    rows = min(first, _MOST_ROWS)
    while True:
        yield rows
        rows = max(rows, min(rows * 2, _MOST_ROWS))


def first_user(rows: Iterable[StoredRow], lowest: int) -> int | None:
    """The number of the first user message numbered ``lowest`` or later."""
    return next(
        (r.seq for r in rows if r.seq >= lowest and r.role == Role.USER.value), None
    )


def _goes(row: StoredRow, cutoff: int, system_batch: int | None) -> bool:
    if row.lane == LANE_OTHER:
        return row.seq < cutoff
    # Lane 0 from system_batch on is the current set, which a view shows.
    return system_batch is not None and row.seq < min(cutoff, system_batch)


def trimmed(
    rows: Iterable[StoredRow], cutoff: int, system_batch: int | None
) -> list[StoredRow]:
    """The rows of lanes 0 and 1 a trim at ``cutoff`` removes, by number."""
    gone = {(r.lane, r.seq): r for r in rows if _goes(r, cutoff, system_batch)}
    return sorted(gone.values(), key=lambda r: r.seq)


def plan_log_trim(
    conversation_id: str,
    version: int,
    ttl: int,
    cutoff: int,
    system_batch: int | None,
    rows: Sequence[StoredRow],
    record: Mapping[str, int],
    freed_slots: Sequence[int],
) -> Plan:
    """Plan the batch of a trim at ``cutoff``; no condition when nothing goes.

    Args:
        conversation_id: The validated conversation id.
        version: The version every read saw.
        ttl: The seconds the conversation has left, ``0`` when it does not
            expire: the record's new rows live as long.
        cutoff: The lowest number kept (:meth:`Retention.cutoff`).
        system_batch: Where the current system messages start (``None``:
            all of lane 0 is current).
        rows: Every row of lanes 0 and 1 below the cutoff (others may come
            too), read at ``version``.
        record: The record of evicted ids as :func:`record_writes` needs it:
            its newest row, and every row at or below the bound it trims to.
        freed_slots: The slots of the id index whose rows go.
    """
    gone = trimmed(rows, cutoff, system_batch)
    if not gone:
        return Plan(None)
    writes: list[Write] = []
    if any(r.lane == LANE_OTHER for r in gone):
        writes.append(
            Write("delete_before", (conversation_id, LANE_OTHER, cutoff), "evict")
        )
    if system_batch is not None and any(r.lane == LANE_SYSTEM for r in gone):
        bound = min(cutoff, system_batch)
        writes.append(
            Write("delete_before", (conversation_id, LANE_SYSTEM, bound), "evict")
        )
    taken_out = [(r.seq, r.msg_id) for r in gone]
    writes += record_writes(conversation_id, dict(record), taken_out, ttl)
    writes += [
        Write("delete_row", (conversation_id, LANE_IDS, slot), "index")
        for slot in freed_slots
    ]
    return Plan(
        Write("confirm", (ttl, False, conversation_id, version), "condition"),
        writes,
        AppendResult([], [r.msg_id for r in gone]),
    )


def index_batches(slots: Sequence[int]) -> list[list[int]]:
    """``slots`` in the batches a trim deletes their rows in: the first goes
    with the trim's own batch, each holds :data:`INDEX_ROWS_PER_BATCH` at most."""
    size = INDEX_ROWS_PER_BATCH
    return [list(slots[i : i + size]) for i in range(0, len(slots), size)] or [[]]


def plan_index_release(
    conversation_id: str, version: int, ttl: int, slots: Sequence[int]
) -> Plan:
    """A further batch of a trim: more id-index rows deleted, on the same
    condition. One that loses it leaves its rows, which still hold their ids
    (a retry of them stays a no-op)."""
    return Plan(
        Write("confirm", (ttl, False, conversation_id, version), "condition"),
        [
            Write("delete_row", (conversation_id, LANE_IDS, slot), "index")
            for slot in slots
        ],
    )
