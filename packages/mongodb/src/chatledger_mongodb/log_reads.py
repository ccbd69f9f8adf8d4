"""The log's reads: aggregations on one conversation document, and their answers.

Example:
    from chatledger import MessageWindow
    from chatledger.validation import utc_now
    from chatledger.window_view import view_reads
    from chatledger_mongodb.log_reads import tail_rows, view_pipeline, view_start

    window = MessageWindow(20)
    rows = next(view_reads(window))     # 28: the limit and core's TURN_SLACK
    pipeline = view_pipeline("c1", window, rows, utc_now())
    found = []  # list(collection.aggregate(pipeline)), or awaited
    view, tail = view_start(found, window)
    view.feed(tail_rows(tail))
    view.messages()                     # []: no such conversation

A window view (``find_window``) is read newest first. :func:`view_pipeline`
answers, in one round trip, the current system set and the newest
non-system rows (how many: core's
:func:`~chatledger.window_view.view_reads`). :func:`view_start` begins
core's :class:`~chatledger.window_view.TailView` with that system set and
:func:`tail_rows` feeds it the rows, newest first. Only while the view is
not done (a turn reaching back past the rows read, rule 3) does
:func:`tail_pipeline` read the rows just older than the oldest read, a page
per round trip (:func:`tail_of` reads its answer). A page of messages
(``find_messages_page``) is one :func:`page_pipeline`, which takes a range
of sequence numbers.

What the server decides: which system messages the view shows (rule 1,
:func:`chatledger.window_view.current_system`): the system elements whose
batch ``b`` is at least the document's ``sb`` (absent: 0), that is those
the latest append that stored a system message stored (see
:mod:`chatledger_mongodb.pipeline`). Rules 2 to 4 run in core's
``TailView``. A row carries the size stored under the window's counter, or
none, and then ``TailView`` measures the message.

A conversation is one document, kept in ``seq`` order, so each read is a
``$match`` on ``_id`` and a ``$project`` that filters and slices its
``messages`` array: the server loads the document and walks the array (work
that grows with the document, which MongoDB bounds at 16 MiB), and sends
only the rows asked for (what grows with the window or the page). A further
view read is answered only while the row it continues from is still stored,
with the same id: after a window append evicted it, or ``save_all``
renumbered the conversation, it answers nothing and the view ends there,
never mixing two conversations' rows.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

from chatledger.adapters import (
    LogRow,
    Message,
    Role,
    TailView,
    Window,
    codec,
)
from chatledger_mongodb.pipeline import SYSTEM_BATCH_FIELD, cached_size, in_current_set
from chatledger_mongodb.steps import live

__all__ = [
    "page_pipeline",
    "page_rows",
    "tail_of",
    "tail_pipeline",
    "tail_rows",
    "view_pipeline",
    "view_start",
]

_SYSTEM = Role.SYSTEM.value


def _view_row(counter_id: str | None) -> dict[str, Any]:
    """A row of a view: seq, id, codec text, and the size under the counter."""
    row: dict[str, Any] = {"s": "$$m.seq", "i": "$$m.id", "p": "$$m.p"}
    if counter_id is not None:
        row["n"] = cached_size("$$m", counter_id)
    return row


def _newest_non_system(
    rows: int, counter_id: str | None, before: int | None = None
) -> dict[str, Any]:
    """The newest ``rows`` non-system rows (below the seq ``before``), oldest first."""
    keep: dict[str, Any] = {"$ne": ["$$m.role", _SYSTEM]}
    if before is not None:
        keep = {"$and": [keep, {"$lt": ["$$m.seq", before]}]}
    chosen = {"$filter": {"input": "$messages", "as": "m", "cond": keep}}
    return {
        "$map": {
            "input": {"$slice": [chosen, -rows]},
            "as": "m",
            "in": _view_row(counter_id),
        }
    }


def view_pipeline(
    conversation_id: str, window: Window, rows: int, now: datetime
) -> list[dict[str, Any]]:
    """The first read of a view: the current system set and the newest rows.

    Answers one document ``{system: [...], tail: [...]}`` (rows oldest
    first), or none for a conversation that does not exist or expired by
    ``now``.
    """
    current = {
        "$filter": {
            "input": "$messages",
            "as": "m",
            "cond": in_current_set("$$m", {"$ifNull": [f"${SYSTEM_BATCH_FIELD}", 0]}),
        }
    }
    return [
        {"$match": {"_id": conversation_id, **live(now)}},
        {
            "$project": {
                "_id": 0,
                "system": {
                    "$map": {
                        "input": current,
                        "as": "m",
                        "in": _view_row(window.counter_id),
                    }
                },
                "tail": _newest_non_system(rows, window.counter_id),
            }
        },
    ]


def tail_pipeline(
    conversation_id: str,
    window: Window,
    oldest: Mapping[str, Any],
    rows: int,
    now: datetime,
) -> list[dict[str, Any]]:
    """A further read of a view: the ``rows`` non-system rows older than ``oldest``.

    ``oldest`` is the oldest row read so far, as an answer gave it. The
    document matches only while that row is still stored (same ``seq``,
    same id), so a read that follows an eviction or a ``save_all`` answers
    nothing. Answers ``{tail: [...]}``, oldest first.
    """
    held = {"$elemMatch": {"seq": oldest["s"], "id": oldest["i"]}}
    return [
        {"$match": {"_id": conversation_id, **live(now), "messages": held}},
        {
            "$project": {
                "_id": 0,
                "tail": _newest_non_system(rows, window.counter_id, oldest["s"]),
            }
        },
    ]


def _row_of(found: Mapping[str, Any]) -> LogRow:
    size = found.get("n")
    return LogRow(
        int(found["s"]),
        codec.from_json(found["p"]),
        None if size is None else int(size),
    )


def view_start(
    found: Sequence[Mapping[str, Any]], window: Window
) -> tuple[TailView, list[Mapping[str, Any]]]:
    """Read :func:`view_pipeline`'s answer: the view begun, and the tail rows.

    Returns the :class:`~chatledger.window_view.TailView` holding the system
    rows, and the newest rows as answered, oldest first, for
    :func:`tail_rows` (an empty view and no rows for no conversation).
    """
    if not found:
        return TailView(window, []), []
    document = found[0]
    system = [_row_of(row) for row in document["system"]]
    return TailView(window, system), list(document["tail"])


def tail_of(found: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The rows of :func:`tail_pipeline`'s answer, oldest first (none if unmatched)."""
    return list(found[0]["tail"]) if found else []


