"""SQLite: ``BEGIN IMMEDIATE`` on a WAL database serialises writers.

Example:
    repository = SqlChatMemoryRepository.from_url("sqlite:///chat.db")

A deferred transaction that reads before it writes cannot upgrade its lock
when another writer got there first, and fails with ``SQLITE_BUSY`` whatever
the busy timeout. Every write therefore starts with ``BEGIN IMMEDIATE``, which
waits (up to ``busy_timeout``) for the one write lock. WAL lets readers go on
meanwhile.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy import Select, exc

from chatledger_sql.dialects.base import SqlDialect

if TYPE_CHECKING:
    from sqlalchemy import Connection, Table

__all__ = ["SQLiteDialect"]


class SQLiteDialect(SqlDialect):
    """SQLite 3.35 and later (the ``sqlite3`` module of the standard library).

    Args:
        busy_timeout_ms: How long a writer waits for the write lock.
    """

    name = "sqlite"

    def __init__(self, busy_timeout_ms: int = 30_000) -> None:
        """Wait up to ``busy_timeout_ms`` for the write lock."""
        self.busy_timeout_ms = int(busy_timeout_ms)

    def __repr__(self) -> str:
        return f"SQLiteDialect(busy_timeout_ms={self.busy_timeout_ms})"

    def prepare_database(self, connection: Connection) -> None:
        """Turn on WAL (kept in the database file; a no-op in memory)."""
        connection.exec_driver_sql("PRAGMA journal_mode=WAL")

    def begin_write(self, connection: Connection) -> None:
        """Set the busy timeout and take the write lock now."""
        connection.exec_driver_sql(f"PRAGMA busy_timeout = {self.busy_timeout_ms}")
        dbapi = connection.connection.dbapi_connection
        # The engine may already have begun a transaction (an event hook that
        # emits BEGIN); then the lock is taken on the first write instead.
        if not getattr(dbapi, "in_transaction", False):
            connection.exec_driver_sql("BEGIN IMMEDIATE")

    def is_retryable(self, error: exc.DBAPIError) -> bool:
        """``database is locked`` after the busy timeout."""
        return "locked" in str(error.orig).lower() or super().is_retryable(error)

    def lock_rows(self, statement: Select[Any], table: Table) -> Select[Any]:
        """No row locks: ``BEGIN IMMEDIATE`` already holds the database's."""
        return statement
