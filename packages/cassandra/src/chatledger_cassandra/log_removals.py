"""What a removal on request reads, removes and sends, decided in pure Python.

Example:
    from chatledger_cassandra.log_removals import plan_removal, system_after
    from chatledger_cassandra.log_rows import Statics
    from chatledger_cassandra.statements import LANE_OTHER, LANE_SYSTEM
    from chatledger_cassandra.steps import StoredRow

    rows = [StoredRow(LANE_SYSTEM, 3, "s", "system", payload="{...}")]
    # Taking user message 9 leaves the current system messages (from 3 on) alone.
    change = system_after(Statics(10, 3, True), rows, True, {9})
    change.moved                # False: system_batch stays
    plan = plan_removal(
        "c1", 10, [StoredRow(LANE_OTHER, 9, "m9", "user")], change,
        kept=rows[:1], empty=False, freed=[], vacated=[], ttl=0,
    )
    plan.condition    # IF next_seq = 10, SET next_seq = 11: the removal's number
    plan.writes       # DELETE ... seq = 9 IF EXISTS; UPDATE ... seq = 3 IF EXISTS

``remove_newest`` and ``remove_messages`` (``AsyncSupportsLogRemoval``) take
messages out of a conversation's log in one conditional batch on its
partition, as every write of it is. What makes a removal atomic:

- its condition, ``IF next_seq = <version read>``, and its ``SET next_seq``
  one higher: a removal takes one sequence number, which no message ever
  gets, as its version. An append or another removal that committed since
  the reads fails the batch (the removal reads again), and the batch fails
  theirs, so two removals never take the same message and a message
  appended meanwhile is taken whole (after a new read) or kept;
- a condition on every row it deletes (``DELETE ... IF EXISTS``) and on a
  row it keeps (``UPDATE ... SET msg_id = <its id> IF EXISTS``): the trim
  of a bounded log moves no version (:mod:`chatledger_cassandra.log_trims`),
  so a trim that came between the reads and the batch is found by the rows
  it deleted, always the oldest of a lane. The kept row guarded is the
  newest one left, which tells the conversation is not left empty; with a
  TTL, whose batch rewrites every row left, the oldest one left of each
  lane, so no row a trim deleted comes back.

The batch deletes the rows (a row tombstone each) and, on a conversation
whose id index is built (:mod:`chatledger_cassandra.id_index`), their ids'
rows of lane 3, so that an id removed is forgotten and appending it again
stores it again: a row goes where the slot after it is free or goes too
(:meth:`~chatledger_cassandra.id_index.SlotMap.freed`); any other is left
holding :data:`VACANT`, an id no message has, so the probe paths through it
stay whole. The record of evicted ids (lane 2) is not touched. A
conversation left without a message is marked ``emptied``: not listed, its
record and ``next_seq`` kept. With a TTL, every row left and the id index are
written again under it, as a log append does, so the cells still expire
together.

Rule 1 over what is left (:func:`system_after`). The current system messages
are the rows of lane 0 from ``system_batch`` on. A removal that takes some of
them leaves the others current, and moves ``system_batch`` to another number
that still starts them, where there is one (the first one left, or one below
the old value and above every superseded row): a repository that remembers
the system messages of a ``system_batch`` (:mod:`chatledger_cassandra.log_states`)
then reads them again. A removal that takes them all makes the system
messages of the newest append that stored any left current: the newest
system row left and the rows before it that share its ``created_at`` (one
append stamps its messages with one time, as the SQL repository also tells
an append's rows; messages given their own ``created_at`` are told apart by
it), ``system_batch`` the first of them; none left, ``system_batch`` is
cleared. Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from cassandra.query import UNSET_VALUE

from chatledger.adapters import Message
from chatledger_cassandra.log_rows import Read, Statics
from chatledger_cassandra.statements import LANE_IDS, LANE_SYSTEM
from chatledger_cassandra.steps import (
    Plan,
    StoredRow,
    Write,
    condition_write,
    rewrite_write,
)

__all__ = [
    "VACANT",
    "NewestScan",
    "RemovalReads",
    "SystemChange",
    "newest",
    "plan_removal",
    "removed_messages",
    "system_after",
]

#: What a slot of the id index holds once the id it held was removed while
#: another id's probe path runs through it: no message id is empty.
VACANT = ""
#: Above every sequence number: a scan from the newest row of a lane.
_ABOVE_EVERY_SEQ = 2**63 - 1
#: The most rows one read of a scan asks for.
_MOST_ROWS = 4096


@dataclass(slots=True)
class NewestScan:
    """One lane read newest first, page after page.

    Attributes:
        lane: The lane read.
        first: How many rows the first read asks for; each further one
            doubles, up to 4,096 (or ``first``, when more).
        rows: The rows read so far, newest first.
        exhausted: The last page came back short: the lane was read to its
            start.
    """

    lane: int
    first: int = 64
    rows: list[StoredRow] = field(default_factory=list)
    exhausted: bool = False
    _sizes: Iterator[int] | None = field(default=None, init=False, repr=False)
    _asked: int = field(default=0, init=False, repr=False)

    def params(self, conversation_id: str) -> tuple[object, ...]:
        """The values of the next read (``select_before`` or
        ``select_ids_before``): on below the last row read."""
        if self._sizes is None:
            self._sizes = _doubling(self.first)
        self._asked = next(self._sizes)
        below = self.rows[-1].seq if self.rows else _ABOVE_EVERY_SEQ
        return (conversation_id, self.lane, below, self._asked)

    def add(self, read: Read) -> None:
        """Take the answer of the read :meth:`params` described."""
        self.rows += read.rows
        self.exhausted = read.count < self._asked


def _doubling(first: int) -> Iterator[int]:
    # The first read asks for all it must see (a pop of more than 4,096).
    rows = first
    while True:
        yield rows
        rows = max(rows, min(rows * 2, _MOST_ROWS))


def newest(rows: Sequence[StoredRow], count: int) -> list[StoredRow]:
    """The newest ``count`` of ``rows`` (of any lanes), oldest first."""
    return sorted(rows, key=lambda r: r.seq)[-count:]


@dataclass(frozen=True, slots=True)
class RemovalReads:
    """What the reads of one attempt of a removal found, at one version.

    Attributes:
        statics: The static columns read (``None``: no message to remove).
        removed: The rows the removal takes, with their payloads.
        lane: Lane 0 as read so far, newest first, with payloads: every row
            taken from it among them; :func:`system_after` may ask for more.
        kept: Rows left that the batch checks still exist.
        empty: Whether the removal leaves no message.
        rewrite: With a TTL, every message row left, oldest first.
        index: With a TTL, every row of the id index (slot to id), read
            whole; ``None`` when the slots must be read.
    """

    statics: Statics | None
    removed: list[StoredRow]
    lane: NewestScan
    kept: list[StoredRow]
    empty: bool
    rewrite: tuple[StoredRow, ...] = ()
    index: Mapping[int, str] | None = None

    @classmethod
    def nothing(cls) -> RemovalReads:
        """The reads of a conversation holding nothing the removal takes."""
        return cls(None, [], NewestScan(LANE_SYSTEM, exhausted=True), [], True)


@dataclass(frozen=True, slots=True)
class SystemChange:
    """The current system messages once a removal commits.

    Attributes:
        system_batch: Where they start in lane 0 (``None``: all of lane 0,
            which holds none when a removal cleared it).
        moved: Whether the removal writes ``system_batch``.
        rows: They, oldest first, with their payloads; ``None`` when the
            removal did not read them all (it changes none of them).
    """

    system_batch: int | None
    moved: bool
    rows: tuple[StoredRow, ...] | None


def _current(row: StoredRow, system_batch: int | None) -> bool:
    return system_batch is None or row.seq >= system_batch


def system_after(
    statics: Statics,
    lane: Sequence[StoredRow],
    exhausted: bool,
    removed: Collection[int],
) -> SystemChange | None:
    """Rule 1 over what a removal leaves, or ``None`` to read lane 0 further.

    Args:
        statics: The conversation as read.
        lane: The rows of lane 0 read, newest first, with their payloads,
            from the newest on, holding every one the removal takes.
        exhausted: Whether ``lane`` reaches the start of lane 0.
        removed: The numbers of the rows the removal takes.
    """
    batch = statics.system_batch
    left = [r for r in lane if r.seq not in removed]
    taken = [r for r in lane if r.seq in removed and _current(r, batch)]
    if not taken:
        whole = exhausted or any(not _current(r, batch) for r in left)
        known = [r for r in left if _current(r, batch)] if whole else None
        return SystemChange(batch, False, None if known is None else _oldest(known))
    # Every current row must be read, and the newest superseded one left.
    if not exhausted and (batch is None or all(_current(r, batch) for r in left)):
        return None
    kept = [r for r in left if _current(r, batch)]
    if kept:
        start = kept[-1].seq
        if batch is not None and start == batch:
            superseded = next((r.seq for r in left if not _current(r, batch)), None)
            # Another number that starts the same rows, where there is one.
            if superseded is None or batch - 1 > superseded:
                start = batch - 1
        return SystemChange(start, start != batch, _oldest(kept))
    if not left:
        if not exhausted:
            return None
        return SystemChange(None, batch is not None, ())
    stamp = left[0].message().created_at
    group = [left[0]]
    for row in left[1:]:
        if row.message().created_at != stamp:
            return SystemChange(group[-1].seq, True, _oldest(group))
        group.append(row)
    if not exhausted:
        return None
    return SystemChange(group[-1].seq, True, _oldest(group))


def _oldest(newest_first: Sequence[StoredRow]) -> tuple[StoredRow, ...]:
    return tuple(reversed(newest_first))


def removed_messages(removed: Sequence[StoredRow]) -> list[Message]:
    """What a removal returns: its rows' messages, oldest first."""
    return [row.message() for row in sorted(removed, key=lambda r: r.seq)]


