"""What each MongoDB call of a repository sends, and how its answer is read.

Example:
    from chatledger import Message, MessageWindow
    from chatledger_mongodb.steps import (
        APPEND_PROJECTION,
        append_outcome,
        append_update,
        prepare_append,
    )

    window = MessageWindow(20)
    prepared = prepare_append("c1", [Message.user("hi", id="m9")], window)
    update = append_update(prepared, window, ttl=None)
    # document = collection.find_one_and_update(
    #     {"_id": "c1"}, update, projection=APPEND_PROJECTION, upsert=True,
    #     return_document=ReturnDocument.AFTER)             # or awaited
    document = {"last_append": {"appended": ["m9"], "evicted": []}}
    append_outcome(document, prepared)      # AppendResult([m9], [])

:class:`chatledger_mongodb.MongoDBChatMemoryRepository` and
:class:`chatledger_mongodb.AsyncMongoDBChatMemoryRepository` build every
filter, update and pipeline here and read every answer here (the log's
reads in :mod:`chatledger_mongodb.log_reads`), so they store the same
documents and decide alike; only the client (``pymongo.MongoClient`` or
``pymongo.AsyncMongoClient``) and the awaiting differ. Nothing here does
I/O.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import bson
from pymongo.errors import OperationFailure

from chatledger.adapters import (
    EVICTED_IDS_KEPT,
    AppendResult,
    ContentionError,
    ConversationPage,
    InvalidNameError,
    InvalidOptionError,
    Message,
    MessageTooLargeError,
    RequestLimit,
    Window,
    checked_window,
    codec,
    stamp_messages,
    utc_now,
    validate_conversation_id,
    validate_messages,
)
from chatledger_mongodb.pipeline import (
    EVICTED_IDS_FIELD,
    RESULT_FIELD,
    SYSTEM_BATCH_FIELD,
    append_pipeline,
    encode_element,
    expired_expression,
    log_append_pipeline,
    record_stage,
)

__all__ = [
    "APPEND_PROJECTION",
    "BACKFILL_PROJECTION",
    "LOG_NUMBER_OFFSET",
    "MAX_DOCUMENT_BYTES",
    "MAX_SIZE_BACKFILLS",
    "READ_PROJECTION",
    "REPOSITORY_OPTIONS",
    "TTL_INDEX_NAME",
    "PreparedAppend",
    "TTLValue",
    "append_outcome",
    "append_update",
    "backfill",
    "connect_given",
    "contention_error",
    "count_of",
    "count_pipeline",
    "listed",
    "live",
    "log_append_numbers",
    "log_append_outcome",
    "log_append_update",
    "messages_of",
    "page_of",
    "prepare_append",
    "prepare_log_append",
    "save_update",
    "size_refusal",
    "split_url_options",
    "validate_collection_name",
    "validate_database_name",
]

#: MongoDB's limit on one BSON document, which bounds one conversation.
MAX_DOCUMENT_BYTES = 16 * 1024 * 1024

#: Room kept for the document's own fields beside the messages array.
_DOCUMENT_OVERHEAD = 1024

_SETTING = "MongoDB's limit of one document, which holds one conversation"
#: A whole conversation's document (``save_all``).
_DOCUMENT = RequestLimit(MAX_DOCUMENT_BYTES, 0, _SETTING)
#: An appended batch's elements, with room for the document's own fields.
_BATCH = RequestLimit(MAX_DOCUMENT_BYTES, _DOCUMENT_OVERHEAD, _SETTING)

#: How often an append re-runs after measuring messages its token counter had
#: never sized; only a concurrent rewrite of those messages makes it loop.
MAX_SIZE_BACKFILLS = 5

#: Core numbers a log from 1, and a bounded retention counts from there
#: (:mod:`chatledger.retention`); the document's ``seq`` starts at 0.
LOG_NUMBER_OFFSET = 1

#: The name of the TTL index on ``expires_at``.
TTL_INDEX_NAME = "chatledger_expires_at"

#: The keyword options both repositories take; ``from_url`` passes the rest
#: to the client.
REPOSITORY_OPTIONS = frozenset(
    {"database", "collection", "ttl", "create_indexes", "retention"}
)

#: What an append reads back: only what it did.
APPEND_PROJECTION = {"_id": 0, RESULT_FIELD: 1}
#: What a read of one conversation needs: the codec text of each message.
READ_PROJECTION = {"_id": 0, "messages.p": 1}
#: What measuring uncached sizes reads.
BACKFILL_PROJECTION = {"messages": 1, "version": 1}

_DATABASE_NAME = re.compile(r"[A-Za-z0-9_-]{1,63}")
_COLLECTION_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,119}")

# Server codes for "the resulting document would be larger than 16 MiB".
_TOO_LARGE_CODES = frozenset({10334, 17419, 17420})

TTLValue = timedelta | int | float | None


def _validate_name(kind: str, value: object, pattern: re.Pattern[str]) -> str:
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise InvalidNameError(
            f"{kind} name {value!r} is not allowed; it must fully match "
            f"{pattern.pattern}"
        )
    return value


def validate_database_name(value: object) -> str:
    """Return ``value`` if it is an allowed database name, else raise.

    Raises:
        InvalidNameError: unless it fully matches ``[A-Za-z0-9_-]{1,63}``.
    """
    return _validate_name("database", value, _DATABASE_NAME)


def validate_collection_name(value: object) -> str:
    """Return ``value`` if it is an allowed collection name, else raise.

    Raises:
        InvalidNameError: unless it fully matches
            ``[A-Za-z_][A-Za-z0-9_-]{0,119}``, or if it starts with
            ``system`` (reserved by MongoDB).
    """
    name = _validate_name("collection", value, _COLLECTION_NAME)
    if name.startswith("system"):
        raise InvalidNameError(f"collection name {name!r} is reserved by MongoDB")
    return name


def split_url_options(
    url: str, options: Mapping[str, Any]
) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """Split ``from_url``'s URL and options into the client's and the repository's.

    The repository's :data:`REPOSITORY_OPTIONS` stay with it, the database
    comes from the URL's path (``mongodb://host/mydb``) unless ``database`` is
    given, and ``retention`` may come from the URL's query
    (``?retention=100``), which then leaves the URL (the client would warn of
    an option it does not know); every other option goes to the client. No
    host is resolved.

    Returns:
        ``(client_url, client_options, repository_options)``.

    Raises:
        InvalidOptionError: ``retention`` in the URL's query more than once,
            or there and as an option too.
    """
    client = {k: v for k, v in options.items() if k not in REPOSITORY_OPTIONS}
    own = {k: v for k, v in options.items() if k in REPOSITORY_OPTIONS}
    if "database" not in own:
        path = urlsplit(url).path.lstrip("/")
        if path:
            own["database"] = unquote(path)
    url, in_query = _without_retention(url)
    if in_query is not None:
        if "retention" in own:
            raise InvalidOptionError(
                "retention is given twice: in the URL's query and as an option"
            )
        own["retention"] = in_query
    return url, client, own


def _without_retention(url: str) -> tuple[str, str | None]:
    """``url`` less its ``retention`` query parameter, and that parameter's value.

    The rest of the URL is kept as written: the client parses it.
    """
    start = url.find("?")
    if start < 0:
        return url, None
    end = url.find("#", start)
    end = len(url) if end < 0 else end
    kept: list[str] = []
    values: list[str] = []
    for item in url[start + 1 : end].split("&"):
        name, _, value = item.partition("=")
        if unquote(name) == "retention":
            values.append(unquote(value))
        else:
            kept.append(item)
    if not values:
        return url, None
    if len(values) > 1:
        raise InvalidOptionError("the URL's query gives retention more than once")
    query = "&".join(kept)
    return url[:start] + ("?" + query if query else "") + url[end:], values[0]


def connect_given(url: str, client_options: Mapping[str, Any]) -> bool:
    """Whether the client options or the URL's query set pymongo's ``connect``.

    Either spelling counts in any case, as pymongo reads them.
    """
    query = urlsplit(url).query
    named = {key.lower() for key in client_options}
    named.update(key.lower() for key, _ in parse_qsl(query, keep_blank_values=True))
    return "connect" in named


def live(now: datetime) -> dict[str, Any]:
    """The filter of documents not expired by ``now``."""
    return {"$or": [{"expires_at": None}, {"expires_at": {"$gt": now}}]}


def listed(now: datetime, after: str | None = None) -> dict[str, Any]:
    """The filter of listed conversations: live, not empty, after ``after``.

    A document left with no messages (its window evicted everything) keeps
    its record of evicted ids and is not listed.
    """
    query: dict[str, Any] = {"messages.0": {"$exists": True}, **live(now)}
    if after is not None:
        query["_id"] = {"$gt": after}
    return query


def page_of(ids: Sequence[Any], limit: int) -> ConversationPage:
    """The page made of up to ``limit + 1`` ids read in ``_id`` order."""
    found = [str(i) for i in ids]
    if len(found) > limit:
        return ConversationPage(found[:limit], found[limit - 1])
    return ConversationPage(found, None)


def count_pipeline(conversation_id: str, now: datetime) -> list[dict[str, Any]]:
    """The aggregation that counts one conversation's messages on the server."""
    return [
        {"$match": {"_id": conversation_id, **live(now)}},
        {"$project": {"_id": 0, "n": {"$size": "$messages"}}},
    ]


