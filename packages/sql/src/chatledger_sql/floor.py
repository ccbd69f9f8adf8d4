"""The driver's floor for ``chatledger bench``: one bare INSERT, one ordered SELECT.

Example:
    from chatledger_sql import SqlChatMemoryRepository

    repository = SqlChatMemoryRepository.from_url("sqlite://")
    floor = repository.benchmark_floor()    # a table of its own, autocommit
    floor.insert("c1", 0, '{"role":"user"}')
    assert len(floor.select("c1")) == 1
    floor.close()                           # drops that table
    repository.close()

The floor runs on a raw DB-API connection of the repository's own engine
(same URL, same connect-time settings such as SQLite's journal mode), in
autocommit, so one INSERT is one statement and one commit: the least any
library on that driver can do to store a message. psycopg prepares the
INSERT on the server. Rows are never decoded.

An ``AsyncEngine``'s floor (:class:`AsyncSqlBenchmarkFloor`) runs the same
statements on its asyncio driver, through the DB-API face SQLAlchemy gives
that driver, each call one switch into SQLAlchemy's greenlet bridge.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy.util import greenlet_spawn

if TYPE_CHECKING:
    from sqlalchemy.engine import Dialect, Engine
    from sqlalchemy.ext.asyncio import AsyncEngine
    from sqlalchemy.pool import PoolProxiedConnection

__all__ = [
    "AsyncSqlBenchmarkFloor",
    "SqlBenchmarkFloor",
    "open_floor",
    "open_floor_async",
]

#: SQLAlchemy's name of a driver where it is not the module people import.
_DRIVER_NAMES = {"pysqlite": "sqlite3", "duckdb_engine": "duckdb"}
_PAYLOAD_TYPES = {"mysql": "LONGTEXT", "mariadb": "LONGTEXT", "duckdb": "VARCHAR"}
_TABLE_OPTIONS = {
    "mysql": " DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin",
    "mariadb": " DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin",
}


def _placeholders(paramstyle: str) -> tuple[str, str, str]:
    """The three positional placeholders of an INSERT in the driver's style."""
    if paramstyle == "qmark":
        return ("?", "?", "?")
    if paramstyle in ("format", "pyformat"):
        return ("%s", "%s", "%s")
    if paramstyle == "numeric":
        return (":1", ":2", ":3")
    if paramstyle == "numeric_dollar":
        return ("$1", "$2", "$3")
    raise NotImplementedError(f"no floor for the {paramstyle!r} parameter style")


class _Autocommit:
    """Switches a DB-API connection to autocommit and back, whatever its driver."""

    def __init__(self, connection: Any, *, sqlite: bool) -> None:
        self.connection = connection
        if sqlite:
            # sqlite3 (or aiosqlite behind SQLAlchemy's adapter): no implicit
            # BEGIN before an INSERT.
            self.attribute, self.saved = "isolation_level", connection.isolation_level
            connection.isolation_level = None
        elif callable(getattr(connection, "get_autocommit", None)):
            # pymysql: autocommit is a method.
            self.attribute, self.saved = "get_autocommit", connection.get_autocommit()
            connection.autocommit(True)
        elif hasattr(connection, "autocommit"):
            self.attribute, self.saved = "autocommit", connection.autocommit
            connection.autocommit = True
        else:  # DuckDB: every statement outside BEGIN commits on its own
            self.attribute, self.saved = "", None

    def restore(self) -> None:
        if self.attribute == "get_autocommit":
            self.connection.autocommit(self.saved)
        elif self.attribute:
            setattr(self.connection, self.attribute, self.saved)


def open_floor(engine: Engine, schema: str | None) -> SqlBenchmarkFloor:
    """A floor on a connection of ``engine``, its table in ``schema``."""
    pooled = engine.raw_connection()
    return SqlBenchmarkFloor(pooled, pooled.driver_connection, engine.dialect, schema)


async def open_floor_async(
    engine: AsyncEngine, schema: str | None
) -> AsyncSqlBenchmarkFloor:
    """A floor on a connection of the ``AsyncEngine``, its table in ``schema``."""
    pooled = await engine.raw_connection()
    # The adapted connection: the asyncio driver behind a DB-API face.
    floor = await greenlet_spawn(
        SqlBenchmarkFloor, pooled, pooled.dbapi_connection, engine.dialect, schema
    )
    return AsyncSqlBenchmarkFloor(floor)


