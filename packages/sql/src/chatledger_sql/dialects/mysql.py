"""MySQL and MariaDB: ``utf8mb4``, ``LONGTEXT``, ``DATETIME(6)`` and an upsert lock.

Example:
    repository = SqlChatMemoryRepository(engine)          # detected
    repository = SqlChatMemoryRepository(engine, dialect=MySQLDialect())

A conversation is locked with ``INSERT ... ON DUPLICATE KEY UPDATE`` (which
creates the row or takes its exclusive lock without the gap-lock deadlocks of
a locking read on a missing row). A window append then reads the row's state,
the known ids and the oldest rows in one plain ``SELECT``; other writes read
the row with ``SELECT ... FOR UPDATE``. Ids use a binary collation, so ``"a"``
and ``"A"`` stay two ids.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import Select, bindparam, cast, exc, func, select, type_coerce
from sqlalchemy.dialects.mysql import CHAR, DATETIME, LONGTEXT, VARCHAR
from sqlalchemy.dialects.mysql import insert as mysql_insert
from sqlalchemy.types import NullType, TypeEngine

from chatledger_sql.dialects.base import ConversationState, SqlDialect
from chatledger_sql.types import UtcDateTime

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from chatledger_sql.statements import Statements

__all__ = ["MariaDBDialect", "MySQLDialect"]

# ER_LOCK_DEADLOCK, ER_LOCK_WAIT_TIMEOUT is not retried (it signals a stuck writer)
_RETRYABLE = {1213}
# ER_TABLE_EXISTS_ERROR, ER_DUP_KEYNAME
_EXISTS = {1050, 1061}


def _errno(error: exc.DBAPIError) -> int | None:
    args = getattr(error.orig, "args", ())
    return args[0] if args and isinstance(args[0], int) else None


class MySQLDialect(SqlDialect):
    """MySQL 8.0 and later."""

    name = "mysql"
    #: Binary collation, known to MySQL 5.7+ and MariaDB alike. It pads with
    #: spaces, so message ids that differ only by trailing spaces collide;
    #: conversation ids cannot end with a space.
    id_collation = "utf8mb4_bin"

    def id_type(self) -> TypeEngine[Any]:
        """``VARCHAR(255)`` utf8mb4 with a binary, no-pad collation."""
        return VARCHAR(255, charset="utf8mb4", collation=self.id_collation)

    def role_type(self) -> TypeEngine[Any]:
        """``VARCHAR(16)`` (ASCII values)."""
        return VARCHAR(16, charset="utf8mb4", collation=self.id_collation)

    def text_type(self) -> TypeEngine[Any]:
        """``LONGTEXT`` utf8mb4 (up to 4 GB; ``max_allowed_packet`` caps a write)."""
        return LONGTEXT(charset="utf8mb4", collation="utf8mb4_bin")

    def timestamp_type(self) -> TypeEngine[Any]:
        """``DATETIME(6)`` holding UTC."""
        return UtcDateTime(DATETIME(fsp=6))

    def raw_timestamp(self, column: Any) -> Any:
        """``DATETIME(6)`` as text: PyMySQL parses a datetime in pure Python."""
        return type_coerce(cast(column, CHAR(26)), NullType())

    def table_options(self) -> dict[str, Any]:
        """InnoDB, utf8mb4."""
        return {"mysql_engine": "InnoDB", "mysql_charset": "utf8mb4"}

    def is_already_exists(self, error: exc.DBAPIError) -> bool:
        """Table or index already exists."""
        return _errno(error) in _EXISTS or super().is_already_exists(error)

    def max_statement_bytes(self, connection: Connection) -> int | None:
        """``max_allowed_packet``: past it the server drops the connection mid-write."""
        value = connection.exec_driver_sql("SELECT @@max_allowed_packet").scalar()
        return None if value is None else int(value)

    def is_retryable(self, error: exc.DBAPIError) -> bool:
        """Deadlock (InnoDB rolled the transaction back)."""
        return _errno(error) in _RETRYABLE or super().is_retryable(error)

    def upsert_conversation(self, statements: Statements) -> Any:
        """Create the row or take its exclusive lock."""
        c = statements.tables.conversations.c
        statement = mysql_insert(statements.tables.conversations).values(
            **statements.new_conversation
        )
        return statement.on_duplicate_key_update(version=c.version + 1)

    def json_rows(self, *columns: Any) -> Any:
        """``JSON_ARRAYAGG(JSON_ARRAY(...))`` (MySQL 5.7.22+, MariaDB 10.5+)."""
        return func.json_arrayagg(func.json_array(*columns))

    def probing_read(self, statements: Statements) -> Select[Any]:
        """The row's state and the probes, read without locking anything.

        It runs after the upsert has locked the row. The row's state is then
        the transaction's own write, so always the latest; the probes read
        the message rows as of the transaction's first consistent read, which
        is this one, taken under the lock (``last_seq`` checks it, see
        :meth:`ConversationState.from_row`). No lock on message rows: a
        probing read that locks them (as a probing upsert does, with shared
        locks, before it holds the row) deadlocks concurrent writers.
        """
        c = statements.tables.conversations.c
        return select(*statements.state_columns, *self.lock_probes(statements)).where(
            c.conversation_id == bindparam("cid")
        )

    def lock_conversation(
        self,
        connection: Connection,
        statements: Statements,
        conversation_id: str,
        now: datetime,
        *,
        create: bool,
        probe_ids: list[str] | None = None,
        peek: int = 0,
    ) -> ConversationState | None:
        """Upsert (the lock), then read the row: with the probes, or ``FOR UPDATE``.

        An upsert that also read the conversation's message rows (as
        PostgreSQL's does) would take shared locks on them under REPEATABLE
        READ before it holds the row, and sixteen writers on one conversation
        then deadlock each other until their retries run out; the read after
        the lock takes none.
        """
        if create:
            connection.execute(
                statements.upsert_conversation, {"cid": conversation_id, "now": now}
            )
            if probe_ids is not None and statements.read_probing is not None:
                row = connection.execute(
                    statements.read_probing,
                    {"cid": conversation_id, "ids": probe_ids, "peek": peek},
                ).one()
                return ConversationState.from_row(row)
        return super().lock_conversation(
            connection, statements, conversation_id, now, create=False
        )


class MariaDBDialect(MySQLDialect):
    """MariaDB 10.5 and later (detected even behind a ``mysql://`` URL)."""

    name = "mariadb"
    #: MariaDB's binary, no-pad collation.
    id_collation = "utf8mb4_nopad_bin"
