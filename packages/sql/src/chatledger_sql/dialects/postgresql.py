"""PostgreSQL: one ``INSERT ... ON CONFLICT DO UPDATE ... RETURNING`` locks a row.

Example:
    repository = SqlChatMemoryRepository(engine, dialect=PostgresDialect())

The upsert creates the conversation row or takes its row lock, returns its
state, and counts which of the new message ids are already stored, all in one
round trip. Unknown products fall back to this dialect, so it sticks to SQL
that PostgreSQL-compatible databases share.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy import TextClause, bindparam, exc, func, text
from sqlalchemy.dialects.postgresql import TIMESTAMP
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.postgresql.base import PGDialect
from sqlalchemy.types import TypeEngine

from chatledger_sql.dialects.base import SqlDialect
from chatledger_sql.types import UtcDateTime

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from chatledger_sql.statements import Statements

__all__ = ["PostgresDialect"]

# serialization_failure, deadlock_detected
_RETRYABLE = {"40001", "40P01"}
# duplicate_table, duplicate_object, unique_violation (pg_type race)
_EXISTS = {"42P07", "42710", "23505"}


_PG = PGDialect()  # type: ignore[no-untyped-call]


def _sqlstate(error: exc.DBAPIError) -> str | None:
    orig = error.orig
    return getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)


class PostgresDialect(SqlDialect):
    """PostgreSQL (also the fallback for products no dialect is registered for)."""

    name = "postgresql"
    lock_returns_state = True

    def timestamp_type(self) -> TypeEngine[Any]:
        """``TIMESTAMP(6) WITH TIME ZONE``."""
        return UtcDateTime(TIMESTAMP(timezone=True, precision=6), aware=True)

    def is_already_exists(self, error: exc.DBAPIError) -> bool:
        """Duplicate table or object, or the ``pg_type`` race of two creators."""
        return _sqlstate(error) in _EXISTS or super().is_already_exists(error)

    def is_retryable(self, error: exc.DBAPIError) -> bool:
        """Serialization failure or deadlock."""
        return _sqlstate(error) in _RETRYABLE or super().is_retryable(error)

    def read_options(self, connection: Connection) -> dict[str, Any]:
        """Autocommit on PostgreSQL drivers: a read is one round trip, not three.

        One SELECT sees one snapshot anyway; in a transaction the driver would
        add a ``BEGIN`` before it and a ``ROLLBACK`` when the pool takes the
        connection back, each a round trip of its own.
        """
        if connection.dialect.name == "postgresql":
            return {"isolation_level": "AUTOCOMMIT"}
        return {}

    def json_rows(self, *columns: Any) -> Any:
        """``json_agg(json_build_array(...))``."""
        return func.json_agg(func.json_build_array(*columns))

    def native(self, connection: Connection) -> bool:
        """PostgreSQL itself; a product falling back to this dialect is not."""
        return connection.dialect.name == "postgresql"

    def upsert_conversation(self, statements: Statements) -> Any:
        """Create-or-lock the row, return its state and count known message ids."""
        return self._upsert(statements).returning(
            *statements.state_columns, self.lock_probes(statements)[0]
        )

    def probing_lock(self, statements: Statements) -> Any:
        """Create-or-lock the row, return its state and probes in one round trip."""
        return self._upsert(statements).returning(
            *statements.state_columns, *self.lock_probes(statements)
        )

    def _upsert(self, statements: Statements) -> Any:
        c = statements.tables.conversations.c
        statement = pg_insert(statements.tables.conversations).values(
            **statements.new_conversation
        )
        return statement.on_conflict_do_update(
            index_elements=[c.conversation_id],
            set_={"version": c.version + 1},
        )

    def append_statement(self, statements: Statements) -> TextClause:
        """Insert, evict and update the conversation row in one statement.

        Data-modifying CTEs all see the snapshot the statement started with,
        so the deletes reach only rows stored before, never the new ones.
        """
        preparer = _PG.identifier_preparer
        m = preparer.format_table(statements.tables.messages)
        c = preparer.format_table(statements.tables.conversations)
        timestamp = self.timestamp_type()
        return text(
            f"WITH new_rows AS (INSERT INTO {m} (conversation_id, seq, "
            "message_id, role, content, payload, weight, created_at) "
            "SELECT :cid, r.seq, r.message_id, r.role, r.content, r.payload, "
            "r.weight, r.created_at FROM unnest(CAST(:seqs AS BIGINT[]), "
            "CAST(:message_ids AS TEXT[]), CAST(:roles AS TEXT[]), "
            "CAST(:contents AS TEXT[]), CAST(:payloads AS TEXT[]), "
            "CAST(:weights AS INTEGER[]), CAST(:created AS TIMESTAMPTZ[])) "
            "AS r(seq, message_id, role, content, payload, weight, created_at)), "
            f"old_system AS (DELETE FROM {m} WHERE conversation_id = :cid "
            "AND role = 'system' AND CAST(:drop_system AS BOOLEAN)), "
            f"evicted AS (DELETE FROM {m} WHERE conversation_id = :cid "
            "AND role <> 'system' AND seq <= :upto) "
            f"UPDATE {c} SET next_seq = :p_next_seq, version = version + 1, "
            "system_count = :p_system_count, other_count = :p_other_count, "
            "weight_counter = :p_weight_counter, "
            "system_weight = :p_system_weight, other_weight = :p_other_weight, "
            "updated_at = :now, expires_at = :p_expires_at "
            "WHERE conversation_id = :cid"
        ).bindparams(
            bindparam("now", type_=timestamp),
            bindparam("p_expires_at", type_=timestamp),
        )

    def write_append(
        self,
        connection: Connection,
        statements: Statements,
        rows: list[dict[str, Any]],
        *,
        drop_system: bool,
        upto: int,
        update: dict[str, Any],
    ) -> bool:
        """One round trip: the CTE statement of :meth:`append_statement`."""
        if not self.native(connection):
            return False
        parameters = dict(update)
        parameters["seqs"] = [r["seq"] for r in rows]
        parameters["message_ids"] = [r["message_id"] for r in rows]
        parameters["roles"] = [r["role"] for r in rows]
        parameters["contents"] = [r["content"] for r in rows]
        parameters["payloads"] = [r["payload"] for r in rows]
        parameters["weights"] = [r["weight"] for r in rows]
        parameters["created"] = [r["created_at"] for r in rows]
        parameters["drop_system"] = drop_system
        parameters["upto"] = upto
        connection.execute(statements.append_all, parameters)
        return True
