# sync twin: repository.py
# sync rename: sqlalchemy.ext.asyncio -> sqlalchemy
# sync rename: create_async_engine -> create_engine
# sync rename: asyncio -> time
# sync rename: Once -> BlockingOnce
"""Chat memory in a SQL database, through SQLAlchemy Core's ``AsyncEngine``.

Example (needs a PostgreSQL server):
    from chatledger import AsyncMessageWindowChatMemory, Message
    from chatledger_sql import AsyncSqlChatMemoryRepository

    repository = AsyncSqlChatMemoryRepository.from_url(
        "postgresql+psycopg://postgres@localhost/app"
    )
    memory = AsyncMessageWindowChatMemory(repository, max_messages=20)
    await memory.add("c1", Message.user("Hello"))
    await repository.aclose()

One repository serves every supported database; the dialect (detected from the
engine, or given) decides column types, guarded DDL and how a conversation is
locked. Every write is one transaction that locks the row of its conversation
only, so writers of one conversation queue while others go on.

With ``ttl=timedelta(days=7)`` (or ``ttl=604800`` seconds) a conversation
expires whole, seven days after its last write: see the class docstring.

The same code runs on the database's async driver too:
``postgresql+psycopg`` (psycopg 3's async connection), ``postgresql+asyncpg``,
``sqlite+aiosqlite``, ``mysql+asyncmy`` and ``mysql+aiomysql`` (MariaDB too,
also as ``mariadb+...``). A dialect's hooks, written for a sync connection, run
there through SQLAlchemy's ``run_sync`` bridge, on the same connection and
driver.

Neither the sync nor the async repository does I/O before its first call, so
one made at import time does not need the database up: the dialect, when it
can only be told after connecting (MariaDB behind ``mysql+...://``), is
detected then, with its warnings, and the tables are created then, once,
behind a lock that concurrent first calls wait on. A server that is down
fails that first call, with the driver's error.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import logging
import operator
import threading
import weakref
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Iterator,
    Mapping,
    Sequence,
)
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Concatenate, Literal, ParamSpec, TypeVar

import sqlalchemy
from sqlalchemy import Connection, Engine, event, exc
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from chatledger.adapters import (
    DEFAULT_CONVERSATION_PAGE_SIZE,
    DEFAULT_MESSAGE_PAGE_SIZE,
    UNSET,
    AppendResult,
    AsyncClosingContext,
    AsyncStoredWindow,
    ChatLedgerError,
    ConversationInfo,
    ConversationInfoPage,
    ConversationPage,
    ConversationQuery,
    FaultPoints,
    InvalidOptionError,
    JsonValue,
    Message,
    MessagePage,
    Retention,
    Role,
    StoredEntry,
    StoreNotFoundError,
    TailView,
    Unset,
    Window,
    check_conversation_info,
    check_find_conversations,
    check_message_page,
    checked_window,
    merge_system,
    message_page,
    metadata_matches,
    needs_stored_system,
    plan_append_async,
    rows_to_peek,
    stamp_messages,
    to_retention,
    to_ttl,
    utc_now,
    validate_conversation_id,
    validate_message_ids,
    validate_messages,
    validate_page_request,
    validate_removal_count,
    view_reads,
)
from chatledger_sql.compiled import (
    OPEN_GATE,
    CompiledStatement,
    RawCalls,
    WriteGate,
    async_driver_calls,  # async-only
    fetch_all,
    fetch_all_async,  # async-only
    raw_calls,
    runs_raw,
    runs_raw_async,  # async-only
    runs_together,  # async-only
    transaction_open,
)
from chatledger_sql.dialects import DialectSpec, resolve_dialect
from chatledger_sql.dialects.base import (
    MAX_IDS_PER_STATEMENT,
    ConversationState,
    RetryTransaction,
    SqlDialect,
)
from chatledger_sql.floor import AsyncSqlBenchmarkFloor, open_floor_async
from chatledger_sql.log_advancing import advance_then_insert
from chatledger_sql.log_steps import (
    log_append_parameters,
    log_append_rows,
    log_row,
    log_trim,
    log_writes,
    numbered_from,
    row_values,
    system_range,
    untally,
)
from chatledger_sql.once import Once
from chatledger_sql.pool_checkout import (
    QuietPool,  # async-only
    pooled_connection,  # async-only
)
from chatledger_sql.rows import check_ids, check_sizes, conversation_info, decode_raw
from chatledger_sql.schema import (
    Tables,
    build_tables,
    check_name,
    check_table_name,
    conversation_indexes,
    missing_columns,
)
from chatledger_sql.statements import Statements
from chatledger_sql.steps import (
    MAX_ATTEMPTS,
    MAX_PURGE_BATCH,
    append_writes,
    check_retry,
    forgotten,
    id_chunks,
    probed_ids,
    retry_pause,
    reweighed,
    save_writes,
    still_expired,
    stored_entry,
    stored_system,
    stored_window,
    update_parameters,
)
from chatledger_sql.urls import (
    async_engine_url,
    check_database_file,
    missing_driver,
    steady_pool,
)

if TYPE_CHECKING:
    from chatledger_sql.dialects.append_routine import AppendRoutine

T = TypeVar("T")
P = ParamSpec("P")

if True:  # async
    from chatledger.adapters import LoopLocal, settled

    #: A step run on a connection (a read, a write, a schema step).
    Work = Callable[[AsyncConnection], Awaitable[T]]
else:
    #: A step run on a connection (a read, a write, a schema step).
    Work = Callable[[Connection], T]  # type: ignore[misc,no-redef]

__all__ = ["AsyncSqlChatMemoryRepository"]

_UNKNOWN: Any = object()
_SYSTEM = Role.SYSTEM.value
#: A read row's sequence number (its first column).
_SEQUENCE = operator.itemgetter(0)
#: The read options a read on the DBAPI cursor can honour (see ``fetch_all``).
_RAW_READ_OPTIONS: tuple[dict[str, Any], ...] = ({}, {"isolation_level": "AUTOCOMMIT"})
#: How many statements of each kind, appends and reads, stay compiled.
_KEPT_RAW_STATEMENTS = 128
#: Records a listing that filters metadata in Python reads at first, and at
#: most, per query: the reads go on, doubling, until a page is found.
_FILTERED_READ = 64
_MAX_FILTERED_READ = 1024
#: Why each column a later release added is added (the log line says).
_ADDED_FOR = {
    "system_batch": "the log's record of its system messages, new since release 0.2",
    "system_last": "the log's record of its system messages, new since release 0.2",
    "system_as_of": "the log's record of its system messages, new since release 0.2",
    "owner": "the conversation's record, new since release 0.2",
    "metadata": "the conversation's record, new since release 0.2",
    "created_at": "the conversation's record, new since release 0.2; filled from "
    "the messages",
}

_engine_locks_guard = threading.Lock()
_log = logging.getLogger("chatledger.sql")

if True:  # async
    #: An asyncio lock serves one event loop: an engine has one per loop.
    _engine_locks: weakref.WeakKeyDictionary[AsyncEngine, LoopLocal[asyncio.Lock]] = (
        weakref.WeakKeyDictionary()
    )

    def _engine_lock(engine: AsyncEngine) -> LoopLocal[asyncio.Lock]:
        with _engine_locks_guard:
            locks = _engine_locks.get(engine)
            if locks is None:
                locks = _engine_locks[engine] = LoopLocal(asyncio.Lock)
            return locks
else:
    _engine_locks: weakref.WeakKeyDictionary[Engine, threading.Lock] = (  # type: ignore[no-redef]
        weakref.WeakKeyDictionary()
    )

    def _engine_lock(engine: Engine) -> threading.Lock:
        with _engine_locks_guard:
            lock = _engine_locks.get(engine)
            if lock is None:
                lock = _engine_locks[engine] = threading.Lock()
            return lock


def _engine_of(engine: AsyncEngine) -> Engine:
    """The ``Engine`` that dialect detection and event listeners take."""
    if True:  # async
        return engine.sync_engine
    else:
        return engine


def _sync(connection: AsyncConnection) -> Connection:
    """The ``Connection`` that dialect hooks take (a started one)."""
    if True:  # async
        sync = connection.sync_connection
        assert sync is not None, "the connection has not started"
        return sync
    else:
        return connection


async def _run(
    connection: AsyncConnection,
    hook: Callable[Concatenate[Connection, P], T],
    *args: P.args,
    **kwargs: P.kwargs,
) -> T:
    """Run a dialect hook, written against a ``Connection``, on ``connection``."""
    if True:  # async
        return await connection.run_sync(hook, *args, **kwargs)
    else:
        return hook(connection, *args, **kwargs)


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


def _missing_tables(connection: Connection, tables: Tables) -> list[str]:
    """The names of ``tables``' tables the database lacks."""
    present = sqlalchemy.inspect(connection)
    schema = tables.messages.schema
    return [
        table.name
        for table in (tables.messages, tables.conversations, tables.evicted)
        if not present.has_table(table.name, schema=schema)
    ]