class SqlBenchmarkFloor:
    """A table of its own beside the repository's, on a raw pooled connection.

    Args:
        pooled: The pooled connection, given back on :meth:`close`.
        connection: Its DB-API connection.
        dialect: The engine's SQLAlchemy dialect.
        schema: The schema of the repository's tables, or ``None``.
    """

    def __init__(
        self,
        pooled: PoolProxiedConnection,
        connection: Any,
        dialect: Dialect,
        schema: str | None,
    ) -> None:
        """Switch the connection to autocommit and create the table."""
        self.name = _DRIVER_NAMES.get(dialect.driver, str(dialect.driver))
        name = f"clfloor_{uuid.uuid4().hex[:12]}"
        self.table = f"{schema}.{name}" if schema else name
        first, second, third = _placeholders(str(dialect.paramstyle))
        self._insert = (
            f"INSERT INTO {self.table} (conversation_id, seq, payload) "
            f"VALUES ({first}, {second}, {third})"
        )
        self._select = (
            f"SELECT payload FROM {self.table} WHERE conversation_id = {first} "
            "ORDER BY seq"
        )
        self._pooled = pooled
        # psycopg's own cursor: SQLAlchemy's adapter of its async one takes no
        # ``prepare``.
        self._prepare = dialect.driver == "psycopg" and not dialect.is_async
        try:
            self._connection: Any = connection
            if self._connection is None:
                raise RuntimeError(f"{self.name} lent no driver connection")
            self._autocommit = _Autocommit(
                self._connection, sqlite=dialect.name == "sqlite"
            )
            self._cursor: Any = self._connection.cursor()
            payload = _PAYLOAD_TYPES.get(dialect.name, "TEXT")
            self._cursor.execute(
                f"CREATE TABLE {self.table} (conversation_id VARCHAR(255) NOT NULL, "
                f"seq BIGINT NOT NULL, payload {payload} NOT NULL, "
                f"PRIMARY KEY (conversation_id, seq))"
                f"{_TABLE_OPTIONS.get(dialect.name, '')}"
            )
        except BaseException:
            self._pooled.close()
            raise

    def insert(self, conversation_id: str, seq: int, payload: str) -> None:
        """One INSERT, committed on its own (prepared on the server by psycopg)."""
        params = (conversation_id, seq, payload)
        if self._prepare:
            self._cursor.execute(self._insert, params, prepare=True)
        else:
            self._cursor.execute(self._insert, params)

    def select(self, conversation_id: str) -> Sequence[Any]:
        """One ordered SELECT of the conversation's rows, undecoded."""
        if self._prepare:
            self._cursor.execute(self._select, (conversation_id,), prepare=True)
        else:
            self._cursor.execute(self._select, (conversation_id,))
        rows: Sequence[Any] = self._cursor.fetchall()
        return rows

    def close(self) -> None:
        """Drop the table and give the connection back as it was lent."""
        try:
            self._cursor.execute(f"DROP TABLE IF EXISTS {self.table}")
        finally:
            try:
                self._cursor.close()
                self._autocommit.restore()
            finally:
                self._pooled.close()


class AsyncSqlBenchmarkFloor:
    """:class:`SqlBenchmarkFloor` on an asyncio driver, each call awaited.

    Args:
        floor: The floor, made on the adapted connection (see
            :func:`open_floor_async`).
    """

    def __init__(self, floor: SqlBenchmarkFloor) -> None:
        """Wrap ``floor``."""
        self._floor = floor
        self.name = floor.name
        self.table = floor.table

    async def insert(self, conversation_id: str, seq: int, payload: str) -> None:
        """One INSERT, committed on its own."""
        await greenlet_spawn(self._floor.insert, conversation_id, seq, payload)

    async def select(self, conversation_id: str) -> Sequence[Any]:
        """One ordered SELECT of the conversation's rows, undecoded."""
        rows: Sequence[Any] = await greenlet_spawn(self._floor.select, conversation_id)
        return rows

    async def aclose(self) -> None:
        """Drop the table and give the connection back as it was lent."""
        await greenlet_spawn(self._floor.close)
