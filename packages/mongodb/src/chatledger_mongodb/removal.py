"""Removals on request: one update of the conversation's document.

Example:
    from datetime import timedelta
    from chatledger.validation import utc_now
    from chatledger_mongodb.removal import REMOVAL_PROJECTION, removed_of
    from chatledger_mongodb.removal import removal_write

    query, update = removal_write("c1", 2, None, ttl=timedelta(days=7), now=utc_now())
    # document = collection.find_one_and_update(
    #     query, update, projection=REMOVAL_PROJECTION,
    #     return_document=ReturnDocument.AFTER)              # or awaited
    removed_of(None)        # []: no live conversation held anything to remove

``remove_newest`` and ``remove_messages`` (``SupportsLogRemoval``) are each
one ``findAndModify`` of the conversation's document whose update is an
aggregation pipeline, so a removal is atomic against appends, trims and
other removals without a transaction: two removals never take the same
message, and a message appended meanwhile is either taken whole or kept.
Nothing here does I/O.

The pipeline names the elements to remove (the last ``count`` of the
``messages`` array, which is kept in ``seq`` order, or those whose ``id``
is named), leaves the rest, and answers the removed ones' codec text in
:data:`~chatledger_mongodb.pipeline.RESULT_FIELD`. Their ids are forgotten:
they do not join ``evicted_ids``, so appending one again stores it again.
``next_seq`` stays (numbers are not reused), ``version`` changes,
``expires_at`` slides as for any write, and the record's ``updated_at``
becomes the server's ``$$NOW`` (never earlier than it was). Sizes are
kept beside each element, so they leave with it.

Rule 1 runs in the server, as a translation of core's
:func:`~chatledger.window_view.current_system` over what is left: while an
element of the current set (a system element whose batch ``b`` is at least
``sb``, :func:`~chatledger_mongodb.pipeline.in_current_set`) is left,
``sb`` stays; when the removal took the whole set, ``sb`` becomes the
largest batch of the system elements left, those of the latest append that
stored any (0 when none is left), so the set it superseded is current
again.

The filter matches only a live document that holds something to remove (a
first element, or an element of a named id): otherwise the command changes
nothing and answers no document. A document left with no messages keeps its
record of evicted ids and is no longer listed, as when a window evicts
everything.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from chatledger.adapters import Message, Role, codec
from chatledger_mongodb.pipeline import (
    RESULT_FIELD,
    SYSTEM_BATCH_FIELD,
    UPDATED_FIELD,
    batch_of,
    in_current_set,
)
from chatledger_mongodb.steps import live

__all__ = ["REMOVAL_PROJECTION", "removal_pipeline", "removal_write", "removed_of"]

#: What a removal reads back: only what it removed.
REMOVAL_PROJECTION = {"_id": 0, RESULT_FIELD: 1}

_TEMPORARIES = ["_rm", "_left"]

_SYSTEM = Role.SYSTEM.value


def _current_batch_after() -> dict[str, Any]:
    """``sb`` after the removal: rule 1 over ``_left`` (see the module docstring)."""
    stored = {"$ifNull": [f"${SYSTEM_BATCH_FIELD}", 0]}
    set_left = {
        "$anyElementTrue": [
            {
                "$map": {
                    "input": "$_left",
                    "as": "m",
                    "in": in_current_set("$$m", stored),
                }
            }
        ]
    }
    system_left = {
        "$filter": {
            "input": "$_left",
            "as": "m",
            "cond": {"$eq": ["$$m.role", _SYSTEM]},
        }
    }
    latest = {
        "$ifNull": [
            {
                "$max": {
                    "$map": {"input": system_left, "as": "m", "in": batch_of("$$m")}
                }
            },
            0,
        ]
    }
    return {"$cond": [set_left, f"${SYSTEM_BATCH_FIELD}", latest]}


def removal_pipeline(
    doomed: Mapping[str, Any], version: str, expires_at: datetime | None
) -> list[dict[str, Any]]:
    """The update pipeline that removes the elements ``doomed`` names.

    Args:
        doomed: An expression of the elements to remove, in ``seq`` order.
        version: The new ``version`` token, set when anything leaves.
        expires_at: The new expiry (``None``: none), set when anything leaves.
    """
    anything = {"$gt": [{"$size": "$_rm"}, 0]}
    left = {
        "$filter": {
            "input": "$messages",
            "as": "m",
            "cond": {"$not": [{"$in": ["$$m.seq", "$_rm.seq"]}]},
        }
    }
    return [
        {"$set": {"_rm": doomed}},
        {"$set": {"_left": left}},
        {
            "$set": {
                "messages": "$_left",
                SYSTEM_BATCH_FIELD: _current_batch_after(),
                "version": {"$cond": [anything, {"$literal": version}, "$version"]},
                "expires_at": {
                    "$cond": [anything, {"$literal": expires_at}, "$expires_at"]
                },
                UPDATED_FIELD: {
                    "$cond": [
                        anything,
                        {"$max": ["$$NOW", f"${UPDATED_FIELD}"]},
                        f"${UPDATED_FIELD}",
                    ]
                },
                RESULT_FIELD: {"removed": "$_rm.p"},
            }
        },
        {"$unset": _TEMPORARIES},
    ]


def removal_write(
    conversation_id: str,
    count: int | None,
    message_ids: Sequence[str] | None,
    *,
    ttl: timedelta | None,
    now: datetime,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The ``(filter, update)`` of a removal, validated by the caller.

    Args:
        conversation_id: The conversation.
        count: How many of the newest to remove; ``None`` to remove by id.
        message_ids: The ids to remove, each once, when ``count`` is ``None``.
        ttl: The repository's TTL; the removal slides the expiry.
        now: When the removal runs; an expired document is left alone.
    """
    messages = "$messages"
    if count is not None:
        held: dict[str, Any] = {"messages.0": {"$exists": True}}
        doomed: dict[str, Any] = {"$slice": [messages, -count]}
    else:
        ids = list(message_ids or [])
        held = {"messages.id": {"$in": ids}}
        doomed = {
            "$filter": {
                "input": messages,
                "as": "m",
                "cond": {"$in": ["$$m.id", {"$literal": ids}]},
            }
        }
    query = {"_id": conversation_id, **live(now), **held}
    expires_at = None if ttl is None else now + ttl
    return query, removal_pipeline(doomed, uuid.uuid4().hex, expires_at)


def removed_of(document: Mapping[str, Any] | None) -> list[Message]:
    """The messages a removal took, oldest first, from what it answered.

    ``document`` was read with :data:`REMOVAL_PROJECTION`; ``None`` (no live
    document held anything to remove) means none.
    """
    if document is None:
        return []
    return [codec.from_json(text) for text in document[RESULT_FIELD]["removed"]]