def count_of(found: Sequence[Mapping[str, Any]]) -> int:
    """The count :func:`count_pipeline` answered (0 for no document)."""
    return int(found[0]["n"]) if found else 0


def messages_of(document: Mapping[str, Any] | None) -> list[Message]:
    """The messages of a document read with :data:`READ_PROJECTION`."""
    if document is None:
        return []
    return [codec.from_json(element["p"]) for element in document["messages"]]


def _expires_at(ttl: timedelta | None, now: datetime) -> datetime | None:
    return None if ttl is None else now + ttl


def save_update(
    conversation_id: str, messages: Sequence[Message], ttl: timedelta | None
) -> list[dict[str, Any]] | None:
    """The update pipeline that replaces one conversation; ``None`` to delete it.

    Validates everything first. The record of evicted ids goes with the old
    content, and the messages are one batch, numbered 0 (no batch recorded).
    The conversation's record stays (owner, metadata, ``created_at``) and
    its ``updated_at`` moves to the server's ``$$NOW``
    (:func:`~chatledger_mongodb.pipeline.record_stage`); over an expired
    document a new record starts.

    Raises:
        MessageTooLargeError: if the conversation would not fit in one
            16 MiB document.
    """
    validate_conversation_id(conversation_id)
    now = utc_now()
    batch = stamp_messages(validate_messages(messages), now)
    if not batch:
        return None
    elements = [encode_element(m, None) for m in batch]
    for seq, element in enumerate(elements):
        element["seq"] = seq
    fields = {
        "messages": elements,
        "next_seq": len(elements),
        "version": uuid.uuid4().hex,
        "expires_at": _expires_at(ttl, now),
    }
    size = len(bson.encode({"_id": conversation_id, **fields}))
    _DOCUMENT.check(size, f"conversation {conversation_id!r}")
    gone = [RESULT_FIELD, EVICTED_IDS_FIELD, SYSTEM_BATCH_FIELD, "_expired"]
    return [
        {"$set": {"_expired": expired_expression(now)}},
        record_stage(True, "$_expired"),
        {"$set": {name: {"$literal": value} for name, value in fields.items()}},
        {"$unset": gone},
    ]


