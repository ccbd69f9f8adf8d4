"""Chat memory in a SQL database for asyncio, through SQLAlchemy's ``AsyncEngine``.

Example:
    import asyncio

    from chatledger import AsyncMessageWindowChatMemory, Message
    from chatledger_sql import AsyncSqlChatMemoryRepository

    async def main():
        repository = AsyncSqlChatMemoryRepository.from_url(
            "sqlite+aiosqlite:///chat.db"  # or postgresql+asyncpg://..., ...
        )
        memory = AsyncMessageWindowChatMemory(repository, max_messages=20)
        await memory.add("c1", Message.user("Hello"))
        await memory.get("c1")
        await repository.aclose()

    asyncio.run(main())

The async twin of :class:`chatledger_sql.SqlChatMemoryRepository`: the same
tables, statements, dialects, row encoding, append planner, retries and
write path (one transaction that locks the conversation's row), on the
database's asyncio driver: ``postgresql+psycopg`` (psycopg 3's async
connection), ``postgresql+asyncpg``, ``sqlite+aiosqlite``, ``mysql+asyncmy``
and ``mysql+aiomysql`` (MariaDB too, also as ``mariadb+...``). The
repository's own statements are awaited on an ``AsyncConnection``; a
dialect's hooks, written against a ``Connection``, run through
``AsyncConnection.run_sync``, SQLAlchemy's bridge that runs them on the same
async connection and driver.

Nothing here does I/O before the first call: the dialect, when it can only be
told after connecting (MariaDB behind ``mysql+...://``), is detected then, and
the tables are created then, once, behind a lock (or by ``await
repository.create_schema()``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import Connection, event, exc
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from chatledger.adapters import (
    AppendResult,
    AsyncClosingContext,
    AsyncStoredWindow,
    ConversationPage,
    FaultPoints,
    Message,
    StoredEntry,
    Window,
    needs_stored_system,
    plan_append_async,
    rows_to_peek,
    settled,
    stamp_messages,
    to_ttl,
    utc_now,
    validate_conversation_id,
    validate_messages,
    validate_page_request,
)
from chatledger_sql.dialects import DialectSpec, resolve_dialect
from chatledger_sql.dialects.base import (
    ConversationState,
    RetryTransaction,
    SqlDialect,
)
from chatledger_sql.repository import MAX_PURGE_BATCH, _sqlite_on_connect
from chatledger_sql.rows import check_ids, check_sizes, decode_raw
from chatledger_sql.schema import Tables, build_tables, check_name, check_table_name
from chatledger_sql.statements import Statements
from chatledger_sql.urls import async_engine_url, check_database_file, missing_driver
from chatledger_sql.write_steps import (
    MAX_ATTEMPTS,
    append_writes,
    check_retry,
    forgotten,
    id_chunks,
    retry_pause,
    reweighed,
    save_writes,
    still_expired,
    stored_entry,
    stored_system,
    stored_window,
)

if TYPE_CHECKING:
    from chatledger_sql.dialects.append_routine import AppendRoutine

__all__ = ["AsyncSqlChatMemoryRepository"]

T = TypeVar("T")
Work = Callable[[AsyncConnection], Awaitable[T]]

_UNKNOWN: Any = object()
_engine_locks: weakref.WeakKeyDictionary[AsyncEngine, asyncio.Lock] = (
    weakref.WeakKeyDictionary()
)


def _engine_lock(engine: AsyncEngine) -> asyncio.Lock:
    lock = _engine_locks.get(engine)
    if lock is None:
        lock = _engine_locks[engine] = asyncio.Lock()
    return lock


def _detectable_now(engine: AsyncEngine) -> bool:
    """The product is known without connecting (see ``dialects.product_name``)."""
    dialect = engine.dialect
    return dialect.name != "mysql" or dialect.server_version_info is not None


def _sync(connection: AsyncConnection) -> Connection:
    """The ``Connection`` a connected ``AsyncConnection`` drives (for dialect hooks)."""
    sync = connection.sync_connection
    assert sync is not None, "the connection has not started"
    return sync


def _enter(connection: Connection, context: AbstractContextManager[None]) -> None:
    context.__enter__()


def _leave(
    connection: Connection,
    context: AbstractContextManager[None],
    error: BaseException | None,
) -> None:
    if error is None:
        context.__exit__(None, None, None)
        return
    try:
        context.__exit__(type(error), error, error.__traceback__)
    except BaseException as raised:
        if raised is not error:
            raise


class AsyncSqlChatMemoryRepository(AsyncClosingContext):
    """A chat memory repository in one SQL table, for asyncio.

    Implements :class:`chatledger.AsyncChatMemoryRepository`,
    :class:`chatledger.AsyncSupportsWindowAppend`, and counting and paging.
    Every option, name and rule is :class:`chatledger_sql.SqlChatMemoryRepository`'s
    (TTL included: see its docstring); only the I/O is awaited.

    Args:
        engine: A SQLAlchemy ``AsyncEngine``. The repository never disposes it.
        dialect: A :class:`~chatledger_sql.dialects.SqlDialect` (instance,
            class, or registered product name) to use instead of the detected
            one; a mismatch with the detected product warns.
        table_name: The messages table; the conversations table is named
            ``<table_name>_conversation``, the record of evicted ids
            ``<table_name>_evicted``.
        schema: The database schema (namespace) holding the tables.
        create_schema: Create the tables, if missing, on the first call.
        ttl: Time to live of a conversation after its last write, as a
            ``timedelta`` or seconds; ``None`` keeps conversations.

    Attributes:
        dialect: The dialect in use; ``None`` until the first call when the
            product is only known after connecting (MariaDB behind a
            ``mysql+...://`` URL; ``mariadb+...://`` is known at once).
        engine: The engine.
        fault_points: Test-only hooks called at the named steps of a write.
        ttl: The time to live as a ``timedelta``, or ``None``.

    Raises:
        InvalidNameError: ``table_name`` or ``schema`` is not an allowed name.
        InvalidTTLError: ``ttl`` is not a positive duration.
        TypeError: ``engine`` is not an ``AsyncEngine``.
    """

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        dialect: DialectSpec | None = None,
        table_name: str = "chat_memory",
        schema: str | None = None,
        create_schema: bool = True,
        ttl: timedelta | float | None = None,
    ) -> None:
        """Check the options; detect the dialect when that needs no connection."""
        self.ttl: timedelta | None = to_ttl(ttl)
        self._table_name = check_table_name(table_name)
        self._schema = None if schema is None else check_name(schema, "schema name")
        if not isinstance(engine, AsyncEngine):
            raise TypeError(
                "engine must be a sqlalchemy AsyncEngine (create_async_engine), "
                f"not {type(engine).__name__}"
            )
        self.engine = engine
        self.fault_points = FaultPoints()
        self.dialect: SqlDialect | None = None
        self._explicit = dialect
        self._create = bool(create_schema)
        self._ready = False
        self._ready_lock = asyncio.Lock()
        self._owns_engine = False
        self._closed = False
        self._statement_limit: int | None = _UNKNOWN
        if _detectable_now(engine):
            self._use(resolve_dialect(engine.sync_engine, dialect))

    def _use(self, dialect: SqlDialect) -> None:
        self.dialect = dialect
        self.tables: Tables = build_tables(dialect, self._table_name, self._schema)
        self._sql = Statements(self.tables, dialect)
        #: The dialect's one-statement append, until a call finds it missing.
        self._routine: AppendRoutine | None = self._sql.append_routine
        self._writer_lock: asyncio.Lock | None = (
            _engine_lock(self.engine) if dialect.serialize_in_process() else None
        )

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        engine_options: dict[str, Any] | None = None,
        **options: Any,
    ) -> AsyncSqlChatMemoryRepository:
        """Make an ``AsyncEngine`` for ``url`` and a repository that owns it.

        No I/O: the engine connects on the repository's first call.

        Args:
            url: A SQLAlchemy URL with an asyncio driver, e.g.
                ``sqlite+aiosqlite:///chat.db``,
                ``postgresql+psycopg://user@host/db``,
                ``postgresql+asyncpg://user@host/db`` or
                ``mysql+asyncmy://user@host/db``; without a driver
                (``sqlite:///chat.db``, ``postgres://...``) the backend's
                installed asyncio driver is used
                (:func:`chatledger_sql.urls.async_engine_url`).
            engine_options: Keyword arguments for ``create_async_engine``.
            **options: Keyword arguments of the constructor.

        :meth:`aclose` disposes the engine made here.

        Raises:
            chatledger.InvalidUrlError: the URL names a sync driver, or a
                backend the async repository does not run on.
            chatledger.MissingDriverError: the asyncio driver is not
                installed (the message gives the ``pip install`` line).
            chatledger.StoreNotFoundError: a SQLite file's folder is missing.
        """
        to_ttl(options.get("ttl"))
        parsed = async_engine_url(url)
        check_database_file(parsed, must_exist=not options.get("create_schema", True))
        try:
            engine = create_async_engine(parsed, **dict(engine_options or {}))
        except (ImportError, exc.NoSuchModuleError) as error:
            raise missing_driver(parsed, error) from error
        if engine.dialect.name == "sqlite":
            event.listen(engine.sync_engine, "connect", _sqlite_on_connect)
        repository = cls(engine, **options)
        repository._owns_engine = True
        return repository

    def __repr__(self) -> str:
        return (
            f"AsyncSqlChatMemoryRepository({self.engine.url!r}, "
            f"dialect={self.dialect!r}, table_name={self._table_name!r}, "
            f"ttl={self.ttl!r})"
        )

    async def aclose(self) -> None:
        """Dispose the engine if :meth:`from_url` made it; calling twice is fine."""
        if self._closed:
            return
        self._closed = True
        if self._owns_engine:
            await self.engine.dispose()

    # -- schema ----------------------------------------------------------------

    async def _detected(self) -> SqlDialect:
        """The dialect, detected on a first connect when it needs one."""
        if self.dialect is None:
            async with self.engine.connect():
                pass  # SQLAlchemy's first connect tells MariaDB from MySQL
            if self.dialect is None:
                self._use(resolve_dialect(self.engine.sync_engine, self._explicit))
        assert self.dialect is not None
        return self.dialect

    async def _prepared(self) -> SqlDialect:
        """The dialect, once the first call has detected it and made the tables."""
        if self._ready:
            assert self.dialect is not None
            return self.dialect
        async with self._ready_lock:
            if not self._ready:
                await self._detected()
                if self._create:
                    await self._create_tables()
                self._ready = True
        assert self.dialect is not None
        return self.dialect

    async def create_schema(self) -> None:
        """Create the tables if missing; idempotent, safe against a racing creator.

        Each step runs once more on a fresh connection when its pooled one
        was dropped by the server, as writes do (:meth:`_schema_step`).
        """
        await self._detected()
        await self._create_tables()

    async def _create_tables(self) -> None:
        dialect = self.dialect
        assert dialect is not None
        await self._schema_step(lambda c: c.run_sync(dialect.prepare_database))
        for statement in dialect.create_statements(self.tables.all):
            # The write path's begin: on SQLite a deferred DDL transaction
            # cannot upgrade its lock past a racing creator.
            async def create(connection: AsyncConnection, ddl: Any = statement) -> None:
                await connection.run_sync(dialect.begin_write)
                await connection.execute(ddl)

            await self._schema_step(create)

        async def create_routines(connection: AsyncConnection) -> None:
            await connection.run_sync(dialect.create_routines, self._sql)

        await self._schema_step(create_routines)

    async def _schema_step(self, step: Work[Any]) -> None:
        """Run and commit one schema step, again while another creator races it.

        A step whose connection was lost runs once more on a fresh one, as
        :meth:`_write` does; every step is guarded, so running it again after
        it had committed changes nothing.
        """
        dialect = self.dialect
        assert dialect is not None
        reconnected = False
        attempt = 0
        while True:
            attempt += 1
            try:
                async with self._serialized(), self._connect() as connection:
                    await step(connection)
                    await connection.commit()
                return
            except exc.DBAPIError as error:
                if error.connection_invalidated and not reconnected:
                    reconnected = True
                    continue
                racing = dialect.is_already_exists(error) or dialect.is_retryable(error)
                if attempt >= MAX_ATTEMPTS or not racing:
                    raise
            await asyncio.sleep(0.05 * attempt)

    async def drop_schema(self) -> None:
        """Drop the tables and every conversation in them.

        Each step runs once more on a fresh connection when its pooled one
        was dropped by the server, so the routine and the tables go together.
        """
        dialect = await self._detected()

        async def drop_routines(connection: AsyncConnection) -> None:
            await connection.run_sync(dialect.drop_routines, self._sql)

        async def drop_tables(connection: AsyncConnection) -> None:
            await connection.run_sync(self.tables.metadata.drop_all, checkfirst=True)

        await self._schema_step(drop_routines)
        await self._schema_step(drop_tables)

    # -- reads -----------------------------------------------------------------

    async def find_conversation_ids(self) -> list[str]:
        """Return the id of every stored, unexpired conversation, in no order."""
        await self._prepared()

        async def work(connection: AsyncConnection) -> list[str]:
            found = await connection.execute(self._sql.list_ids, {"now": utc_now()})
            return list(found.scalars())

        return await self._read(work)

    async def find_by_conversation_id(self, conversation_id: str) -> list[Message]:
        """Return one conversation, oldest first: one query ordered by ``seq``.

        An expired conversation reads as empty.
        """
        validate_conversation_id(conversation_id)
        dialect = await self._prepared()
        parameters = {"cid": conversation_id, "now": utc_now()}

        async def work(connection: AsyncConnection) -> list[Message]:
            options = dialect.read_options(_sync(connection))
            if options:
                await connection.execution_options(**options)
            rows = (await connection.execute(self._sql.read, parameters)).all()
            return [decode_raw(*row) for row in rows]

        return await self._read(work)

    async def count_messages(self, conversation_id: str) -> int:
        """Return how many messages a conversation holds, from its row alone."""
        validate_conversation_id(conversation_id)
        await self._prepared()
        parameters = {"cid": conversation_id, "now": utc_now()}

        async def work(connection: AsyncConnection) -> int:
            found = await connection.execute(self._sql.count_messages, parameters)
            return int(found.scalar() or 0)

        return await self._read(work)

    async def find_conversation_ids_page(
        self, cursor: str | None = None, limit: int = 100
    ) -> ConversationPage:
        """Return up to ``limit`` conversation ids after ``cursor``, in id order."""
        after, limit = validate_page_request(cursor, limit)
        await self._prepared()
        parameters: dict[str, Any] = {"now": utc_now()}
        if after is None:
            statement = self._sql.limited(self._sql.first_ids_page, limit + 1)
        else:
            statement = self._sql.limited(self._sql.ids_page_after, limit + 1)
            parameters["after_id"] = after

        async def work(connection: AsyncConnection) -> list[str]:
            return list((await connection.execute(statement, parameters)).scalars())

        ids = await self._read(work)
        if len(ids) > limit:
            return ConversationPage(ids[:limit], ids[limit - 1])
        return ConversationPage(ids, None)

    # -- writes ----------------------------------------------------------------

    async def save_all(self, conversation_id: str, messages: Sequence[Message]) -> None:
        """Replace a conversation in one transaction; ``[]`` deletes it."""
        validate_conversation_id(conversation_id)
        batch = validate_messages(messages)
        check_ids(batch)
        if not batch:
            await self.delete_by_conversation_id(conversation_id)
            return
        await self._prepared()
        await self._check_sizes(batch)

        async def work(connection: AsyncConnection) -> None:
            now = utc_now()
            state = await self._lock(connection, conversation_id, now, probe_ids=[])
            self.fault_points.reach("after_lock")
            await connection.run_sync(
                self._dialect().forget, self._sql, conversation_id
            )
            self.fault_points.reach("after_delete")
            stamped = stamp_messages(batch, now)
            rows, update = save_writes(
                conversation_id, stamped, state.next_seq, now, self.ttl
            )
            await connection.execute(self._sql.insert_messages, rows)
            self.fault_points.reach("after_insert")
            await connection.execute(self._sql.update_conversation, update)

        await self._write(conversation_id, work)

    async def delete_by_conversation_id(self, conversation_id: str) -> None:
        """Remove a conversation; an unknown id does nothing."""
        validate_conversation_id(conversation_id)
        dialect = await self._prepared()

        async def work(connection: AsyncConnection) -> None:
            await connection.run_sync(
                dialect.lock_conversation,
                self._sql,
                conversation_id,
                utc_now(),
                create=False,
            )
            self.fault_points.reach("after_lock")
            await connection.run_sync(dialect.forget, self._sql, conversation_id)
            self.fault_points.reach("after_delete")
            await connection.execute(
                self._sql.delete_conversation, {"cid": conversation_id}
            )

        await self._write(conversation_id, work)

    async def append_to_window(
        self, conversation_id: str, messages: Sequence[Message], window: Window
    ) -> AppendResult:
        """Append and evict in one transaction that locks this conversation only.

        See :class:`chatledger.AsyncSupportsWindowAppend`; what is read and
        written is :meth:`chatledger_sql.SqlChatMemoryRepository.append_to_window`'s.
        """
        validate_conversation_id(conversation_id)
        batch = validate_messages(messages)
        check_ids(batch)
        if not batch:
            return AppendResult()
        await self._prepared()
        await self._check_sizes(batch)
        routine = self._routine
        if routine is not None and routine.takes(batch) and not self.fault_points.armed:
            done = await self._append_by_routine(
                routine, conversation_id, batch, window
            )
            if done is not None:
                return done
        return await self._write(
            conversation_id, lambda c: self._append(c, conversation_id, batch, window)
        )

    async def purge_expired(self, *, batch_size: int = 500) -> int:
        """Delete every conversation that has expired; return how many.

        See :meth:`chatledger_sql.SqlChatMemoryRepository.purge_expired`.

        Raises:
            ValueError: ``batch_size`` is not an int from 1 to 1000.
        """
        if (
            isinstance(batch_size, bool)
            or not isinstance(batch_size, int)
            or not 1 <= batch_size <= MAX_PURGE_BATCH
        ):
            raise ValueError(
                f"batch_size must be an int from 1 to {MAX_PURGE_BATCH}, "
                f"not {batch_size!r}"
            )
        await self._prepared()
        now = utc_now()
        find = self._sql.expired_ids.limit(batch_size)
        removed = 0
        while True:

            async def candidates(connection: AsyncConnection) -> list[str]:
                return sorted((await connection.execute(find, {"now": now})).scalars())

            ids = await self._read(candidates)
            if not ids:
                return removed
            purge = functools.partial(self._purge, ids=ids, now=now)
            removed += await self._write(f"{len(ids)} expired, from {ids[0]}", purge)
            if len(ids) < batch_size:
                return removed

    # -- internals -------------------------------------------------------------

    async def _read(self, work: Work[T]) -> T:
        """Run a read; once more on a fresh connection if the server dropped it."""
        try:
            async with self._connect() as connection:
                return await work(connection)
        except exc.DBAPIError as error:
            if not error.connection_invalidated:
                raise
        async with self._connect() as connection:
            return await work(connection)

    async def _check_sizes(self, batch: list[Message]) -> None:
        """Refuse, before writing, a message whose row the server would refuse."""
        if self._statement_limit is _UNKNOWN:
            dialect = self.dialect
            assert dialect is not None
            async with self._connect() as connection:
                limit = await connection.run_sync(dialect.max_statement_bytes)
            self._statement_limit = limit
        if self._statement_limit is not None:
            check_sizes(batch, self._statement_limit)

    async def _write(
        self, conversation_id: str, work: Work[T], *, commits_itself: bool = False
    ) -> T:
        """Run a write transaction, again after a deadlock, race or lost connection.

        The retries are :meth:`chatledger_sql.SqlChatMemoryRepository._write`'s
        (:func:`chatledger_sql.write_steps.check_retry`): at most
        ``MAX_ATTEMPTS``, then :class:`chatledger.ContentionError`. With
        ``commits_itself``, ``work`` runs one statement that commits on its
        own (in autocommit, or a procedure that commits).
        """
        attempt = 0
        reconnected = False
        while True:
            attempt += 1
            try:
                async with self._serialized(), self._connect() as connection:
                    if commits_itself:
                        result = await work(connection)
                    else:
                        result = await self._transaction(connection, work)
            except exc.DBAPIError as error:
                if error.connection_invalidated and not reconnected:
                    reconnected = True
                    continue
                check_retry(error, attempt, self._dialect(), conversation_id)
            except RetryTransaction as error:
                check_retry(error, attempt, self._dialect(), conversation_id)
            else:
                self.fault_points.reach("after_commit")
                return result
            await asyncio.sleep(retry_pause(attempt))

    async def _append_by_routine(
        self,
        routine: AppendRoutine,
        conversation_id: str,
        batch: list[Message],
        window: Window,
    ) -> AppendResult | None:
        """:meth:`chatledger_sql.SqlChatMemoryRepository._append_by_routine`."""
        parameters, stamped = routine.parameters(
            conversation_id, batch, window, utc_now(), self.ttl
        )
        if not routine.fits(parameters, self._statement_limit):
            return None

        async def call(connection: AsyncConnection) -> Any:
            if not self._dialect().runs_routines(_sync(connection)):
                return None
            if not routine.commits_itself:
                await connection.execution_options(isolation_level="AUTOCOMMIT")
            return (await connection.execute(routine.call, parameters)).one()

        try:
            writing = self._write(conversation_id, call, commits_itself=True)
            row = await settled(writing)
        except exc.DBAPIError as error:
            if not self._dialect().is_missing_routine(error):
                raise
            row = None
        if row is None:
            self._routine = None
            return None
        return routine.result(row, stamped)

    async def _transaction(self, connection: AsyncConnection, work: Work[T]) -> T:
        """Run ``work`` in the dialect's write transaction and commit it.

        Leaving by an error (a cancellation included) rolls back: the
        connection's close does, as it goes back to the pool. A cancellation
        that comes once the commit is under way waits for its answer
        (:func:`chatledger.adapters.settled`): the write has then landed or
        not, for good.
        """
        dialect = self._dialect()
        writing = dialect.writing(_sync(connection))
        await connection.run_sync(_enter, writing)
        try:
            result = await work(connection)
            self.fault_points.reach("before_commit")
            commit = connection.run_sync(dialect.commit_write)
            if dialect.settles_commit(_sync(connection)):
                await settled(commit)
            else:
                await commit
        except BaseException as error:
            await connection.run_sync(_leave, writing, error)
            raise
        await connection.run_sync(_leave, writing, None)
        return result

    def _dialect(self) -> SqlDialect:
        assert self.dialect is not None
        return self.dialect

    @contextlib.asynccontextmanager
    async def _connect(self) -> AsyncIterator[AsyncConnection]:
        """A pooled connection, discarded rather than pooled after a cancellation.

        A statement cancelled while its answer was on the way leaves the
        driver's connection in a state nobody knows (a reply still to read, a
        transaction the rollback did not reach); closing it is the one sure
        way that the next user of the pool does not read it. The server rolls
        back whatever the closed connection had begun.
        """
        async with self.engine.connect() as connection:
            try:
                yield connection
            except BaseException as error:
                if not isinstance(error, Exception):
                    await connection.invalidate(error)
                raise

    @contextlib.asynccontextmanager
    async def _serialized(self) -> AsyncIterator[None]:
        lock = getattr(self, "_writer_lock", None)
        if lock is None:
            yield
        else:
            async with lock:
                yield

    async def _lock(
        self,
        connection: AsyncConnection,
        conversation_id: str,
        now: datetime,
        *,
        probe_ids: list[str],
        peek: int = 0,
    ) -> ConversationState:
        """Create or lock the conversation's row: the dialect's own statements."""
        state = await connection.run_sync(
            self._dialect().lock_conversation,
            self._sql,
            conversation_id,
            now,
            create=True,
            probe_ids=probe_ids,
            peek=peek,
        )
        assert state is not None
        return state

    async def _purge(
        self, connection: AsyncConnection, ids: list[str], now: datetime
    ) -> int:
        """Delete those of ``ids`` that are still expired once locked."""
        locked = await connection.execute(self._sql.lock_expired, {"ids": ids})
        expired = still_expired(locked, now)
        if expired:
            await connection.execute(self._sql.purge_messages, {"ids": expired})
            await connection.execute(self._sql.purge_evicted, {"ids": expired})
            await connection.execute(self._sql.purge_conversations, {"ids": expired})
        return len(expired)

    async def _oldest(
        self,
        connection: AsyncConnection,
        conversation_id: str,
        chunk: int,
        state: ConversationState,
    ) -> AsyncIterator[Any]:
        """Stream the oldest non-system rows: the lock's peek, then by ``chunk``."""
        after = -1
        if state.oldest is not None:
            for row in state.oldest:
                yield row
            if len(state.oldest) < state.peek:
                return
            if state.oldest:
                after = state.oldest[-1].seq
        while True:
            found = await connection.execute(
                self._sql.limited(self._sql.oldest, chunk),
                {"cid": conversation_id, "after": after},
            )
            rows = found.all()
            for row in rows:
                yield row
            if len(rows) < chunk:
                return
            after = rows[-1].seq
            chunk *= 2

    async def _append(
        self,
        connection: AsyncConnection,
        conversation_id: str,
        batch: list[Message],
        window: Window,
    ) -> AppendResult:
        now = utc_now()
        ids = [m.id for m in batch]
        counter = window.counter_id
        state = await self._lock(
            connection,
            conversation_id,
            now,
            probe_ids=ids,
            peek=rows_to_peek(window, len(batch)),
        )
        if state.expires_at is not None:
            now = utc_now()  # the lock may have waited: judge expiry as of now
            if state.expires_at <= now:
                await connection.run_sync(
                    self._dialect().forget, self._sql, conversation_id
                )
                state = forgotten(state)
        self.fault_points.reach("after_lock")
        known: set[str] = set()
        if state.known is None or state.known > 0:
            for chunk in id_chunks(ids):
                found = await connection.execute(
                    self._sql.known_ids, {"cid": conversation_id, "ids": chunk}
                )
                known.update(found.scalars())
        fresh = stamp_messages((m for m in batch if m.id not in known), now)
        if not fresh:
            return AppendResult()
        if counter is not None and state.weight_counter != counter:
            rows = await connection.execute(
                self._sql.all_rows, {"cid": conversation_id}
            )
            updates, state = reweighed(rows, conversation_id, window, state)
            if updates:
                await connection.execute(self._sql.set_weight, updates)
        stored, system_seqs = await self._stored_window(
            connection, conversation_id, window, state, fresh
        )
        plan = await plan_append_async(stored, fresh, window)
        writes = append_writes(
            plan, conversation_id, state, counter, now, self.ttl, system_seqs
        )
        if await connection.run_sync(
            self._dialect().write_append,
            self._sql,
            writes.rows,
            drop_system=writes.drop_system,
            upto=writes.upto,
            evicted=writes.evicted,
            trim_below=writes.trim_below,
            update=writes.update,
        ):
            self.fault_points.reach("after_insert")
            self.fault_points.reach("after_evict")
            return writes.result
        if writes.drop_system:
            await connection.execute(self._sql.delete_system, {"cid": conversation_id})
        if writes.rows:
            await connection.execute(self._sql.insert_messages, writes.rows)
        self.fault_points.reach("after_insert")
        if writes.evicts:
            await connection.execute(
                self._sql.delete_oldest, {"cid": conversation_id, "upto": writes.upto}
            )
        if writes.evicted:
            await connection.execute(self._sql.insert_evicted, writes.evicted)
        if writes.trim_below is not None:
            await connection.execute(
                self._sql.trim_evicted,
                {"cid": conversation_id, "below": writes.trim_below},
            )
        self.fault_points.reach("after_evict")
        await connection.execute(self._sql.update_conversation, writes.update)
        return writes.result

    async def _stored_window(
        self,
        connection: AsyncConnection,
        conversation_id: str,
        window: Window,
        state: ConversationState,
        fresh: list[Message],
    ) -> tuple[AsyncStoredWindow, dict[str, int]]:
        """What the planner needs, from the locked row and the oldest rows,
        and the sequence numbers of the stored system messages it read."""
        counted = window.counter_id is None
        system: list[Message] | None = None
        system_seqs: dict[str, int] = {}
        if needs_stored_system(fresh):
            found = await connection.execute(
                self._sql.system_rows, {"cid": conversation_id}
            )
            system, system_seqs = stored_system(found)

        async def read_oldest(expected: int) -> AsyncIterator[StoredEntry]:
            async for row in self._oldest(connection, conversation_id, expected, state):
                yield stored_entry(row, counted)

        stored = stored_window(AsyncStoredWindow, window, state, system, read_oldest)
        return stored, system_seqs