def plan_removal(
    conversation_id: str,
    version: int,
    removed: Sequence[StoredRow],
    change: SystemChange,
    *,
    kept: Sequence[StoredRow],
    empty: bool,
    freed: Sequence[int],
    vacated: Sequence[int],
    ttl: int,
    indexed: bool = False,
    system_batch: int | None = None,
    rewrite: Sequence[StoredRow] = (),
    index: Mapping[int, str] | None = None,
) -> Plan:
    """Plan the conditional batch of a removal.

    Args:
        conversation_id: The validated conversation id.
        version: The version every read saw.
        removed: The rows taken.
        change: What :func:`system_after` said.
        kept: Rows left that the batch checks still exist.
        empty: Whether no message is left.
        freed: The slots of the id index whose rows go.
        vacated: The slots of the id index left holding :data:`VACANT`.
        ttl: The TTL in seconds, ``0`` for none: every cell written takes it.
        indexed: Whether lane 3 indexes the conversation (with a TTL, the
            flag is written again).
        system_batch: The ``system_batch`` read (with a TTL, written again).
        rewrite: With a TTL, every message row left, with its payload.
        index: With a TTL, every row of the id index (slot to id).
    """
    gone = set(freed) | set(vacated)
    writes: list[Write] = [
        Write("delete_if_exists", (conversation_id, r.lane, r.seq), "delete")
        for r in removed
    ]
    writes += [
        Write("touch", (ttl, r.msg_id, conversation_id, r.lane, r.seq), "condition")
        for r in kept
    ]
    writes += [
        Write("delete_row", (conversation_id, LANE_IDS, slot), "index")
        for slot in freed
    ]
    writes += [
        Write("insert_evicted", (conversation_id, LANE_IDS, slot, VACANT, ttl), "index")
        for slot in vacated
    ]
    if ttl:
        writes += [rewrite_write(conversation_id, row, ttl) for row in rewrite]
        writes += [
            Write(
                "insert_evicted",
                (conversation_id, LANE_IDS, slot, message_id, ttl),
                "refresh",
            )
            for slot, message_id in (index or {}).items()
            if slot not in gone
        ]
    batch: object = UNSET_VALUE
    if change.moved:
        batch = change.system_batch
    elif ttl and system_batch is not None:
        batch = system_batch
    flag: object = True if ttl and indexed else UNSET_VALUE
    if batch is not UNSET_VALUE or flag is not UNSET_VALUE:
        writes.append(Write("mark", (ttl, batch, flag, conversation_id), "mark"))
    return Plan(
        condition_write(conversation_id, version, version + 1, ttl, empty), writes
    )
