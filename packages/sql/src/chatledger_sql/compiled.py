"""Statements compiled once for an engine's dialect, run on the DBAPI cursor.

Example:
    from sqlalchemy import bindparam, create_engine, text
    from chatledger_sql.compiled import CompiledStatement, fetch_all

    engine = create_engine("sqlite://")
    select = text("SELECT :word || '!'").bindparams(bindparam("word"))
    read = CompiledStatement(engine.dialect, [select])
    with engine.connect() as connection:
        rows = fetch_all(connection, read, {"word": "hi"}, autocommit=False)
    assert rows == [("hi!",)]

SQLAlchemy still owns the engine: the URL, the pool, the DDL, and every
statement's text, which it compiles once here. What this skips on the hot
read is its per-call work (the compiled-cache lookup, parameter and result
processing, ``Row`` objects): about a quarter of a window read's client time
on PostgreSQL. A DBAPI error is raised as SQLAlchemy raises it
(:class:`sqlalchemy.exc.DBAPIError`, ``connection_invalidated`` set and the
connection invalidated when the server dropped it), so callers handle both
paths alike. :func:`runs_raw` says when an engine must keep SQLAlchemy's
path: its own drivers only, and never while ``echo`` or a cursor-execute
listener (logging, tracing) would miss the statement.

On aiosqlite and psycopg's asyncio connection (:func:`runs_raw_async`),
:func:`fetch_all_async` and :func:`async_driver_calls` send each statement
to the driver's connection in one call: on aiosqlite, where every call of
SQLAlchemy's cursor is a trip to the driver's thread and back, one such trip;
on psycopg without the greenlet switch SQLAlchemy's adapter makes.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import (
    AsyncIterator,
    Callable,
    Generator,
    Iterator,
    MutableMapping,
    Sequence,
)
from typing import TYPE_CHECKING, Any, TypeVar, cast

from sqlalchemy import exc
from sqlalchemy.engine import Connection, Dialect, Engine
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.elements import ClauseElement

from chatledger.adapters import settled

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

__all__ = [
    "ASYNC_RAW_DRIVERS",
    "OPEN_GATE",
    "PARAMSTYLES",
    "RAW_DRIVERS",
    "AsyncDriverCalls",
    "CompiledStatement",
    "RawCalls",
    "WriteGate",
    "async_driver_calls",
    "fetch_all",
    "fetch_all_async",
    "raw_calls",
    "runs_raw",
    "runs_raw_async",
    "runs_together",
    "transaction_open",
]

#: The drivers' parameter styles a compiled statement binds: by position
#: (``qmark``, ``format``) or by name (``pyformat``, ``named``).
PARAMSTYLES = ("qmark", "format", "pyformat", "named")
_POSITIONAL = ("qmark", "format")

#: (dialect, driver) pairs whose DBAPI cursor reads are run on directly.
RAW_DRIVERS = frozenset(
    {
        ("sqlite", "pysqlite"),
        ("postgresql", "psycopg"),
        ("mysql", "pymysql"),
        ("mariadb", "pymysql"),
    }
)
#: The same for asyncio drivers, sent to the driver's connection directly:
#: aiosqlite, whose every cursor call is a trip to its thread and back (one
#: ``execute_fetchall`` is one trip); psycopg, whose statements through
#: SQLAlchemy's adapter cost each a greenlet switch and more client time than
#: the round trip; asyncmy, whose MariaDB statements SQLAlchemy never
#: prepared (parsed anew each time) and followed with a ROLLBACK round trip.
ASYNC_RAW_DRIVERS = frozenset(
    {
        ("sqlite", "aiosqlite"),
        ("postgresql", "psycopg"),
        ("mysql", "asyncmy"),
        ("mariadb", "asyncmy"),
    }
)
#: The MySQL protocol's status bit for an open transaction.
_SERVER_STATUS_IN_TRANS = 1

T = TypeVar("T")


class CompiledStatement:
    """Statements compiled for one dialect, with the values they bind.

    Args:
        dialect: The engine's SQLAlchemy dialect.
        statements: The statements, in order; :attr:`sql` joins their texts
            with ``;`` (one statement: its text).
        paramstyles: The parameter styles the caller can send.

    Bound parameters keep their names, so a name used by several statements
    takes one value; constants SQLAlchemy would bind (``'system'``,
    ``version + 1``) come along, and values go through their column types'
    bind processing, as through SQLAlchemy.

    Raises:
        ValueError: the driver's parameter style is not in ``paramstyles``, or
            two statements bind one constant name to different values.
    """

    __slots__ = ("_constants", "_order", "_processors", "parts", "sql")

    def __init__(
        self,
        dialect: Dialect,
        statements: Sequence[ClauseElement],
        paramstyles: Sequence[str] = PARAMSTYLES,
    ) -> None:
        """Compile ``statements`` for ``dialect``."""
        if dialect.paramstyle not in paramstyles:
            raise ValueError(
                f"needs a {' or '.join(paramstyles)} driver, not {dialect.paramstyle!r}"
            )
        #: The parameters' names in placeholder order (positional styles).
        self._order: list[str] | None = (
            [] if dialect.paramstyle in _POSITIONAL else None
        )
        #: Each statement's text, in order.
        self.parts: list[str] = []
        constants: dict[str, Any] = {}
        processors: dict[str, Callable[[Any], Any]] = {}
        for statement in statements:
            compiled = statement.compile(dialect=dialect)
            assert isinstance(compiled, SQLCompiler)
            self.parts.append(str(compiled))
            if self._order is not None:
                assert compiled.positiontup is not None
                self._order.extend(compiled.positiontup)
            for name, bind in compiled.binds.items():
                # The dialect's own implementation of the type, as SQLAlchemy
                # binds it: a TypeDecorator's processor alone would skip its
                # column type's (SQLite's text form of a timestamp).
                processor = bind.type.dialect_impl(dialect).bind_processor(dialect)
                if processor is not None:
                    processors[name] = processor
                if bind.required:
                    continue
                value = bind.effective_value
                if processor is not None:
                    value = processor(value)
                if name in constants and constants[name] != value:
                    raise ValueError(f"bound parameter {name!r} has two values")
                constants[name] = value
        #: The text to send.
        self.sql = "; ".join(self.parts)
        self._constants = constants
        self._processors = processors

    def parameters(self, values: dict[str, Any]) -> dict[str, Any] | tuple[Any, ...]:
        """The driver's parameters: the constants, then ``values`` processed;
        by name, or in placeholder order for a positional driver."""
        parameters = dict(self._constants)
        processors = self._processors
        for name, value in values.items():
            processor = processors.get(name)
            parameters[name] = value if processor is None else processor(value)
        if self._order is None:
            return parameters
        return tuple([parameters[name] for name in self._order])

    def steps(
        self, parameters: Any, kept: MutableMapping[Any, Any]
    ) -> Generator[tuple[str, Any], None, None]:
        """What to send for the statement with the driver's ``parameters``:
        each ``(sql, parameters)`` is run by the caller in turn, and a
        driver's error thrown back in; the last one's rows are the answer.

        ``kept`` is the DBAPI connection's record (the pool's ``info``), for
        a statement that keeps something on the connection (a prepared one).
        The default: the statement itself.
        """
        yield self.sql, parameters

    def send(
        self, cursor: Any, parameters: Any, kept: MutableMapping[Any, Any]
    ) -> None:
        """Run the statement (:meth:`steps`) on ``cursor``."""
        steps = self.steps(parameters, kept)
        failed: Exception | None = None
        while True:
            try:
                step = next(steps) if failed is None else steps.throw(failed)
            except StopIteration:
                return
            failed = None
            try:
                cursor.execute(*step)
            except Exception as error:
                failed = error


def runs_raw(engine: Engine | AsyncEngine) -> bool:
    """Whether reads on ``engine`` may run on the DBAPI cursor right now.

    Checked on every call: logging (``echo``) or a listener added after the
    repository was made sends the reads back through SQLAlchemy. An asyncio
    driver never runs raw (psycopg's is named as its sync one).
    """
    dialect = engine.dialect
    if dialect.is_async or (dialect.name, dialect.driver) not in RAW_DRIVERS:
        return False
    return _unobserved(cast("Engine", engine))


def runs_raw_async(engine: AsyncEngine) -> bool:
    """Whether statements on an asyncio ``engine`` may go to its driver's
    connection right now (:func:`fetch_all_async`, :func:`async_driver_calls`):
    aiosqlite, psycopg and asyncmy (:data:`ASYNC_RAW_DRIVERS`); checked on
    every call, as :func:`runs_raw` checks."""
    dialect = engine.dialect
    if (dialect.name, dialect.driver) not in ASYNC_RAW_DRIVERS:
        return False
    return _unobserved(engine.sync_engine)


def runs_together(engine: AsyncEngine) -> bool:
    """Whether :meth:`AsyncDriverCalls.together` can run on ``engine``'s
    connections right now: aiosqlite's (:func:`runs_raw_async`), whose
    connection runs a function in its thread."""
    dialect = engine.dialect
    return (
        dialect.driver == "aiosqlite"
        and runs_raw_async(engine)
        and _aiosqlite_runs_functions()
    )


@functools.cache
def _aiosqlite_runs_functions() -> bool:
    import aiosqlite

    return callable(getattr(aiosqlite.Connection, "_execute", None))


def _unobserved(engine: Engine) -> bool:
    """No ``echo`` and no cursor-execute listener would miss a statement."""
    if engine.echo:
        return False
    dispatch = engine.dispatch
    return not (dispatch.before_cursor_execute or dispatch.after_cursor_execute)


def fetch_all(
    connection: Connection,
    statement: CompiledStatement,
    values: dict[str, Any],
    *,
    autocommit: bool,
    commits_itself: bool = False,
) -> list[Any]:
    """Run ``statement`` on ``connection``'s DBAPI cursor; every row, as tuples.

    ``autocommit`` runs it outside a transaction (the connection must have
    none open), as ``isolation_level="AUTOCOMMIT"`` would, and puts the
    driver's setting back after (psycopg); ``commits_itself`` says the
    statement ends the transaction it began (a stored procedure that
    commits), so nothing is sent after it; otherwise the read's transaction
    is rolled back after it, as SQLAlchemy ends it.

    Raises:
        sqlalchemy.exc.DBAPIError: as SQLAlchemy raises it.
    """
    driver: Any = connection.connection.driver_connection
    parameters = statement.parameters(values)
    cursor = None
    try:
        if autocommit:
            driver.autocommit = True
        cursor = driver.cursor()
        statement.send(cursor, parameters, connection.connection.info)
        rows: list[Any] = cursor.fetchall()
        cursor.close()
        if autocommit:
            driver.autocommit = False
        elif not commits_itself:
            # End the transaction the SELECT may have opened, as SQLAlchemy
            # would: InnoDB opens one without flagging it in the server status
            # the pool's return looks at, and its snapshot must not outlive
            # the read. (sqlite3 sends nothing when none is open.)
            driver.rollback()
    except connection.dialect.loaded_dbapi.Error as error:
        raise _as_sqlalchemy_error(
            connection, statement.sql, parameters, error, cursor
        ) from error
    except BaseException as error:
        # Interrupted mid-statement: the connection's state is unknown.
        connection.invalidate(error if isinstance(error, Exception) else None)
        raise
    return rows


async def fetch_all_async(
    connection: AsyncConnection,
    statement: CompiledStatement,
    values: dict[str, Any],
    *,
    autocommit: bool = False,
    ends: bool = False,
) -> list[Any]:
    """Run ``statement`` on an asyncio driver's connection (see
    :func:`runs_raw_async`); every row, as tuples.

    ``autocommit`` runs it outside a transaction (psycopg: the connection must
    have none open), and puts the driver's setting back after; ``ends`` says
    the statement ends the transaction it began (MariaDB's read and its
    ``ROLLBACK``, or its log append and its ``COMMIT``, in one compound
    statement), so nothing is sent after it; otherwise a transaction the
    statement opened (psycopg's, never aiosqlite's for a read) is rolled back
    after it, as SQLAlchemy ends a read, and on asyncmy always (an InnoDB
    read's snapshot is not flagged in the server status).

    Raises:
        sqlalchemy.exc.DBAPIError: as SQLAlchemy raises it.
    """
    async with async_driver_calls(connection) as calls:
        if autocommit:
            await calls.driver.set_autocommit(True)
        rows = await calls.run(statement, values)
        if autocommit:
            await calls.driver.set_autocommit(False)
        elif ends:
            calls.transaction_ended()
        elif calls.kind == "asyncmy" or calls.in_transaction():
            await calls.driver.rollback()
        return rows


class AsyncDriverCalls:
    """Statements sent one after another to an asyncio driver's connection,
    each in one call: a round trip on psycopg and asyncmy, a trip to
    aiosqlite's thread; made by :func:`async_driver_calls`. :attr:`driver` is
    the driver's connection, for its own ``commit``, ``rollback`` and
    ``set_autocommit``; :attr:`info` the pool's record of it
    (``ConnectionRecord.info``)."""

    __slots__ = ("_parameters", "_sql", "driver", "info", "kind")

    def __init__(self, driver: Any, info: MutableMapping[Any, Any], kind: str) -> None:
        """Take the driver's connection, the pool's record of it and the
        driver's name (``aiosqlite``, ``psycopg``, ``asyncmy``)."""
        self.driver = driver
        self.info = info
        #: The driver's name.
        self.kind = kind
        self._sql = ""
        self._parameters: Any = None

    async def execute(self, sql: str, parameters: Any = ()) -> list[Any]:
        """Run ``sql`` with the driver's ``parameters``; every row it answers."""
        self._sql, self._parameters = sql, parameters
        driver = self.driver
        if self.kind == "aiosqlite":
            return list(await driver.execute_fetchall(sql, parameters))
        if self.kind == "asyncmy":
            cursor = driver.cursor()
            try:
                await cursor.execute(sql, parameters)
                return list(await cursor.fetchall())
            finally:
                await cursor.close()
        cursor = await driver.execute(sql, parameters)
        try:
            return await cursor.fetchall() if cursor.description is not None else []
        finally:
            await cursor.close()

    def in_transaction(self) -> bool:
        """Whether the driver has a transaction open (:func:`transaction_open`)."""
        return transaction_open(self.driver)

    def transaction_ended(self) -> None:
        """Note that the statement just run ended its transaction.

        asyncmy keeps the server status of the last reply that had any flag
        set, so a reply with none (after a ``ROLLBACK`` with autocommit off)
        leaves the open-transaction flag of the one before standing: it is
        cleared here, or the pool's return would send a ``ROLLBACK`` for
        nothing.
        """
        if self.kind == "asyncmy":
            self.driver.server_status &= ~_SERVER_STATUS_IN_TRANS

    async def run(
        self, statement: CompiledStatement, values: dict[str, Any]
    ) -> list[Any]:
        """Run ``statement`` (its :meth:`~CompiledStatement.steps`) with
        ``values``; every row its last step answers."""
        steps = statement.steps(statement.parameters(values), self.info)
        rows: list[Any] = []
        failed: Exception | None = None
        while True:
            try:
                sql, parameters = next(steps) if failed is None else steps.throw(failed)
            except StopIteration:
                return rows
            failed = None
            try:
                rows = await self.execute(sql, parameters)
            except Exception as error:
                failed = error

    async def run_many(
        self, statement: CompiledStatement, rows: Sequence[dict[str, Any]]
    ) -> None:
        """Run ``statement`` once per row of ``rows``, in one trip."""
        self._sql = statement.sql
        self._parameters = parameters = [statement.parameters(row) for row in rows]
        await self.driver.executemany(statement.sql, parameters)

    async def together(self, procedure: Callable[[RawCalls, WriteGate], T]) -> T:
        """Run ``procedure`` on aiosqlite's ``sqlite3`` connection, in one
        trip to its thread (where :func:`runs_together`); what it returns.

        ``procedure`` sends its statements through the :class:`RawCalls` it
        is given, as on a sync driver, and asks the :class:`WriteGate` it is
        given: ``wanted()`` while it waits for a lock (``False`` once the
        caller was cancelled: it stops waiting, nothing begun), and
        ``may_commit()`` just before it commits (``False`` when the caller was
        cancelled first: it rolls back instead). A cancellation that comes
        later waits for the commit (:func:`~chatledger.adapters.settled`):
        either way, what is stored when the cancellation returns stays. A
        statement that fails is named in the error :func:`async_driver_calls`
        raises, as one sent by :meth:`run`.
        """
        driver = self.driver
        # aiosqlite runs every call as a function queued to its thread
        # (``_execute``, which SQLAlchemy's own adapter also feeds): a whole
        # write goes as one such function instead of a trip per statement.
        calls = RawCalls(driver._conn, self.info)
        gate = _CommitGate()

        def run_together() -> T:
            try:
                return procedure(calls, gate)
            finally:
                calls.close()

        try:
            result: T = await settled(
                driver._execute(run_together), committing=gate.committing
            )
        finally:
            self._sql, self._parameters = calls._sql, calls._parameters
        return result


class WriteGate:
    """What a write on the driver's connection asks its caller as it goes.

    Whether it may commit, just before it does, and whether it is still
    wanted, while it waits for a lock. This one, for a caller that cannot be
    cancelled (a sync one), answers yes to both; :attr:`cancellable` says a
    write need not ask while it waits.
    """

    __slots__ = ()

    #: Whether :meth:`wanted` can ever answer ``False``.
    cancellable = False

    def may_commit(self) -> bool:
        """Just before the commit: go on (``True``) or roll back."""
        return True

    def wanted(self) -> bool:
        """While waiting for a lock: whether to keep waiting."""
        return True


#: The gate of a write nobody can cancel.
OPEN_GATE = WriteGate()


class _CommitGate(WriteGate):
    """Who comes first, across threads: a procedure's commit or a
    cancellation (:meth:`AsyncDriverCalls.together`)."""

    __slots__ = ("_lock", "_state")

    cancellable = True

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._state = ""

    def may_commit(self) -> bool:
        """The procedure's thread, just before its commit: go on or not."""
        with self._lock:
            self._state = self._state or "committing"
            return self._state == "committing"

    def wanted(self) -> bool:
        """The procedure's thread, waiting for a lock: not once cancelled."""
        with self._lock:
            return self._state != "stopped"

    def committing(self) -> bool:
        """The event loop, on a cancellation: whether the commit is under way;
        if not, it will not be."""
        with self._lock:
            self._state = self._state or "stopped"
            return self._state == "committing"


@contextlib.asynccontextmanager
async def async_driver_calls(
    connection: AsyncConnection,
) -> AsyncIterator[AsyncDriverCalls]:
    """Send statements to ``connection``'s driver (see :func:`runs_raw_async`).

    As :func:`raw_calls`: a driver error is raised as SQLAlchemy raises it,
    the statement named, and the connection is invalidated, so whatever
    transaction the calls had begun ends with it; so is it after any other
    interruption (a cancellation).

    Raises:
        sqlalchemy.exc.DBAPIError: as SQLAlchemy raises it.
    """
    sync = connection.sync_connection
    assert sync is not None
    # A live connection's pooled one is at hand; get_raw_connection() would
    # fetch it in a greenlet of its own, for a reconnect that is not needed.
    live = not (sync.closed or sync.invalidated)
    pooled = sync.connection if live else await connection.get_raw_connection()
    calls = AsyncDriverCalls(pooled.driver_connection, pooled.info, sync.dialect.driver)
    try:
        yield calls
    except sync.dialect.loaded_dbapi.Error as error:
        dropped = sync.dialect.is_disconnect(error, pooled.dbapi_connection, None)
        await connection.invalidate(error)
        raise _wrapped(
            sync.dialect, calls._sql, calls._parameters, error, dropped
        ) from error
    except BaseException as error:
        # Interrupted mid-statement: the connection's state is unknown.
        await connection.invalidate(error if isinstance(error, Exception) else None)
        raise


def transaction_open(driver: Any) -> bool:
    """Whether a driver's connection may have a transaction open, asked
    without I/O: PyMySQL's server status, psycopg's transaction status,
    ``sqlite3``'s and aiosqlite's own flag; ``True`` for any other driver."""
    # PyMySQL: the server flags one in every reply (SERVER_STATUS_IN_TRANS).
    status = getattr(driver, "server_status", None)
    if isinstance(status, int):
        return bool(status & _SERVER_STATUS_IN_TRANS)
    # psycopg: IDLE is 0.
    info_status = getattr(getattr(driver, "info", None), "transaction_status", None)
    if info_status is not None:
        return int(info_status) != 0
    in_transaction = getattr(driver, "in_transaction", None)
    return in_transaction if isinstance(in_transaction, bool) else True


class RawCalls:
    """Compiled statements run one after another on a DBAPI connection's cursor.

    Made by :func:`raw_calls`, which raises a failing statement's error as
    SQLAlchemy would, and by :meth:`AsyncDriverCalls.together`. :attr:`driver`
    is the driver's connection, for its own ``commit`` and ``rollback``;
    :attr:`info` the pool's record of it (``ConnectionRecord.info``).
    """

    __slots__ = ("_cursor", "_parameters", "_sql", "driver", "info")

    def __init__(self, driver: Any, info: MutableMapping[Any, Any]) -> None:
        """Take the DBAPI connection and the pool's record of it; no cursor yet."""
        self.driver = driver
        self.info = info
        self._cursor: Any = None
        self._sql = ""
        self._parameters: Any = None

    def _opened(self) -> Any:
        """The cursor, opened on first use."""
        cursor = self._cursor
        if cursor is None:
            cursor = self._cursor = self.driver.cursor()
        return cursor

    def execute_text(self, sql: str) -> None:
        """Run ``sql``, a statement without parameters (a ``BEGIN``)."""
        cursor = self._opened()
        self._sql, self._parameters = sql, ()
        cursor.execute(sql)

    def execute(self, statement: CompiledStatement, values: dict[str, Any]) -> Any:
        """Run ``statement`` with ``values``; return the cursor, to fetch from."""
        cursor = self._opened()
        self._sql = statement.sql
        self._parameters = parameters = statement.parameters(values)
        statement.send(cursor, parameters, self.info)
        return cursor

    def execute_many(
        self, statement: CompiledStatement, rows: Sequence[dict[str, Any]]
    ) -> None:
        """Run ``statement`` once per row of ``rows`` (one call when one row)."""
        if len(rows) == 1:
            self.execute(statement, rows[0])
            return
        cursor = self._opened()
        self._sql = statement.sql
        self._parameters = parameters = [statement.parameters(row) for row in rows]
        cursor.executemany(statement.sql, parameters)

    def close(self) -> None:
        """Close the cursor, if one was opened."""
        if self._cursor is not None:
            self._cursor.close()
            self._cursor = None


@contextlib.contextmanager
def raw_calls(connection: Connection) -> Iterator[RawCalls]:
    """Run statements on ``connection``'s DBAPI cursor (see :func:`runs_raw`).

    A DBAPI error is raised as SQLAlchemy raises it, the statement named,
    and the connection is invalidated, so whatever transaction the calls
    had begun ends with it; so is it after any other interruption.

    Raises:
        sqlalchemy.exc.DBAPIError: as SQLAlchemy raises it.
    """
    pooled = connection.connection
    calls = RawCalls(pooled.driver_connection, pooled.info)
    try:
        yield calls
        calls.close()
    except connection.dialect.loaded_dbapi.Error as error:
        raise _as_sqlalchemy_error(
            connection, calls._sql, calls._parameters, error, calls._cursor
        ) from error
    except BaseException as error:
        # Interrupted mid-statement: the connection's state is unknown.
        connection.invalidate(error if isinstance(error, Exception) else None)
        raise


def _as_sqlalchemy_error(
    connection: Connection,
    sql: str,
    parameters: Any,
    error: Any,
    cursor: Any,
) -> exc.DBAPIError:
    dialect = connection.dialect
    dropped = dialect.is_disconnect(
        error, connection.connection.dbapi_connection, cursor
    )
    # A failed statement may leave autocommit on or a transaction aborted:
    # this connection is not given back to the pool as it is.
    connection.invalidate(error)
    return _wrapped(dialect, sql, parameters, error, dropped)


def _wrapped(
    dialect: Dialect, sql: str, parameters: Any, error: Any, dropped: bool
) -> exc.DBAPIError:
    """The driver's ``error`` as SQLAlchemy raises it."""
    wrapped = exc.DBAPIError.instance(
        sql,
        parameters,
        error,
        dialect.loaded_dbapi.Error,
        connection_invalidated=dropped,
        dialect=dialect,
    )
    assert isinstance(wrapped, exc.DBAPIError)
    return wrapped
