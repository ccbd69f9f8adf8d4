"""How the reads of a window view and of a message page become their answer.

Example:
    from chatledger import Message, MessageWindow, codec
    from chatledger.adapters import view_reads
    from chatledger_cassandra.log_rows import LOG_COLUMNS, read_of
    from chatledger_cassandra.log_views import tail_start

    window = MessageWindow(20)
    first = next(view_reads(window))      # 28 rows: the window and a turn's slack
    hello = codec.to_json(Message.user("hello"))
    rows = [(2, None, True, 1, 1, "m1", "user", None, None, hello)]  # the newest
    start = tail_start(read_of(rows, LOG_COLUMNS), first, None, None)
    start.system       # []: the read reached the start of the log, and found none
    start.exhausted    # True: every message row was read

A view (``find_window``) reads the newest rows of the conversation backwards in
clustering order: ``lane < 2 ORDER BY lane DESC, seq DESC LIMIT n`` gives the
newest ``n`` messages of lane 1 (every message but the system ones), newest
first, and, once lane 1 is read whole, the newest system messages of lane 0.
Its system messages are the current ones (core's
:func:`~chatledger.window_view.current_system`: lane 0 from ``system_batch``
on); unless that first read reached them, they come from a second read sent
with it (the newest rows of lane 0), or from what the repository remembers
of the same ``system_batch`` (:mod:`chatledger_cassandra.log_states`), or, for
a set larger than that read, from a third one. Every read names the version
it saw (:mod:`chatledger_cassandra.log_rows`); reads that disagree are sent
again, so a view always shows one state of the conversation. Core's
:class:`~chatledger.window_view.TailView` builds the view, fed row by row and
decoding only what it reads; it asks for older rows only when a turn reaches
further back than the first read (rule 3), a page at a time, as many rows as
core's :func:`~chatledger.window_view.view_reads` says.

A message page reads each message lane from the cursor on, one more row than
the page, and merges the two by sequence number (:func:`page_rows`); core's
:func:`~chatledger.message_pages.message_page` makes the page. Nothing here
does I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from chatledger.adapters import LogRow, Message, Window, codec
from chatledger_cassandra.log_rows import Read, Statics, current_system
from chatledger_cassandra.log_states import LogState
from chatledger_cassandra.statements import LANE_OTHER, LANE_SYSTEM
from chatledger_cassandra.steps import StoredRow

__all__ = [
    "NEWEST_SYSTEM_ROWS",
    "TailStart",
    "disagrees",
    "log_rows",
    "page_bound",
    "page_rows",
    "system_rows",
    "tail_start",
]

#: How many of the newest system rows a view reads beside its first read.
NEWEST_SYSTEM_ROWS = 8
#: Bounds no sequence number reaches, for a page that starts at an end.
_ABOVE_EVERY_SEQ = 2**63 - 1
_BELOW_EVERY_SEQ = -(2**63)


@dataclass(frozen=True, slots=True)
class TailStart:
    """What a view's first reads told.

    Attributes:
        statics: The conversation's static columns (``None``: no message).
        others: The rows of lane 1 read, newest first.
        exhausted: Every row of lane 1 was read.
        system: The current system rows, oldest first; ``None`` when they
            must still be read (:func:`system_rows` reads the answer).
    """

    statics: Statics | None
    others: list[StoredRow]
    exhausted: bool
    system: list[StoredRow] | None


def tail_start(
    newest: Read,
    limit: int,
    newest_system: Read | None,
    remembered: LogState | None,
) -> TailStart | None:
    """Read a view's first answers; ``None`` when they show different states.

    Args:
        newest: The ``select_newest`` read of ``limit`` rows.
        limit: Its limit.
        newest_system: The read of the newest :data:`NEWEST_SYSTEM_ROWS` rows
            of lane 0 sent with it, if one was.
        remembered: What the repository remembers of the conversation.
    """
    statics = newest.statics
    if statics is None:
        if newest_system is not None and newest_system.statics is not None:
            return None  # a message came between the two reads
        return TailStart(None, [], True, [])
    others = [r for r in newest.rows if r.lane == LANE_OTHER]
    seen = [r for r in newest.rows if r.lane == LANE_SYSTEM]
    whole = newest.count < limit
    system: list[StoredRow] | None = None
    if seen or whole:
        system = current_system(seen, statics.system_batch, whole=whole)
    batch = statics.system_batch
    if (
        system is None
        and remembered is not None
        and remembered.system is not None
        and batch is not None
        and remembered.system_batch == batch
    ):
        system = list(remembered.system)
    if system is None and newest_system is not None:
        if disagrees(newest_system, statics):
            return None
        whole_set = newest_system.count < NEWEST_SYSTEM_ROWS
        system = system_rows(newest_system, statics, whole=whole_set)
    return TailStart(statics, others, whole or bool(seen), system)


def disagrees(read: Read, statics: Statics) -> bool:
    """Whether a read of lane 0 shows other system messages than ``statics``.

    A read that returned no row names no version: it disagrees only if the
    state has current system messages (``system_batch`` set) it should have
    found. A read at another version agrees when both name the same
    ``system_batch``: every write that changes the current system messages
    moves it, so an append without one in between changed none of them.
    """
    if read.statics is None:
        return statics.system_batch is not None
    if read.version == statics.version:
        return False
    batch = statics.system_batch
    return batch is None or read.statics.system_batch != batch


def system_rows(read: Read, statics: Statics, *, whole: bool) -> list[StoredRow] | None:
    """The current system rows a read of lane 0 holds, oldest first.

    Args:
        read: A read of lane 0 that agrees with ``statics``, in any order.
        statics: The state the view shows.
        whole: Whether the read holds every row of lane 0 it could reach.

    Returns:
        ``None`` when the read may miss some of them.
    """
    rows = sorted(read.rows, key=lambda r: -r.seq)
    return current_system(rows, statics.system_batch, whole=whole)


def log_rows(rows: Iterable[StoredRow], window: Window) -> Iterator[LogRow]:
    """The rows as core's :class:`~chatledger.window_view.LogRow`, decoded lazily.

    A size stored under the window's counter is taken; any other is left for
    the view to measure.
    """
    counter = window.counter_id
    for row in rows:
        size = row.size if counter is not None and row.size_counter == counter else None
        yield LogRow(row.seq, row.message(), size)


def page_bound(after: int | None, *, newest_first: bool) -> int:
    """The sequence number a page reads from (exclusive)."""
    if after is not None:
        return after
    return _ABOVE_EVERY_SEQ if newest_first else _BELOW_EVERY_SEQ


def page_rows(
    reads: Iterable[Read], *, newest_first: bool
) -> Iterator[tuple[int, Message]]:
    """The rows of both message lanes in the page's order, decoded lazily."""
    rows = [row for read in reads for row in read.rows]
    rows.sort(key=lambda r: -r.seq if newest_first else r.seq)
    for row in rows:
        yield row.seq, codec.from_json(row.payload or "")