class AsyncSqlChatMemoryRepository(AsyncClosingContext):
    """A chat memory repository in one SQL table (plus one row per conversation).

    Implements :class:`chatledger.AsyncChatMemoryRepository`,
    :class:`chatledger.AsyncSupportsWindowAppend`,
    :class:`chatledger.AsyncSupportsSaveMany`,
    :class:`chatledger.AsyncSupportsConversationInfo` and
    :class:`chatledger.AsyncSupportsSchemaUpgrade`.

    Args:
        engine: A SQLAlchemy 2 ``AsyncEngine``. The repository never disposes it.
        dialect: A :class:`~chatledger_sql.dialects.SqlDialect` (instance,
            class, or registered product name) to use instead of the detected
            one; a mismatch with the detected product warns.
        table_name: The messages table; the conversations table is named
            ``<table_name>_conversation`` and the record of evicted ids
            ``<table_name>_evicted``, so a name ending in ``_conversation``
            or ``_evicted`` is refused (it would be another repository's).
        schema: The database schema (namespace) holding the tables; it must
            exist. ``None`` uses the connection's default.
        create_schema: Create the tables if they are missing (idempotent and
            safe to run from several processes at once), on the first call.
        ttl: Time to live of a conversation after its last write, as a
            ``datetime.timedelta`` or seconds (``int`` or ``float``); ``None``
            (the default) keeps conversations until they are deleted.
        retention: What each conversation's log keeps:
            ``Retention.everything()`` (the default) or ``Retention.last(n)``
            (``n`` for short): see :mod:`chatledger.retention`. A bounded log
            is trimmed in its own transaction after one append in about
            ``slack``, which removes the rows below the cutoff and records
            their ids as evicted.

    Time to live is sliding and whole-conversation: every write (``save_all``,
    ``append_to_window``) sets the conversation's ``expires_at`` to now plus
    ``ttl``, in the transaction of the write. Time is the application's clock
    in UTC (:func:`chatledger.validation.utc_now`), never the database's, so
    the clocks of the processes sharing a database should agree. Expiry is
    read from the stored row, so a repository without ``ttl`` also hides a
    conversation another repository gave a TTL, and its own writes clear it.

    Deletion is lazy. From the moment it expires, a conversation reads as
    empty and leaves :meth:`find_conversation_ids`; its rows stay until the
    next write to it (which deletes them, in the same locked transaction,
    before appending, so the new conversation starts empty) or until
    :meth:`purge_expired` removes them.

    A window append that takes messages out of the window records their ids
    in ``<table_name>_evicted`` (:mod:`chatledger.evicted_ids`), in its own
    transaction, so that a late retry of them is a no-op: one row per id,
    numbered by the message's sequence number and trimmed to the newest
    ``EVICTED_IDS_KEPT`` numbers (at most ``EVICTED_IDS_KEPT +
    EVICTED_IDS_TRIM_STEP`` rows per conversation). Writes that replace or
    delete a conversation, and its expiry, clear them.

    Attributes:
        dialect: The dialect in use; ``None`` until the first call when the
            product is only known after connecting (MariaDB behind a
            ``mysql+...://`` URL; ``mariadb+...://`` is known at once).
        engine: The engine.
        tables: The SQLAlchemy ``Table`` objects (once ``dialect`` is known).
        fault_points: Test-only hooks called at the named steps of a write.
        ttl: The time to live as a ``timedelta``, or ``None``.
        retention: What each conversation's log keeps.

    Raises:
        InvalidNameError: ``table_name`` or ``schema`` is not an allowed name.
        InvalidRetentionError: ``retention`` is neither everything nor a bound.
        InvalidTTLError: ``ttl`` is not a positive duration
            (:class:`chatledger_sql.InvalidTTLError`, a ``ValueError``).
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
        retention: Retention | int | None = None,
    ) -> None:
        """Check the options, and detect the dialect when that needs no
        connection; the first call detects it otherwise, and creates the
        tables unless told not to."""
        self.ttl: timedelta | None = to_ttl(ttl)
        self.retention = to_retention(retention)
        self._table_name = check_table_name(table_name)
        self._schema = None if schema is None else check_name(schema, "schema name")
        if not isinstance(engine, AsyncEngine):
            raise TypeError(
                "engine must be a sqlalchemy AsyncEngine (create_async_engine), "
                f"not {type(engine).__name__}"
            )
        self._engine = engine
        if True:  # async
            #: One engine per event loop, when from_url made them (see engine).
            self._engines: LoopLocal[AsyncEngine] | None = None
            #: Says when the connections of the engines from_url made may be
            #: checked out and in without a greenlet (see _connect).
            self._quiet: QuietPool | None = None
        if engine.dialect.name == "sqlite":
            _roll_back_before_discarding(engine)
        self.fault_points = FaultPoints()
        self._explicit = dialect
        #: Reads on the DBAPI cursor, as the dialect sends them, by what they
        #: are and their size (see ``_fetch_raw``).
        self._raw_reads: dict[Any, tuple[CompiledStatement, bool]] = {}
        #: The append routine's call, compiled likewise.
        self._raw_routine: CompiledStatement | None = None
        #: The log's append statements, compiled likewise, by what they are
        #: and their size.
        self._raw_statements: dict[Any, CompiledStatement] = {}
        #: How many rows a view reads, first and further (tests read fewer).
        self._view_reads: Callable[[Window], Iterator[int]] = view_reads
        self._owns_engine = False
        self._closed = False
        self._statement_limit: int | None = _UNKNOWN
        self.dialect: SqlDialect | None = None
        self._create = bool(create_schema)
        # Each runs once, by one of the callers (loops, threads) that come at
        # once: the detection (and its warnings), then the tables.
        self._detection = Once(self._detect)
        self._ready = Once(self._prepare)
        if _detectable_now(engine):
            self._use(resolve_dialect(_engine_of(engine), dialect))

    def _use(self, dialect: SqlDialect) -> None:
        self.tables = build_tables(dialect, self._table_name, self._schema)
        self._sql = Statements(self.tables, dialect)
        #: The dialect's one-statement append, until a call finds it missing.
        self._routine: AppendRoutine | None = self._sql.append_routine
        self._writer_lock = (
            _engine_lock(self.engine) if dialect.serialize_in_process() else None
        )
        # Last: a call on another thread (or its loop) that finds the dialect
        # set goes on to use what was set above.
        self.dialect = dialect

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        engine_options: dict[str, Any] | None = None,
        **options: Any,
    ) -> AsyncSqlChatMemoryRepository:
        """Make an engine for ``url`` and a repository that owns it.

        Args:
            url: A SQLAlchemy URL, e.g. ``sqlite:///chat.db`` or
                ``postgresql+psycopg://user@host/db``; the scheme's case does
                not matter, ``postgres://`` means PostgreSQL, and a URL
                without a driver uses the backend's driver that the
                package's extra installs
                (:func:`chatledger_sql.urls.async_engine_url`).
            engine_options: Keyword arguments for ``create_async_engine``.
                On a server, the pool keeps up to 15 connections and opens
                no more (:func:`chatledger_sql.urls.steady_pool`) unless
                these size it.
            **options: Keyword arguments of the constructor.

        :meth:`aclose` disposes the engine made here; so does a failure to make
        the repository. With ``create_schema=False`` a missing SQLite or
        DuckDB file is an error, never created. This does no I/O: the engine
        connects on the repository's first call.

        Raises:
            InvalidOptionError: an option the constructor does not take; the
                message lists those it does.
            InvalidUrlError: a URL that cannot work as written
                (``sqlite://chat.db``: two slashes, a host where a path was
                meant; a driver of the other kind, sync or async).
            MissingDriverError: the database driver is not installed; the
                message names the ``pip install`` line.
            StoreNotFoundError: the folder of a database file is missing, or
                the file is, with ``create_schema=False``.
        """
        _check_options(cls, options)
        to_ttl(options.get("ttl"))
        if engine_options is not None and not isinstance(engine_options, Mapping):
            raise InvalidOptionError(
                "engine_options must be a dict of create_engine keyword "
                f"arguments, not {type(engine_options).__name__}"
            )
        # No pool_pre_ping: it costs a round trip per operation. A connection
        # the server dropped fails its first statement instead, and every
        # operation runs once more on a fresh one (see _write and _read).
        settings: dict[str, Any] = dict(engine_options or {})
        parsed = async_engine_url(url)
        settings.update(steady_pool(parsed, settings))
        skip_idle_rollback = "pool_reset_on_return" not in settings and (
            parsed.get_backend_name() == "sqlite"
            or (
                parsed.get_backend_name() in ("mysql", "mariadb")
                and parsed.get_driver_name() in ("pymysql", "asyncmy")
            )
            or (
                parsed.get_backend_name() == "postgresql"
                and parsed.get_driver_name() == "psycopg"
            )
        )
        if skip_idle_rollback:
            settings["pool_reset_on_return"] = None

        def make_engine() -> AsyncEngine:
            try:
                engine = create_async_engine(parsed, **settings)
            except (ImportError, exc.NoSuchModuleError) as error:
                raise missing_driver(parsed, error) from error
            if engine.dialect.name == "sqlite":
                event.listen(_engine_of(engine), "connect", _sqlite_on_connect)
                _roll_back_before_discarding(engine)
            if skip_idle_rollback:
                event.listen(_engine_of(engine), "reset", _rollback_unless_idle)
            return engine

        engine = make_engine()
        # The engine has not connected yet: its pool holds nothing to close,
        # so disposing it here needs no I/O, and SQLite has created no file.
        try:
            check_database_file(
                parsed, must_exist=not options.get("create_schema", True)
            )
            repository = cls(engine, **options)
        except BaseException:
            _engine_of(engine).dispose()
            raise
        repository._owns_engine = True
        if True:  # async
            if skip_idle_rollback:
                repository._quiet = QuietPool(settings)
            # Each event loop gets an engine of its own (see engine).
            repository._engines = LoopLocal(
                make_engine, close=AsyncEngine.dispose, first=engine
            )
        return repository

    if True:  # async

        @property
        def engine(self) -> AsyncEngine:
            """The engine of the running event loop.

            An ``AsyncEngine``'s pool serves one event loop: its connections'
            transports (asyncpg, asyncmy, aiomysql) and its queue's waiters
            belong to the loop that made them. So a repository that
            :meth:`from_url` made keeps an engine per loop
            (:class:`chatledger.adapters.LoopLocal`): the first loop to call
            takes the one made there, each later loop (``asyncio.run`` again,
            threads each running a loop) makes one like it on its first call,
            and each is disposed on its own loop as that loop shuts down, or
            by :meth:`aclose` (the running loop's before it returns, another
            open loop's on that loop's next turn). Outside a running loop
            this is the engine made first.

            An engine given to the constructor serves every call as it is: its
            pool keeps SQLAlchemy's rule of one event loop, unless it is a
            ``NullPool``, which serves any.
            """
            engines = self._engines
            if engines is None:
                return self._engine
            try:
                asyncio.get_running_loop()
            except RuntimeError:
                return self._engine
            return engines.get()

    else:

        @property
        def engine(self) -> Engine:
            """The engine every call runs on."""
            return self._engine

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
            if True:  # async
                assert self._engines is not None
                await self._engines.aclose()
            else:
                self.engine.dispose()

    # -- schema ----------------------------------------------------------------

    async def _detected(self) -> SqlDialect:
        """The dialect, detected on a first connect when it needs one."""
        if not self._detection.done:
            await self._detection()
        return self._dialect()

    async def _detect(self) -> None:
        """Connect, and tell the product by what the connection learnt."""
        if self.dialect is None:
            async with self.engine.connect():
                pass  # SQLAlchemy's first connect tells MariaDB from MySQL
            self._use(resolve_dialect(_engine_of(self.engine), self._explicit))

    async def _prepared(self) -> SqlDialect:
        """The dialect, once the first call has detected it and made the tables."""
        if not self._ready.done:
            await self._ready()
        return self._dialect()

    async def _prepare(self) -> None:
        """Detect the dialect and create the tables: the first call's step."""
        await self._detected()
        if self._create:
            await self._create_tables()

    def _dialect(self) -> SqlDialect:
        """The dialect of a repository that has detected it."""
        dialect = self.dialect
        assert dialect is not None
        return dialect

    async def create_schema(self) -> None:
        """Create the tables if missing; idempotent, safe against a racing creator.

        Each step runs once more on a fresh connection when its pooled one
        was dropped by the server, as writes do (:meth:`_schema_step`). Made
        here, the tables are not made again by the first call.
        """
        await self._detected()
        await self._create_tables()
        self._create = False

    async def upgrade_schema(self) -> list[str]:
        """Bring tables an earlier release made to this release's schema.

        The steps :meth:`create_schema` runs on every opening with
        ``create_schema=True``, on a store that must exist: the record of
        evicted ids (new since release 0.1) is created if missing, the
        log's columns of the conversations table (new since release 0.2)
        are added, then the conversation record's (``owner``, ``metadata``,
        ``created_at``, also new since release 0.2) and its two indexes, and the
        server-side append routine of this release, where the database runs
        one. The one thing rewritten is ``created_at`` of the rows lacking
        it: the ``created_at`` of the conversation's oldest message (none
        later than the row's ``updated_at``, its last write, which an
        earlier release kept), else ``updated_at``; this runs on every
        ``upgrade_schema``, for the rows an earlier release's processes made
        meanwhile, and is not listed. The routine an earlier release made
        stays for its processes still running (:meth:`drop_schema` drops
        it). Safe beside other processes opening or upgrading the same
        tables: each column, index and routine is added by one of them, the
        others find it there.

        Returns:
            One line per change, ``[]`` when the tables were current.

        Raises:
            StoreNotFoundError: the messages or conversations table does not
                exist; nothing is created.
        """
        await self._detected()
        async with self._connect() as connection:
            missing = await _run(connection, _missing_tables, self.tables)
        made = [self.tables.messages.name, self.tables.conversations.name]
        absent = [name for name in made if name in missing]
        if absent:
            where = self.engine.url.render_as_string(hide_password=True)
            raise StoreNotFoundError(
                f"table {absent[0]!r} does not exist in {where}: there is no "
                "store to upgrade (check table_name and schema; opening it "
                "with create_schema=True creates a new one)"
            )
        changes = [f"created table {name}" for name in missing]
        return changes + await self._make_current(fill=True)

    async def _create_tables(self) -> None:
        await self._make_current()

    async def _make_current(self, *, fill: bool = False) -> list[str]:
        """Create what is missing; return the columns, indexes and routines added.

        ``created_at`` is filled where it lacks when this call added the
        column, or with ``fill``.
        """
        dialect = self._dialect()

        async def prepare(connection: AsyncConnection) -> None:
            await _run(connection, dialect.prepare_database)

        await self._schema_step(prepare)
        for statement in dialect.create_statements(self.tables.all):
            # The write path's begin: on SQLite a deferred DDL transaction
            # cannot upgrade its lock past a racing creator.
            async def create(connection: AsyncConnection, ddl: Any = statement) -> None:
                await _run(connection, dialect.begin_write)
                await connection.execute(ddl)

            await self._schema_step(create)
        changes: list[str] = []
        table = self.tables.conversations
        added: list[str] = []

        # One column a step, reported once its step committed: where DDL
        # commits by itself (MariaDB), a step that fails after one ALTER is
        # run again and must not add, nor report, that column twice.
        async def add_column(connection: AsyncConnection) -> None:
            added.clear()
            await _run(connection, dialect.begin_write)
            columns = await _run(connection, missing_columns, self.tables)
            if columns:
                name = columns[0].name
                _log.info(
                    "adding column %s to table %s (%s)",
                    name,
                    table.name,
                    _ADDED_FOR[name],
                )
                await _run(connection, dialect.add_column, table, columns[0])
                added.append(name)

        while True:
            await self._schema_step(add_column)
            if not added:
                break
            fill = fill or added[0] == "created_at"
            changes.append(f"added column {added[0]} to table {table.name}")

        async def fill_created_at(connection: AsyncConnection) -> None:
            await _run(connection, dialect.begin_write)
            await connection.execute(self._sql.fill_created_at)

        if fill:
            await self._schema_step(fill_created_at)
        if dialect.keeps_conversation_indexes:
            for index in conversation_indexes(self.tables):
                made: list[str] = []

                # Looked for, then made, in one step: a racing creator makes
                # the CREATE fail, and the step runs again and finds it.
                async def create_index(
                    connection: AsyncConnection, index: Any = index, made: Any = made
                ) -> None:
                    made.clear()
                    await _run(connection, dialect.begin_write)
                    found = await _run(connection, dialect.existing_indexes, table)
                    if str(index.name).lower() not in found:
                        _log.info(
                            "creating index %s on table %s (the listing of "
                            "conversations)",
                            index.name,
                            table.name,
                        )
                        await _run(connection, dialect.create_index, index)
                        made.append(str(index.name))

                await self._schema_step(create_index)
                changes += [f"created index {n} on table {table.name}" for n in made]
        created: list[str] = []

        async def create_routines(connection: AsyncConnection) -> None:
            created[:] = await _run(connection, dialect.create_routines, self._sql)

        await self._schema_step(create_routines)
        return changes + [f"created routine {name}" for name in created]

    async def _schema_step(self, step: Work[None]) -> None:
        """Run and commit one schema step, again while another creator races it.

        A step whose connection was lost (a pooled connection the server
        dropped) runs once more on a fresh one, as :meth:`_write` does. Every
        step is guarded (``IF NOT EXISTS``, ``checkfirst``), so running one
        again after it had committed changes nothing.
        """
        dialect = self._dialect()
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
                # Another creator won between the guard and the CREATE (or, on
                # DuckDB, at commit): the guarded statement is now a no-op. On
                # SQLite the switch to WAL fails at once, without waiting,
                # while another connection makes the same switch.
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
            await _run(connection, dialect.drop_routines, self._sql)

        async def drop_tables(connection: AsyncConnection) -> None:
            await _run(connection, self.tables.metadata.drop_all, checkfirst=True)

        await self._schema_step(drop_routines)
        await self._schema_step(drop_tables)

    async def benchmark_floor(self) -> AsyncSqlBenchmarkFloor:
        """The driver's bare INSERT and SELECT, for ``chatledger bench``."""
        return await open_floor_async(self.engine, self._schema)

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
            if options in _RAW_READ_OPTIONS and self._reads_raw():
                rows: Sequence[Any] = await self._fetch_raw(
                    connection, ("read",), self._sql.read, parameters, bool(options)
                )
            else:
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
        """Return up to ``limit`` conversation ids after ``cursor``, in id order.

        One indexed range query per page on the conversations table: the
        cursor is the last id of the previous page.
        """
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

    # -- the conversation's record ----------------------------------------------

    async def set_conversation_info(
        self,
        conversation_id: str,
        *,
        owner: str | Literal[Unset.UNSET] | None = UNSET,
        metadata: Mapping[str, Any] | Literal[Unset.UNSET] = UNSET,
    ) -> ConversationInfo:
        """Set a conversation's owner or metadata in one transaction; return
        the record as stored (see ``AsyncSupportsConversationInfo``).

        Under the conversation row's lock, which makes the row when it is
        missing (a record without messages): the columns given are written
        (``metadata`` as JSON text, replacing the whole), the expiry renewed,
        and the row read back. ``updated_at`` stays. A conversation found
        expired is forgotten first, as a write to it would: its messages go,
        and its record starts again (made now, no owner, no metadata).
        """
        update = check_conversation_info(conversation_id, owner, metadata)
        dialect = await self._prepared()

        async def work(connection: AsyncConnection) -> ConversationInfo:
            now = utc_now()
            state = await _run(
                connection,
                dialect.lock_conversation,
                self._sql,
                conversation_id,
                now,
                create=True,
            )
            assert state is not None
            if state.expires_at is not None:
                now = utc_now()  # the lock may have waited: judge expiry as of now
                if state.expires_at <= now:
                    await _run(connection, dialect.forget, self._sql, conversation_id)
                    emptied = update_parameters(
                        conversation_id,
                        now,
                        self.ttl,
                        next_seq=state.next_seq,
                        system_count=0,
                        other_count=0,
                        weights=None,
                    )
                    await connection.execute(self._sql.update_conversation, emptied)
            self.fault_points.reach("after_lock")
            await connection.execute(
                self._sql.set_info,
                {
                    "cid": conversation_id,
                    "p_keep_owner": int(update.owner is UNSET),
                    "p_owner": None if update.owner is UNSET else update.owner,
                    "p_keep_metadata": int(update.metadata_json is UNSET),
                    "p_metadata": (
                        None if update.metadata_json is UNSET else update.metadata_json
                    ),
                    "p_expires_at": None if self.ttl is None else now + self.ttl,
                },
            )
            found = await connection.execute(
                self._sql.read_info, {"cid": conversation_id}
            )
            return conversation_info(found.one())

        return await self._write(conversation_id, work)

    async def get_conversation_info(
        self, conversation_id: str
    ) -> ConversationInfo | None:
        """Return a conversation's record, from its row alone; ``None`` when
        it has none or has expired."""
        validate_conversation_id(conversation_id)
        dialect = await self._prepared()
        parameters = {"cid": conversation_id, "now": utc_now()}

        async def work(connection: AsyncConnection) -> Any:
            options = dialect.read_options(_sync(connection))
            if options:
                await connection.execution_options(**options)
            return (await connection.execute(self._sql.get_info, parameters)).first()

        row = await self._read(work)
        return None if row is None else conversation_info(row)

    async def find_conversations(
        self,
        *,
        owner: str | None = None,
        metadata: Mapping[str, JsonValue] | None = None,
        updated_before: datetime | None = None,
        cursor: str | None = None,
        limit: int = DEFAULT_CONVERSATION_PAGE_SIZE,
    ) -> ConversationInfoPage:
        """Return a page of records, newest ``updated_at`` first, ties by id
        descending (see ``AsyncSupportsConversationInfo``).

        A keyset page: one range of an index read backwards from the
        cursor's ``(updated_at, id)``, ``(owner, updated_at, id)`` for an
        owner's and ``(updated_at, id)`` for everyone's (DuckDB, which keeps
        no index, scans and keeps the top). The metadata filter is compared
        in the query on PostgreSQL (``jsonb``) and SQLite (``json_each``);
        elsewhere the records are read in the listing's order, in growing
        batches, and compared here, until the page is full.
        """
        query = check_find_conversations(
            owner=owner,
            metadata=metadata,
            updated_before=updated_before,
            cursor=cursor,
            limit=limit,
        )
        dialect = await self._prepared()
        now = utc_now()

        async def work(connection: AsyncConnection) -> list[ConversationInfo]:
            options = dialect.read_options(_sync(connection))
            if options:
                await connection.execution_options(**options)
            return await self._listed(connection, query, now)

        return query.page(await self._read(work))

    async def _listed(
        self, connection: AsyncConnection, query: ConversationQuery, now: datetime
    ) -> list[ConversationInfo]:
        """Up to ``query.limit + 1`` matching records, in the listing's order."""
        dialect = self._dialect()
        wanted = query.limit + 1
        shapes = tuple(
            dialect.metadata_shape(key, value) for key, value in query.metadata.items()
        )
        in_sql = all(shape is not None for shape in shapes) and (
            not shapes or dialect.filters_metadata(_sync(connection))
        )
        native = dialect.native(_sync(connection))
        parameters: dict[str, Any] = {"now": now}
        if query.owner is not None:
            parameters["owner"] = query.owner
        if query.updated_before is not None:
            parameters["before"] = query.updated_before
        if in_sql:
            for index, (key, value) in enumerate(query.metadata.items()):
                parameters.update(dialect.metadata_parameters(index, key, value))
        rows = wanted if in_sql else max(wanted, _FILTERED_READ)
        after = query.after
        found: list[ConversationInfo] = []
        while True:
            statement = self._sql.listing(
                owner=query.owner is not None,
                before=query.updated_before is not None,
                after=after is not None,
                metadata=tuple(str(shape) for shape in shapes) if in_sql else (),
                native=native,
            )
            if after is not None:
                parameters["after_at"], parameters["after_id"] = after
            read = (
                await connection.execute(self._sql.limited(statement, rows), parameters)
            ).all()
            for row in read:
                info = conversation_info(row)
                # Compared here too where the query compared: PostgreSQL
                # passes metadata jsonb cannot hold, and MySQL's utf8mb4_bin
                # finds "alice " equal to "alice".
                if (
                    query.owner is None or info.owner == query.owner
                ) and metadata_matches(info.metadata, query.metadata):
                    found.append(info)
                    if len(found) == wanted:
                        return found
            if len(read) < rows:
                return found
            after = (read[-1].updated_at, read[-1].conversation_id)
            rows = min(rows * 2, max(wanted, _MAX_FILTERED_READ))

    # -- writes ----------------------------------------------------------------

    async def save_all(self, conversation_id: str, messages: Sequence[Message]) -> None:
        """Replace a conversation in one transaction; ``[]`` deletes it."""
        validate_conversation_id(conversation_id)
        batch = validate_messages(messages)
        check_ids(batch)
        if not batch:
            await self.delete_by_conversation_id(conversation_id)
            return
        dialect = await self._prepared()
        await self._check_sizes(batch)

        async def work(connection: AsyncConnection) -> None:
            now = utc_now()
            state = await _run(
                connection,
                dialect.lock_conversation,
                self._sql,
                conversation_id,
                now,
                create=True,
                probe_ids=[],
            )
            assert state is not None
            self.fault_points.reach("after_lock")
            await _run(connection, dialect.forget, self._sql, conversation_id)
            self.fault_points.reach("after_delete")
            stamped = stamp_messages(batch, now)
            rows, update = save_writes(
                conversation_id, stamped, state.next_seq, now, self.ttl
            )
            await connection.execute(self._sql.insert_messages, rows)
            self.fault_points.reach("after_insert")
            await connection.execute(self._sql.update_log, update)

        await self._write(conversation_id, work)

    async def save_many(self, conversations: Mapping[str, Sequence[Message]]) -> None:
        """Replace several conversations in one transaction; ``[]`` deletes one.

        The effect of :meth:`save_all` on each, all or none, for the cost of
        one transaction and a few statements per batch instead of several per
        conversation (see :class:`chatledger.AsyncSupportsSaveMany`). Every id and
        message is checked before any write. Rows are locked in id order.
        """
        batches: dict[str, list[Message]] = {}
        for conversation_id, messages in conversations.items():
            validate_conversation_id(conversation_id)
            with _naming(conversation_id):
                batch = validate_messages(messages)
                check_ids(batch)
            batches[conversation_id] = batch
        if not batches:
            return
        await self._prepared()
        for conversation_id, batch in batches.items():
            if batch:
                with _naming(conversation_id):
                    await self._check_sizes(batch)
        label = f"{len(batches)} conversations, from {min(batches)}"
        await self._write(label, functools.partial(self._save_many, batches=batches))

    async def _save_many(
        self, connection: AsyncConnection, batches: dict[str, list[Message]]
    ) -> None:
        dialect = self._dialect()
        now = utc_now()
        ids = sorted(batches)
        kept = [cid for cid in ids if batches[cid]]
        gone = [cid for cid in ids if not batches[cid]]
        next_seq = await _run(connection, dialect.lock_many, self._sql, kept, now)
        for conversation_id in gone:
            # Created when missing, as delete_by_conversation_id does.
            await _run(
                connection,
                dialect.lock_conversation,
                self._sql,
                conversation_id,
                now,
                create=True,
            )
        self.fault_points.reach("after_lock")
        for start in range(0, len(ids), MAX_IDS_PER_STATEMENT):
            chunk = ids[start : start + MAX_IDS_PER_STATEMENT]
            await connection.execute(self._sql.purge_messages, {"ids": chunk})
            await connection.execute(self._sql.purge_evicted, {"ids": chunk})
        # Between the message and the row deletes, as in delete_by_conversation_id.
        self.fault_points.reach("after_delete")
        for start in range(0, len(gone), MAX_IDS_PER_STATEMENT):
            chunk = gone[start : start + MAX_IDS_PER_STATEMENT]
            await connection.execute(self._sql.purge_conversations, {"ids": chunk})
        rows: list[dict[str, Any]] = []
        updates: list[dict[str, Any]] = []
        for conversation_id in kept:
            stamped = stamp_messages(batches[conversation_id], now)
            written, update = save_writes(
                conversation_id, stamped, next_seq[conversation_id], now, self.ttl
            )
            rows += written
            updates.append(update)
        if rows:
            await connection.execute(self._sql.insert_messages, rows)
            self.fault_points.reach("after_insert")
            await connection.execute(self._sql.update_log, updates)

    async def delete_by_conversation_id(self, conversation_id: str) -> None:
        """Remove a conversation; an unknown id does nothing."""
        validate_conversation_id(conversation_id)
        dialect = await self._prepared()

        async def work(connection: AsyncConnection) -> None:
            # Created when missing: the row's lock is what keeps an append
            # out until the delete commits. Without it, under READ COMMITTED,
            # an append committing between the two deletes kept its messages
            # and lost its row, and every later append met them at seq 0.
            await _run(
                connection,
                dialect.lock_conversation,
                self._sql,
                conversation_id,
                utc_now(),
                create=True,
            )
            self.fault_points.reach("after_lock")
            await _run(connection, dialect.forget, self._sql, conversation_id)
            self.fault_points.reach("after_delete")
            await connection.execute(
                self._sql.delete_conversation, {"cid": conversation_id}
            )

        await self._write(conversation_id, work)

    async def append_to_window(
        self, conversation_id: str, messages: Sequence[Message], window: Window
    ) -> AppendResult:
        """Append and evict in one transaction that locks this conversation only.

        Reads only the system messages (when the batch has one) and the oldest
        rows it may evict; the counts and size totals live in the conversation
        row. See :class:`chatledger.AsyncSupportsWindowAppend` for the contract.
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

    # -- the log ---------------------------------------------------------------

    async def append_to_log(
        self,
        conversation_id: str,
        messages: Sequence[Message],
        window: Window | None = None,
    ) -> AppendResult:
        """Append to the log in one transaction (see ``AsyncSupportsLog``).

        Nothing is evicted: the messages go after the last one, less the ids
        the conversation holds or held (its rows and the record of evicted
        ids) and the system messages equal to the current set (rule 1). The
        transaction locks the conversation row, which also answers how many
        of the ids are held and where the current system messages are; the
        system messages are read only when the batch has one (or where they
        are is not known yet: a conversation a window append or release 0.2
        wrote). Given a window with a counter, each message's size under it
        is stored while the conversation's sizes are all under that counter.
        """
        validate_conversation_id(conversation_id)
        batch = validate_messages(messages)
        if window is not None:
            checked_window(window)
        check_ids(batch)
        if not batch:
            return AppendResult()
        await self._prepared()
        await self._check_sizes(batch)
        done: tuple[AppendResult, int] | None = None
        if not self.fault_points.armed and all(
            m.role is not Role.SYSTEM for m in batch
        ):
            done = await self._append_log_at_once(conversation_id, batch, window)
        if done is None:
            done = await self._write(
                conversation_id,
                functools.partial(
                    self._append_log,
                    conversation_id=conversation_id,
                    batch=batch,
                    window=window,
                ),
            )
        result, last = done
        appended = len(result.appended)
        if appended and self.retention.trim_due(last - appended + 1, last):
            # Stored and committed already: a failing trim raises, and the
            # next due trim removes what this one did not.
            await self._write(
                conversation_id,
                functools.partial(
                    self._trim_log,
                    conversation_id=conversation_id,
                    window=window,
                    last=last,
                ),
            )
        return result

    async def _append_log_at_once(
        self,
        conversation_id: str,
        batch: list[Message],
        window: Window | None,
    ) -> tuple[AppendResult, int] | None:
        """A log append of a batch without a system message, the dialect's short way.

        One statement that commits alone (the dialect's
        ``log_append_statement``), or, where a write transaction excludes
        every other writer, one statement that advances the conversation row
        and the insert after it (``log_advance_statement``). Returns the
        result and the last sequence number stored, or ``None`` when the
        dialect has neither, or left the append to the transaction: an id
        the conversation holds or held, an expired conversation, a batch the
        statement cannot carry, or a server that is not the dialect's own
        product.
        """
        dialect = self._dialect()
        size = len(batch)
        statement = self._sql.log_append(size)
        advance = None if statement is not None else self._sql.log_advance(size)
        if statement is None and advance is None:
            return None
        now = utc_now()
        stamped = stamp_messages(batch, now)
        rows = log_append_rows(conversation_id, stamped, window)
        if not dialect.log_append_takes(rows):
            return None
        parameters = log_append_parameters(conversation_id, rows, window, now, self.ttl)
        if statement is not None:
            parameters.update(row_values(rows, dialect.log_append_arrays_past))
            last = await self._log_append_alone(
                conversation_id, statement, size, parameters
            )
        else:
            last = await self._log_append_advancing(
                conversation_id, advance, rows, parameters
            )
        if last is None:
            return None
        return AppendResult(stamped), last

    async def _log_append_alone(
        self,
        conversation_id: str,
        statement: Any,
        size: int,
        parameters: dict[str, Any],
    ) -> int | None:
        """Run the dialect's one-statement log append; the last number it stored."""
        dialect = self._dialect()
        commits_itself = dialect.log_append_commits_itself

        def compiled_for(connection: AsyncConnection) -> CompiledStatement:
            key = ("log append", size)
            compiled = self._raw_statements.get(key)
            if compiled is None:
                sync = _sync(connection)
                compiled = dialect.raw_log_append(sync, statement, size)
                self._keep_raw(key, compiled)
            return compiled

        async def call(connection: AsyncConnection) -> list[Any] | None:
            if not dialect.native(_sync(connection)):
                return None
            if True:  # async
                if runs_raw_async(self.engine):
                    return await fetch_all_async(
                        connection,
                        compiled_for(connection),
                        parameters,
                        autocommit=not commits_itself,
                        ends=commits_itself,
                    )
            # Never on an asyncio driver: runs_raw knows sync drivers only.
            if runs_raw(self.engine):
                return fetch_all(
                    _sync(connection),
                    compiled_for(connection),
                    parameters,
                    autocommit=not commits_itself,
                    commits_itself=commits_itself,
                )
            if not commits_itself:
                await connection.execution_options(isolation_level="AUTOCOMMIT")
            return list(await connection.execute(statement, parameters))

        if True:  # async
            rows = await settled(
                self._write(conversation_id, call, commits_itself=True)
            )
        else:
            rows = self._write(conversation_id, call, commits_itself=True)
        stored = [int(row[0]) for row in rows or () if row[0] is not None]
        return max(stored) if stored else None

    async def _log_append_advancing(
        self,
        conversation_id: str,
        advance: Any,
        rows: list[dict[str, Any]],
        parameters: dict[str, Any],
    ) -> int | None:
        """Advance the conversation row, then insert ``rows``, in one write
        transaction; the last number stored, ``None`` if the row refused."""
        dialect = self._dialect()
        size = len(rows)

        async def write(connection: AsyncConnection) -> int | None:
            found = (await connection.execute(advance, parameters)).first()
            if found is None:
                return None  # nothing changed: the commit is empty
            base, sized = int(found[0]), bool(found[1])
            await connection.execute(
                self._sql.insert_messages, numbered_from(rows, base, sized)
            )
            return base + size - 1

        def on_driver(
            connection: AsyncConnection,
        ) -> Callable[[RawCalls, WriteGate], int | None]:
            # The same, on the driver's connection: the write transaction is
            # the dialect's begin (SQLite's BEGIN IMMEDIATE) and the driver's
            # commit, with no statement of SQLAlchemy's in between.
            return functools.partial(
                advance_then_insert,
                dialect=dialect,
                advancing=self._compiled(connection, ("log advance", size), advance),
                parameters=parameters,
                inserting=self._compiled(
                    connection, ("insert messages",), self._sql.insert_messages
                ),
                rows=rows,
            )

        if True:  # async

            async def together(connection: AsyncConnection) -> int | None:
                # On aiosqlite, the whole of it in one trip to its thread: a
                # trip a statement costs as much as the statement.
                async with async_driver_calls(connection) as calls:
                    return await calls.together(on_driver(connection))

            # A dialect that says what begins its writes (SQLite's) is sent
            # that; any other keeps SQLAlchemy's path.
            begins_itself = dialect.write_begins({}, True) is not None
            if begins_itself and runs_together(self.engine):
                return await self._write(conversation_id, together, commits_itself=True)
        # Never on an asyncio driver: runs_raw knows sync drivers only.
        if runs_raw(self.engine):

            async def raw(connection: AsyncConnection) -> int | None:
                with raw_calls(_sync(connection)) as calls:
                    return on_driver(connection)(calls, OPEN_GATE)

            return await self._write(conversation_id, raw, commits_itself=True)
        return await self._write(conversation_id, write)

    def _compiled(
        self, connection: AsyncConnection, key: Any, statement: Any
    ) -> CompiledStatement:
        """``statement`` compiled for the engine's driver, kept under ``key``."""
        compiled = self._raw_statements.get(key)
        if compiled is None:
            compiled = CompiledStatement(connection.dialect, [statement])
            self._keep_raw(key, compiled)
        return compiled

    def _keep_raw(self, key: Any, compiled: CompiledStatement) -> None:
        """Keep ``compiled`` under ``key``, up to a bound on how many are kept."""
        if len(self._raw_statements) < _KEPT_RAW_STATEMENTS:
            self._raw_statements[key] = compiled

    async def _append_log(
        self,
        connection: AsyncConnection,
        conversation_id: str,
        batch: list[Message],
        window: Window | None,
    ) -> tuple[AppendResult, int]:
        """A log append in a transaction; the result and the last number stored."""
        dialect = self._dialect()
        now = utc_now()
        ids = [m.id for m in batch]
        probed = probed_ids(ids)
        state = await _run(
            connection,
            dialect.lock_conversation,
            self._sql,
            conversation_id,
            now,
            create=True,
            probe_ids=probed,
        )
        assert state is not None
        expired = False
        if state.expires_at is not None:
            now = utc_now()  # the lock may have waited: judge expiry as of now
            if state.expires_at <= now:
                await _run(connection, dialect.forget, self._sql, conversation_id)
                state = forgotten(state)
                expired = True
        self.fault_points.reach("after_lock")
        known: set[str] = set()
        if len(probed) < len(ids) or state.known is None or state.known > 0:
            for chunk in id_chunks(ids):
                found = await connection.execute(
                    self._sql.known_ids, {"cid": conversation_id, "ids": chunk}
                )
                known.update(found.scalars())
        fresh = [m for m in batch if m.id not in known]
        has_system = any(m.role is Role.SYSTEM for m in fresh)
        current: list[tuple[int, Message]] = []
        if not expired and (has_system or not state.system_known):
            found = await connection.execute(
                self._sql.current_system,
                {"cid": conversation_id, "now": now, "counter": None},
            )
            current = [(row.sequence, row.message) for row in map(log_row, found)]
        appended = merge_system([m for _, m in current], fresh).new
        if not appended:
            return AppendResult(), -1
        stamped = stamp_messages(appended, now)
        writes = log_writes(
            conversation_id,
            state,
            stamped,
            window,
            now,
            self.ttl,
            system_range(state, current),
        )
        if await _run(
            connection, dialect.write_log, self._sql, writes.rows, writes.update
        ):
            self.fault_points.reach("after_insert")
        else:
            await connection.execute(self._sql.insert_messages, writes.rows)
            self.fault_points.reach("after_insert")
            await connection.execute(self._sql.update_log, writes.update)
        return AppendResult(stamped), writes.rows[-1]["seq"]

    async def _trim_log(
        self,
        connection: AsyncConnection,
        conversation_id: str,
        window: Window | None,
        last: int,
    ) -> None:
        """Trim a bounded log after the append that ended at ``last``.

        Under the conversation row's lock, as :mod:`chatledger.retention`
        says: the cut falls at the first user message among the newest
        ``keep``, never past the oldest message the view of ``window``
        shows; the system messages a view shows stay; the ids removed join
        the record of evicted ids and the row's tallies lose them.
        """
        now = utc_now()
        state = await _run(
            connection,
            self._dialect().lock_conversation,
            self._sql,
            conversation_id,
            now,
            create=False,
        )
        if state is None or (state.expires_at is not None and state.expires_at <= now):
            return
        parameters = {"cid": conversation_id, "now": now, "counter": None}
        shown_from = None
        if window is not None:
            view = await self._tail_view(
                connection, window, {**parameters, "counter": window.counter_id}
            )
            shown_from = None if view is None else view.shown_from()
        user_from = (
            await connection.execute(
                self._sql.first_user_from,
                {"cid": conversation_id, "after": self.retention.first_kept(last)},
            )
        ).scalar()
        cutoff = self.retention.cutoff(
            last,
            user_from=None if user_from is None else int(user_from),
            shown_from=shown_from,
        )
        shown_system = {
            int(row[0])
            for row in await connection.execute(self._sql.current_system, parameters)
        }
        candidates = (
            await connection.execute(
                self._sql.trim_candidates, {"cid": conversation_id, "below": cutoff}
            )
        ).all()
        trim = log_trim(conversation_id, candidates, shown_system)
        if not trim.seqs:
            return
        for start in range(0, len(trim.seqs), MAX_IDS_PER_STATEMENT):
            await connection.execute(
                self._sql.delete_seqs,
                {
                    "cid": conversation_id,
                    "seqs": trim.seqs[start : start + MAX_IDS_PER_STATEMENT],
                },
            )
        if trim.evicted:
            await connection.execute(self._sql.insert_evicted, trim.evicted)
        if trim.trim_below is not None:
            await connection.execute(
                self._sql.trim_evicted,
                {"cid": conversation_id, "below": trim.trim_below},
            )
        await connection.execute(
            self._sql.untally_trimmed,
            {**trim.untally, "p_expires_at": state.expires_at},
        )

    # -- removals ----------------------------------------------------------------

    async def remove_newest(
        self, conversation_id: str, count: int = 1
    ) -> list[Message]:
        """Remove the newest ``count`` messages in one transaction; return them.

        See ``AsyncSupportsLogRemoval``: under the conversation row's lock,
        the rows are read and deleted, the row's tallies lose them, and when
        a current system message goes, the system rows of the newest append
        that stored any left become current (rule 1).
        """
        validate_conversation_id(conversation_id)
        validate_removal_count(count)
        await self._prepared()
        newest = self._sql.limited(self._sql.removal_newest, count)
        return await self._write(
            conversation_id,
            functools.partial(
                self._remove,
                conversation_id=conversation_id,
                reads=[(newest, {"cid": conversation_id})],
            ),
        )

    async def remove_messages(
        self, conversation_id: str, message_ids: Sequence[str]
    ) -> list[Message]:
        """Remove the messages of ``message_ids`` in one transaction; return them.

        As :meth:`remove_newest` does, for the ids the log holds.
        """
        validate_conversation_id(conversation_id)
        ids = list(dict.fromkeys(validate_message_ids(message_ids)))
        if not ids:
            return []
        await self._prepared()
        reads = [
            (self._sql.removal_named, {"cid": conversation_id, "ids": chunk})
            for chunk in id_chunks(ids)
        ]
        return await self._write(
            conversation_id,
            functools.partial(
                self._remove, conversation_id=conversation_id, reads=reads
            ),
        )

    async def _remove(
        self,
        connection: AsyncConnection,
        conversation_id: str,
        reads: list[tuple[Any, dict[str, Any]]],
    ) -> list[Message]:
        now = utc_now()
        state = await _run(
            connection,
            self._dialect().lock_conversation,
            self._sql,
            conversation_id,
            now,
            create=False,
        )
        if state is None or (state.expires_at is not None and state.expires_at <= now):
            return []
        rows: list[Any] = []
        for statement, parameters in reads:
            rows += (await connection.execute(statement, parameters)).all()
        if not rows:
            return []
        rows.sort(key=lambda row: int(row[0]))
        seqs = [int(row[0]) for row in rows]
        for start in range(0, len(seqs), MAX_IDS_PER_STATEMENT):
            await connection.execute(
                self._sql.delete_seqs,
                {
                    "cid": conversation_id,
                    "seqs": seqs[start : start + MAX_IDS_PER_STATEMENT],
                },
            )
        await connection.execute(
            self._sql.untally,
            {
                **untally(conversation_id, [(row[2], row[6]) for row in rows]),
                "now": now,
                "p_expires_at": None if self.ttl is None else now + self.ttl,
            },
        )
        if any(row[2] == Role.SYSTEM.value for row in rows):
            shown = (
                await connection.execute(
                    self._sql.current_system,
                    {"cid": conversation_id, "now": now, "counter": None},
                )
            ).first()
            if state.system_known or shown is None:
                first, last = (
                    await connection.execute(
                        self._sql.newest_system_batch, {"cid": conversation_id}
                    )
                ).one()
                await connection.execute(
                    self._sql.set_system_range,
                    {
                        "cid": conversation_id,
                        "p_system_batch": first,
                        "p_system_last": last,
                    },
                )
        return [log_row(row).message for row in rows]

    async def find_window(self, conversation_id: str, window: Window) -> list[Message]:
        """Return the view of ``window`` on the log, oldest first.

        One query reads the current system messages (a range of the primary
        key the conversation row bounds) and the newest other rows (the
        window's limit plus a few, or 32 for tokens), through the primary
        key's order, never the whole log; core's ``TailView`` builds the view
        from them. Only a view reaching further back (a turn larger than the
        window, rule 3, or a token window over more rows) reads older rows,
        each read starting again if the row it continues from has gone (the
        conversation was replaced meanwhile). Sizes stored under the window's
        counter are used, others measured.
        """
        validate_conversation_id(conversation_id)
        checked_window(window)
        await self._prepared()
        parameters: dict[str, Any] = {
            "cid": conversation_id,
            "now": utc_now(),
            "counter": window.counter_id,
        }

        dialect = self._dialect()

        async def work(connection: AsyncConnection) -> list[Message] | None:
            # Each query reads on its own (on PostgreSQL in autocommit: one
            # round trip, no BEGIN and ROLLBACK): a read further back checks
            # that the row it continues from is still stored.
            options = dialect.read_options(_sync(connection))
            raw = options in _RAW_READ_OPTIONS and self._reads_raw()
            if options and not raw:
                await connection.execution_options(**options)
            view = await self._tail_view(
                connection, window, parameters, raw=bool(options) if raw else None
            )
            return None if view is None else view.messages()

        while True:
            shown = await self._read(work)
            if shown is not None:
                return shown

    async def _tail_view(
        self,
        connection: AsyncConnection,
        window: Window,
        parameters: dict[str, Any],
        *,
        raw: bool | None = None,
    ) -> TailView | None:
        """The view of ``window``, read newest first; ``None`` if replaced meanwhile.

        With ``raw`` each query runs on the DBAPI cursor (``raw`` says
        whether in autocommit, see ``fetch_all``), each in its own
        transaction; never inside a write. A row is decoded when the view
        takes it: those past the one that settles the view never are.
        """
        reads = self._view_reads(window)
        rows = next(reads)
        found = await self._view_rows(
            connection, ("view", rows), self._sql.view(rows), parameters, raw
        )
        system = sorted([row for row in found if row[2] == _SYSTEM], key=_SEQUENCE)
        tail: Sequence[Any] = sorted(
            [row for row in found if row[2] != _SYSTEM], key=_SEQUENCE, reverse=True
        )
        view = TailView(window, [log_row(row) for row in system])
        while not view.feed(map(log_row, tail)) and len(tail) == rows:
            rows = next(reads)
            older = self._sql.limited(self._sql.log_older, rows + 1)
            before = int(tail[-1][0])
            read = await self._view_rows(
                connection,
                ("view older", rows),
                older,
                {**parameters, "before": before},
                raw,
            )
            if not read or int(read[0][0]) != before:
                return None  # replaced meanwhile: read the view again
            tail = read[1:]
        return view

    async def _view_rows(
        self,
        connection: AsyncConnection,
        key: Any,
        statement: Any,
        parameters: dict[str, Any],
        raw: bool | None,
    ) -> Sequence[Any]:
        """The rows of one of a view's queries (see :meth:`_tail_view`)."""
        if raw is None:
            return (await connection.execute(statement, parameters)).all()
        return await self._fetch_raw(connection, key, statement, parameters, raw)

    def _reads_raw(self) -> bool:
        """Whether reads go to the driver's connection right now, compiled once
        (:mod:`chatledger_sql.compiled`): on sync drivers, and on aiosqlite's,
        psycopg's and asyncmy's asyncio connections."""
        if True:  # async
            return runs_raw_async(self.engine)
        else:
            return runs_raw(self.engine)

    async def _fetch_raw(
        self,
        connection: AsyncConnection,
        key: Any,
        statement: Any,
        parameters: dict[str, Any],
        autocommit: bool,
    ) -> list[Any]:
        """Read on the DBAPI cursor, as the dialect sends a read (its
        ``raw_read``), compiled once under ``key``."""
        found = self._raw_reads.get(key)
        if found is None:
            found = self._dialect().raw_read(_sync(connection), statement)
            if len(self._raw_reads) < _KEPT_RAW_STATEMENTS:
                self._raw_reads[key] = found
        compiled, ends = found
        if True:  # async
            return await fetch_all_async(
                connection,
                compiled,
                parameters,
                autocommit=autocommit and not ends,
                ends=ends,
            )
        else:
            return fetch_all(
                _sync(connection),
                compiled,
                parameters,
                autocommit=autocommit and not ends,
                commits_itself=ends,
            )

    async def find_messages_page(
        self,
        conversation_id: str,
        cursor: str | None = None,
        limit: int = DEFAULT_MESSAGE_PAGE_SIZE,
        newest_first: bool = True,
    ) -> MessagePage:
        """Return one page of the log, newest first by default.

        One query per page: a range of the primary key after the cursor's
        sequence number. Pages stay exact while messages are appended: each
        message is on exactly one page.
        """
        validate_conversation_id(conversation_id)
        after, limit = check_message_page(cursor, limit, newest_first=newest_first)
        await self._prepared()
        parameters: dict[str, Any] = {"cid": conversation_id, "now": utc_now()}
        sql = self._sql
        if after is None:
            base = sql.page_newest if newest_first else sql.page_oldest
        else:
            base = sql.page_newest_after if newest_first else sql.page_oldest_after
            parameters["after"] = after
        statement = self._sql.limited(base, limit + 1)

        dialect = self._dialect()

        async def work(connection: AsyncConnection) -> list[Any]:
            options = dialect.read_options(_sync(connection))
            if options:
                await connection.execution_options(**options)
            return list(await connection.execute(statement, parameters))

        rows = await self._read(work)
        return message_page(
            ((int(row[0]), decode_raw(*row[1:])) for row in rows),
            limit,
            newest_first=newest_first,
        )

    async def purge_expired(self, *, batch_size: int = 500) -> int:
        """Delete every conversation that has expired; return how many.

        Reads already hide expired conversations; this reclaims their storage.
        Run it now and then (from a scheduled job, say). Each batch of up to
        ``batch_size`` conversations is one transaction that locks their rows,
        checks again that they have expired (a write may have just renewed
        one), then deletes their messages and rows. Finding candidates scans
        the conversations table, which has no index on ``expires_at``, so that
        writes stay cheap.

        Args:
            batch_size: Conversations per transaction, 1 to 1000.

        Raises:
            ValueError: ``batch_size`` is out of range.
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
                await self._raise_if_tables_missing(error)
                raise
        async with self._connect() as connection:
            return await work(connection)

    async def _raise_if_tables_missing(self, error: exc.DBAPIError) -> None:
        """Name the missing table when a read or write failed for want of one.

        A table goes missing under a repository opened with
        ``create_schema=False``; the check runs on the failure path only. A
        database made before the record of evicted ids existed lacks only
        its table, which writes need and :meth:`create_schema` adds; one made
        before the log, or before the conversation's record, lacks the
        conversation columns they added, likewise.
        """
        try:
            async with self._connect() as connection:
                missing = await _run(connection, _missing_tables, self.tables)
                columns = (
                    []
                    if missing
                    else await _run(connection, missing_columns, self.tables)
                )
        except exc.DBAPIError:
            return
        where = self.engine.url.render_as_string(hide_password=True)
        if columns:
            raise StoreNotFoundError(
                f"table {self.tables.conversations.name!r} in {where} lacks the "
                f"column {columns[0].name!r} ({_ADDED_FOR[columns[0].name]}): the "
                "store was made by an earlier version; create_schema() adds it "
                "(as does opening it with create_schema=True, the default)"
            ) from error
        if not missing:
            return
        if missing == [self.tables.evicted.name]:
            raise StoreNotFoundError(
                f"table {missing[0]!r} does not exist in {where}: the store was "
                "made by an earlier version; create_schema() adds the table (as "
                "does opening it with create_schema=True, the default)"
            ) from error
        raise StoreNotFoundError(
            f"table {missing[0]!r} does not exist in {where} (check table_name "
            "and schema; a read never creates it)"
        ) from error

    async def _check_sizes(self, batch: list[Message]) -> None:
        """Refuse, before writing, a message whose row the server would refuse."""
        if self._statement_limit is _UNKNOWN:
            dialect = self._dialect()
            async with self._connect() as connection:
                limit = await _run(connection, dialect.max_statement_bytes)
            self._statement_limit = limit
        if self._statement_limit is not None:
            check_sizes(batch, self._statement_limit)

    async def _write(
        self, conversation_id: str, work: Work[T], *, commits_itself: bool = False
    ) -> T:
        """Run a write transaction, again after a deadlock, race or lost connection.

        Gives up with :class:`chatledger.ContentionError` after ``MAX_ATTEMPTS``
        (:func:`chatledger_sql.steps.check_retry`). With
        ``commits_itself``, ``work`` runs one statement that commits on its
        own (in autocommit, or a stored procedure that begins and commits its
        transaction) on the connection it is given, which has no transaction
        open: no ``BEGIN`` or ``COMMIT`` round trip goes with it.

        A write whose connection was lost (the server restarted, a pooled
        connection timed out) runs once more on a fresh connection. That is
        safe even if the lost attempt had committed: an append of stored
        message ids is a no-op, ``save_all`` replaces, a delete deletes.
        """
        dialect = self._dialect()
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
                try:
                    check_retry(error, attempt, dialect, conversation_id)
                except exc.DBAPIError:
                    await self._raise_if_tables_missing(error)
                    raise
            except RetryTransaction as error:
                check_retry(error, attempt, dialect, conversation_id)
            else:
                self.fault_points.reach("after_commit")
                return result
            await asyncio.sleep(retry_pause(attempt))

    async def _transaction(self, connection: AsyncConnection, work: Work[T]) -> T:
        """Run ``work`` in the dialect's write transaction and commit it.

        Leaving by an error (a cancellation included) rolls back: the
        connection's close does, as it goes back to the pool. On an async
        driver a cancellation that comes once the commit is under way waits
        for its answer (:func:`chatledger.adapters.settled`): the write has
        then landed or not, for good.
        """
        dialect = self._dialect()
        writing = dialect.writing(_sync(connection))
        await _run(connection, _enter, writing)
        try:
            result = await work(connection)
            self.fault_points.reach("before_commit")
            if True:  # async
                commit = connection.run_sync(dialect.commit_write)
                if dialect.settles_commit(_sync(connection)):
                    await settled(commit)
                else:
                    await commit
            else:
                dialect.commit_write(connection)
        except BaseException as error:
            await _run(connection, _leave, writing, error)
            raise
        await _run(connection, _leave, writing, None)
        return result

    async def _append_by_routine(
        self,
        routine: AppendRoutine,
        conversation_id: str,
        batch: list[Message],
        window: Window,
    ) -> AppendResult | None:
        """Append in one call of the dialect's server-side routine.

        ``None`` when the routine left the append to the portable path, or
        the database has none (a product the dialect serves as a fallback, a
        store made before it existed): then none is called again. A batch
        whose call would not fit a statement (:meth:`AppendRoutine.fits`)
        goes to the portable path unsent.
        """
        dialect = self._dialect()
        parameters, stamped = routine.parameters(
            conversation_id, batch, window, utc_now(), self.ttl
        )
        if not routine.fits(parameters, self._statement_limit):
            return None

        async def call(connection: AsyncConnection) -> Any:
            if not dialect.runs_routines(_sync(connection)):
                return None
            commits_itself = routine.commits_itself
            # Never on an asyncio driver: runs_raw knows sync drivers only.
            if runs_raw(self.engine):
                if self._raw_routine is None:
                    self._raw_routine = CompiledStatement(
                        connection.dialect, [routine.call]
                    )
                return fetch_all(
                    _sync(connection),
                    self._raw_routine,
                    parameters,
                    autocommit=not commits_itself,
                    commits_itself=commits_itself,
                )[0]
            if not commits_itself:
                await connection.execution_options(isolation_level="AUTOCOMMIT")
            return (await connection.execute(routine.call, parameters)).one()

        try:
            if True:  # async
                row = await settled(
                    self._write(conversation_id, call, commits_itself=True)
                )
            else:
                row = self._write(conversation_id, call, commits_itself=True)
        except exc.DBAPIError as error:
            if not dialect.is_missing_routine(error):
                raise
            row = None
        if row is None:
            self._routine = None
            return None
        return routine.result(row, stamped)

    if True:  # async
        # On a cancellation the connection is closed, not pooled again.
        @contextlib.asynccontextmanager
        async def _connect(self) -> AsyncIterator[AsyncConnection]:
            """A pooled connection, discarded rather than pooled after a cancellation.

            A statement cancelled while its answer was on the way leaves the
            driver's connection in a state nobody knows (a reply still to read,
            a transaction the rollback did not reach); closing it is the one
            sure way that the next user of the pool does not read it. The
            server rolls back whatever the closed connection had begun.
            """
            async with pooled_connection(self.engine, self._quiet) as connection:
                try:
                    yield connection
                except BaseException as error:
                    if not isinstance(error, Exception):
                        await connection.invalidate(error)
                    raise

    else:
        # The pool's connection, as it is.
        def _connect(self) -> Connection:
            """A pooled connection."""
            return self.engine.connect()

    @contextlib.asynccontextmanager
    async def _serialized(self) -> AsyncIterator[None]:
        lock = getattr(self, "_writer_lock", None)
        if True:  # async
            lock = None if lock is None else lock.get()  # the running loop's
        if lock is None:
            yield
        else:
            async with lock:
                yield

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
    ) -> AsyncIterator[Sequence[Any]]:
        """Stream the oldest non-system rows, a batch at a time: the lock's
        peek, then by ``chunk``, doubled each time."""
        after = -1
        if state.oldest is not None:
            yield state.oldest
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
            yield rows
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
        dialect = self._dialect()
        now = utc_now()
        ids = [m.id for m in batch]
        probed = probed_ids(ids)
        counter = window.counter_id
        # The lock statement (where the dialect can) also reads the oldest
        # rows, as many as a steady-state eviction of this batch needs.
        state = await _run(
            connection,
            dialect.lock_conversation,
            self._sql,
            conversation_id,
            now,
            create=True,
            probe_ids=probed,
            peek=rows_to_peek(window, len(batch)),
        )
        assert state is not None
        if state.expires_at is not None:
            now = utc_now()  # the lock may have waited: judge expiry as of now
            if state.expires_at <= now:
                # An expired conversation's messages and evicted ids go first.
                await _run(connection, dialect.forget, self._sql, conversation_id)
                state = forgotten(state)
        self.fault_points.reach("after_lock")
        known: set[str] = set()
        if len(probed) < len(ids) or state.known is None or state.known > 0:
            for chunk in id_chunks(ids):
                found = await connection.execute(
                    self._sql.known_ids, {"cid": conversation_id, "ids": chunk}
                )
                known.update(found.scalars())
        fresh = stamp_messages((m for m in batch if m.id not in known), now)
        if not fresh:
            return AppendResult()
        if counter is not None and state.weight_counter != counter:
            # The stored weights are stale: measure every stored message once.
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
        if await _run(
            connection,
            dialect.write_append,
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
            oldest = self._oldest(connection, conversation_id, expected, state)
            async for rows in oldest:
                for row in rows:
                    yield stored_entry(row, counted)

        stored = stored_window(AsyncStoredWindow, window, state, system, read_oldest)
        return stored, system_seqs


def _detectable_now(engine: AsyncEngine) -> bool:
    """The product is known without connecting (see ``dialects.product_name``)."""
    dialect = engine.dialect
    return dialect.name != "mysql" or dialect.server_version_info is not None


@contextlib.contextmanager
def _naming(conversation_id: str) -> Iterator[None]:
    """Say which conversation of a ``save_many`` call a refusal is about."""
    try:
        yield
    except ChatLedgerError as error:
        raise type(error)(f"conversation {conversation_id!r}: {error}") from error


def _check_options(
    cls: type[AsyncSqlChatMemoryRepository], options: dict[str, Any]
) -> None:
    """Refuse an option the constructor would not take, listing those it takes."""
    parameters = inspect.signature(cls.__init__).parameters.values()
    valid = {p.name for p in parameters if p.kind is p.KEYWORD_ONLY}
    unknown = sorted(set(options) - valid)
    if unknown:
        listed = ", ".join(sorted(valid | {"engine_options"}))
        raise InvalidOptionError(
            f"{cls.__name__}.from_url takes no option {unknown[0]!r}; "
            f"its options are: {listed}"
        )


def _rollback_unless_idle(
    dbapi_connection: Any, connection_record: Any, reset_state: Any
) -> None:
    # The pool rolls back every connection it takes back, even after a
    # COMMIT: PyMySQL and asyncmy send that ROLLBACK, a round trip per
    # operation for nothing, aiosqlite hands it to its thread and back
    # (~0.1 ms), and psycopg's async adapter awaits it in a greenlet. Each
    # driver knows without I/O whether a transaction is open; with none, the
    # return needs no I/O at all (chatledger_sql.pool_checkout).
    if reset_state.terminate_only or reset_state.transaction_was_reset:
        return
    if transaction_open(connection_record.driver_connection):
        dbapi_connection.rollback()


def _sqlite_on_connect(dbapi_connection: Any, connection_record: Any) -> None:
    # Engines made by from_url: WAL (readers never wait on the writer) and a
    # generous busy timeout for every pooled connection.
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA busy_timeout = 30000")
        cursor.execute("PRAGMA journal_mode=WAL")
    finally:
        cursor.close()


def _roll_back_before_discarding(engine: AsyncEngine) -> None:
    """Have ``engine`` roll back a SQLite connection before discarding it."""
    target = _engine_of(engine)
    if not event.contains(target, "invalidate", _sqlite_roll_back_first):
        event.listen(target, "invalidate", _sqlite_roll_back_first)


def _sqlite_roll_back_first(
    dbapi_connection: Any, connection_record: Any, exception: BaseException | None
) -> None:
    # A statement interrupted while it had rows to give (a cancelled task, a
    # KeyboardInterrupt) is never finalized: SQLAlchemy drops its cursor
    # unclosed. sqlite3_close_v2 then leaves the connection a "zombie" that
    # keeps its transaction, and with it the write lock of BEGIN IMMEDIATE,
    # until the garbage collector finalizes that statement; every other
    # writer meanwhile fails with "database is locked". A ROLLBACK first
    # (which aborts pending statements) releases the lock before the close.
    # On aiosqlite it is queued behind the interrupted statement, on the
    # connection's own thread, and runs even if this wait is cancelled too.
    # It may fail on a broken connection: the close that follows is left to
    # roll back, as it did before, and the error that discards it goes on.
    with contextlib.suppress(Exception):
        dbapi_connection.rollback()
