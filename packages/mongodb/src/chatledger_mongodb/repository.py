# Written by tools/async_to_sync.py from async_repository.py: edit that one.
"""MongoDB conversation memory: one document per conversation.

Example (needs a MongoDB server)::

    from datetime import timedelta
    from chatledger import MessageWindowChatMemory, Message
    from chatledger_mongodb import MongoDBChatMemoryRepository

    url = "mongodb://localhost:27017/app"
    ttl = timedelta(days=7)
    with MongoDBChatMemoryRepository.from_url(url, ttl=ttl) as repository:
        memory = MessageWindowChatMemory(repository, max_messages=20)
        memory.add("c1", Message.user("Hello"))
        memory.get("c1")

The data model, and why
-----------------------
MongoDB makes a write atomic for one document only (multi-document
transactions need a replica set and cost more). So a conversation is ONE
document::

    {_id: <conversation id>, messages: [{seq, id, role, sizes, k?, b?, p}, ...],
     next_seq, sb, version, expires_at, evicted_ids, last_append,
     created_at, updated_at, owner?, meta?, meta_eq?}

- ``p`` is the codec's JSON text. Metadata keys such as ``"$set"`` or ``"a.b"``
  therefore never become BSON field names, and a message comes back exactly.
- ``seq`` is the per-conversation, gap-free order; the array is kept in ``seq``
  order and nothing is ever ordered by time.
- ``sizes`` caches each message's size under a token counter, so a token
  window never re-tokenizes the history; ``k`` (system messages only) is the
  equality key the system-message rule compares.
- ``b`` (system messages only) is the batch of the append that stored the
  message, the ``seq`` of the first message it stored, and ``sb`` the batch
  of the current system set (rule 1: the system messages of the latest
  append that stored any). Absent, either means 0: what ``save_all`` and the
  releases that kept only the window wrote, where every stored system
  message is current.
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
- ``created_at``, ``updated_at``, ``owner``, ``meta`` and ``meta_eq`` are the
  conversation's record (:mod:`chatledger_mongodb.records`): the times are
  the server's ``$$NOW``, kept by the update each write of the messages
  already sends; two indexes, ``(owner, updated_at, _id)`` and
  ``(updated_at, _id)``, list the records newest first.

A window append is ONE ``findAndModify`` whose update is an aggregation
pipeline (:mod:`chatledger_mongodb.pipeline`): the server skips known message
ids (stored or recorded as evicted), merges system messages into the current
set, numbers the new messages, computes the turn-aligned cut, drops the
evicted messages and records their ids while it holds the document, then
returns only ``last_append`` (ids appended, ids evicted). One round trip,
atomic, no retries under contention and no lost or duplicated message. The
window bounds the document, and with it the 16 MiB limit: a batch that cannot
fit is refused before any I/O, and a write the server refuses for size
(nothing changes, the update is atomic) surfaces as
:class:`chatledger.MessageTooLargeError`.

Alternatives weighed: a document per message (Spring AI's layout) needs a
multi-document transaction to append and evict atomically; read-then-write with
a version check reads the whole window on every append and retries under
contention. Two first appends to a new conversation race safely: the server
retries an upsert that lost a duplicate-key race on ``_id`` (MongoDB 4.2+).

``save_all`` writes the whole document in one update, so it never leaves a
partial conversation. Expired documents are hidden by every read (the TTL
monitor runs about once a minute) and count as empty for an append.

The log
-------
The same document is the conversation's log (``SupportsLog``). A log
append is ONE ``findAndModify`` too, whose pipeline shares the window
append's first steps (known ids skipped, rule 1 by ``k`` against the current
set, numbering) and then puts the new messages after the stored ones,
removing nothing; a new system set moves ``sb`` and the superseded one stays
in the log. A window append replaces the current set only and leaves
superseded system messages in place, so the two appends can take turns on
one conversation. A view (``find_window``) is one aggregation that answers
the current set (rule 1, decided in the server) and the newest non-system
rows, for core's ``TailView``; only a turn reaching back past them reads
further, a page per aggregation. A page of messages is one aggregation over a
range of ``seq`` (:mod:`chatledger_mongodb.log_reads`). Whatever wrote the
document (a window append, ``save_all``, an older release), the log methods
read what it holds: a window-written conversation reads as a log of its
window.

Why the log stays one document: a log append must be one atomic unit, in
one round trip where the backend allows, that skips every id the
conversation holds or held, compares system messages with the current set
and numbers the rest without gaps. On one document the server does all of
it in one ``findAndModify``, atomically, without a transaction or a replica
set, with no retry under contention. The layout weighed against it is one
document per message under a unique index on ``(conversation id, seq)``,
with a small counter document per conversation: no 16 MiB bound, and a view
that reads the newest rows by index. But its append writes several
documents, which MongoDB makes atomic only in a transaction (a replica set;
the counter's ``findAndModify``, which must answer the numbers and the
current system set before the inserts can carry them, a read of the ids
already held, since a duplicate key would abort the transaction rather than
skip one message, the inserts, and the commit: four round trips, with
concurrent appends conflicting on the counter document and retried whole). A
bulk write is one round trip, but it is not atomic (a failover or an
interruption midway leaves part of it) and it cannot number messages without
reading the counter first. And while memories still call the window append,
that single-document pipeline must work on the same data.

What one document costs, reasoned rather than measured (no MongoDB server
ran where this was written):

- A conversation's log holds at most 16 MiB of BSON: about 13,000 messages
  of 1,000 characters each (about 1.2 KB stored apiece). An append that
  would pass it is refused by the server, raises
  :class:`chatledger.MessageTooLargeError` and changes nothing;
  ``save_all`` with a shorter history, or deleting the conversation, makes
  room again. ``retention=Retention.last(n)`` bounds a log (below).
- Every append, window or log, rebuilds the document in the server (the
  pipeline walks the array for known ids and the system set), work that
  grows with the stored log; what crosses the network is the batch and the
  ids appended.
- A view or a page loads the document and filters its array in the server;
  what crosses the network is the rows asked for, which grows with the
  window or the page, not with the log.

Under ``retention=Retention.last(n)`` (:mod:`chatledger.retention`) a log
append that makes a trim due is followed by one more single-document update,
the trim of :mod:`chatledger_mongodb.trim`, which removes the log's oldest
messages as core's rules say (reading the append's window view first when
it was given one); every other append stays one ``findAndModify``.

Removals on request (``SupportsLogRemoval``: ``remove_newest``,
``remove_messages``) are one ``findAndModify`` each too, whose pipeline
takes the elements out, forgets their ids and, when the current system set
goes, makes the one it superseded current again
(:mod:`chatledger_mongodb.removal`).

Rows are addressed by ``seq``, never by their place in the array, so cursors
and batches would keep their meaning under a layout that moves old rows out
of the document.

Every filter, update and pipeline, and the reading of every answer, is in
:mod:`chatledger_mongodb.steps`, so the sync and the async repository store
the same documents and decide alike. Every write is one single-document
command: a cancelled async write either reached the server whole or not at
all, and one that was sent waits for its answer
(:func:`chatledger.adapters.settled`), so it cannot land after the
cancellation returned.

Neither repository does I/O when it is made, so one made at import time does
not need the server up: the client connects on the first call (a server that
is down fails it, after ``serverSelectionTimeoutMS``), and the TTL index is
made before the first write, once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any, Literal, TypeVar

from pymongo import AsyncMongoClient, IndexModel, MongoClient, ReturnDocument
from pymongo.collection import Collection

from chatledger.adapters import (
    DEFAULT_CONVERSATION_PAGE_SIZE,
    DEFAULT_MESSAGE_PAGE_SIZE,
    UNSET,
    AppendResult,
    ClosingContext,
    ConversationInfo,
    ConversationInfoPage,
    ConversationPage,
    FaultPoints,
    Message,
    MessagePage,
    Unset,
    Window,
    check_conversation_info,
    check_find_conversations,
    check_message_page,
    checked_window,
    message_page,
    to_ttl,
    utc_now,
    validate_conversation_id,
    validate_message_ids,
    validate_page_request,
    validate_removal_count,
    view_reads,
)
from chatledger.retention import Retention, to_retention
from chatledger.window_view import TailView
from chatledger_mongodb.log_reads import (
    page_pipeline,
    page_rows,
    tail_of,
    tail_pipeline,
    tail_rows,
    view_pipeline,
    view_start,
)
from chatledger_mongodb.records import (
    INFO_PROJECTION,
    RECORD_INDEXES,
    fill_write,
    info_write,
    listing_page,
    listing_pipeline,
    record_of,
    record_pipeline,
    unfilled_pipeline,
)
from chatledger_mongodb.removal import REMOVAL_PROJECTION, removal_write, removed_of
from chatledger_mongodb.steps import (
    APPEND_PROJECTION,
    BACKFILL_PROJECTION,
    MAX_DOCUMENT_BYTES,
    MAX_SIZE_BACKFILLS,
    READ_PROJECTION,
    TTL_INDEX_NAME,
    TTLValue,
    append_outcome,
    append_update,
    backfill,
    connect_given,
    contention_error,
    count_of,
    count_pipeline,
    listed,
    live,
    log_append_numbers,
    log_append_outcome,
    log_append_update,
    messages_of,
    page_of,
    prepare_append,
    prepare_log_append,
    save_update,
    size_refusal,
    split_url_options,
    validate_collection_name,
    validate_database_name,
)
from chatledger_mongodb.trim import trim_write

__all__ = ["MAX_DOCUMENT_BYTES", "MongoDBChatMemoryRepository"]

T = TypeVar("T")


def settled(answer: T) -> T:
    """A sync write returns with the server's answer: nothing left to wait for."""
    return answer


