"""What one read of a conversation's log returns: its static columns and rows.

Example:
    from chatledger_cassandra.log_rows import LOG_COLUMNS, read_of

    # A row of a read of the log: the static columns, then the row's.
    rows = [(12, 3, True, 1, 11, "m11", "user", None, None, "{...}")]
    read = read_of(rows, LOG_COLUMNS)
    read.statics.version                # 12: the next_seq the read saw
    [row.seq for row in read.rows]      # [11]

Every read of the log (:mod:`chatledger_cassandra.statements`) selects the
partition's static columns first, so each row it returns also says at which
version (``next_seq``) it was read. A log append or a window view that needs
several reads sends them at once and keeps their answers only when every read
that returned a row names the same version: then together they show one state
of the conversation. A read that returned no row names no version; a
partition that does not exist returns none. Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

from chatledger_cassandra.statements import (
    LANE_IDS,
    LANE_SYSTEM,
    ROW_COLUMNS,
    STATIC_COLUMNS,
)
from chatledger_cassandra.steps import StoredRow, cells

__all__ = [
    "LOG_COLUMNS",
    "SLOT_COLUMNS",
    "Read",
    "Statics",
    "agree",
    "current_system",
    "read_of",
]

#: The columns of a read of log rows: the static ones, then a row's.
LOG_COLUMNS = (*STATIC_COLUMNS, *ROW_COLUMNS)
#: The columns of a read of the id index.
SLOT_COLUMNS = (*STATIC_COLUMNS, "seq", "msg_id")


@dataclass(frozen=True, slots=True)
class Statics:
    """A partition's static columns, as one read saw them.

    Attributes:
        version: ``next_seq``: the next free sequence number.
        system_batch: Where the current system messages start in lane 0
            (``None``: all of lane 0 is the current set).
        indexed: Whether lane 3 holds the id of every stored row.
    """

    version: int | None
    system_batch: int | None
    indexed: bool


@dataclass(frozen=True, slots=True)
class Read:
    """The answer of one read.

    Attributes:
        statics: The static columns, ``None`` when the read returned no row.
        rows: The rows, in the order read (no row for a partition's statics
            alone). Rows of the id index hold their slot as ``seq`` and their
            id, nothing else.
        count: How many rows the server returned, statics-only ones too.
    """

    statics: Statics | None
    rows: list[StoredRow]
    count: int

    @property
    def version(self) -> int | None:
        """The version read, ``None`` when no row came back."""
        return None if self.statics is None else self.statics.version


def read_of(rows: Iterable[Any], names: Sequence[str]) -> Read:
    """Read the rows of a select of ``names`` (the static columns first)."""
    at = {name: index for index, name in enumerate(names)}
    seq_at, id_at = at.get("seq"), at.get("msg_id")
    whole_rows = all(name in at for name in ROW_COLUMNS)
    row_of = itemgetter(*(at[name] for name in ROW_COLUMNS)) if whole_rows else None
    statics: Statics | None = None
    stored: list[StoredRow] = []
    count = 0
    for row in rows:
        count += 1
        values = cells(row, names)
        if statics is None or values[0] != statics.version:
            statics = Statics(values[0], values[1], bool(values[2]))
        if seq_at is None or id_at is None or values[seq_at] is None:
            continue  # the static columns alone
        if row_of is not None:
            stored.append(StoredRow(*row_of(values)))
        else:  # a row of the id index: its slot and id
            stored.append(StoredRow(LANE_IDS, values[seq_at], values[id_at], ""))
    return Read(statics, stored, count)


def agree(reads: Iterable[Read]) -> bool:
    """True when every read that returned a row saw the same version."""
    versions = {read.version for read in reads if read.statics is not None}
    return len(versions) <= 1


def current_system(
    newest_first: Iterable[StoredRow], system_batch: int | None, *, whole: bool
) -> list[StoredRow] | None:
    """The current system messages among rows of lane 0 read newest first.

    They are the rows from ``system_batch`` on (all of them when it is
    ``None``). Returns them oldest first, or ``None`` when the rows read may
    not hold all of them: ``whole`` says the read reached the start of lane 0.
    """
    shown: list[StoredRow] = []
    for row in newest_first:
        if row.lane != LANE_SYSTEM:
            continue
        if system_batch is not None and row.seq < system_batch:
            return shown[::-1]
        shown.append(row)
    return shown[::-1] if whole else None