def tail_rows(tail: Sequence[Mapping[str, Any]]) -> Iterator[LogRow]:
    """The rows of an answer's tail, newest first.

    A lazy iterator: :meth:`~chatledger.window_view.TailView.feed` stops at
    the row that settles the view, and no message past it is decoded.
    """
    for index in range(len(tail) - 1, -1, -1):
        yield _row_of(tail[index])


def page_pipeline(
    conversation_id: str,
    after: int | None,
    limit: int,
    newest_first: bool,
    now: datetime,
) -> list[dict[str, Any]]:
    """One page of the log: ``limit + 1`` rows past the seq ``after``.

    Newest first, the rows below ``after`` (from the newest when ``None``);
    oldest first, those above it. One row more than the page tells whether
    another follows. Answers ``{rows: [...]}`` in ``seq`` order.
    """
    source: Any = "$messages"
    if after is not None:
        compare = "$lt" if newest_first else "$gt"
        source = {
            "$filter": {
                "input": "$messages",
                "as": "m",
                "cond": {compare: ["$$m.seq", after]},
            }
        }
    count = -(limit + 1) if newest_first else limit + 1
    return [
        {"$match": {"_id": conversation_id, **live(now)}},
        {
            "$project": {
                "_id": 0,
                "rows": {
                    "$map": {
                        "input": {"$slice": [source, count]},
                        "as": "m",
                        "in": {"s": "$$m.seq", "p": "$$m.p"},
                    }
                },
            }
        },
    ]


def page_rows(
    found: Sequence[Mapping[str, Any]], newest_first: bool
) -> Iterator[tuple[int, Message]]:
    """``(seq, message)`` of each row :func:`page_pipeline` answered, in page order."""
    rows = list(found[0]["rows"]) if found else []
    if newest_first:
        rows.reverse()
    for row in rows:
        yield int(row["s"]), codec.from_json(row["p"])