@dataclass(frozen=True)
class PreparedAppend:
    """A validated, stamped and encoded batch, ready for :func:`append_update`.

    Attributes:
        stamped: The batch's messages, stamped with ``now``.
        elements: Their array elements (:func:`encode_element`).
        now: When the append started; expiry is measured from it.
    """

    stamped: list[Message]
    elements: list[dict[str, Any]]
    now: datetime


def prepare_append(
    conversation_id: str, messages: Sequence[Message], window: Window
) -> PreparedAppend | None:
    """Validate and encode an append's batch; ``None`` for an empty batch.

    Raises:
        MessageTooLargeError: if the batch cannot fit in one document.
    """
    validate_conversation_id(conversation_id)
    batch = validate_messages(messages)
    if not batch:
        return None
    return _encoded(conversation_id, batch, window)


def prepare_log_append(
    conversation_id: str, messages: Sequence[Message], window: Window | None
) -> PreparedAppend | None:
    """Validate and encode a log append's batch; ``None`` for an empty batch.

    The id, the batch and the window (``None`` or a
    :class:`~chatledger.window.Window`) are checked even when the batch is
    empty. Given a window with a counter, each element carries its size.

    Raises:
        TypeError: if ``window`` is neither ``None`` nor a ``Window``.
        MessageTooLargeError: if the batch cannot fit in one document.
    """
    validate_conversation_id(conversation_id)
    batch = validate_messages(messages)
    if window is not None:
        checked_window(window)
    if not batch:
        return None
    return _encoded(conversation_id, batch, window)


def _encoded(
    conversation_id: str, batch: list[Message], window: Window | None
) -> PreparedAppend:
    now = utc_now()
    stamped = stamp_messages(batch, now)
    elements = [encode_element(m, window) for m in stamped]
    size = sum(len(bson.encode({"e": e})) for e in elements)
    _BATCH.check(size, f"the batch appended to conversation {conversation_id!r}")
    return PreparedAppend(stamped, elements, now)