class MongoDBChatMemoryRepository(ClosingContext):
    """Conversations in a MongoDB collection, one document each.

    Implements :class:`chatledger.ChatMemoryRepository`,
    :class:`chatledger.SupportsWindowAppend`,
    :class:`chatledger.SupportsLog`,
    :class:`chatledger.SupportsLogRemoval`,
    :class:`chatledger.SupportsConversationInfo` (each conversation's
    record on its own document, :mod:`chatledger_mongodb.records`), and
    counting and paging. The data model and its limits are in the module's
    docstring.

    Args:
        client: A ``pymongo.MongoClient``. Its read and write concerns are
            used as they are (``w: "majority"`` with retryable writes is
            MongoDB's default and what this repository expects). The
            repository does not close a client it was given.
        database: The database name (letters, digits, ``_`` and ``-``).
        collection: The collection name (a letter or ``_`` first, then letters,
            digits, ``_`` and ``-``; no ``system`` prefix).
        ttl: Sliding time to live of a whole conversation (a ``timedelta`` or
            seconds); ``None`` keeps conversations until deleted.
        create_indexes: Create the indexes (:meth:`create_indexes`,
            idempotent) before the first write, and again before the first
            write after :meth:`drop_schema`; once, however many first writes
            come together.
        retention: What each conversation's log keeps:
            ``Retention.everything()`` (the default) or ``Retention.last(n)``
            (``n`` for short); see :mod:`chatledger.retention` and
            :meth:`append_to_log`.

    Raises:
        InvalidNameError: if a name is not allowed.
        InvalidTTLError: if ``ttl`` is not a positive duration.
        InvalidRetentionError: if ``retention`` is neither.
        TypeError: if ``client`` is a ``pymongo.AsyncMongoClient``
            (:class:`chatledger_mongodb.AsyncMongoDBChatMemoryRepository` takes one).
    """

    def __init__(
        self,
        client: MongoClient[Any],
        *,
        database: str = "chatledger",
        collection: str = "chat_memory",
        ttl: TTLValue = None,
        create_indexes: bool = True,
        retention: Retention | int | None = None,
    ) -> None:
        """Bind to ``database.collection`` of ``client``; see the class docstring."""
        self._database_name = validate_database_name(database)
        self._collection_name = validate_collection_name(collection)
        self.ttl = to_ttl(ttl)
        self.retention = to_retention(retention)
        # Each side refuses the other's client (the sync renames swap the names).
        if isinstance(client, AsyncMongoClient):
            raise TypeError(
                "client must be a pymongo MongoClient, not AsyncMongoClient "
                "(AsyncMongoDBChatMemoryRepository takes AsyncMongoClient)"
            )
        self._client = client
        self._owns_client = False
        self._collection: Collection[Any] = client[self._database_name][
            self._collection_name
        ]
        self.fault_points = FaultPoints()
        # How many rows a window view reads, first and then further back.
        self._view_reads: Callable[[Window], Iterator[int]] = view_reads
        self._create_indexes = bool(create_indexes)
        self._indexes_ready = not self._create_indexes
        self._ready_lock = threading.Lock()

    @classmethod
    def from_url(cls, url: str, **options: Any) -> MongoDBChatMemoryRepository:
        """Make an ``MongoClient`` for ``url`` that this repository owns.

        The database comes from the URL path (``mongodb://host/mydb``) unless
        ``database=`` is given. The constructor's options (``database``,
        ``collection``, ``ttl``, ``create_indexes``, ``retention``, the last
        also as ``?retention=100`` in the URL's query) go to it, checked
        before a client exists; every other option goes to
        ``MongoClient`` (``serverSelectionTimeoutMS=3000``, say), which
        refuses one it does not know. :meth:`close` closes the client. This
        does no I/O (a ``mongodb+srv://`` name is resolved on the first
        call): the sync repository's client is made with ``connect=False``,
        unless the options or the URL set ``connect``, so that it does not
        connect in the background.
        """
        url, client_options, own = split_url_options(url, options)
        validate_database_name(own.get("database", "chatledger"))
        validate_collection_name(own.get("collection", "chat_memory"))
        to_ttl(own.get("ttl"))
        to_retention(own.get("retention"))
        if not connect_given(url, client_options):
            client_options["connect"] = False
        client: MongoClient[Any] = MongoClient(url, **client_options)
        repository = cls(client, **own)
        repository._owns_client = True
        return repository

    def __repr__(self) -> str:
        bound = f", retention={self.retention!r}" if self.retention.bounded else ""
        return (
            f"{type(self).__name__}(database={self._database_name!r}, "
            f"collection={self._collection_name!r}, ttl={self.ttl!r}{bound})"
        )

    @property
    def collection(self) -> Collection[Any]:
        """The pymongo ``Collection`` that holds the conversations."""
        return self._collection

    def close(self) -> None:
        """Close the client if :meth:`from_url` made it; a given client stays open."""
        if self._owns_client:
            self._client.close()

    # -- schema ----------------------------------------------------------------

    def _prepared(self) -> None:
        """Create the indexes once, before the first write, if asked to."""
        if self._indexes_ready:
            return
        lock = self._ready_lock
        with lock:
            if not self._indexes_ready:
                self.create_indexes()
                self._indexes_ready = True

    def create_schema(self) -> None:
        """Create what the collection needs (:meth:`create_indexes`); idempotent."""
        self.create_indexes()
        self._indexes_ready = True

    def drop_schema(self) -> None:
        """Drop the collection, with every conversation and index in it.

        A later write creates the indexes again (with ``create_indexes``).
        """
        self._collection.drop()
        self._indexes_ready = not self._create_indexes

    def create_indexes(self) -> None:
        """Create the indexes and fill the records an earlier release left out.

        Safe to run again, and at once. The TTL index on ``expires_at``
        (documents of conversations without a TTL hold ``expires_at: null``,
        which the TTL monitor ignores) and the conversation records' two
        listing indexes, ``(owner, updated_at, _id)`` and ``(updated_at,
        _id)``, in one command. Then each document an earlier release
        wrote, which has no record times, gets its oldest and newest
        messages' times (one aggregation on the ``updated_at`` index, one
        update each), so the listing finds it.
        """
        self._collection.create_indexes(
            [
                IndexModel("expires_at", expireAfterSeconds=0, name=TTL_INDEX_NAME),
                *(IndexModel(keys, name=name) for keys, name in RECORD_INDEXES),
            ]
        )
        found = self._collection.aggregate(unfilled_pipeline())
        unfilled = [document for document in found]
        now = utc_now()
        for document in unfilled:
            self._collection.update_one(*fill_write(document, now))

    # -- reads -----------------------------------------------------------------

    def find_conversation_ids(self) -> list[str]:
        """Return the id of every live, non-empty conversation."""
        found = self._collection.find(listed(utc_now()), {"_id": 1})
        return [str(doc["_id"]) for doc in found]

    def count_messages(self, conversation_id: str) -> int:
        """Return how many messages a conversation holds; the server counts."""
        validate_conversation_id(conversation_id)
        cursor = self._collection.aggregate(count_pipeline(conversation_id, utc_now()))
        return count_of(cursor.to_list())

    def find_conversation_ids_page(
        self, cursor: str | None = None, limit: int = 100
    ) -> ConversationPage:
        """Return up to ``limit`` conversation ids after ``cursor``, in ``_id`` order.

        One range query on ``_id`` (the primary index) per page.
        """
        after, limit = validate_page_request(cursor, limit)
        found = self._collection.find(listed(utc_now(), after), {"_id": 1})
        documents = found.sort("_id", 1).limit(limit + 1).to_list()
        return page_of([doc["_id"] for doc in documents], limit)

    def find_by_conversation_id(self, conversation_id: str) -> list[Message]:
        """Return one conversation, oldest first (``[]`` if none or expired)."""
        validate_conversation_id(conversation_id)
        document = self._collection.find_one(
            {"_id": conversation_id, **live(utc_now())}, READ_PROJECTION
        )
        return messages_of(document)

    # -- writes ----------------------------------------------------------------

    def save_all(self, conversation_id: str, messages: Sequence[Message]) -> None:
        """Replace one conversation in a single-document write; ``[]`` deletes it.

        The record of evicted ids goes with the old content.

        Raises:
            MessageTooLargeError: before any I/O, if the conversation would not
                fit in one 16 MiB document.
        """
        update = save_update(conversation_id, messages, self.ttl)
        if update is None:
            self.delete_by_conversation_id(conversation_id)
            return
        self._prepared()
        self.fault_points.reach("before_commit")
        with size_refusal(conversation_id):
            settled(
                self._collection.update_one(
                    {"_id": conversation_id}, update, upsert=True
                )
            )
        self.fault_points.reach("after_commit")

    def delete_by_conversation_id(self, conversation_id: str) -> None:
        """Remove one conversation with its record of evicted ids, if it exists."""
        validate_conversation_id(conversation_id)
        settled(self._collection.delete_one({"_id": conversation_id}))

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
        prepared = prepare_append(conversation_id, messages, window)
        if prepared is None:
            return AppendResult()
        self._prepared()
        for _ in range(MAX_SIZE_BACKFILLS + 1):
            update = append_update(prepared, window, self.ttl)
            self.fault_points.reach("before_commit")
            with size_refusal(conversation_id):
                document = settled(
                    self._collection.find_one_and_update(
                        {"_id": conversation_id},
                        update,
                        projection=APPEND_PROJECTION,
                        upsert=True,
                        return_document=ReturnDocument.AFTER,
                    )
                )
            self.fault_points.reach("after_commit")
            result = append_outcome(document, prepared)
            if result is not None:
                return result
            self._backfill_sizes(conversation_id, window, prepared.now)
        raise contention_error(conversation_id, window)

    def append_to_log(
        self,
        conversation_id: str,
        messages: Sequence[Message],
        window: Window | None = None,
    ) -> AppendResult:
        """Append to the conversation's log in one atomic single-document update.

        See :class:`chatledger.SupportsLog` for the contract. Nothing is
        evicted: the messages go after the last one, less the ids the
        conversation holds or held and the system messages equal to the
        current set (rule 1, compared by ``system_key`` as the window append
        does). Given a window with a counter, each message's size under it is
        stored beside it. One ``findAndModify``, whatever the history holds.

        Under ``Retention.last(n)``, an append whose numbers make a trim due
        (:meth:`~chatledger.retention.Retention.trim_due`, about one in
        ``slack``) then trims the log in one more single-document update
        (:mod:`chatledger_mongodb.trim`); given a window, the view of it is
        read first, as :meth:`find_window` reads it (one aggregation, or a
        few for a view that reaches far back), and the trim keeps what it
        shows. The append is stored before the trim starts: if the trim
        fails, its error is raised and the appended messages stay stored (a
        retry of the append is a no-op; the next due trim catches up).

        Raises:
            TypeError: if ``window`` is neither ``None`` nor a ``Window``.
            MessageTooLargeError: if the batch cannot fit in one document
                (before any I/O) or the server refuses the grown document
                (the log is full at 16 MiB; nothing changed).
        """
        prepared = prepare_log_append(conversation_id, messages, window)
        if prepared is None:
            return AppendResult()
        self._prepared()
        update = log_append_update(prepared, self.ttl)
        self.fault_points.reach("before_commit")
        with size_refusal(conversation_id):
            document = settled(
                self._collection.find_one_and_update(
                    {"_id": conversation_id},
                    update,
                    projection=APPEND_PROJECTION,
                    upsert=True,
                    return_document=ReturnDocument.AFTER,
                )
            )
        self.fault_points.reach("after_commit")
        result = log_append_outcome(document, prepared)
        numbers = log_append_numbers(document, result)
        if numbers is not None and self.retention.trim_due(*numbers):
            shown_from = None
            if window is not None:
                view = self._tail_view(conversation_id, window)
                shown_from = view.shown_from()
            query, update = trim_write(
                conversation_id,
                self.retention,
                numbers[1],
                result.appended[-1].id,
                shown_from,
                utc_now(),
            )
            settled(self._collection.update_one(query, update))
        return result

    # -- removals ----------------------------------------------------------------

    def remove_newest(self, conversation_id: str, count: int = 1) -> list[Message]:
        """Remove and return the newest ``count`` messages, oldest first, in one update.

        See :class:`chatledger.SupportsLogRemoval`: one
        ``findAndModify`` of the conversation's document
        (:mod:`chatledger_mongodb.removal`) takes the last elements of its
        array, atomically against appends, trims and other removals; when
        the current system set goes, the server makes the one it superseded
        current again (rule 1 over what is left).

        Raises:
            InvalidPageError: ``count`` is not an int from 1 to
                :data:`chatledger.validation.MAX_PAGE_SIZE`, before any I/O.
        """
        validate_conversation_id(conversation_id)
        validate_removal_count(count)
        return self._removal(
            *removal_write(conversation_id, count, None, ttl=self.ttl, now=utc_now())
        )

    def remove_messages(
        self, conversation_id: str, message_ids: Sequence[str]
    ) -> list[Message]:
        """Remove and return the messages of ``message_ids`` in one update.

        As :meth:`remove_newest` does (oldest first), for the ids the log
        holds; ids it does not hold (never stored, removed, or evicted) are
        ignored.

        Raises:
            InvalidMessageError: ``message_ids`` is not a list of non-empty
                str, before any I/O.
        """
        validate_conversation_id(conversation_id)
        ids = list(dict.fromkeys(validate_message_ids(message_ids)))
        if not ids:
            return []
        return self._removal(
            *removal_write(conversation_id, None, ids, ttl=self.ttl, now=utc_now())
        )

    def _removal(
        self, query: dict[str, Any], update: list[dict[str, Any]]
    ) -> list[Message]:
        """Run one removal's ``findAndModify``; the messages it removed."""
        self._prepared()
        document = settled(
            self._collection.find_one_and_update(
                query,
                update,
                projection=REMOVAL_PROJECTION,
                return_document=ReturnDocument.AFTER,
            )
        )
        return removed_of(document)

    # -- conversation records ----------------------------------------------------

    def set_conversation_info(
        self,
        conversation_id: str,
        *,
        owner: str | Literal[Unset.UNSET] | None = UNSET,
        metadata: Mapping[str, Any] | Literal[Unset.UNSET] = UNSET,
    ) -> ConversationInfo:
        """Set the owner or the metadata in one update; return the record.

        See :class:`chatledger.SupportsConversationInfo`. One
        ``findAndModify`` (an upsert) sets what was given on the
        conversation's document and answers the record, atomically: a new id
        gets a document without messages, its record made at the server's
        ``$$NOW``. ``updated_at`` stays; the TTL slides.

        Raises:
            InvalidConversationIdError: the id is not valid, before any I/O.
            InvalidConversationInfoError: a bad owner or metadata, before any
                I/O.
        """
        update = check_conversation_info(conversation_id, owner, metadata)
        self._prepared()
        query, pipeline = info_write(update, ttl=self.ttl, now=utc_now())
        self.fault_points.reach("before_commit")
        with size_refusal(update.conversation_id):
            document = settled(
                self._collection.find_one_and_update(
                    query,
                    pipeline,
                    projection=INFO_PROJECTION,
                    upsert=True,
                    return_document=ReturnDocument.AFTER,
                )
            )
        self.fault_points.reach("after_commit")
        # An upsert that returns the document after the update always has one.
        assert document is not None
        return record_of(document)

    def get_conversation_info(self, conversation_id: str) -> ConversationInfo | None:
        """Return the record of one live conversation, or ``None``; one aggregation.

        The server counts the messages; they do not cross the network.
        """
        validate_conversation_id(conversation_id)
        now = utc_now()
        found = self._collection.aggregate(record_pipeline(conversation_id, now))
        documents = found.to_list()
        return record_of(documents[0], now) if documents else None

    def find_conversations(
        self,
        *,
        owner: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        updated_before: datetime | None = None,
        cursor: str | None = None,
        limit: int = DEFAULT_CONVERSATION_PAGE_SIZE,
    ) -> ConversationInfoPage:
        """Return up to ``limit`` records, newest ``updated_at`` first; one aggregation.

        A range of the ``(owner, updated_at, _id)`` index (given an owner)
        or of ``(updated_at, _id)``, read newest first below the cursor's
        record and stopped at ``limit + 1``; the metadata filter is compared
        in the same query, by the equality keys of the metadata's top-level
        scalars (:mod:`chatledger_mongodb.records`).

        Raises:
            InvalidConversationInfoError: a bad ``owner``, ``metadata`` filter
                or ``updated_before``, before any I/O.
            InvalidPageError: a bad ``limit`` or ``cursor``, before any I/O.
        """
        query = check_find_conversations(
            owner=owner,
            metadata=metadata,
            updated_before=updated_before,
            cursor=cursor,
            limit=limit,
        )
        found = self._collection.aggregate(listing_pipeline(query, utc_now()))
        return listing_page(found.to_list(), query)

    # -- the log's reads ---------------------------------------------------------

    def find_window(self, conversation_id: str, window: Window) -> list[Message]:
        """Return the view of ``window`` on the log, oldest first.

        One aggregation reads the current system set and the newest rows (the
        window's limit plus a few, or 32 for tokens), and core's ``TailView``
        builds the view from them; only a turn reaching further back (rule 3)
        makes it read older rows, a page per round trip. Sizes stored under
        the window's counter are used, others measured here.

        Raises:
            TypeError: if ``window`` is not a ``Window``, before any I/O.
        """
        validate_conversation_id(conversation_id)
        checked_window(window)
        return (self._tail_view(conversation_id, window)).messages()

    def _tail_view(self, conversation_id: str, window: Window) -> TailView:
        """Read the rows the view of ``window`` needs, newest first, into a view."""
        now = utc_now()
        reads = self._view_reads(window)
        rows = next(reads)
        found = self._collection.aggregate(
            view_pipeline(conversation_id, window, rows, now)
        )
        view, tail = view_start(found.to_list(), window)
        while not view.feed(tail_rows(tail)) and len(tail) == rows:
            rows = next(reads)
            found = self._collection.aggregate(
                tail_pipeline(conversation_id, window, tail[0], rows, now)
            )
            tail = tail_of(found.to_list())
        return view

    def find_messages_page(
        self,
        conversation_id: str,
        cursor: str | None = None,
        limit: int = DEFAULT_MESSAGE_PAGE_SIZE,
        newest_first: bool = True,
    ) -> MessagePage:
        """Return up to ``limit`` messages of the log after ``cursor``, in one read.

        The aggregation takes the page's range of sequence numbers (and one
        row more, to tell whether another page follows), so what it sends
        grows with the page, not with the log.

        Raises:
            InvalidPageError: for a bad ``limit`` or ``cursor``, before any I/O.
        """
        validate_conversation_id(conversation_id)
        after, limit = check_message_page(cursor, limit, newest_first=newest_first)
        found = self._collection.aggregate(
            page_pipeline(conversation_id, after, limit, newest_first, utc_now())
        )
        rows = page_rows(found.to_list(), newest_first)
        return message_page(rows, limit, newest_first=newest_first)

    def _backfill_sizes(
        self, conversation_id: str, window: Window, now: datetime
    ) -> None:
        """Measure the stored messages lacking a size under the window's counter."""
        document = self._collection.find_one(
            {"_id": conversation_id, **live(now)}, BACKFILL_PROJECTION
        )
        write = backfill(conversation_id, document, window)
        if write is not None:
            self._collection.update_one(*write)
