"""The trim of a bounded log: one update of the conversation's document.

Example:
    from chatledger import Retention
    from chatledger.validation import utc_now
    from chatledger_mongodb.trim import trim_write

    # after a log append that stored the numbers 141..150, the last one "m150"
    query, update = trim_write(
        "c1", Retention.last(100), 150, "m150", shown_from=None, now=utc_now()
    )
    # collection.update_one(query, update)                 # or awaited

Under ``Retention.last(n)`` (:mod:`chatledger.retention`) a log append whose
numbers make a trim due (:meth:`~chatledger.retention.Retention.trim_due`)
is followed by this update, a single-document write of its own, so the
append stays one ``findAndModify`` and the trim is atomic too. Nothing here
does I/O.

Core numbers a log from 1 and the document from 0 (``seq``, as
``save_all`` numbers it), so the numbers core's rules take are each
``seq`` plus :data:`~chatledger_mongodb.steps.LOG_NUMBER_OFFSET`. Core answers
:meth:`~chatledger.retention.Retention.first_kept` here, and the caller
gives the view's :meth:`~chatledger.window_view.TailView.shown_from` (a
``seq``, read as ``find_window`` reads it); the rest runs in the server,
as translations of core's rules:

- ``user_from``: the ``seq`` of the first user message from the first
  kept through the append's last (a later append's messages are not this
  append's log);
- the cutoff, :meth:`~chatledger.retention.Retention.cutoff`: that user
  message, or the first kept without one, never past the view's oldest;
- what stays below it: the current system set, the system elements whose
  batch ``b`` is at least the document's ``sb`` (absent: 0), the test the
  view's read makes (:func:`chatledger_mongodb.pipeline.in_current_set`,
  core's :func:`~chatledger.window_view.current_system`).

Every other element below the cutoff leaves the ``messages`` array, and
its id joins ``evicted_ids`` as a window append's evictions do (the record
keeps its newest :data:`~chatledger.evicted_ids.EVICTED_IDS_KEPT`, as
:func:`~chatledger.evicted_ids.kept_newest` does). ``version`` changes when
anything left, so a size backfill read before the trim writes nothing;
``next_seq``, ``sb`` and ``expires_at`` stay. The filter matches only a live
document that still holds the append's last message at its ``seq``: after a
``save_all``, a delete or expiry the numbers are not the append's, and the
update changes nothing.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from chatledger.adapters import EVICTED_IDS_KEPT, Role
from chatledger.retention import Retention
from chatledger_mongodb.pipeline import (
    EVICTED_IDS_FIELD,
    SYSTEM_BATCH_FIELD,
    in_current_set,
)
from chatledger_mongodb.steps import LOG_NUMBER_OFFSET, live

__all__ = ["trim_pipeline", "trim_write"]

_TEMPORARIES = ["_uf", "_cut", "_gone"]


def _below_cutoff(variable: str) -> dict[str, Any]:
    """True for an element the trim removes: below ``_cut``, not of the current set."""
    current = in_current_set(variable, {"$ifNull": [f"${SYSTEM_BATCH_FIELD}", 0]})
    return {"$and": [{"$lt": [f"{variable}.seq", "$_cut"]}, {"$not": [current]}]}


def trim_pipeline(
    last: int,
    first_kept: int,
    shown_from: int | None,
    version: str,
    evicted_ids_kept: int = EVICTED_IDS_KEPT,
) -> list[dict[str, Any]]:
    """The update pipeline of a trim, in the document's ``seq`` numbers.

    Args:
        last: The ``seq`` of the append's last message.
        first_kept: The ``seq`` of the oldest of the newest ``n``.
        shown_from: The ``seq`` of the oldest non-system message the
            append's window view shows, or ``None`` without a window.
        version: The new ``version`` token, set when anything leaves.
        evicted_ids_kept: How many of the newest evicted ids the record keeps.
    """
    users = {
        "$filter": {
            "input": "$messages",
            "as": "m",
            "cond": {
                "$and": [
                    {"$eq": ["$$m.role", Role.USER.value]},
                    {"$gte": ["$$m.seq", {"$literal": first_kept}]},
                    {"$lte": ["$$m.seq", {"$literal": last}]},
                ]
            },
        }
    }
    start: Any = {"$ifNull": ["$_uf", {"$literal": first_kept}]}
    if shown_from is not None:
        shown = {"$literal": shown_from}
        start = {
            "$let": {
                "vars": {"start": start},
                "in": {"$cond": [{"$lt": [shown, "$$start"]}, shown, "$$start"]},
            }
        }
    gone = {"$filter": {"input": "$messages", "as": "m", "cond": _below_cutoff("$$m")}}
    kept = {
        "$filter": {
            "input": "$messages",
            "as": "m",
            "cond": {"$not": [_below_cutoff("$$m")]},
        }
    }
    record = {
        "$slice": [
            {"$concatArrays": [{"$ifNull": [f"${EVICTED_IDS_FIELD}", []]}, "$_gone"]},
            -evicted_ids_kept,
        ]
    }
    anything = {"$gt": [{"$size": "$_gone"}, 0]}
    return [
        {
            "$set": {
                "_uf": {
                    "$arrayElemAt": [
                        {"$map": {"input": users, "as": "m", "in": "$$m.seq"}},
                        0,
                    ]
                }
            }
        },
        {"$set": {"_cut": start}},
        {"$set": {"_gone": {"$map": {"input": gone, "as": "m", "in": "$$m.id"}}}},
        {
            "$set": {
                "messages": kept,
                EVICTED_IDS_FIELD: {
                    "$cond": [anything, record, f"${EVICTED_IDS_FIELD}"]
                },
                "version": {"$cond": [anything, {"$literal": version}, "$version"]},
            }
        },
        {"$unset": _TEMPORARIES},
    ]


def trim_write(
    conversation_id: str,
    retention: Retention,
    last: int,
    last_id: str,
    shown_from: int | None,
    now: datetime,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The ``(filter, update)`` of the trim after an append that ended at ``last``.

    Args:
        conversation_id: The conversation appended to.
        retention: The repository's (bounded) retention.
        last: Core's number of the append's last message.
        last_id: That message's id.
        shown_from: The ``seq`` the append's window view starts at
            (:meth:`~chatledger.window_view.TailView.shown_from`), or ``None``.
        now: The time the trim runs; an expired document is left alone.
    """
    last_seq = last - LOG_NUMBER_OFFSET
    held = {"$elemMatch": {"seq": last_seq, "id": last_id}}
    query = {"_id": conversation_id, **live(now), "messages": held}
    first_kept = retention.first_kept(last) - LOG_NUMBER_OFFSET
    return query, trim_pipeline(last_seq, first_kept, shown_from, uuid.uuid4().hex)
