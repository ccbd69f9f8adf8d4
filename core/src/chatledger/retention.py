"""How much of each conversation's log a repository keeps: everything, or a bound.

Example:
    from chatledger.retention import Retention

    Retention.everything()      # the default: nothing stored disappears
    keep = Retention.last(100)  # the newest 100 messages, at most 100 + slack
    keep.trim_due(141, 150)     # True: this append crossed a multiple of the slack
    keep.first_kept(150)        # 51: the newest 100 start here
    keep.cutoff(150, user_from=52)  # 52: the log is cut where a turn starts

A repository takes ``retention=`` beside ``ttl=`` (``Retention.last(100)``,
or ``100`` for short; ``?retention=100`` in a URL). Under
``Retention.last(n)`` every adapter keeps a conversation's log the same way:

1. What stays. The newest ``n`` messages by sequence, less those before
   the first user message among them (the log is cut where a turn starts, as
   a window is), the system messages a view shows
   (:func:`chatledger.window_view.current_system`), and, when the append
   that trims was given a window, every message that window's view shows (a
   turn longer than ``n`` is kept whole while the view shows it). Everything
   older is trimmed. Without a user message among the newest ``n`` (an
   agent's long turn) the cut falls at the ``n``-th newest.
2. When. Trimming is amortized: it runs after an append whose sequence
   numbers reach a multiple of the slack (:meth:`Retention.trim_due`), so a
   log holds at most ``n + slack`` messages besides the ones rule 1 keeps,
   and one append in about ``slack`` pays for a trim. With concurrent
   writers that bound holds once their trims are done; while trims wait for
   the conversation, the others' appends go on, up to one slack more per
   writer waiting: at most ``n + slack * (writers + 1)`` for a moment, since
   each multiple of the slack crossed since the last trim done is a writer's
   trim still to run, and a writer waiting for its trim appends nothing.
3. Off the append's path. The append commits first; the trim is a separate
   atomic step after it. A trim that fails leaves the append stored and is
   caught up by the next one: a trim removes everything below its cutoff,
   not one slack's worth.
4. No race into loss. A trim removes only messages numbered below a cutoff
   (:meth:`Retention.cutoff`) taken from its own append's last number:
   concurrent appends only add higher numbers.
5. Retries. A trimmed message's id joins the conversation's record of
   evicted ids (:mod:`chatledger.evicted_ids`), so a late retry of its
   append stays a no-op.

Translations. Where a part of the trim runs inside the server, it is named
here; the suite's random-history case
(``RetentionTests.test_the_view_of_a_bounded_log_is_the_unbounded_view``)
exercises it on its backend. Core decides :meth:`Retention.trim_due` and
:meth:`Retention.first_kept` on every backend, and the view's
:meth:`~chatledger.window_view.TailView.shown_from` comes from a view read as
``find_window`` reads it.

- Redis: the ``TRIM`` script of ``chatledger_redis.scripts`` finds
  ``user_from`` (the first user marker numbered from ``first_kept(last)``
  through the append's own last, scanning the turns list from its head) and
  takes :meth:`Retention.cutoff` (never past ``shown_from``); below the
  cutoff it keeps the current system set as the ``VIEW`` script answers it
  (:func:`~chatledger.window_view.current_system`), and the removed ids join
  the record through the window append's eviction path. Core's numbers are
  Redis sequence numbers + 1.
- MongoDB: the update pipeline of ``chatledger_mongodb.trim.trim_pipeline``
  finds ``user_from`` with a ``$filter`` of user elements and takes the
  cutoff as a minimum against ``shown_from``; below it, the current system
  set (``b`` at least ``sb``) stays, and the record is a ``$slice`` to the
  newest :data:`~chatledger.evicted_ids.EVICTED_IDS_KEPT`, as
  :func:`~chatledger.evicted_ids.kept_newest` makes it. Core's numbers are
  ``seq`` + 1.
- Neo4j: what stays below the cutoff (the current system messages,
  :func:`~chatledger.window_view.current_system`) is found in the server by
  the ``trim`` statement of ``chatledger_neo4j.cypher``, with the view's own
  ``current_system`` seeks; the same statement extends the record as
  :func:`~chatledger.evicted_ids.kept_newest` makes it and adjusts the
  conversation's counts. ``user_from`` is one index seek in ``trim_start``;
  the cutoff is computed in Python.
- Cassandra: nothing runs in the server but range deletes; the cutoff, what
  goes and the record's trim are decided in ``chatledger_cassandra.log_trims``
  (lane 0 is deleted only below ``min(cutoff, system_batch)``, the existing
  rule 1 translation of ``window_view``).

A window memory over a bounded log must fit in it: a
:class:`~chatledger.MessageWindowChatMemory` whose ``max_messages`` is more
than ``n`` is refused when it is made.
"""

