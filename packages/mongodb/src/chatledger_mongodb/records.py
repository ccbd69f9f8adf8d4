"""Conversation records on the conversation's own document: writes, reads, listing.

Example:
    from chatledger.adapters import check_conversation_info, check_find_conversations
    from chatledger.validation import utc_now
    from chatledger_mongodb.records import (
        INFO_PROJECTION,
        info_write,
        listing_page,
        listing_pipeline,
        record_of,
    )

    update = check_conversation_info("c1", owner="alice", metadata={"title": "Tax"})
    query, pipeline = info_write(update, ttl=None, now=utc_now())
    # document = collection.find_one_and_update(
    #     query, pipeline, projection=INFO_PROJECTION, upsert=True,
    #     return_document=ReturnDocument.AFTER)              # or awaited
    # record_of(document)                # ConversationInfo(id="c1", ...)

    wanted = check_find_conversations(owner="alice", limit=20)
    pipeline = listing_pipeline(wanted, utc_now())
    listing_page([], wanted)             # ConversationInfoPage([], None)

A conversation's record (:class:`chatledger.SupportsConversationInfo`) is
kept on its document, beside its messages:

- ``created_at`` and ``updated_at``: BSON dates of the server's clock
  (``$$NOW``, milliseconds). Every write of the messages keeps them in the
  update it already sends (:func:`chatledger_mongodb.pipeline.record_stage`):
  an append that stores something, a window's eviction, ``save_all`` and a
  removal move ``updated_at``, never back; a trim and
  :func:`info_write` leave it.
- ``owner``: the owner's string, or absent (null) for none.
- ``meta``: the metadata as compact JSON text (absent or null for ``{}``),
  so every JSON object comes back exactly (keys such as ``"$set"``, ``"a.b"``
  or ``""``, integers past 64 bits) and no key becomes a BSON field name.
- ``meta_eq``: one string per top-level key whose value is a JSON scalar,
  the key and the value's canonical form (:func:`match_keys`). The listing's
  metadata filter is ``meta_eq: {$all: [...]}`` in the query, on the server:
  equal strings mean equal JSON values as core compares them
  (:func:`chatledger.conversation_info.metadata_matches`: ``True`` is not
  ``1``, ``1`` is ``1.0``, ``null`` is not an absent key), which neither a
  query on the keys as BSON fields (a dotted key is a path there, ``null``
  matches an absent field and a scalar matches an array's element) nor
  BSON's numbers (64 bits) could say.

The count is the messages array's size, computed by the server where the
record is read. Two indexes answer the listing (:data:`RECORD_INDEXES`):
``(owner, updated_at, _id)`` for one owner's records and ``(updated_at,
_id)`` for all. A page is one aggregation: a ``$match`` whose range on
``updated_at`` stops at the cursor's record (the records at its exact time
whose id is not below the cursor's are left out), a ``$sort`` in the index's
order, newest first, and a ``$limit`` of one more than the page. The
conditions the index does not hold (the metadata, the expiry) are checked on
the documents the index range yields, in order, until the limit.

A document an earlier release wrote holds no record: :func:`record_of`
reads its times from its oldest and newest messages, and
:func:`unfilled_pipeline` and :func:`fill_write` store them (the
repository's ``create_indexes`` does, once a process), so that the listing,
which reads ``updated_at`` by index, finds it.

Nothing here does I/O; the checks come from core
(:func:`chatledger.adapters.check_conversation_info`,
:func:`chatledger.adapters.check_find_conversations`), before any of it.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from chatledger.adapters import (
    UNSET,
    ConversationInfo,
    ConversationInfoPage,
    ConversationInfoUpdate,
    ConversationQuery,
    codec,
    validate_conversation_id,
)
from chatledger_mongodb.pipeline import (
    CREATED_FIELD,
    EVICTED_IDS_FIELD,
    MATCH_FIELD,
    METADATA_FIELD,
    OWNER_FIELD,
    RESULT_FIELD,
    SYSTEM_BATCH_FIELD,
    UPDATED_FIELD,
    expired_expression,
)
from chatledger_mongodb.steps import live

__all__ = [
    "INFO_PROJECTION",
    "OWNER_INDEX_NAME",
    "RECORD_INDEXES",
    "UPDATED_INDEX_NAME",
    "fill_write",
    "info_write",
    "listing_page",
    "listing_pipeline",
    "match_keys",
    "record_of",
    "record_pipeline",
    "unfilled_pipeline",
]

#: The name of the index of one owner's records, newest first.
OWNER_INDEX_NAME = "chatledger_owner_updated_at"
#: The name of the index of all records, newest first.
UPDATED_INDEX_NAME = "chatledger_updated_at"

#: The listing's indexes: ``(keys, name)`` for ``create_index``.
RECORD_INDEXES: list[tuple[list[tuple[str, int]], str]] = [
    ([(OWNER_FIELD, 1), (UPDATED_FIELD, 1), ("_id", 1)], OWNER_INDEX_NAME),
    ([(UPDATED_FIELD, 1), ("_id", 1)], UPDATED_INDEX_NAME),
]

#: What ``set_conversation_info`` reads back: the record and the count its
#: update left in the result field.
INFO_PROJECTION = {
    "_id": 1,
    OWNER_FIELD: 1,
    CREATED_FIELD: 1,
    UPDATED_FIELD: 1,
    METADATA_FIELD: 1,
    RESULT_FIELD: 1,
}


def _missing(field: str) -> dict[str, Any]:
    return {"$eq": [{"$ifNull": [f"${field}", None]}, None]}


def _message_text(field: str, index: int) -> dict[str, Any]:
    """The codec text of the oldest (0) or newest (-1) message, without ``field``.

    For a document an earlier release wrote: its record's times are its
    messages'.
    """
    texts = {"$ifNull": ["$messages.p", []]}
    return {"$cond": [_missing(field), {"$arrayElemAt": [texts, index]}, None]}


#: The ``$project`` of a record read: its fields and the count.
_RECORD_PROJECTION: dict[str, Any] = {
    "_id": 1,
    OWNER_FIELD: 1,
    CREATED_FIELD: 1,
    UPDATED_FIELD: 1,
    METADATA_FIELD: 1,
    "n": {"$size": {"$ifNull": ["$messages", []]}},
    "first": _message_text(CREATED_FIELD, 0),
    "last": _message_text(UPDATED_FIELD, -1),
}


def _number(value: int | float) -> int | float:
    """A number in the one form its equal numbers share: integral floats as int."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _match_key(key: str, value: object) -> str | None:
    """The equality key of ``key: value``, or ``None`` for a list or an object."""
    if value is None or isinstance(value, bool | str):
        canonical: object = value
    elif isinstance(value, int | float):
        canonical = _number(value)
    else:
        return None
    return json.dumps([key, canonical], ensure_ascii=False, separators=(",", ":"))


