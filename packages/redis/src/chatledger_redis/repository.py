# Written by tools/async_to_sync.py from async_repository.py: edit that one.
"""``RedisChatMemoryRepository``: conversations in plain Redis 6.2+ or Valkey.

Example (needs a Redis server):
    from datetime import timedelta

    from chatledger import MessageWindowChatMemory, Message
    from chatledger_redis import RedisChatMemoryRepository

    repository = RedisChatMemoryRepository.from_url(
        "redis://localhost:6379/0", ttl=timedelta(days=7)
    )
    memory = MessageWindowChatMemory(repository, max_messages=20)
    memory.add("c1", Message.user("Hello"))
    repository.close()

No module is needed (no RedisJSON, no search). Each conversation is six keys
in one hash slot (:mod:`chatledger_redis.keys`); every write is one Lua script
or one command, so it is atomic and, once the scripts are cached on the
server, one round trip. A window append pushes the new messages, applies the
system-message rule and evicts whole turns in the same script, reading only
compact markers (:mod:`chatledger_redis.markers`) and only as many of the
oldest as the eviction needs. What each call sends and how its answer is read
is in :mod:`chatledger_redis.steps`, shared by the sync and the async
repository (one module is generated from the other), so both read and write
the same conversations.

The same keys hold the conversation as a log (``SupportsLog``): a log
append pushes the new messages and markers and evicts nothing, keeping a
superseded system set in the log (``meta``'s ``sb`` names the current one);
a window view reads the current system set and the newest messages, by
sequence number, in one script and builds the view with core's
``TailView``; a page of messages reads a range of sequence numbers in one
script (:mod:`chatledger_redis.scripts` says why a range suffices). The log
methods read whatever the keys hold, so a conversation a window append or
``save_all`` wrote (an older release's too) reads as a log of what is left.

Under ``retention=Retention.last(n)`` (:mod:`chatledger.retention`) a log
append that makes a trim due runs one more script after it, the ``TRIM`` of
:mod:`chatledger_redis.scripts`, which removes the log's oldest messages as
core's rules say (reading the append's window view first when it was given
one); the other appends stay one round trip.

Removals on request (``SupportsLogRemoval``: ``remove_newest``,
``remove_messages``) are one script each, the ``REMOVE`` of
:mod:`chatledger_redis.scripts`: the messages, their markers and their ids
go together, atomically against appends, trims and other removals, and when
the current system set goes the system markers' batches say which set is
current again. A removal is safe to send again: the client resends a
command whose reply it lost, and the script then finds the receipt its first
run left (in the conversation's ``removals`` key, a ring of its latest
removals that expires on its own) and answers the same messages without
removing others.

The evicted-id record (:mod:`chatledger.evicted_ids`) lives in the
``<prefix>{<tag>}:evicted`` list (at least the newest
:data:`~chatledger.evicted_ids.EVICTED_IDS_KEPT` ids the window took out,
oldest first, trimmed in steps), each of its ids marked with an empty value
in the ``ids`` hash: the same script checks and updates it, so a late retry
of an evicted message is a no-op.

Why the listing of ids uses ``SCAN`` rather than an index key: an index is
one key in one slot, so on Redis Cluster it cannot be updated in the same
script as the conversation (cross-slot), and keeping it in step costs a
second call on every write plus lazy repair of stale entries, which the
records pay (below) but the ids need not.
:meth:`RedisChatMemoryRepository.find_conversation_ids` scans for the
per-conversation ``meta`` keys (on Cluster, redis-py scans every primary). The
keys are the truth, so the listing is complete, uncapped, and agrees with
deletes and with expiry by construction (the server hides expired keys from
``SCAN``); the price is a pass over the database's keyspace, which is fine for
an administrative listing and never touches the append path. During a Cluster
resharding a scan may miss a key that moves; repeat the listing if that
matters.

Conversation records (``SupportsConversationInfo``) are the
conversation's ``info`` key, written by the scripts that write its messages
(an append, ``save_all``, a window's eviction and a removal move
``updated_at`` to the server's clock, never back; ``set_conversation_info``
is a script of its own), so a record costs no round trip of its own. They
are listed from an index kept in a slot of its own (``SCAN`` would read the
whole keyspace for an app's list of chats): on plain Redis the scripts
update it in the same atomic step, on Redis Cluster, where a script reaches
one slot only, the repository sends each write's index update to the
index's node after the write (one round trip more), and the listing reads
the record behind every entry it lists, so an update lost between the two
neither shows a record that is gone nor hides one twice
(:mod:`chatledger_redis.records`).

Neither repository does I/O when it is made, so one made at import time does
not need the server up: the client connects on the first call, which a server
that is down fails with the driver's error. redis-py's sync ``RedisCluster``
connects to a node as it is made, to learn the slots, so the sync repository
that ``from_url`` makes for a cluster makes that client on its first call,
once, however many threads make it together.

Durability is the server's: with asynchronous replication or
``appendfsync everysec`` about a second of acknowledged writes can be lost in a
crash. Call ``client.wait(...)`` after a write if you need more.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Literal

from redis import Redis
from redis.cluster import RedisCluster
from redis.commands.core import Script
from redis.exceptions import NoScriptError, ResponseError

from chatledger.adapters import (
    DEFAULT_CONVERSATION_PAGE_SIZE,
    DEFAULT_MESSAGE_PAGE_SIZE,
    UNSET,
    AppendResult,
    ClosingContext,
    ContentionError,
    ConversationInfo,
    ConversationInfoPage,
    ConversationPage,
    FaultPoints,
    JsonValue,
    Message,
    MessagePage,
    Unset,
    Window,
    check_conversation_info,
    check_find_conversations,
    check_message_page,
    checked_window,
    message_page,
    stamp_messages,
    validate_conversation_id,
    validate_message_ids,
    validate_messages,
    validate_removal_count,
    view_reads,
)
from chatledger.retention import Retention, to_retention
from chatledger.window_view import TailView
from chatledger_redis.bulk_limit import (
    PROTO_MAX_BULK_LEN,
    check_arguments,
    limit_from_reply,
    may_pass_smallest_limit,
)
from chatledger_redis.clients import redis_client
from chatledger_redis.floor import RedisBenchmarkFloor
from chatledger_redis.keys import (
    ConversationKeys,
    IndexKeys,
    evicted_key_pattern,
    info_key_pattern,
    meta_key_pattern,
    removals_key_pattern,
    validate_key_prefix,
)
from chatledger_redis.records import (
    RecordListing,
    index_update,
    record_keys,
    record_of,
    record_update,
    set_info_args,
)
from chatledger_redis.scripts import (
    APPEND,
    APPEND_LOG,
    DELETE,
    INDEX,
    INFO,
    PAGE,
    REMOVE,
    RESIZE,
    SAVE,
    SET_INFO,
    TAIL,
    TRIM,
    VIEW,
)
from chatledger_redis.steps import (
    RESIZE_ATTEMPTS,
    TailRead,
    append_args,
    append_result,
    client_url,
    conversation_keys,
    ids_of_evicted_keys,
    ids_of_info_keys,
    ids_of_meta_keys,
    log_append_args,
    log_append_result,
    ordered_messages,
    page_args,
    page_of,
    page_rows,
    removal_args,
    removed_messages,
    resize_args,
    save_args,
    trim_args,
    ttl_milliseconds,
)

__all__ = ["RedisChatMemoryRepository"]

Client = Redis | RedisCluster
#: Stands for the client the sync repository's ``from_url`` leaves to the
#: first call (a cluster's).
_NOT_MADE: Any = object()


class RedisChatMemoryRepository(ClosingContext):
    """Conversations in Redis or Valkey, with atomic window appends.

    Implements :class:`~chatledger.ChatMemoryRepository`.

    Args:
        client: A ``redis.Redis`` or ``redis.cluster.RedisCluster``
            (or a Valkey server behind either); ``decode_responses`` may be on
            or off. The repository does not close a client it was given.
        key_prefix: Starts every key; letters, digits and ``_ : . -`` only.
        ttl: Time to live of a conversation after its last write
            (a ``timedelta`` or seconds), sliding; ``None`` keeps it forever.
        retention: What each conversation's log keeps:
            ``Retention.everything()`` (the default) or ``Retention.last(n)``
            (``n`` for short); see :mod:`chatledger.retention` and
            :meth:`append_to_log`.

    Raises:
        InvalidNameError: for a key prefix outside the allowlist.
        TypeError, ValueError: for a ttl that is not a positive duration.
        InvalidRetentionError: for a retention that is neither.
    """

    def __init__(
        self,
        client: Client,
        *,
        key_prefix: str = "chatledger:",
        ttl: timedelta | float | None = None,
        retention: Retention | int | None = None,
    ) -> None:
        """Store conversations through ``client`` under ``key_prefix``."""
        if client is None:
            raise TypeError("client must be a redis.Redis or RedisCluster, not None")
        self.key_prefix = validate_key_prefix(key_prefix)
        self._index = IndexKeys.of(self.key_prefix)
        self._ttl_ms = ttl_milliseconds(ttl)
        self.ttl = None if ttl is None else timedelta(milliseconds=self._ttl_ms)
        self.retention = to_retention(retention)
        self._client = None if client is _NOT_MADE else client
        #: Makes the client on the first call, when from_url left it to it.
        self._make_client: Callable[[], Redis | RedisCluster] | None = None
        self._client_lock = threading.Lock()
        if self._client is not None:
            self._register_scripts(self._client)
        self.fault_points = FaultPoints()
        self._owns_client = False
        # How many rows a window view reads, first and then further back.
        self._tail_reads: Callable[[Window], Iterator[int]] = view_reads
        #: The server's proto-max-bulk-len, once a large argument needed it.
        self._max_bulk_bytes: int | None = None

    def _register_scripts(self, client: Client) -> None:
        """Register the scripts, once; each call names the client it runs on."""
        self._append = client.register_script(APPEND)
        self._append_log = client.register_script(APPEND_LOG)
        self._save = client.register_script(SAVE)
        self._resize = client.register_script(RESIZE)
        self._view = client.register_script(VIEW)
        self._tail = client.register_script(TAIL)
        self._page = client.register_script(PAGE)
        self._trim = client.register_script(TRIM)
        self._remove = client.register_script(REMOVE)
        self._set_info = client.register_script(SET_INFO)
        self._delete = client.register_script(DELETE)
        self._info = client.register_script(INFO)
        self._index_script = client.register_script(INDEX)

    @classmethod
    def from_url(cls, url: str, **options: Any) -> RedisChatMemoryRepository:
        """Connect to ``url`` with a client this repository owns (see :meth:`close`).

        No I/O: the client connects on the first call (the sync repository
        makes a cluster's client then, see the module). ``redis://``,
        ``rediss://`` and ``unix://`` URLs make a ``redis.Redis``;
        ``redis+cluster://`` and ``rediss+cluster://`` (or ``cluster=True``)
        make a ``redis.cluster.RedisCluster``. ``key_prefix``,
        ``ttl`` and ``retention`` (also ``?retention=100`` in the URL's
        query) go to the repository, every other option to the client's
        ``from_url``.

        A ``Redis`` client made here sends a command again, on a new
        connection, when its connection broke
        (:mod:`chatledger_redis.clients`, one policy for the sync and
        the async repository); pass ``retry`` to choose.

        Raises:
            InvalidOptionError: an option neither the repository nor the
                ``redis.Redis`` client takes (checked before any
                connection; a cluster client's options are its own to check).
            InvalidRetentionError: a retention that is neither everything
                nor a bound, before any connection.
        """
        # Our own options are validated before a client (and its pool) exists.
        url, cluster, repository_options = client_url(url, options)

        def make() -> Client:
            return redis_client(url, cluster=cluster, options=options)

        # A sync RedisCluster connects as it is made: the first call makes it.
        client = _NOT_MADE if cluster else make()
        repository = cls(client, **repository_options)
        repository._owns_client = True
        repository._make_client = make
        return repository

    @property
    def client(self) -> Client:
        """The client calls go through.

        An asyncio client serves one event loop, so the async repository
        made by ``from_url`` makes a client for each loop that calls it
        (``asyncio.run`` twice, threads each running a loop), the first loop
        taking the first one (:mod:`chatledger_redis.loop_clients`). A client
        given to the constructor serves every call as given. The sync
        repository that ``from_url`` made for a cluster makes its client on
        the first call (or the first read of this property).
        """
        if self._client is None:
            with self._client_lock:
                if self._client is None:
                    assert self._make_client is not None
                    made = self._make_client()
                    self._register_scripts(made)
                    self._client = made
        return self._client

    def close(self) -> None:
        """Close the client if :meth:`from_url` made it; a given client stays open."""
        # A cluster's client may not be made yet.
        if self._owns_client and self._client is not None:
            self._client.close()

    def __repr__(self) -> str:
        bound = f", retention={self.retention!r}" if self.retention.bounded else ""
        return (
            f"RedisChatMemoryRepository(key_prefix={self.key_prefix!r}, "
            f"ttl={self.ttl!r}{bound})"
        )

    def _keys(self, conversation_id: str) -> ConversationKeys:
        return conversation_keys(self.key_prefix, conversation_id)[0]

    def create_schema(self) -> None:
        """Do nothing: a conversation's keys appear with its first write.

        Here so that every adapter offers the same schema calls.
        """

    def drop_schema(self) -> None:
        """Delete every conversation under this repository's key prefix.

        Only keys of the layout this repository writes are touched; other keys
        that share the prefix stay. The evicted-id record a window left when
        it emptied a conversation (no ``meta``, so not listed) goes too, and
        so do the receipts of recent removals, the records (those without
        messages too) and the listing index.
        """
        client = self.client
        left: list[Any] = []
        for pattern in (
            evicted_key_pattern(self.key_prefix),
            removals_key_pattern(self.key_prefix),
            info_key_pattern(self.key_prefix),
        ):
            left += [k for k in client.scan_iter(match=pattern, count=1000)]
        doomed = ids_of_evicted_keys(self.key_prefix, left)
        doomed.update(self.find_conversation_ids())
        for conversation_id in doomed:
            keys = self._keys(conversation_id)
            client.unlink(*keys.every(), keys.info)
        # One slot: one command, on Cluster too.
        client.unlink(*self._index.all())

    def benchmark_floor(self) -> RedisBenchmarkFloor:
        """The driver's bare RPUSH and LRANGE, for ``chatledger bench``."""
        return RedisBenchmarkFloor(self.client, self.key_prefix)

    def find_conversation_ids(self) -> list[str]:
        """Return the id of every stored conversation (a SCAN of the meta keys)."""
        pattern = meta_key_pattern(self.key_prefix)
        found = [k for k in self.client.scan_iter(match=pattern, count=1000)]
        return ids_of_meta_keys(self.key_prefix, found)

    def count_messages(self, conversation_id: str) -> int:
        """Return how many messages a conversation holds, in one command (``HLEN``)."""
        validate_conversation_id(conversation_id)
        return int(self.client.hlen(self._keys(conversation_id).msgs))

    def find_conversation_ids_page(
        self, cursor: str | None = None, limit: int = 100
    ) -> ConversationPage:
        """Return up to ``limit`` conversation ids after ``cursor``, in id order.

        Redis cannot range over keys in order, and ``SCAN`` may return a key
        twice while the keyspace is resized, so each page scans every meta key
        under the prefix (as :meth:`find_conversation_ids` does) and cuts its
        page from the sorted ids: every conversation that exists throughout
        comes exactly once, and each page costs a full scan. Page with a large
        ``limit`` (up to 10,000) to scan less often.
        """
        page_of([], cursor, limit)  # a bad cursor or limit: before any I/O
        return page_of(self.find_conversation_ids(), cursor, limit)

    def find_by_conversation_id(self, conversation_id: str) -> list[Message]:
        """Return one conversation, oldest first, in one command (``HGETALL``)."""
        validate_conversation_id(conversation_id)
        stored: dict[Any, Any] = self.client.hgetall(self._keys(conversation_id).msgs)
        return ordered_messages(stored)

    def save_all(self, conversation_id: str, messages: Sequence[Message]) -> None:
        """Replace one conversation in one script; an empty list removes it."""
        validate_conversation_id(conversation_id)
        batch = stamp_messages(validate_messages(messages))
        args = save_args(batch, self._ttl_ms)
        client = self.client
        self._check_arguments(client, args, first=3, per_message=4)
        # The script is the atomic unit: a fault before it leaves the old
        # conversation whole, a fault after it leaves the new one whole.
        for point in ("after_lock", "after_delete", "after_insert", "before_commit"):
            self.fault_points.reach(point)
        keys = self._keys(conversation_id)
        reply = self._run(
            client, self._save, [*keys.all(), *self._record_keys(client, keys)], args
        )
        self._publish(client, conversation_id, reply[-1])
        self.fault_points.reach("after_commit")

    def delete_by_conversation_id(self, conversation_id: str) -> None:
        """Remove one conversation's keys in one command; an unknown id is a no-op.

        The receipts of its recent removals go too (they hold the removed
        messages): a removal sent again after the delete removes nothing.
        """
        validate_conversation_id(conversation_id)
        for point in ("after_lock", "after_delete", "before_commit"):
            self.fault_points.reach(point)
        client = self.client
        keys = self._keys(conversation_id)
        op = self._run(
            client, self._delete, [*keys.every(), *self._record_keys(client, keys)], []
        )
        self._publish(client, conversation_id, op)
        self.fault_points.reach("after_commit")

    def append_to_window(
        self, conversation_id: str, messages: Sequence[Message], window: Window
    ) -> AppendResult:
        """Append and trim in one script (see ``SupportsWindowAppend``).

        One round trip when the stored sizes were measured by ``window``'s
        counter (always for a message window). When a token window with another
        counter meets a conversation, the history is measured once with the new
        counter, then the append runs.
        """
        validate_conversation_id(conversation_id)
        batch = validate_messages(messages)
        if not batch:
            return AppendResult()
        stamped = stamp_messages(batch)
        counter = window.counter_id
        keys, key_names = conversation_keys(self.key_prefix, conversation_id)
        args = append_args(stamped, window, self._ttl_ms)
        client = self.client
        key_names += self._record_keys(client, keys)
        self._check_arguments(client, args, first=1, per_message=1)
        for point in ("after_lock", "after_insert", "after_evict", "before_commit"):
            self.fault_points.reach(point)
        for _ in range(RESIZE_ATTEMPTS):
            outcome = self._run(client, self._append, key_names, args)
            if outcome != -1:
                self._publish(client, conversation_id, outcome[-1])
                outcome = outcome[:-1]
                break
            assert counter is not None  # the script asks only for a named counter
            self._remeasure(client, self._keys(conversation_id), counter, window)
        else:
            raise ContentionError(
                conversation_id,
                RESIZE_ATTEMPTS,
                f"its history kept changing while measured with {counter!r}",
            )
        self.fault_points.reach("after_commit")
        return append_result(outcome, stamped)

    def append_to_log(
        self,
        conversation_id: str,
        messages: Sequence[Message],
        window: Window | None = None,
    ) -> AppendResult:
        """Append to the conversation's log in one script (see ``SupportsLog``).

        Nothing is evicted: the messages go after the last one, less the ids
        the conversation holds or held and the system messages equal to the
        current set (rule 1, compared by ``system_key`` as the window append
        does). Given a window with a counter, each message's size under it is
        stored in its marker. One round trip, once the script is cached.

        Under ``Retention.last(n)``, an append whose numbers make a trim due
        (:meth:`~chatledger.retention.Retention.trim_due`, about one in
        ``slack``) then trims the log in one more script, the ``TRIM`` of
        :mod:`chatledger_redis.scripts`; given a window, the view of it is
        read first, as :meth:`find_window` reads it (one more round trip,
        or a few for a view that reaches far back), and the trim keeps what
        it shows. The append is stored before the trim starts: if the trim
        fails, its error is raised and the appended messages stay stored (a
        retry of the append is a no-op; the next due trim catches up).
        """
        validate_conversation_id(conversation_id)
        batch = validate_messages(messages)
        if window is not None:
            checked_window(window)
        if not batch:
            return AppendResult()
        stamped = stamp_messages(batch)
        keys, key_names = conversation_keys(self.key_prefix, conversation_id)
        args = log_append_args(stamped, window, self._ttl_ms)
        client = self.client
        self._check_arguments(client, args, first=1, per_message=1)
        outcome = self._run(
            client,
            self._append_log,
            key_names + self._record_keys(client, keys),
            args,
        )
        self._publish(client, conversation_id, outcome[-1])
        result, numbers = log_append_result(outcome[:-1], stamped)
        if numbers is not None and self.retention.trim_due(*numbers):
            keys = self._keys(conversation_id)
            shown_from = (
                None
                if window is None
                else (self._tail_view(client, keys, window)).shown_from()
            )
            self._run(
                client,
                self._trim,
                key_names,
                trim_args(
                    self.retention, numbers[1], result.appended[-1].id, shown_from
                ),
            )
        return result

    def remove_newest(self, conversation_id: str, count: int = 1) -> list[Message]:
        """Remove and return the newest ``count`` messages, oldest first, in one script.

        See ``SupportsLogRemoval``. The ``REMOVE`` script of
        :mod:`chatledger_redis.scripts` takes the tails of the turns and the
        system lists, their messages and their ids in one atomic step, so a
        pop racing appends or other pops never loses nor repeats a message,
        and one the client sends again (its reply lost) answers the same.
        When the current system set goes, the one before it is current again
        (rule 1 over what is left, decided in the script). One round trip.
        """
        validate_conversation_id(conversation_id)
        validate_removal_count(count)
        return self._removal(conversation_id, removal_args(True, [count], self._ttl_ms))

    def remove_messages(
        self, conversation_id: str, message_ids: Sequence[str]
    ) -> list[Message]:
        """Remove and return the messages of ``message_ids`` in one script.

        As :meth:`remove_newest` does (oldest first), for the ids the log
        holds; ids it does not hold (never stored, removed, or evicted) are
        ignored. Each marker is found by a binary search of its list, so a
        removal costs about the logarithm of the log's length per message,
        plus moving the markers between it and the nearer end of its list.

        Raises:
            InvalidMessageError: ``message_ids`` is not a list of non-empty
                str, before any I/O.
            MessageTooLargeError: an id is longer than one argument of a
                command may be (the server's ``proto-max-bulk-len``), before
                it is sent.
        """
        validate_conversation_id(conversation_id)
        ids = list(dict.fromkeys(validate_message_ids(message_ids)))
        if not ids:
            return []
        args = removal_args(False, ids, self._ttl_ms)
        self._check_arguments(
            self.client, args, first=1, per_message=1, item="message_ids"
        )
        return self._removal(conversation_id, args)

    def _removal(self, conversation_id: str, args: list[Any]) -> list[Message]:
        """Run the ``REMOVE`` script with ``args``; the messages it removed.

        The client may send it again (its reply lost): the script's receipt
        answers the first run's messages then, and removes nothing more.
        """
        client = self.client
        keys = self._keys(conversation_id)
        key_names = [*keys.every(), *self._record_keys(client, keys)]
        reply = self._run(client, self._remove, key_names, args)
        self._publish(client, conversation_id, reply[-1])
        return removed_messages(reply[:-1])

    def find_window(self, conversation_id: str, window: Window) -> list[Message]:
        """Return the view of ``window`` on the log, oldest first.

        One script reads the current system set and the newest rows (the
        window's limit plus a few sequence numbers, or 32 for tokens), and
        core's ``TailView`` builds the view from them; only a view reaching
        further back (a turn larger than the window, rule 3, or a token
        window over more rows) reads older rows, a page per round trip.
        Sizes stored under the window's counter are used, others measured.
        """
        validate_conversation_id(conversation_id)
        checked_window(window)
        view = self._tail_view(self.client, self._keys(conversation_id), window)
        return view.messages()

    def _tail_view(
        self, client: Client, keys: ConversationKeys, window: Window
    ) -> TailView:
        """Read the rows the view of ``window`` needs, newest first, into a view."""
        reads = self._tail_reads(window)
        rows = next(reads)
        reply = self._run(
            client,
            self._view,
            (keys.meta, keys.msgs, keys.turns, keys.system),
            [rows, window.counter_id or ""],
        )
        read = TailRead(reply, window)
        while not read.view.feed(read.rows()) and not read.complete:
            reply = self._run(
                client,
                self._tail,
                (keys.meta, keys.msgs, keys.turns),
                read.further(next(reads)),
            )
            read.extend(reply)
        return read.view

    def find_messages_page(
        self,
        conversation_id: str,
        cursor: str | None = None,
        limit: int = DEFAULT_MESSAGE_PAGE_SIZE,
        newest_first: bool = True,
    ) -> MessagePage:
        """Return up to ``limit`` messages of the log after ``cursor``, in one script.

        The script reads the page's range of sequence numbers (and one row
        more, to tell whether another page follows), so a page costs about
        its size, however long the log.
        """
        validate_conversation_id(conversation_id)
        after, limit = check_message_page(cursor, limit, newest_first=newest_first)
        keys = self._keys(conversation_id)
        reply = self._run(
            self.client,
            self._page,
            (keys.meta, keys.msgs, keys.turns, keys.system),
            page_args(after, limit, newest_first),
        )
        return message_page(page_rows(reply), limit, newest_first=newest_first)

    # -- conversation records ----------------------------------------------------

    def _record_keys(self, client: Client, keys: ConversationKeys) -> tuple[str, ...]:
        """The keys a writing script takes after the conversation's: its record,
        and on plain Redis the listing index, which the script then updates
        itself (on Cluster it is in another slot: see :meth:`_publish`)."""
        # RedisCluster is a runtime protocol: its isinstance costs ~0.4 us,
        # a plain client's type check nothing.
        if type(client) is not Redis and isinstance(client, RedisCluster):
            return (keys.info,)
        return (keys.info, *self._index.all())

    def _publish(self, client: Client, conversation_id: str, op: Any) -> None:
        """Send the index update a writing script answered, if it left one.

        Only on Redis Cluster: one more round trip, to the index's node
        (:mod:`chatledger_redis.records` says what a crash before it leaves).
        """
        args = index_update(conversation_id, op)
        if args is not None:
            self._run(client, self._index_script, self._index.all(), args)

    def set_conversation_info(
        self,
        conversation_id: str,
        *,
        owner: str | Literal[Unset.UNSET] | None = UNSET,
        metadata: Mapping[str, Any] | Literal[Unset.UNSET] = UNSET,
    ) -> ConversationInfo:
        """Set the owner or the metadata in one script; return the record.

        See :class:`chatledger.SupportsConversationInfo`: left out, each
        is kept; ``owner=None`` clears the owner; ``metadata`` replaces the
        whole metadata (``{}`` clears it). The ``SET_INFO`` script of
        :mod:`chatledger_redis.scripts` makes the record of a new id (no
        messages), sets what was given, slides the TTL of every key of the
        conversation and reads the record back, atomically; ``updated_at``
        stays. One round trip on plain Redis, where the script updates the
        listing index too; two on Cluster (the index's update follows).

        Raises:
            InvalidConversationIdError: the id is not valid, before any I/O.
            InvalidConversationInfoError: a bad owner or metadata, before any
                I/O.
        """
        update = check_conversation_info(conversation_id, owner, metadata)
        args = set_info_args(update, self._ttl_ms)
        client = self.client
        keys = self._keys(update.conversation_id)
        reply = self._run(
            client,
            self._set_info,
            [*keys.all(), *self._record_keys(client, keys)],
            args,
        )
        self._publish(client, update.conversation_id, reply[5])
        return record_of(update.conversation_id, *reply[:5])

    def get_conversation_info(self, conversation_id: str) -> ConversationInfo | None:
        """Return the record of one conversation, or ``None``; one script.

        The ``INFO`` script reads the record's hash and counts the messages
        (``HLEN``) together. A conversation an earlier release wrote has no
        record until its next write or :meth:`set_conversation_info`.
        """
        validate_conversation_id(conversation_id)
        keys = self._keys(conversation_id)
        reply = self._run(self.client, self._info, record_keys(keys), [])
        if not reply:
            return None
        created, updated, _, owner, metadata, count = reply
        return record_of(conversation_id, created, updated, owner, metadata, count)

    def find_conversations(
        self,
        *,
        owner: str | None = None,
        metadata: Mapping[str, JsonValue] | None = None,
        updated_before: datetime | None = None,
        cursor: str | None = None,
        limit: int = DEFAULT_CONVERSATION_PAGE_SIZE,
    ) -> ConversationInfoPage:
        """Return up to ``limit`` records, newest ``updated_at`` first.

        Read from the listing index (:class:`chatledger_redis.keys.IndexKeys`),
        never by a scan: one ``ZREVRANGEBYLEX`` of the owner's range of the
        owners' index (given an owner) or of the index by update, from the
        cursor's place down, of ``limit + 1`` entries, then the records
        behind them in one pipeline of the ``INFO`` script (on Cluster, a
        batch per node): two round trips for a page, whose cost grows with
        the page, not with the number of records or of other owners'
        entries. A metadata filter is compared here on the decoded records,
        reading on in larger batches while too few match.

        An entry whose record is gone (a delete or an expiry the index did
        not see) is not listed and is dropped; one that lags its record is
        brought up to it, after the page is read
        (:mod:`chatledger_redis.records`).

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
        client = self.client
        listing = RecordListing(query, self._index)
        while not listing.done:
            key, high, low, count = listing.read()
            members = client.zrevrangebylex(key, high, low, start=0, num=count)
            ids = listing.entries(members)
            if ids:
                listing.feed(self._read_records(client, ids))
        for args in listing.repairs:
            self._run(client, self._index_script, self._index.all(), args)
        return listing.page()

    def repair_conversation_index(self) -> int:
        """Bring the listing index up to every record; return the entries changed.

        Only Redis Cluster needs it, and only after a client died between a
        write and its index update (:mod:`chatledger_redis.records`): a
        conversation whose first update was lost so is not listed until its
        next write, or this call. It scans the records under the key prefix
        (``SCAN``, every primary), reads them in pipelines and sends each
        one's update, which the index applies only where it holds an older
        version: safe beside writers, and a no-op on an index in step.
        Entries whose record is gone are left to the listings, which drop
        them as they meet them.
        """
        client = self.client
        pattern = info_key_pattern(self.key_prefix)
        found = [k for k in client.scan_iter(match=pattern, count=1000)]
        ids = ids_of_info_keys(self.key_prefix, found)
        changed = 0
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            for conversation_id, reply in zip(
                chunk, self._read_records(client, chunk), strict=True
            ):
                if reply:
                    args = record_update(conversation_id, reply)
                    changed += int(
                        self._run(client, self._index_script, self._index.all(), args)
                    )
        return changed

    def _read_records(self, client: Client, ids: list[str]) -> list[Any]:
        """The INFO answers of ``ids``: one pipeline (on Cluster, a batch a node)."""
        for attempt in range(2):
            pipe = client.pipeline(transaction=False)
            for conversation_id in ids:
                keys = record_keys(self._keys(conversation_id))
                pipe.execute_command("EVALSHA", self._info.sha, 2, *keys)
            try:
                return list(pipe.execute())
            except NoScriptError:
                if attempt:
                    raise
                # A restarted or flushed server: load the script, once.
                client.script_load(INFO)
        raise AssertionError("unreachable")

    def _check_arguments(
        self,
        client: Client,
        args: list[Any],
        *,
        first: int,
        per_message: int,
        item: str = "messages",
    ) -> None:
        """Refuse, before sending, a script argument the server would not read.

        The server's ``proto-max-bulk-len`` is asked once, and only when an
        argument may pass the smallest value a server allows
        (:mod:`chatledger_redis.bulk_limit`).
        """
        if not may_pass_smallest_limit(args):
            return
        if self._max_bulk_bytes is None:
            try:
                reply = client.config_get(PROTO_MAX_BULK_LEN)
            except ResponseError:  # CONFIG refused (an ACL, a managed server)
                reply = None
            self._max_bulk_bytes = limit_from_reply(reply)
        check_arguments(
            args, self._max_bulk_bytes, first=first, per_message=per_message, item=item
        )

    def _run(
        self,
        client: Client,
        script: Script,
        keys: Sequence[str],
        args: Sequence[Any],
    ) -> Any:
        # EVALSHA sent directly: Script.__call__ copies the arguments and
        # imports on every call. It is still the fallback that loads the
        # script after a NOSCRIPT (a restarted or flushed server, a new node).
        try:
            return client.execute_command(  # type: ignore[no-untyped-call]
                "EVALSHA", script.sha, len(keys), *keys, *args
            )
        except NoScriptError:
            return script(keys=keys, args=args, client=client)

    def _remeasure(
        self, client: Client, keys: ConversationKeys, counter: str, window: Window
    ) -> None:
        """Measure the stored history with ``window`` and store its sizes.

        The write token is read before the messages and the system markers
        (whose batches the new markers keep), and the rewrite only happens if
        it is unchanged, so the sizes always match the markers.
        Every stored message is measured, the log's superseded system
        messages too, so this grows with the stored history.
        """
        pipe = client.pipeline(transaction=False)
        pipe.hmget(keys.meta, "ver", "sb")
        pipe.hgetall(keys.msgs)
        pipe.lrange(keys.system, 0, -1)
        state, stored, system = pipe.execute()
        args = resize_args(counter, state, stored, window, system)
        if args is not None:
            self._resize(
                keys=[keys.meta, keys.turns, keys.system], args=args, client=client
            )
