"""SQLite: ``BEGIN IMMEDIATE`` on a WAL database serialises writers.

Example:
    from chatledger_sql import SqlChatMemoryRepository

    repository = SqlChatMemoryRepository.from_url("sqlite:///chat.db")

A deferred transaction that reads before it writes cannot upgrade its lock
when another writer got there first, and fails with ``SQLITE_BUSY`` whatever
the busy timeout. Every write therefore starts with ``BEGIN IMMEDIATE``, which
waits (up to ``busy_timeout``) for the one write lock. WAL lets readers go on
meanwhile.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy import Select, exc, func
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from chatledger_sql.dialects.base import SqlDialect

if TYPE_CHECKING:
    from sqlalchemy import Connection, Table

    from chatledger_sql.statements import Statements

__all__ = ["SQLiteDialect"]


class SQLiteDialect(SqlDialect):
    """SQLite 3.35 and later (the ``sqlite3`` module of the standard library).

    Args:
        busy_timeout_ms: How long a writer waits for the write lock.
    """

    name = "sqlite"
    writes_exclusively = True

    def __init__(self, busy_timeout_ms: int = 30_000) -> None:
        """Wait up to ``busy_timeout_ms`` for the write lock."""
        self.busy_timeout_ms = int(busy_timeout_ms)

    def __repr__(self) -> str:
        return f"SQLiteDialect(busy_timeout_ms={self.busy_timeout_ms})"

    def prepare_database(self, connection: Connection) -> None:
        """Turn on WAL (kept in the database file; a no-op in memory).

        Switching needs the database to itself, so racing creators wait for
        it under the busy timeout, and a file already in WAL is left alone.
        """
        dbapi: Any = connection.connection.dbapi_connection
        dbapi.execute(f"PRAGMA busy_timeout = {self.busy_timeout_ms}")
        mode = dbapi.execute("PRAGMA journal_mode").fetchone()[0]
        if str(mode).lower() not in ("wal", "memory"):
            connection.exec_driver_sql("PRAGMA journal_mode=WAL")

    def begin_write(self, connection: Connection) -> None:
        """Set the busy timeout and take the write lock now.

        Both go straight to the ``sqlite3`` connection: through SQLAlchemy
        each would cost more than the statements of a small append.
        """
        dbapi: Any = connection.connection.dbapi_connection
        dbapi.execute(f"PRAGMA busy_timeout = {self.busy_timeout_ms}")
        # The engine may already have begun a transaction (an event hook that
        # emits BEGIN); then the lock is taken on the first write instead.
        if not getattr(dbapi, "in_transaction", False):
            dbapi.execute("BEGIN IMMEDIATE")

    def is_retryable(self, error: exc.DBAPIError) -> bool:
        """``database is locked`` after the busy timeout."""
        return "locked" in str(error.orig).lower() or super().is_retryable(error)

    def json_rows(self, *columns: Any) -> Any:
        """``json_group_array(json_array(...))``."""
        return func.json_group_array(func.json_array(*columns))

    def probing_lock(self, statements: Statements) -> Any:
        """Create-or-touch the row; return its state, known ids and oldest rows."""
        c = statements.tables.conversations.c
        return (
            sqlite_insert(statements.tables.conversations)
            .values(**statements.new_conversation)
            .on_conflict_do_update(
                index_elements=[c.conversation_id], set_={"version": c.version + 1}
            )
            .returning(*statements.state_columns, *self.lock_probes(statements))
        )

    def lock_rows(self, statement: Select[Any], table: Table) -> Select[Any]:
        """No row locks: ``BEGIN IMMEDIATE`` already holds the database's."""
        return statement
