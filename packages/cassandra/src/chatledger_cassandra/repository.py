"""Conversation memory in Apache Cassandra (and ScyllaDB), on cassandra-driver.

Example (needs a Cassandra server):
    from cassandra.cluster import Cluster
    from chatledger import Message, MessageWindowChatMemory
    from chatledger_cassandra import CassandraChatMemoryRepository

    session = Cluster(["127.0.0.1"]).connect()
    repository = CassandraChatMemoryRepository(session, keyspace="chat")
    memory = MessageWindowChatMemory(repository, max_messages=20)
    memory.add("c1", Message.user("Hello"))

    # or let the repository own the cluster:
    with CassandraChatMemoryRepository.from_url("cassandra://db1,db2/chat") as repo:
        ...

Design. One partition per conversation, its rows clustered by a per-conversation
sequence number (see :mod:`chatledger_cassandra.statements` for the table). The
partition's static column ``next_seq`` is both the next free sequence number
and the conversation's version. **Every write is a lightweight transaction on
that partition**: a conditional single-partition batch whose condition is
``IF next_seq = <version read>`` (``IF next_seq = null`` for a new one) and
whose other statements insert the new messages, range-delete the evicted ones
and rewrite the survivors under a refreshed TTL. A lost condition means another
writer got there first: the repository reads again and retries.

Why not reserve sequence numbers with an LWT on a separate conversation row and
then send a plain batch, the usual recipe? Because reserving numbers does not
serialize the read-decide-write of a window append: two appenders that reserve
in turn can each read the partition before the other's batch lands, and then
both miss each other's message ids (a retried append duplicates) and evict by a
wrong count; a crash between the reservation and the batch leaves a gap. With
the version check inside the batch, the check, the inserts, the evictions and
the TTL refresh are one Paxos round: atomic and isolated (a single-partition
batch), linearizable (the condition), gap-free (numbers are taken only by a
committed write) and free of client clocks: every write of the partition gets
its timestamp from the Paxos ballot, never from a client, so clock skew can
neither reorder messages nor let a delete shadow a later insert. The DataStax
warning against mixing LWT and non-LWT writes on one partition is kept the
strict way: no non-LWT write ever touches a conversation's partition. A
conditional batch may carry range deletions (Cassandra applies them inside the
CAS request) as long as the condition sits on another statement, which is how
the plans are built (:mod:`chatledger_cassandra.plan`).

The price is an LWT per write (about four round trips) plus a plain read: an
append reads the index columns of the conversation (ids, roles, sizes: no
payloads except the system messages'), then commits. The read need not be
serial: a read that missed a newer write only makes the version check fail.
Writers sharing one repository take turns on a per-conversation lock
(:mod:`chatledger_cassandra.locks`), so only writers in different processes
race; a loser retries with jittered back-off, at most ``max_attempts`` times,
then raises :class:`~chatledger_cassandra.errors.ContentionError`. A CAS that times out
(``WriteTimeout`` of write type CAS) has an unknown outcome; the repository
reads again and retries, and the message ids make a second application a no-op.

TTL. With a ``ttl``, every write carries ``USING TTL`` and an append rewrites
every surviving row (system messages included) and ``next_seq`` with the new
TTL in the same batch, so the cells of a conversation always expire together
and a window can never start mid-turn because its oldest cells expired first.
The cost is that a TTL'd append reads and rewrites the payloads of the window.
Cassandra TTLs have one-second precision (a ``ttl`` is rounded up) and a
maximum of 20 years. Cassandra before 5.0 (and 5.0 in storage compatibility
mode 4) stores expiry times as 32-bit seconds: a write whose expiry falls after
2038-01-19T03:14:07Z is rejected or capped by the server's
``expiration_date_overflow_policy``.

Listing pages through the whole token ring with ``SELECT DISTINCT`` and driver
paging. Deleting a conversation (or ``save_all(id, [])``) deletes its whole
partition, so it is never listed again.

The record of evicted ids (:mod:`chatledger.evicted_ids`), which keeps a late
retry of an append a no-op after the window evicted its messages, is lane 2 of
the conversation's own partition: one row per evicted id (``msg_id``), numbered
by the evicted message's sequence number, at most ``EVICTED_IDS_KEPT +
EVICTED_IDS_TRIM_STEP`` (1,250) rows. The read an append decides on returns it
with the message ids; the conditional batch that commits the append adds to it
and trims it. ``save_all`` range-deletes it with the old messages, deleting the
conversation deletes it with the partition, and ``drop_schema`` with the table.
A window that takes every message out keeps the partition for the record, with
its static ``emptied`` set, and such a partition is not listed, paged or
counted as a conversation. With a TTL, each row of the record is written with
the conversation's TTL and is not rewritten by later appends: it never outlives
the conversation, and a retry that comes more than one TTL after its messages
were evicted is no longer recognised.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any, TypeVar

from cassandra import ConsistencyLevel

from chatledger.adapters import (
    AppendResult,
    ClosingContext,
    ConversationPage,
    FaultPoints,
    Message,
    Window,
)
from chatledger_cassandra.connecting import url_settings
from chatledger_cassandra.locks import ConversationLocks
from chatledger_cassandra.requests import (
    Commit,
    Pause,
    Read,
    Request,
    bind_read,
    commit_statement,
    configure_prepared,
)
from chatledger_cassandra.sizes import DEFAULT_MAX_WRITE_BYTES
from chatledger_cassandra.steps import (
    MAX_TTL_SECONDS,
    Call,
    Steps,
    TableSteps,
    ttl_seconds,
)

__all__ = ["MAX_TTL_SECONDS", "CassandraChatMemoryRepository", "ttl_seconds"]

_T = TypeVar("_T")


class CassandraChatMemoryRepository(ClosingContext):
    """Conversations in one Cassandra table, one partition each.

    Implements :class:`chatledger.ChatMemoryRepository` and the atomic
    :class:`chatledger.SupportsWindowAppend`. Construction validates the names,
    creates the schema when asked; each statement is prepared once, on first use.
    What every call reads, writes and retries is decided by
    :class:`chatledger_cassandra.steps.TableSteps`, which the async twin shares;
    this class runs those steps on ``session.execute``.

    Attributes:
        keyspace: The keyspace of the table.
        table: The table name.
        ttl: The TTL in seconds, ``0`` when conversations do not expire.
        fault_points: Test hooks reached at the named steps of every write.
    """

    def __init__(
        self,
        session: Any,
        *,
        keyspace: str = "chatledger",
        table: str = "chat_memory",
        ttl: timedelta | float | None = None,
        create_schema: bool = True,
        create_keyspace: bool = False,
        replication: Mapping[str, object] | None = None,
        consistency_level: int = ConsistencyLevel.LOCAL_QUORUM,
        serial_consistency_level: int = ConsistencyLevel.LOCAL_SERIAL,
        max_attempts: int = 100,
        page_size: int = 5000,
        max_write_bytes: int = DEFAULT_MAX_WRITE_BYTES,
    ) -> None:
        """Use ``session`` (a connected ``cassandra.cluster.Session``).

        Args:
            session: The driver session; the repository never shuts it down.
            keyspace: The keyspace holding the table.
            table: The table name.
            ttl: Sliding time-to-live of a whole conversation (a ``timedelta``
                or seconds), refreshed by every write; ``None`` keeps forever.
            create_schema: Run ``CREATE TABLE IF NOT EXISTS`` now.
            create_keyspace: Run ``CREATE KEYSPACE IF NOT EXISTS`` now.
            replication: Replication options for a created keyspace, e.g.
                ``{"class": "NetworkTopologyStrategy", "dc1": 3}``; the default,
                SimpleStrategy with one replica, suits development only.
            consistency_level: Consistency of reads (those a write decides on
                too) and of the commit of every write. Below a quorum, a write
                may retry until the replica it reads has caught up.
            serial_consistency_level: Consistency of the Paxos phase of every
                write.
            max_attempts: How often a write is tried when other writers win the
                race, before :class:`ContentionError`.
            page_size: Rows per page when listing and reading.
            max_write_bytes: The largest write (one conditional batch) sent;
                a larger one raises ``MessageTooLargeError`` before it is sent.
                The default is the server's default limit of a request and of
                a mutation (16 MiB); raise it only with the server's
                ``native_transport_max_message_size`` and ``max_mutation_size``.

        Raises:
            InvalidNameError: for a bad keyspace, table or replication option.
            InvalidTTLError: for a bad ``ttl``.
        """
        if session is None:
            raise TypeError("session must be a connected cassandra Session")
        self._steps = TableSteps(
            keyspace=keyspace,
            table=table,
            ttl=ttl,
            replication=replication,
            max_attempts=max_attempts,
            page_size=page_size,
            max_write_bytes=max_write_bytes,
        )
        self.keyspace = keyspace
        self.table = table
        self.ttl = self._steps.ttl
        self._session = session
        self._cluster: Any = None
        self._consistency = consistency_level
        self._serial = serial_consistency_level
        if create_keyspace:
            session.execute(self._steps.keyspace_ddl)
        if create_schema:
            self.create_schema()
        # Prepared on first use: with create_schema=False the table may not exist
        # yet, and the server refuses to prepare a statement on a missing table.
        self._texts = self._steps.cql.prepared()
        self._prepared: dict[str, Any] = {}
        self._prepare_lock = threading.Lock()
        self._writers = ConversationLocks()

    @classmethod
    def from_url(cls, url: str, **options: Any) -> CassandraChatMemoryRepository:
        """Connect to ``cassandra://[user:pass@]host[:port][,host...][/keyspace]``.

        The repository owns the cluster it opens: :meth:`close` (or leaving a
        ``with`` block) shuts it down. Query options (``table``, ``ttl``,
        ``create_schema``, ``create_keyspace``, ``replication_factor``,
        ``local_dc``, ``protocol_version``, ``connect_timeout``) are applied
        first, then ``options`` override them.

        Raises:
            InvalidURLError: for a URL that cannot be parsed.
        """
        from cassandra.cluster import Cluster

        cluster_args, settings = url_settings(url, options)
        cluster = Cluster(**cluster_args)
        try:
            repository = cls(cluster.connect(), **settings)
        except BaseException:
            cluster.shutdown()
            raise
        repository._cluster = cluster
        return repository

    def close(self) -> None:
        """Shut down the cluster if :meth:`from_url` opened it; else do nothing."""
        if self._cluster is not None:
            self._cluster.shutdown()
            self._cluster = None

    def __repr__(self) -> str:
        return (
            f"CassandraChatMemoryRepository(keyspace={self.keyspace!r}, "
            f"table={self.table!r}, ttl={self.ttl or None!r})"
        )

    @property
    def session(self) -> Any:
        """The driver session every statement runs on."""
        return self._session

    @property
    def fault_points(self) -> FaultPoints:
        """Test hooks reached at the named steps of every write."""
        return self._steps.fault_points

    def create_schema(self) -> None:
        """Create the table if it is missing (idempotent)."""
        self._session.execute(self._steps.cql.create_table)

    def drop_schema(self) -> None:
        """Drop the table and every conversation in it (the keyspace stays)."""
        self._session.execute(f"DROP TABLE IF EXISTS {self._steps.cql.qualified}")

    # -- the calls ---------------------------------------------------------

    def find_conversation_ids(self) -> list[str]:
        """Return every conversation id; pages through the whole token ring."""
        return self._run(self._steps.find_conversation_ids())

    def count_messages(self, conversation_id: str) -> int:
        """Return how many messages a conversation holds; the server counts."""
        return self._run(self._steps.count_messages(conversation_id))

    def find_conversation_ids_page(
        self, cursor: str | None = None, limit: int = 100
    ) -> ConversationPage:
        """Return up to ``limit`` conversation ids after ``cursor``, in token order.

        One range query over the partition tokens per page (more only when
        partitions that hold no conversation fill it,
        :mod:`chatledger_cassandra.listing`): the cursor is the token of the
        last id of the previous page, so each page starts where the last ended
        on the ring, whatever the cluster's size.

        Raises:
            InvalidPageError: as the protocol says, and for a cursor that is
                not a token this method gave.
        """
        return self._run(self._steps.find_conversation_ids_page(cursor, limit))

    def find_by_conversation_id(self, conversation_id: str) -> list[Message]:
        """Return one conversation's messages, oldest first (``[]`` if none)."""
        return self._run(self._steps.find_by_conversation_id(conversation_id))

    def save_all(self, conversation_id: str, messages: Sequence[Message]) -> None:
        """Replace a conversation atomically; an empty list deletes it.

        Raises:
            MessageTooLargeError: before any I/O, if the messages cannot fit in
                one write (``max_write_bytes``).
        """
        self._run(self._steps.save_all(conversation_id, messages))

    def delete_by_conversation_id(self, conversation_id: str) -> None:
        """Delete a conversation's partition; an unknown id does nothing."""
        self._run(self._steps.delete_by_conversation_id(conversation_id))

    def append_to_window(
        self, conversation_id: str, messages: Sequence[Message], window: Window
    ) -> AppendResult:
        """Append and evict in one conditional batch (``SupportsWindowAppend``).

        Raises:
            MessageTooLargeError: before any I/O, if the new messages cannot
                fit in one write (``max_write_bytes``); before writing, if the
                whole batch cannot (with a TTL it rewrites the window).
        """
        return self._run(
            self._steps.append_to_window(conversation_id, messages, window)
        )

    # -- the I/O -----------------------------------------------------------

    def _run(self, call: Call[_T]) -> _T:
        """Run ``call``'s steps, taking turns with this process's other writers."""
        if call.writer is None:
            return self._drive(call.steps)
        with self._writers.hold(call.writer):
            return self._drive(call.steps)

    def _drive(self, steps: Steps[_T]) -> _T:
        """Perform each request of ``steps``; hand each answer or error back."""
        answer: Any = None
        error: BaseException | None = None
        while True:
            try:
                request = steps.send(answer) if error is None else steps.throw(error)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
            answer, error = None, None
            try:
                answer = self._perform(request)
            except BaseException as raised:
                error = raised

    def _perform(self, request: Request) -> Any:
        if isinstance(request, Pause):
            time.sleep(request.seconds)
            return None
        if isinstance(request, Read):
            bound = bind_read(self._statement(request.statement), request)
            return list(self._session.execute(bound))
        assert isinstance(request, Commit)
        statement = commit_statement(
            request.plan, self._statement, self._consistency, self._serial
        )
        return list(self._session.execute(statement))

    def _statement(self, name: str) -> Any:
        """Return the prepared statement ``name``, preparing it once."""
        prepared = self._prepared.get(name)
        if prepared is None:
            with self._prepare_lock:
                prepared = self._prepared.get(name)
                if prepared is None:
                    prepared = configure_prepared(
                        self._session.prepare(self._texts[name]),
                        self._consistency,
                        self._serial,
                    )
                    self._prepared[name] = prepared
        return prepared