def append_update(
    prepared: PreparedAppend, window: Window, ttl: timedelta | None
) -> list[dict[str, Any]]:
    """The update pipeline of one attempt of an append, with a new ``version``.

    The record of evicted ids keeps core's
    :data:`chatledger.adapters.EVICTED_IDS_KEPT`.
    """
    return append_pipeline(
        prepared.elements,
        window,
        version=uuid.uuid4().hex,
        expires_at=_expires_at(ttl, prepared.now),
        now=prepared.now,
        evicted_ids_kept=EVICTED_IDS_KEPT,
    )


def append_outcome(
    document: Mapping[str, Any] | None, prepared: PreparedAppend
) -> AppendResult | None:
    """What an append did, from the document it returned (:data:`APPEND_PROJECTION`).

    ``None`` means nothing was written: stored messages lack a size under the
    window's counter; measure them (:func:`backfill`) and append again.
    """
    # An upsert that returns the document after the update always has one.
    assert document is not None
    result = document[RESULT_FIELD]
    if "stale" in result:
        return None
    by_id = {m.id: m for m in prepared.stamped}
    return AppendResult([by_id[i] for i in result["appended"]], list(result["evicted"]))


def log_append_update(
    prepared: PreparedAppend, ttl: timedelta | None
) -> list[dict[str, Any]]:
    """The update pipeline of a log append, with a new ``version``."""
    return log_append_pipeline(
        prepared.elements,
        version=uuid.uuid4().hex,
        expires_at=_expires_at(ttl, prepared.now),
        now=prepared.now,
    )


def log_append_outcome(
    document: Mapping[str, Any] | None, prepared: PreparedAppend
) -> AppendResult:
    """What a log append did, from the document it returned; nothing is evicted."""
    # An upsert that returns the document after the update always has one.
    assert document is not None
    by_id = {m.id: m for m in prepared.stamped}
    return AppendResult([by_id[i] for i in document[RESULT_FIELD]["appended"]])


def log_append_numbers(
    document: Mapping[str, Any] | None, result: AppendResult
) -> tuple[int, int] | None:
    """The numbers a log append stored, ``(first, last)``, as core counts them.

    Core numbers a log from 1, the document's ``seq`` from 0
    (:data:`LOG_NUMBER_OFFSET`); ``None`` when nothing was appended.
    ``document`` is what the append returned.
    """
    if not result.appended:
        return None
    # An append that stored anything returned its document.
    assert document is not None
    last = int(document[RESULT_FIELD]["next"]) - 1 + LOG_NUMBER_OFFSET
    return last - len(result.appended) + 1, last


def backfill(
    conversation_id: str, document: Mapping[str, Any] | None, window: Window
) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The write that caches the sizes a document lacks under ``window``'s counter.

    ``document`` was read with :data:`BACKFILL_PROJECTION`. The returned
    ``(filter, update)`` is conditioned on the ``version`` read, so it never
    undoes a concurrent append; it changes no message, only cached sizes.
    ``None`` when there is nothing to write.
    """
    if document is None:
        return None
    counter = window.counter_id
    elements = document["messages"]
    changed = False
    for element in elements:
        sizes = element.setdefault("sizes", [])
        if not any(s.get("c") == counter for s in sizes):
            message = codec.from_json(element["p"])
            sizes.append({"c": counter, "n": window.measure(message)})
            changed = True
    if not changed:
        return None
    return (
        {"_id": conversation_id, "version": document.get("version")},
        {"$set": {"messages": elements}},
    )


def contention_error(conversation_id: str, window: Window) -> ContentionError:
    """The error of an append whose backfills kept losing to rewrites."""
    return ContentionError(
        conversation_id,
        MAX_SIZE_BACKFILLS + 1,
        f"the document kept changing while its message sizes for "
        f"{window.counter_id!r} were measured",
    )


@contextmanager
def size_refusal(conversation_id: str) -> Iterator[None]:
    """Turn the server's "document too large" refusal into MessageTooLargeError.

    The server checks the 16 MiB limit on the updated document and refuses the
    whole update, so nothing has changed when this raises.
    """
    try:
        yield
    except OperationFailure as error:
        if error.code not in _TOO_LARGE_CODES:
            raise
        raise MessageTooLargeError(
            f"MongoDB refused the write to conversation {conversation_id!r}: the "
            f"document would exceed {MAX_DOCUMENT_BYTES} bytes; nothing was changed"
        ) from error