from __future__ import annotations

from dataclasses import dataclass

from chatledger.errors import InvalidRetentionError

__all__ = ["InvalidRetentionError", "Retention", "to_retention"]

#: The most messages a bounded log is asked to keep (a bound this large is
#: everything in practice, and keeps cutoffs far from any integer limit).
MAX_KEPT = 10**9


@dataclass(frozen=True, slots=True)
class Retention:
    """What a repository keeps of each conversation's log.

    Make one with :meth:`everything` (the default) or :meth:`last`.

    Attributes:
        keep: The newest messages kept, or ``None`` for everything.
        slack: How many more a bounded log may hold before a trim (``0`` for
            everything).
    """

    keep: int | None = None
    slack: int = 0

    def __post_init__(self) -> None:
        """Refuse a bound that :meth:`last` would refuse."""
        if self.keep is None:
            if self.slack != 0:
                raise InvalidRetentionError("an unbounded retention has no slack")
            return
        for name, value, least in (("keep", self.keep, 1), ("slack", self.slack, 1)):
            if not isinstance(value, int) or isinstance(value, bool):
                raise InvalidRetentionError(
                    f"retention {name} must be an int, not {type(value).__name__}"
                )
            if not least <= value <= MAX_KEPT:
                raise InvalidRetentionError(
                    f"retention {name} must be from {least} to {MAX_KEPT}, not {value}"
                )

    @classmethod
    def everything(cls) -> Retention:
        """Keep every message: nothing a user stored disappears unless asked."""
        return cls()

    @classmethod
    def last(cls, n: int, *, slack: int | None = None) -> Retention:
        """Keep about the newest ``n`` messages of each conversation.

        Args:
            n: The messages kept, from 1 (the system messages a view shows
                are kept besides).
            slack: How many more a log may hold before a trim removes them;
                by default a quarter of ``n``, at least 10. A larger slack
                trims less often, in larger batches.

        Raises:
            InvalidRetentionError: ``n`` or ``slack`` is not a positive int.
        """
        if slack is None and isinstance(n, int) and not isinstance(n, bool):
            slack = max(10, n // 4)
        return cls(n, 1 if slack is None else slack)

    @property
    def bounded(self) -> bool:
        """True when the log is trimmed to a bound."""
        return self.keep is not None

    def trim_due(self, first: int, last: int) -> bool:
        """True if an append that stored the numbers ``first``..``last`` trims.

        It does when the numbers reach a multiple of the slack and the log
        has more than ``keep`` numbers: about once per ``slack`` messages.
        """
        if self.keep is None or last <= self.keep:
            return False
        return last // self.slack > (first - 1) // self.slack

    def first_kept(self, last: int) -> int:
        """The number of the oldest of the newest ``keep``, after ``last``."""
        return 1 if self.keep is None else max(1, last - self.keep + 1)

    def cutoff(
        self, last: int, *, user_from: int | None, shown_from: int | None = None
    ) -> int:
        """The lowest number a trim keeps, after an append that ended at ``last``.

        Args:
            last: The number of the append's last message.
            user_from: The number of the first user message numbered
                :meth:`first_kept` or later, if there is one: the log is cut
                where a turn starts, so a view never starts inside one.
            shown_from: The number of the oldest non-system message the
                view of the append's window shows, if it was given one:
                the cutoff never passes it.
        """
        if self.keep is None:
            return 1
        start = self.first_kept(last) if user_from is None else user_from
        return start if shown_from is None else min(start, shown_from)

    def __repr__(self) -> str:
        if self.keep is None:
            return "Retention.everything()"
        return f"Retention.last({self.keep}, slack={self.slack})"


def to_retention(value: object) -> Retention:
    """Return the ``retention`` option as a :class:`Retention`, or raise.

    Args:
        value: A :class:`Retention`, ``None`` (everything), a positive int
            (``Retention.last(n)``), or the same as text from a URL's query:
            ``"all"``, ``"everything"`` or digits.

    Raises:
        InvalidRetentionError: anything else; before any I/O.
    """
    if value is None:
        return Retention.everything()
    if isinstance(value, Retention):
        return value
    if isinstance(value, str):
        text = value.strip().lower()
        if text in {"all", "everything"}:
            return Retention.everything()
        if not text.isdigit() or not text.isascii():
            raise InvalidRetentionError(
                f"retention must be 'all' or a number of messages, not {value!r}"
            )
        value = int(text)
    if isinstance(value, int) and not isinstance(value, bool):
        return Retention.last(value)
    raise InvalidRetentionError(
        "retention must be a Retention, a number of messages or None, "
        f"not {type(value).__name__}"
    )
