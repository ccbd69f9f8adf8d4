"""What a SQL dialect decides: column types, guarded DDL, locking and retries.

Example:
    from chatledger_sql.dialects.base import SqlDialect

    class CockroachDialect(PostgresDialect):
        name = "cockroachdb"

A dialect never imports a database driver: the engine owns the driver. The base
class holds the portable defaults; each built-in dialect overrides only what its
database does differently.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar

from sqlalchemy import BigInteger, Integer, Select, String, Text, exc
from sqlalchemy.schema import CreateTable, ExecutableDDLElement
from sqlalchemy.types import TypeEngine

from chatledger_sql.types import UtcDateTime

if TYPE_CHECKING:
    from sqlalchemy import Connection, Table

    from chatledger_sql.statements import Statements

__all__ = ["ConversationState", "RetryTransaction", "SqlDialect"]


class RetryTransaction(Exception):
    """Raised inside a write to roll it back and run it again from the start."""


@dataclass(frozen=True, slots=True)
class ConversationState:
    """The locked row of one conversation, as the write found it.

    Attributes:
        next_seq: The sequence number the next message gets.
        system_count: How many system messages are stored.
        other_count: How many other messages are stored.
        weight_counter: Which measure the weights hold (``None``: not kept).
        system_weight: Total weight of the system messages.
        other_weight: Total weight of the other messages.
        known: How many of the probed message ids are already stored, when the
            lock statement could tell (``None``: ask separately).
    """

    next_seq: int
    system_count: int
    other_count: int
    weight_counter: str | None
    system_weight: int | None
    other_weight: int | None
    known: int | None = None

    @classmethod
    def empty(cls) -> ConversationState:
        """The state of a conversation that has just been created."""
        return cls(0, 0, 0, None, 0, 0, 0)

    @classmethod
    def from_row(cls, row: Any) -> ConversationState:
        """Read the state from a row of the conversation columns."""
        mapping = row._mapping
        return cls(
            next_seq=int(mapping["next_seq"]),
            system_count=int(mapping["system_count"]),
            other_count=int(mapping["other_count"]),
            weight_counter=mapping["weight_counter"],
            system_weight=mapping["system_weight"],
            other_weight=mapping["other_weight"],
            known=mapping.get("known"),
        )


class SqlDialect:
    """Portable defaults; subclass and override what your database does differently.

    Attributes:
        name: The product this dialect is for, as SQLAlchemy names it
            (``engine.dialect.name``, or ``"mariadb"``).
    """

    name: ClassVar[str] = "sql"

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    # -- column types -------------------------------------------------------

    def id_type(self) -> TypeEngine[Any]:
        """Conversation and message ids: up to 255 characters, compared exactly."""
        return String(255)

    def role_type(self) -> TypeEngine[Any]:
        """The role column."""
        return String(16)

    def text_type(self) -> TypeEngine[Any]:
        """Message text and JSON payload: at least 16 MB."""
        return Text()

    def timestamp_type(self) -> TypeEngine[Any]:
        """A UTC instant with microseconds."""
        return UtcDateTime()

    def sequence_type(self) -> TypeEngine[Any]:
        """Sequence numbers and versions."""
        return BigInteger()

    def count_type(self) -> TypeEngine[Any]:
        """Counts and weights."""
        return Integer()

    def table_options(self) -> dict[str, Any]:
        """Extra ``Table`` keyword arguments (``mysql_charset`` and the like)."""
        return {}

    # -- DDL -------------------------------------------------------------------

    def create_statements(self, tables: list[Table]) -> list[ExecutableDDLElement]:
        """DDL that creates each table only if it is missing."""
        return [CreateTable(table, if_not_exists=True) for table in tables]

    def prepare_database(self, connection: Connection) -> None:
        """Run once before the DDL (SQLite turns on WAL here)."""

    def is_already_exists(self, error: exc.DBAPIError) -> bool:
        """True when DDL failed because another process created the object first."""
        text = str(error.orig).lower()
        return "already exist" in text or "duplicate" in text

    # -- transactions ----------------------------------------------------------

    def begin_write(self, connection: Connection) -> None:
        """Start a write transaction (the default lets SQLAlchemy autobegin)."""

    def serialize_in_process(self) -> bool:
        """True when writers in one process must queue on a lock (DuckDB)."""
        return False

    def max_statement_bytes(self, connection: Connection) -> int | None:
        """The largest statement the server takes, or ``None`` if no message nears it.

        Asked once per repository, before its first write; a message whose
        row would not fit is refused with ``MessageTooLargeError`` up front.
        """
        return None

    def is_retryable(self, error: exc.DBAPIError) -> bool:
        """True for a deadlock or serialization failure worth running again."""
        text = str(error.orig).lower()
        return "deadlock" in text or "serializ" in text

    def lock_rows(self, statement: Select[Any], table: Table) -> Select[Any]:
        """Make ``statement`` lock the rows it reads until the transaction ends."""
        return statement.with_for_update()

    def upsert_conversation(self, statements: Statements) -> Any:
        """Build a statement that creates-or-locks a conversation row, or ``None``."""
        return None

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
        """Lock the row of one conversation, creating it when ``create`` is true.

        Returns the state found, or ``None`` when the row is missing and
        ``create`` is false. Writers of other conversations are not blocked.
        The default reads the row with a locking read and inserts it when
        missing; a concurrent creator makes the insert fail, and the write is
        run again.
        """
        row = connection.execute(
            statements.lock_select, {"cid": conversation_id}
        ).first()
        if row is not None:
            return ConversationState.from_row(row)
        if not create:
            return None
        try:
            connection.execute(
                statements.insert_conversation, {"cid": conversation_id, "now": now}
            )
        except exc.IntegrityError as error:
            raise RetryTransaction from error
        return ConversationState.empty()
