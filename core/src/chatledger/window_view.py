"""The window as a view of the log: what a memory shows, read from a bounded tail.

Example:
    from chatledger import Message, MessageWindow
    from chatledger.window_view import LogRow, TailView

    log = [Message.user("q1"), Message.assistant("a1"), Message.user("q2")]
    rows = [LogRow(n, m, 1) for n, m in enumerate(log, 1)]
    view = TailView(MessageWindow(2), system=[])
    view.feed(reversed(rows))    # newest first; True once the view is known
    view.messages()              # [q2]: the window starts on a whole turn

A repository that keeps each conversation as a log (see
:class:`chatledger.SupportsLog`) shows a window by reading the newest rows,
newest first, a batch at a time, and feeding them here until
:meth:`TailView.feed` answers ``True``: for a message window that is about
the window's size plus the rest of a turn, never the whole log. Nothing here
does I/O.

The rules are those of :mod:`chatledger.window`, applied at read time to the
whole log instead of at each append:

1. System messages. The ones shown are those stored by the latest append that
   stored any (:func:`current_system`): an append holding a new system
   message supersedes the earlier ones, which stay in the log. They are
   shown where they were added, and never cut.
2. Turns. The rest is the longest tail of non-system messages that fits
   beside them, its start moved forward to the first user message in it.
3. One turn larger than the window. If that tail holds no user message, the
   view starts at the last user message before it: the newest turn is shown
   whole. A log with no user message at all is one turn in progress and is
   shown whole.
4. No orphan tool response. A view never starts on a tool message: where it
   reaches the start of the log, the log's leading tool messages are left
   out.

For every history whose system messages never shrink, the view equals the
window a write-time memory (:func:`chatledger.window.apply_window`, applied
append by append) would have kept; the conformance suite's
``LogTests.test_window_view_matches_the_write_time_window`` checks it on
random histories. Where they differ, the view shows more, never less: after
a system message is replaced by a smaller one, the room it frees shows older
turns again (a write-time window had already deleted them).

Translations. Where a part of the view runs in the server, it is named here,
and that random-history test exercises it on its backend:

- Redis: rule 1 (:func:`current_system`) in the ``VIEW`` script of
  ``chatledger_redis.scripts``, which answers the system messages from the
  latest system batch on (the tail of the conversation's system list, from
  the batch number kept beside it) together with the newest rows; rules 2-4
  run here, in :class:`TailView`, over those rows and the older ones the
  ``TAIL`` script reads while the view is not done (the Redis conformance
  tests also run the suite with views read a row or two at a time, so every
  view crosses those reads).
- MongoDB: rule 1 (:func:`current_system`) in the aggregation of
  ``chatledger_mongodb.log_reads.view_pipeline``, which answers the system
  elements whose batch is at least the one the conversation's document
  records (``b`` against ``sb``, absent meaning 0) together with the newest
  rows; rules 2-4 run here, in :class:`TailView`, over those rows and the
  older ones ``tail_pipeline`` reads while the view is not done. The suite
  runs on a MongoDB server where one is reachable, and always on the tests'
  in-process stand-in (mongomock and an evaluator of the pipeline's
  operators: it checks the aggregation's logic, not a server); both also
  with views read a row or two at a time.
- Neo4j: rule 1 (:func:`current_system`) in the ``current_system`` part of
  the ``view`` statement of ``chatledger_neo4j.cypher``: the newest system
  message's batch, then the system messages from that batch on, both by
  seeks of the ``(conversation_id, role, seq)`` index; rules 2-4 run here
  over the newest rows it answers and the older ones ``view_older`` reads.
  The Neo4j conformance tests also run with views read a row or two at a
  time.
- Removals (:class:`chatledger.SupportsLogRemoval`) run rule 1 again in the
  server when they take every message of the current set: in the ``REMOVE``
  script of ``chatledger_redis.scripts`` (the set current again is the tail
  of the system list from the batch the newest system marker left records;
  each system marker ends with its append's batch, ``chatledger_redis.markers``)
  and in the pipeline of ``chatledger_mongodb.removal`` (``sb`` becomes the
  largest ``b`` of the system elements left). The suite's
  ``LogRemovalTests.test_removing_the_current_system_message_shows_the_one_before``
  exercises both, and each backend's ``test_removal`` holds them to the
  in-memory repository on random histories.
- Cassandra keeps the batch of the current system messages as the static
  ``system_batch`` and reads lane 0 from it
  (``chatledger_cassandra.log_views``); rules 2-4 run here.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import TypeVar, cast

from chatledger.append_plan import TOKEN_WINDOW_FIRST_READ, TURN_SLACK
from chatledger.messages import Message, Role
from chatledger.window import MessageWindow, Window

__all__ = ["LogRow", "TailView", "checked_window", "current_system", "view_reads"]

T = TypeVar("T")

#: The most rows a view reads back in one further read.
TAIL_READ_CAP = 4096

# Types already found to be a Window: a check against a runtime Protocol walks
# its members on every call (tens of microseconds, more than the rest of a log
# append's own work), so each type is checked once.
_WINDOW_TYPES: set[type] = set()


def checked_window(window: object) -> Window:
    """Return ``window`` if it is a :class:`~chatledger.window.Window`, else raise.

    Raises:
        TypeError: naming the type given; call it before any I/O.
    """
    kind = type(window)
    if kind not in _WINDOW_TYPES:
        if not isinstance(window, Window):
            raise TypeError(f"window must be a Window, not {kind.__name__}")
        _WINDOW_TYPES.add(kind)
    return cast(Window, window)


def view_reads(window: Window) -> Iterator[int]:
    """How many non-system rows a view reads: first, then in each further read.

    The first read is about the window and the rest of a turn: its limit plus
    :data:`~chatledger.append_plan.TURN_SLACK` for a message window,
    :data:`~chatledger.append_plan.TOKEN_WINDOW_FIRST_READ` for tokens. Most
    views are done after it; each further read doubles, up to
    :data:`TAIL_READ_CAP` rows (never below the first).
    """
    rows = (
        window.limit + TURN_SLACK
        if window.counter_id is None
        else (TOKEN_WINDOW_FIRST_READ)
    )
    while True:
        yield rows
        rows = max(rows, min(rows * 2, TAIL_READ_CAP))


@dataclass(frozen=True, slots=True)
class LogRow:
    """One stored message of a log, as a view reads it.

    Attributes:
        sequence: Its place in the conversation's gap-free sequence.
        message: The message.
        size: Its size in the window's measure, or ``None`` to measure it
            here (a size stored under another counter, or none at all).
    """

    sequence: int
    message: Message
    size: int | None = None

    def __init__(
        self, sequence: int, message: Message, size: int | None = None
    ) -> None:
        # The slots' own setters: a read builds one row per message it
        # decodes, and the frozen dataclass's setattr costs half again as much.
        _SET_SEQUENCE(self, sequence)
        _SET_MESSAGE(self, message)
        _SET_SIZE(self, size)


_SEQUENCE = attrgetter("sequence")
_SET_SEQUENCE, _SET_MESSAGE, _SET_SIZE = (
    LogRow.__dict__[name].__set__ for name in ("sequence", "message", "size")
)


def current_system(system_rows: Iterable[tuple[int, T]]) -> list[T]:
    """Return the system messages a view shows (rule 1), oldest first.

    Args:
        system_rows: ``(batch, row)`` for each stored system message (the
            message itself, or a :class:`LogRow` of it), oldest first, where
            ``batch`` is the sequence number of the first message of the
            append that stored it. Only the latest batch counts, so a
            repository may pass that batch's rows alone.
    """
    latest: int | None = None
    shown: list[T] = []
    for batch, message in system_rows:
        if latest is None or batch > latest:
            latest, shown = batch, []
        if batch == latest:
            shown.append(message)
    return shown


class TailView:
    """Builds one window view from the newest rows of a log, fed newest first.

    Args:
        window: The window to show.
        system: The rows of the system messages shown (see
            :func:`current_system`), oldest first.
    """

    __slots__ = ("_kept", "_room", "_system", "_turn_start", "_window", "done")

    def __init__(self, window: Window, system: Sequence[LogRow]) -> None:
        """Start an empty view; the system rows count against the limit."""
        self._window = window
        self._system = list(system)
        self._room = window.limit - sum(self._size(row) for row in self._system)
        # Non-system rows that fit, newest first, and then, once the tail is
        # full and holds no user message, the rows back to the last user one.
        self._kept: list[LogRow] = []
        self._turn_start: int | None = None
        #: True once the view is known: feed no more.
        self.done = False

    def _size(self, row: LogRow) -> int:
        return self._window.measure(row.message) if row.size is None else row.size

    def feed(self, newest_first: Iterable[LogRow]) -> bool:
        """Take the next rows (older than any fed before); True once done.

        Rows of system messages are skipped: the view takes its system
        messages from the constructor. Feeding stops at the first row that
        settles the view, so a lazy iterable is read no further.
        """
        if self.done:
            return True
        # Locals, and the room written back once: a read feeds every row here.
        kept = self._kept
        keep = kept.append
        room = self._room
        measure = None if type(self._window) is MessageWindow else self._window.measure
        system, user = Role.SYSTEM, Role.USER
        try:
            for row in newest_first:
                role = row.message.role
                if role is system:
                    continue
                if self._turn_start is not None:
                    # Rule 3: walking back to the start of the newest turn.
                    keep(row)
                    if role is user:
                        self.done = True
                        break
                    continue
                size = row.size
                if size is None:
                    size = 1 if measure is None else measure(row.message)
                if size <= room:
                    room -= size
                    keep(row)
                    continue
                # The tail is full: it starts at its oldest user message (rule 2),
                # or, holding none, the view reaches back to the last one (rule 3).
                users = [n for n, held in enumerate(kept) if held.message.role is user]
                if users:
                    del kept[users[-1] + 1 :]
                    self.done = True
                    break
                self._turn_start = len(kept)
                keep(row)
                if role is user:
                    self.done = True
                    break
        finally:
            # Kept rows and room agree even when the rows' iterable raises.
            self._room = room
        return self.done

    def messages(self) -> list[Message]:
        """Return the view, oldest first; call it once every row is fed or done.

        Without :attr:`done`, the rows fed are taken as the whole log.
        """
        rows = sorted([*self._system, *self._shown()], key=_SEQUENCE)
        return [row.message for row in rows]

    def shown_from(self) -> int | None:
        """The number of the oldest non-system row the view shows, if any.

        A bounded retention trims nothing from there on
        (:meth:`chatledger.retention.Retention.cutoff`).
        """
        kept = self._shown()
        return kept[-1].sequence if kept else None

    def _shown(self) -> list[LogRow]:
        """The non-system rows shown, newest first."""
        kept = self._kept
        if not self.done or self._turn_start is None:
            # Rule 4 where the view reaches the start of the log (a view cut
            # on a turn starts on a user message already).
            while kept and kept[-1].message.role is Role.TOOL:
                kept = kept[:-1]
        return kept
