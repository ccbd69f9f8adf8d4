"""MongoDB conversation memory: one document per conversation.

Example (needs a MongoDB server):
    from datetime import timedelta
    from pymongo import MongoClient
    from chatledger import MessageWindowChatMemory
    from chatledger_mongodb import MongoDBChatMemoryRepository

    repository = MongoDBChatMemoryRepository(MongoClient(), ttl=timedelta(days=7))
    memory = MessageWindowChatMemory(repository, max_messages=20)

The data model, and why
-----------------------
MongoDB makes a write atomic for one document only (multi-document
transactions need a replica set and cost more). So a conversation is ONE
document::

    {_id: <conversation id>, messages: [{seq, id, role, sizes, k?, p}, ...],
     next_seq, version, expires_at, evicted_ids, last_append}

- ``p`` is the codec's JSON text. Metadata keys such as ``"$set"`` or ``"a.b"``
  therefore never become BSON field names, and a message comes back exactly.
- ``seq`` is the per-conversation, gap-free order; the array is kept in ``seq``
  order and nothing is ever ordered by time.
- ``sizes`` caches each message's size under a token counter, so a token
  window never re-tokenizes the history; ``k`` (system messages only) is the
  equality key the system-message rule compares.
- ``evicted_ids`` records, oldest first, the ids of the newest
  :data:`chatledger.adapters.EVICTED_IDS_KEPT` messages appends took out of
  the window (see :mod:`chatledger.evicted_ids`), so a late retry of an
  append whose messages were evicted since stores nothing. The append reads
  and extends it in its own pipeline; ``save_all`` clears it and it goes with
  the document (delete, TTL). A window that evicts everything leaves the
  document with no messages and its record: such a conversation is not listed.
- ``version`` is a fresh random token on every content write (no ABA after a
  delete and re-create); ``expires_at`` drives a TTL index and is refreshed by
  every write (sliding TTL).

A window append is ONE ``findAndModify`` whose update is an aggregation
pipeline (:mod:`chatledger_mongodb.pipeline`): the server skips known message
ids (stored or recorded as evicted), merges system messages, numbers the new
messages, computes the turn-aligned cut, drops the evicted messages and records
their ids while it holds the document, then returns only ``last_append`` (ids
appended, ids evicted). One round trip, atomic, no
retries under contention and no lost or duplicated message. The window bounds
the document, and with it the 16 MiB limit: a batch that cannot fit is refused
before any I/O, and a write the server refuses for size (nothing changes, the
update is atomic) surfaces as :class:`chatledger.MessageTooLargeError`.

Alternatives weighed: a document per message (Spring AI's layout) needs a
multi-document transaction to append and evict atomically; read-then-write with
a version check reads the whole window on every append and retries under
contention. Two first appends to a new conversation race safely: the server
retries an upsert that lost a duplicate-key race on ``_id`` (MongoDB 4.2+).

``save_all`` writes the whole document in one update, so it never leaves a
partial conversation. Expired documents are hidden by every read (the TTL
monitor runs about once a minute) and count as empty for an append.
"""

from __future__ import annotations

import inspect
import re
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import unquote, urlsplit

import bson
from pymongo import MongoClient, ReturnDocument
from pymongo.collection import Collection
from pymongo.errors import OperationFailure

from chatledger.adapters import (
    EVICTED_IDS_KEPT,
    AppendResult,
    ClosingContext,
    ContentionError,
    ConversationPage,
    FaultPoints,
    InvalidNameError,
    Message,
    MessageTooLargeError,
    Window,
    codec,
    stamp_messages,
    to_ttl,
    utc_now,
    validate_conversation_id,
    validate_messages,
    validate_page_request,
)
from chatledger_mongodb.pipeline import (
    EVICTED_IDS_FIELD,
    RESULT_FIELD,
    append_pipeline,
    encode_element,
)

__all__ = ["MAX_DOCUMENT_BYTES", "MongoDBChatMemoryRepository"]

#: MongoDB's limit on one BSON document, which bounds one conversation.
MAX_DOCUMENT_BYTES = 16 * 1024 * 1024

