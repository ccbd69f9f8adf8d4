"""``AsyncCassandraChatMemoryRepository``: conversations in Cassandra, for asyncio.

Example (needs a Cassandra server):
    import asyncio

    from chatledger import AsyncMessageWindowChatMemory, Message
    from chatledger_cassandra import AsyncCassandraChatMemoryRepository

    async def main():
        url = "cassandra://127.0.0.1:9042/chatledger?create_keyspace=true"
        async with AsyncCassandraChatMemoryRepository.from_url(url) as repository:
            memory = AsyncMessageWindowChatMemory(repository, max_messages=20)
            await memory.add("c1", Message.user("Hello"))
            await memory.get("c1")

    asyncio.run(main())

The async twin of :class:`chatledger_cassandra.CassandraChatMemoryRepository`:
the same table, options, names, checks and behaviour, because both run the
same steps (:class:`chatledger_cassandra.steps.TableSteps`): which rows to
read, what to write, when to read again, when to give up. This class only
performs the I/O those steps ask for, with ``session.execute_async``: each
statement's ``ResponseFuture`` is delivered to the event loop by
:mod:`chatledger_cassandra.bridge`, so no thread waits for a statement and
the event loop never blocks on one.

Every write is one conditional single-partition batch, applied by the server
whole or not at all. A call cancelled before its batch is sent sends nothing;
one cancelled after waits for the server's answer before the cancellation
returns (:func:`chatledger.adapters.settled`), so the batch cannot land
later: the conversation holds the old state or the new, never a part, for
good. The repository still forgets what it remembered of the conversation
after a cancelled commit and reads it again on the next write.

Nothing is opened when the repository is made: :meth:`from_url` only checks
the URL and the options. The first call connects (when :meth:`from_url` made
the repository), creates the keyspace and the table when asked, and prepares
the statements, once, behind a lock that concurrent first calls wait on; or
call :meth:`create_schema` first. cassandra-driver has no asynchronous form of
connecting, preparing or shutting down, so those three run on a thread of
their own (:func:`chatledger_cassandra.bridge.off_loop`), once each in the
repository's life.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any, TypeVar

from cassandra import ConsistencyLevel, DriverException

from chatledger.adapters import (
    AppendResult,
    AsyncClosingContext,
    ConversationPage,
    FaultPoints,
    Message,
    Window,
    settled,
)
from chatledger_cassandra.bridge import all_rows, off_loop
from chatledger_cassandra.connecting import url_settings
from chatledger_cassandra.locks import AsyncConversationLocks
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
from chatledger_cassandra.steps import Call, Steps, TableSteps

__all__ = ["AsyncCassandraChatMemoryRepository"]

_T = TypeVar("_T")
#: Stands for the session a repository made by ``from_url`` opens on first use.
_NOT_OPENED: Any = object()


class AsyncCassandraChatMemoryRepository(AsyncClosingContext):
    """Conversations in one Cassandra table, one partition each, for asyncio.

    Implements :class:`chatledger.AsyncChatMemoryRepository`, the atomic
    :class:`chatledger.AsyncSupportsWindowAppend`, counting and paging. Every
    option, name and rule is
    :class:`chatledger_cassandra.CassandraChatMemoryRepository`'s (see its
    module for the design, TTL and the record of evicted ids); only the I/O
    is awaited.

    Args:
        session: A connected ``cassandra.cluster.Session``; the repository
            never shuts it down.
        keyspace: The keyspace holding the table.
        table: The table name.
        ttl: Sliding time-to-live of a whole conversation (a ``timedelta`` or
            seconds), refreshed by every write; ``None`` keeps forever.
        create_schema: Run ``CREATE TABLE IF NOT EXISTS`` on the first call.
        create_keyspace: Run ``CREATE KEYSPACE IF NOT EXISTS`` on the first call.
        replication: Replication options for a created keyspace.
        consistency_level: Consistency of reads and of the commit of every write.
        serial_consistency_level: Consistency of the Paxos phase of every write.
        max_attempts: How often a write is tried when other writers win the
            race, before ``ContentionError``.
        page_size: Rows per page when listing and reading.
        max_write_bytes: The largest write sent; a larger one raises
            ``MessageTooLargeError`` before it is sent.

    Attributes:
        keyspace: The keyspace of the table.
        table: The table name.
        ttl: The TTL in seconds, ``0`` when conversations do not expire.

    Raises:
        InvalidNameError: for a bad keyspace, table or replication option.
        InvalidTTLError: for a bad ``ttl``.
        TypeError: for a missing session.
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
        """Check the options; nothing is sent before the first call."""
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
        self._session: Any = None if session is _NOT_OPENED else session
        self._consistency = consistency_level
        self._serial = serial_consistency_level
        self._create_keyspace = bool(create_keyspace)
        self._create_schema = bool(create_schema)
        self._cluster_args: dict[str, Any] | None = None
        self._cluster: Any = None
        self._opening: asyncio.Future[tuple[Any, Any]] | None = None
        self._closed = False
        self._ready = False
        self._ready_lock = asyncio.Lock()
        self._prepared: dict[str, Any] = {}
        self._writers = AsyncConversationLocks()

    @classmethod
    def from_url(cls, url: str, **options: Any) -> AsyncCassandraChatMemoryRepository:
        """A repository for ``cassandra://[user:pass@]host[:port][,host...][/keyspace]``.

        No I/O: the URL and options are checked now, the cluster is made and
        connected on the first call. The repository owns that cluster:
        :meth:`aclose` (or leaving ``async with``) shuts it down. The options
        are :meth:`chatledger_cassandra.CassandraChatMemoryRepository.from_url`'s.

        Raises:
            InvalidURLError: for a URL that cannot be parsed.
            InvalidNameError: for a bad keyspace, table or replication option.
            InvalidTTLError: for a bad ``ttl``.
        """
        cluster_args, settings = url_settings(url, options)
        repository = cls(_NOT_OPENED, **settings)
        repository._cluster_args = cluster_args
        return repository

    def __repr__(self) -> str:
        return (
            f"AsyncCassandraChatMemoryRepository(keyspace={self.keyspace!r}, "
            f"table={self.table!r}, ttl={self.ttl or None!r})"
        )

    @property
    def session(self) -> Any:
        """The driver session, ``None`` until a repository made by ``from_url``
        has connected."""
        return self._session

    @property
    def fault_points(self) -> FaultPoints:
        """Test hooks reached at the named steps of every write."""
        return self._steps.fault_points

    async def aclose(self) -> None:
        """Shut down the cluster if :meth:`from_url` made it; calling twice is fine."""
        if self._closed:
            return
        self._closed = True
        if self._cluster_args is None:
            return  # a given session stays open
        if self._session is None and self._opening is not None:
            try:
                await asyncio.shield(self._opening)
            except Exception:
                return  # it never connected: nothing to shut down
            self._cluster, self._session = self._opening.result()
        if self._cluster is not None:
            await off_loop(self._cluster.shutdown)

    # -- schema --------------------------------------------------------------

    async def create_schema(self) -> None:
        """Create the table if it is missing (idempotent).

        The keyspace first, if ``create_keyspace`` asked for it and the first
        call has not made it yet.
        """
        await self._make_schema(table=True)

    async def _make_schema(self, *, table: bool) -> None:
        session = await self._connected()
        if self._create_keyspace:
            await all_rows(session.execute_async(self._steps.keyspace_ddl))
            self._create_keyspace = False
        if table:
            await all_rows(session.execute_async(self._steps.cql.create_table))
            self._create_schema = False

    async def drop_schema(self) -> None:
        """Drop the table and every conversation in it (the keyspace stays)."""
        session = await self._connected()
        ddl = f"DROP TABLE IF EXISTS {self._steps.cql.qualified}"
        await all_rows(session.execute_async(ddl))

    # -- the calls -----------------------------------------------------------

    async def find_conversation_ids(self) -> list[str]:
        """Return every conversation id; pages through the whole token ring."""
        return await self._run(self._steps.find_conversation_ids())

    async def count_messages(self, conversation_id: str) -> int:
        """Return how many messages a conversation holds; the server counts."""
        return await self._run(self._steps.count_messages(conversation_id))

    async def find_conversation_ids_page(
        self, cursor: str | None = None, limit: int = 100
    ) -> ConversationPage:
        """Return up to ``limit`` conversation ids after ``cursor``, in token order.

        Raises:
            InvalidPageError: as the protocol says, and for a cursor that is
                not a token this method gave.
        """
        return await self._run(self._steps.find_conversation_ids_page(cursor, limit))

    async def find_by_conversation_id(self, conversation_id: str) -> list[Message]:
        """Return one conversation's messages, oldest first (``[]`` if none)."""
        return await self._run(self._steps.find_by_conversation_id(conversation_id))

    async def save_all(self, conversation_id: str, messages: Sequence[Message]) -> None:
        """Replace a conversation atomically; an empty list deletes it.

        Raises:
            MessageTooLargeError: before any I/O, if the messages cannot fit in
                one write (``max_write_bytes``).
        """
        await self._run(self._steps.save_all(conversation_id, messages))

    async def delete_by_conversation_id(self, conversation_id: str) -> None:
        """Delete a conversation's partition; an unknown id does nothing."""
        await self._run(self._steps.delete_by_conversation_id(conversation_id))

    async def append_to_window(
        self, conversation_id: str, messages: Sequence[Message], window: Window
    ) -> AppendResult:
        """Append and evict in one conditional batch (``AsyncSupportsWindowAppend``).

        Raises:
            MessageTooLargeError: before any I/O, if the new messages cannot
                fit in one write (``max_write_bytes``); before writing, if the
                whole batch cannot (with a TTL it rewrites the window).
        """
        return await self._run(
            self._steps.append_to_window(conversation_id, messages, window)
        )

    # -- the I/O -------------------------------------------------------------

    async def _run(self, call: Call[_T]) -> _T:
        """Run ``call``'s steps, taking turns with this loop's other writers."""
        if call.needs_server:
            await self._made_ready()
        if call.writer is None:
            return await self._drive(call.steps)
        async with self._writers.hold(call.writer):
            return await self._drive(call.steps)

    async def _drive(self, steps: Steps[_T]) -> _T:
        """Perform each request of ``steps``; hand each answer or error back.

        A cancellation is handed back too, so the steps forget what they
        cannot know, then it goes on.
        """
        answer: Any = None
        error: BaseException | None = None
        while True:
            try:
                request = steps.send(answer) if error is None else steps.throw(error)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
            answer, error = None, None
            try:
                answer = await self._perform(request)
            except BaseException as raised:
                error = raised

    async def _perform(self, request: Request) -> Any:
        if isinstance(request, Pause):
            await asyncio.sleep(request.seconds)
            return None
        if isinstance(request, Read):
            bound = bind_read(self._prepared[request.statement], request)
            return await all_rows(self._session.execute_async(bound))
        assert isinstance(request, Commit)
        # A cancellation asked for while the steps ran lands here, before the
        # batch is sent: then nothing is written.
        await asyncio.sleep(0)
        statement = commit_statement(
            request.plan, self._prepared.__getitem__, self._consistency, self._serial
        )
        # Once sent, the batch is carried out whatever the client does: a
        # cancellation waits for its answer, so the write does not land
        # after the cancellation returned.
        return await settled(all_rows(self._session.execute_async(statement)))

    async def _made_ready(self) -> None:
        """Connect, make the schema and prepare the statements, once."""
        if self._ready:
            return
        async with self._ready_lock:
            if self._ready:
                return
            await self._make_schema(table=self._create_schema)
            session = await self._connected()
            texts = self._steps.cql.prepared()
            consistency, serial = self._consistency, self._serial
            self._prepared = await off_loop(
                lambda: {
                    name: configure_prepared(session.prepare(text), consistency, serial)
                    for name, text in texts.items()
                }
            )
            self._ready = True

    async def _connected(self) -> Any:
        """The session; a repository made by ``from_url`` connects on first use."""
        if self._session is not None:
            return self._session
        if self._closed or self._cluster_args is None:
            raise DriverException("Cluster is already shut down")
        opening = self._opening
        if opening is None or (opening.done() and opening.exception() is not None):
            opening = self._opening = off_loop(self._open, _shutdown)
        # Shielded: a cancelled first call leaves the connection to the next.
        cluster, session = await asyncio.shield(opening)
        if self._session is None:
            self._cluster, self._session = cluster, session
        return self._session

    def _open(self) -> tuple[Any, Any]:
        """Make the cluster and connect it (on a thread of its own)."""
        from cassandra.cluster import Cluster

        assert self._cluster_args is not None
        cluster = Cluster(**self._cluster_args)
        try:
            return cluster, cluster.connect()
        except BaseException:
            cluster.shutdown()
            raise


def _shutdown(opened: tuple[Any, Any]) -> None:
    opened[0].shutdown()
