"""chatledger-sql: chat memory in seven SQL databases, through SQLAlchemy Core.

Example:
    from chatledger import Message, MessageWindowChatMemory
    from chatledger_sql import SqlChatMemoryRepository

    repository = SqlChatMemoryRepository.from_url("sqlite:///chat.db")
    memory = MessageWindowChatMemory(repository, max_messages=20)
    memory.add("c1", Message.user("Hello"))

With asyncio, :class:`AsyncSqlChatMemoryRepository` does the same on an
``AsyncEngine`` (``sqlite+aiosqlite``, ``postgresql+psycopg``,
``postgresql+asyncpg``, ``mysql+asyncmy``, ``mysql+aiomysql``).

The dialect is detected from the engine (``engine.dialect.name``); register your
own with :func:`register_dialect` or the entry-point group
``chatledger.sql_dialects``. Importing this package imports no database driver.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from chatledger.adapters import (
    InvalidTTLError,
)
from chatledger_sql.dialects import (
    ENTRY_POINT_GROUP,
    DialectMismatchWarning,
    SqlDialect,
    UnknownDialectError,
    UnknownDialectWarning,
    detect_dialect,
    load_dialect,
    register_dialect,
    unregister_dialect,
)
from chatledger_sql.repository import SqlChatMemoryRepository

if TYPE_CHECKING:
    from chatledger_sql.async_repository import AsyncSqlChatMemoryRepository

if TYPE_CHECKING:
    from chatledger_sql.dialects.duckdb import DuckDBDialect
    from chatledger_sql.dialects.mssql import SQLServerDialect
    from chatledger_sql.dialects.mysql import MariaDBDialect, MySQLDialect
    from chatledger_sql.dialects.oracle import OracleDialect
    from chatledger_sql.dialects.postgresql import PostgresDialect
    from chatledger_sql.dialects.sqlite import SQLiteDialect

__version__ = "0.3.0.dev0"

__all__ = [
    "ENTRY_POINT_GROUP",
    "AsyncSqlChatMemoryRepository",
    "DialectMismatchWarning",
    "DuckDBDialect",
    "InvalidTTLError",
    "MariaDBDialect",
    "MySQLDialect",
    "OracleDialect",
    "PostgresDialect",
    "SQLServerDialect",
    "SQLiteDialect",
    "SqlChatMemoryRepository",
    "SqlDialect",
    "UnknownDialectError",
    "UnknownDialectWarning",
    "__version__",
    "detect_dialect",
    "load_dialect",
    "register_dialect",
    "unregister_dialect",
]

_LAZY = {
    "DuckDBDialect",
    "MariaDBDialect",
    "MySQLDialect",
    "OracleDialect",
    "PostgresDialect",
    "SQLServerDialect",
    "SQLiteDialect",
}


def __getattr__(name: str) -> Any:
    if name == "AsyncSqlChatMemoryRepository":
        # Imported on use: it needs SQLAlchemy's asyncio extension (greenlet).
        from chatledger_sql.async_repository import AsyncSqlChatMemoryRepository

        return AsyncSqlChatMemoryRepository
    if name in _LAZY:
        from chatledger_sql import dialects

        return getattr(dialects, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