def match_keys(metadata: Mapping[str, object]) -> list[str]:
    """The equality keys of a metadata's (or a filter's) top-level scalars.

    Two keys are equal exactly when core's
    :func:`chatledger.conversation_info.metadata_matches` holds the values
    equal: the JSON text of ``[key, value]`` with each number in one form
    (an integral float as its int, exactly: ``1.0`` as ``1``, ``2.0**64``
    as ``18446744073709551616``), so ``true``, ``1``, ``"1"`` and ``null``
    differ.
    """
    found = (_match_key(key, value) for key, value in metadata.items())
    return [key for key in found if key is not None]


def info_write(
    update: ConversationInfoUpdate, *, ttl: timedelta | None, now: datetime
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The ``(filter, update pipeline)`` of one ``set_conversation_info``.

    One upsert by ``_id``: what was given replaces the owner or the metadata,
    what was left out stays. A new id gets a document without messages (not
    listed by id) whose record is made now (``$$NOW``); over an expired
    document the conversation starts anew, messages gone. ``updated_at``
    stays; the expiry slides, as for any write. The messages' count is left
    in the result field, for :data:`INFO_PROJECTION` to read back.
    """
    expired = "$_expired"
    fields: dict[str, Any] = {
        "messages": {"$cond": [expired, [], {"$ifNull": ["$messages", []]}]},
        "next_seq": {"$cond": [expired, 0, {"$ifNull": ["$next_seq", 0]}]},
        EVICTED_IDS_FIELD: {
            "$cond": [expired, [], {"$ifNull": [f"${EVICTED_IDS_FIELD}", []]}]
        },
        SYSTEM_BATCH_FIELD: {
            "$cond": [expired, 0, {"$ifNull": [f"${SYSTEM_BATCH_FIELD}", 0]}]
        },
        "version": {
            "$cond": [
                {"$or": [expired, _missing("version")]},
                {"$literal": uuid.uuid4().hex},
                "$version",
            ]
        },
        "expires_at": {"$literal": None if ttl is None else now + ttl},
        CREATED_FIELD: {
            "$cond": [expired, "$$NOW", {"$ifNull": [f"${CREATED_FIELD}", "$$NOW"]}]
        },
        UPDATED_FIELD: {
            "$cond": [expired, "$$NOW", {"$ifNull": [f"${UPDATED_FIELD}", "$$NOW"]}]
        },
    }
    if update.owner is UNSET:
        fields[OWNER_FIELD] = {"$cond": [expired, None, f"${OWNER_FIELD}"]}
    else:
        fields[OWNER_FIELD] = {"$literal": update.owner}
    if update.metadata is UNSET or update.metadata_json is UNSET:
        for name in (METADATA_FIELD, MATCH_FIELD):
            fields[name] = {"$cond": [expired, None, f"${name}"]}
    else:
        text = update.metadata_json if update.metadata else None
        fields[METADATA_FIELD] = {"$literal": text}
        fields[MATCH_FIELD] = {"$literal": match_keys(update.metadata) or None}
    return {"_id": update.conversation_id}, [
        {"$set": {"_expired": expired_expression(now)}},
        {"$set": fields},
        {"$set": {RESULT_FIELD: {"count": {"$size": "$messages"}}}},
        {"$unset": ["_expired"]},
    ]


def record_pipeline(conversation_id: str, now: datetime) -> list[dict[str, Any]]:
    """The aggregation that reads one live conversation's record."""
    validate_conversation_id(conversation_id)
    return [
        {"$match": {"_id": conversation_id, **live(now)}},
        {"$project": _RECORD_PROJECTION},
    ]


def listing_pipeline(query: ConversationQuery, now: datetime) -> list[dict[str, Any]]:
    """The aggregation of one ``find_conversations`` page (``limit + 1`` records).

    Given an owner it is a range of ``(owner, updated_at, _id)``, else of
    ``(updated_at, _id)``, read newest first: the ``$match`` bounds
    ``updated_at`` by the cursor's time (and ``updated_before``), leaves out
    the records at the cursor's exact time whose id is not below its id, and
    checks the metadata's equality keys and the expiry on what the range
    yields; the ``$sort`` is the index's order reversed.
    """
    times: dict[str, Any] = {}
    if query.updated_before is not None:
        times["$lt"] = query.updated_before
    if query.after is not None:
        times["$lte"] = query.after[0]
    if not times:
        # Records only: a document an earlier release wrote, not yet filled,
        # has no updated_at.
        times["$type"] = "date"
    match: dict[str, Any] = {}
    sort: dict[str, int] = {}
    if query.owner is not None:
        match[OWNER_FIELD] = query.owner
        sort[OWNER_FIELD] = -1
    match[UPDATED_FIELD] = times
    sort[UPDATED_FIELD] = -1
    sort["_id"] = -1
    if query.after is not None:
        moment, after_id = query.after
        match["$nor"] = [{UPDATED_FIELD: moment, "_id": {"$gte": after_id}}]
    wanted = match_keys(query.metadata)
    if wanted:
        match[MATCH_FIELD] = {"$all": wanted}
    # Not expired: no expires_at (null or absent), or one after now.
    match["expires_at"] = {"$not": {"$lte": now}}
    return [
        {"$match": match},
        {"$sort": sort},
        {"$limit": query.limit + 1},
        {"$project": _RECORD_PROJECTION},
    ]


def _aware(moment: datetime) -> datetime:
    """A BSON date as an aware UTC datetime (pymongo decodes naive UTC by default)."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


def _message_time(text: object) -> datetime | None:
    if not isinstance(text, str):
        return None
    return codec.from_json(text).created_at


def record_of(
    document: Mapping[str, Any], now: datetime | None = None
) -> ConversationInfo:
    """The record of a document read by :func:`record_pipeline`, a listing, or
    ``set_conversation_info`` (:data:`INFO_PROJECTION`).

    A document without times (an earlier release's) takes its oldest and
    newest messages' ``created_at``, or ``now`` when it holds none.
    """
    if "n" in document:
        count = int(document["n"])
    else:
        count = int(document[RESULT_FIELD]["count"])
    fallback = now if now is not None else datetime.now(UTC)
    created = document.get(CREATED_FIELD) or _message_time(document.get("first"))
    updated = document.get(UPDATED_FIELD) or _message_time(document.get("last"))
    created = _aware(created or updated or fallback)
    updated = _aware(updated or created)
    text = document.get(METADATA_FIELD)
    return ConversationInfo(
        id=str(document["_id"]),
        created_at=created,
        updated_at=updated,
        message_count=count,
        owner=document.get(OWNER_FIELD),
        metadata=json.loads(text) if text else {},
    )


def listing_page(
    documents: Sequence[Mapping[str, Any]], query: ConversationQuery
) -> ConversationInfoPage:
    """The page of a listing's answer (:func:`listing_pipeline`), with its cursor."""
    return query.page(record_of(document) for document in documents)


def unfilled_pipeline() -> list[dict[str, Any]]:
    """The aggregation of the documents without record times (an earlier release's).

    Null or absent ``updated_at`` is a range of the ``(updated_at, _id)``
    index.
    """
    return [
        {"$match": {UPDATED_FIELD: None}},
        {
            "$project": {
                "_id": 1,
                "first": _message_text(CREATED_FIELD, 0),
                "last": _message_text(UPDATED_FIELD, -1),
            }
        },
    ]


def fill_write(
    document: Mapping[str, Any], now: datetime
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ``(filter, update)`` that stores an unfilled document's record times.

    Its oldest and newest messages' ``created_at`` (``now`` for a document
    without messages). The filter holds only while the document still has no
    ``updated_at``, so a write of this release that came first is kept.
    """
    created = _message_time(document.get("first")) or now
    updated = _message_time(document.get("last")) or created
    return (
        {"_id": document["_id"], UPDATED_FIELD: {"$exists": False}},
        {"$set": {CREATED_FIELD: created, UPDATED_FIELD: updated}},
    )
