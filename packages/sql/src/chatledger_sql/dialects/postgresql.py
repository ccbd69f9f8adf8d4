"""PostgreSQL: one ``INSERT ... ON CONFLICT DO UPDATE ... RETURNING`` locks a row.

Example:
    repository = SqlChatMemoryRepository(engine, dialect=PostgresDialect())

The upsert creates the conversation row or takes its row lock, returns its
state, and counts which of the new message ids are already stored, all in one
round trip. Unknown products fall back to this dialect, so it sticks to SQL
that PostgreSQL-compatible databases share.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import bindparam, exc, func, select
from sqlalchemy.dialects.postgresql import TIMESTAMP
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.types import TypeEngine

from chatledger_sql.dialects.base import ConversationState, SqlDialect
from chatledger_sql.types import UtcDateTime

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from chatledger_sql.statements import Statements

__all__ = ["PostgresDialect"]

# serialization_failure, deadlock_detected
_RETRYABLE = {"40001", "40P01"}
# duplicate_table, duplicate_object, unique_violation (pg_type race)
_EXISTS = {"42P07", "42710", "23505"}


def _sqlstate(error: exc.DBAPIError) -> str | None:
    orig = error.orig
    return getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)


class PostgresDialect(SqlDialect):
    """PostgreSQL (also the fallback for products no dialect is registered for)."""

    name = "postgresql"

    def timestamp_type(self) -> TypeEngine[Any]:
        """``TIMESTAMP(6) WITH TIME ZONE``."""
        return UtcDateTime(TIMESTAMP(timezone=True, precision=6), aware=True)

    def is_already_exists(self, error: exc.DBAPIError) -> bool:
        """Duplicate table or object, or the ``pg_type`` race of two creators."""
        return _sqlstate(error) in _EXISTS or super().is_already_exists(error)

    def is_retryable(self, error: exc.DBAPIError) -> bool:
        """Serialization failure or deadlock."""
        return _sqlstate(error) in _RETRYABLE or super().is_retryable(error)

    def upsert_conversation(self, statements: Statements) -> Any:
        """Create-or-lock the row, return its state and count known message ids."""
        tables = statements.tables
        m = tables.messages.c
        c = tables.conversations.c
        known = (
            select(func.count())
            .where(
                m.conversation_id == bindparam("cid"),
                m.message_id.in_(bindparam("ids", expanding=True)),
            )
            .scalar_subquery()
            .label("known")
        )
        statement = pg_insert(tables.conversations).values(
            conversation_id=bindparam("cid"),
            next_seq=0,
            version=0,
            system_count=0,
            other_count=0,
            weight_counter=None,
            system_weight=0,
            other_weight=0,
            updated_at=bindparam("now"),
            expires_at=None,
        )
        return statement.on_conflict_do_update(
            index_elements=[c.conversation_id],
            set_={"version": c.version + 1},
        ).returning(*statements.state_columns, known)

    def lock_conversation(
        self,
        connection: Connection,
        statements: Statements,
        conversation_id: str,
        now: datetime,
        *,
        create: bool,
        probe_ids: list[str] | None = None,
    ) -> ConversationState | None:
        """One round trip: upsert the row (its lock) and count known ids."""
        if not create:
            return super().lock_conversation(
                connection, statements, conversation_id, now, create=False
            )
        row = connection.execute(
            statements.upsert_conversation,
            {"cid": conversation_id, "now": now, "ids": probe_ids or []},
        ).one()
        return ConversationState.from_row(row)