#: Room kept for the document's own fields beside the messages array.
_DOCUMENT_OVERHEAD = 1024

_DATABASE_NAME = re.compile(r"[A-Za-z0-9_-]{1,63}")
_COLLECTION_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,119}")

# Server codes for "the resulting document would be larger than 16 MiB".
_TOO_LARGE_CODES = frozenset({10334, 17419, 17420})

#: How often an append re-runs after measuring messages its token counter had
#: never sized; only a concurrent rewrite of those messages makes it loop.
_MAX_SIZE_BACKFILLS = 5

TTLValue = timedelta | int | float | None


def _validate_name(kind: str, value: object, pattern: re.Pattern[str]) -> str:
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise InvalidNameError(
            f"{kind} name {value!r} is not allowed; it must fully match "
            f"{pattern.pattern}"
        )
    if kind == "collection" and value.startswith("system"):
        raise InvalidNameError(f"collection name {value!r} is reserved by MongoDB")
    return value


def _database_from_url(url: str) -> str | None:
    """The database named in a MongoDB URL's path, without resolving any host."""
    path = urlsplit(url).path.lstrip("/")
    return unquote(path) if path else None


def _element_bytes(element: Mapping[str, Any]) -> int:
    return len(bson.encode({"e": element}))


class MongoDBChatMemoryRepository(ClosingContext):
    """Conversations in a MongoDB collection, one document each.

    Args:
        client: A connected ``pymongo.MongoClient``. Its read and write concerns
            are used as they are (``w: "majority"`` with retryable writes is
            MongoDB's default and what this repository expects).
        database: The database name (letters, digits, ``_`` and ``-``).
        collection: The collection name (a letter or ``_`` first, then letters,
            digits, ``_`` and ``-``; no ``system`` prefix).
        ttl: Sliding time to live of a whole conversation (a ``timedelta`` or
            seconds); ``None`` keeps conversations until deleted.
        create_indexes: Create the TTL index at construction (idempotent).

    Raises:
        InvalidNameError: if a name is not allowed.
        InvalidTTLError: if ``ttl`` is not a positive duration.
    """

    def __init__(
        self,
        client: MongoClient[Any],
        *,
        database: str = "chatledger",
        collection: str = "chat_memory",
        ttl: TTLValue = None,
        create_indexes: bool = True,
    ) -> None:
        """Bind to ``database.collection`` of ``client``; see the class docstring."""
        self._database_name = _validate_name("database", database, _DATABASE_NAME)
        self._collection_name = _validate_name(
            "collection", collection, _COLLECTION_NAME
        )
        self.ttl = to_ttl(ttl)
        self._client = client
        self._owns_client = False
        self._collection: Collection[Any] = client[self._database_name][
            self._collection_name
        ]
        self.fault_points = FaultPoints()
        if create_indexes:
            self.create_indexes()

    @classmethod
    def from_url(cls, url: str, **options: Any) -> MongoDBChatMemoryRepository:
        """Connect with a ``mongodb://`` or ``mongodb+srv://`` URL.

        The database comes from the URL path (``mongodb://host/mydb``) unless
        ``database=`` is given. The constructor's options (``database``,
        ``collection``, ``ttl``, ``create_indexes``) go to it; every other
        option goes to ``MongoClient`` (``serverSelectionTimeoutMS=3000``,
        say), which refuses one it does not know.
        The repository owns this client: :meth:`close` closes it.
        """
        parameters = inspect.signature(cls.__init__).parameters.values()
        own = {p.name for p in parameters if p.kind is p.KEYWORD_ONLY}
        client_options = {k: v for k, v in options.items() if k not in own}
        options = {k: v for k, v in options.items() if k in own}
        if "database" not in options:
            path_database = _database_from_url(url)
            if path_database:
                options["database"] = path_database
        client: MongoClient[Any] = MongoClient(url, **client_options)
        try:
            repository = cls(client, **options)
        except BaseException:
            client.close()
            raise
        repository._owns_client = True
        return repository

    def __repr__(self) -> str:
        return (
            f"MongoDBChatMemoryRepository(database={self._database_name!r}, "
            f"collection={self._collection_name!r}, ttl={self.ttl!r})"
        )

    @property
    def collection(self) -> Collection[Any]:
        """The pymongo collection that holds the conversations."""
        return self._collection

    def close(self) -> None:
        """Close the client if :meth:`from_url` made it; otherwise do nothing."""
        if self._owns_client:
            self._client.close()

    def create_schema(self) -> None:
        """Create what the collection needs (its TTL index); idempotent."""
        self.create_indexes()

    def drop_schema(self) -> None:
        """Drop the collection, with every conversation and index in it."""
        self._collection.drop()

    def create_indexes(self) -> None:
        """Create the TTL index on ``expires_at`` (safe to run again, and at once).

        Documents of conversations without a TTL hold ``expires_at: null``,
        which the TTL monitor ignores.
        """
        self._collection.create_index(
            "expires_at", expireAfterSeconds=0, name="chatledger_expires_at"
        )

    def _live(self, now: datetime) -> dict[str, Any]:
        return {"$or": [{"expires_at": None}, {"expires_at": {"$gt": now}}]}

    def _expires_at(self, now: datetime) -> datetime | None:
        return None if self.ttl is None else now + self.ttl

    def find_conversation_ids(self) -> list[str]:
        """Return the id of every live, non-empty conversation."""
        query = {"messages.0": {"$exists": True}, **self._live(utc_now())}
        return [str(doc["_id"]) for doc in self._collection.find(query, {"_id": 1})]

    def count_messages(self, conversation_id: str) -> int:
        """Return how many messages a conversation holds; the server counts."""
        validate_conversation_id(conversation_id)
        found = list(
            self._collection.aggregate(
                [
                    {"$match": {"_id": conversation_id, **self._live(utc_now())}},
                    {"$project": {"_id": 0, "n": {"$size": "$messages"}}},
                ]
            )
        )
        return int(found[0]["n"]) if found else 0

    def find_conversation_ids_page(
        self, cursor: str | None = None, limit: int = 100
    ) -> ConversationPage:
        """Return up to ``limit`` conversation ids after ``cursor``, in ``_id`` order.

        One range query on ``_id`` (the primary index) per page.
        """
        after, limit = validate_page_request(cursor, limit)
        query: dict[str, Any] = {
            "messages.0": {"$exists": True},
            **self._live(utc_now()),
        }
        if after is not None:
            query["_id"] = {"$gt": after}
        found = self._collection.find(query, {"_id": 1}).sort("_id", 1)
        ids = [str(doc["_id"]) for doc in found.limit(limit + 1)]
        if len(ids) > limit:
            return ConversationPage(ids[:limit], ids[limit - 1])
        return ConversationPage(ids, None)

    def find_by_conversation_id(self, conversation_id: str) -> list[Message]:
        """Return one conversation, oldest first (``[]`` if none or expired)."""
        validate_conversation_id(conversation_id)
        document = self._collection.find_one(
            {"_id": conversation_id, **self._live(utc_now())},
            {"_id": 0, "messages.p": 1},
        )
        if document is None:
            return []
        return [codec.from_json(element["p"]) for element in document["messages"]]

    def save_all(self, conversation_id: str, messages: Sequence[Message]) -> None:
        """Replace one conversation in a single-document write; ``[]`` deletes it.

        The record of evicted ids goes with the old content.

        Raises:
            MessageTooLargeError: before any I/O, if the conversation would not
                fit in one 16 MiB document.
        """
        validate_conversation_id(conversation_id)
        now = utc_now()
        batch = stamp_messages(validate_messages(messages), now)
        if not batch:
            self.delete_by_conversation_id(conversation_id)
            return
        elements = [encode_element(m, None) for m in batch]
        for seq, element in enumerate(elements):
            element["seq"] = seq
        fields = {
            "messages": elements,
            "next_seq": len(elements),
            "version": uuid.uuid4().hex,
            "expires_at": self._expires_at(now),
        }
        size = len(bson.encode({"_id": conversation_id, **fields}))
        if size > MAX_DOCUMENT_BYTES:
            raise MessageTooLargeError(
                f"conversation {conversation_id!r} would take {size} bytes; one "
                f"MongoDB document holds at most {MAX_DOCUMENT_BYTES}"
            )
        self.fault_points.reach("before_commit")
        with _size_refusal(conversation_id):
            self._collection.update_one(
                {"_id": conversation_id},
                {"$set": fields, "$unset": {RESULT_FIELD: "", EVICTED_IDS_FIELD: ""}},
                upsert=True,
            )
        self.fault_points.reach("after_commit")

    def delete_by_conversation_id(self, conversation_id: str) -> None:
        """Remove one conversation with its record of evicted ids, if it exists."""
        validate_conversation_id(conversation_id)
        self._collection.delete_one({"_id": conversation_id})

    def append_to_window(
        self, conversation_id: str, messages: Sequence[Message], window: Window
    ) -> AppendResult:
        """Append and trim in one atomic single-document update.

        See :class:`chatledger.SupportsWindowAppend` for the contract.

        Raises:
            MessageTooLargeError: if the batch cannot fit in one document
                (before any I/O) or the server refuses the grown document
                (nothing changed).
            ContentionError: if measuring uncached sizes kept racing with
                rewrites of the same conversation.
        """
        validate_conversation_id(conversation_id)
        batch = validate_messages(messages)
        if not batch:
            return AppendResult()
        now = utc_now()
        stamped = stamp_messages(batch, now)
        elements = [encode_element(m, window) for m in stamped]
        size = sum(_element_bytes(e) for e in elements) + _DOCUMENT_OVERHEAD
        if size > MAX_DOCUMENT_BYTES:
            raise MessageTooLargeError(
                f"the batch takes {size} bytes; one MongoDB document (one "
                f"conversation) holds at most {MAX_DOCUMENT_BYTES}"
            )
        for _ in range(_MAX_SIZE_BACKFILLS + 1):
            update = append_pipeline(
                elements,
                window,
                version=uuid.uuid4().hex,
                expires_at=self._expires_at(now),
                now=now,
                evicted_ids_kept=EVICTED_IDS_KEPT,
            )
            self.fault_points.reach("before_commit")
            with _size_refusal(conversation_id):
                document = self._collection.find_one_and_update(
                    {"_id": conversation_id},
                    update,
                    projection={"_id": 0, RESULT_FIELD: 1},
                    upsert=True,
                    return_document=ReturnDocument.AFTER,
                )
            self.fault_points.reach("after_commit")
            # An upsert that returns the document after the update always has one.
            assert document is not None
            result = document[RESULT_FIELD]
            if "stale" in result:
                self._backfill_sizes(conversation_id, window, now)
                continue
            by_id = {m.id: m for m in stamped}
            return AppendResult(
                [by_id[i] for i in result["appended"]], list(result["evicted"])
            )
        raise ContentionError(
            conversation_id,
            _MAX_SIZE_BACKFILLS + 1,
            f"the document kept changing while its message sizes for "
            f"{window.counter_id!r} were measured",
        )

    def _backfill_sizes(
        self, conversation_id: str, window: Window, now: datetime
    ) -> None:
        """Measure the stored messages lacking a size under the window's counter.

        The write is conditioned on the ``version`` read, so it never undoes a
        concurrent append; it changes no message, only their cached sizes.
        """
        counter = window.counter_id
        document = self._collection.find_one(
            {"_id": conversation_id, **self._live(now)}, {"messages": 1, "version": 1}
        )
        if document is None:
            return
        changed = False
        for element in document["messages"]:
            sizes = element.setdefault("sizes", [])
            if not any(s.get("c") == counter for s in sizes):
                message = codec.from_json(element["p"])
                sizes.append({"c": counter, "n": window.measure(message)})
                changed = True
        if changed:
            self._collection.update_one(
                {"_id": conversation_id, "version": document.get("version")},
                {"$set": {"messages": document["messages"]}},
            )


@contextmanager
def _size_refusal(conversation_id: str) -> Iterator[None]:
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
