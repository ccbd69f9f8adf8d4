"""What a SQL dialect decides: column types, guarded DDL, locking and retries.

Example:
    from chatledger_sql import PostgresDialect
    from chatledger_sql.dialects.base import SqlDialect

    class CockroachDialect(PostgresDialect):
        name = "cockroachdb"

    assert issubclass(CockroachDialect, SqlDialect)

A dialect never imports a database driver: the engine owns the driver. The base
class holds the portable defaults; each built-in dialect overrides only what its
database does differently. :class:`RoutineDialect` is the base of those whose
database runs a window append in a routine of its own
(:mod:`chatledger_sql.dialects.append_routine`).
"""

from __future__ import annotations

import contextlib
import json
import warnings
from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

from sqlalchemy import (
    Integer,
    Select,
    String,
    Text,
    bindparam,
    exc,
    false,
    func,
    select,
    text,
    type_coerce,
)
from sqlalchemy import inspect as sqlalchemy_inspect
from sqlalchemy.schema import CreateIndex, CreateTable, ExecutableDDLElement
from sqlalchemy.sql.elements import ClauseElement
from sqlalchemy.types import NullType, TypeEngine

from chatledger_sql.compiled import CompiledStatement, RawCalls, WriteGate
from chatledger_sql.types import UtcDateTime

if TYPE_CHECKING:
    from sqlalchemy import Column, Connection, Index, Table
    from sqlalchemy.engine import Dialect

    from chatledger_sql.dialects.append_routine import AppendRoutine
    from chatledger_sql.statements import Statements

__all__ = [
    "MAX_IDS_PER_STATEMENT",
    "ConversationState",
    "RetryTransaction",
    "RoutineDialect",
    "SqlDialect",
    "StoredRow",
]

#: The most ids one ``IN`` list holds (Oracle's limit; SQL Server allows
#: 2100 parameters in a statement).
MAX_IDS_PER_STATEMENT = 1000


class RetryTransaction(Exception):
    """Raised inside a write to roll it back and run it again from the start."""


class StoredRow(NamedTuple):
    """One of the oldest non-system rows, as eviction reads it."""

    seq: int
    message_id: str
    role: str
    weight: int | None


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
        known: How many of the probed message ids are already stored or in
            the record of evicted ids, when the lock statement could tell
            (``None``: ask separately).
        expires_at: When the conversation expires (``None``: never).
        oldest: Up to ``peek`` of the oldest non-system rows as
            ``(seq, message_id, role, weight)``, oldest first, when the lock
            statement read them (``None``: read them separately).
        peek: How many rows the lock statement was asked for; fewer in
            ``oldest`` means there are no more.
        system_batch: The first sequence number of the append that stored
            the current system messages (``None``: none, or not known).
        system_last: The sequence number of the last of them.
        system_as_of: The ``next_seq`` those two were right for: they are
            known exactly while it equals ``next_seq``.
    """

    next_seq: int
    system_count: int
    other_count: int
    weight_counter: str | None
    system_weight: int | None
    other_weight: int | None
    known: int | None = None
    expires_at: datetime | None = None
    oldest: list[StoredRow] | None = None
    peek: int = 0
    system_batch: int | None = None
    system_last: int | None = None
    system_as_of: int | None = None

    @property
    def system_known(self) -> bool:
        """True when ``system_batch`` and ``system_last`` hold for the log as it is."""
        return self.system_as_of == self.next_seq

    @classmethod
    def empty(cls) -> ConversationState:
        """The state of a conversation that has just been created."""
        return cls(0, 0, 0, None, 0, 0, 0)

    @classmethod
    def from_row(cls, row: Any) -> ConversationState:
        """Read the state from a row of the conversation columns."""
        return cls.from_mapping(row._mapping)

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any]) -> ConversationState:
        """Read the state from the conversation columns, by name."""
        next_seq = int(mapping["next_seq"])
        known = mapping.get("known")
        oldest = None
        peek = 0
        if "last_seq" in mapping:
            last_seq = mapping["last_seq"]
            # The probes read a snapshot; on PostgreSQL it may predate the
            # writer the lock waited for. Their rows would then end before
            # the row's next_seq: read again, separately, after the lock.
            # Every append that changes anything moves next_seq (ids that
            # leave the window at once use up numbers too), so no such write
            # goes unnoticed; the last rows evicted also read as stale.
            fresh = (last_seq is None and next_seq == 0) or (
                last_seq is not None and int(last_seq) == next_seq - 1
            )
            if fresh:
                found = mapping["oldest"]
                if isinstance(found, (str, bytes)):
                    found = json.loads(found)
                oldest = sorted(
                    StoredRow(
                        int(seq), mid, role, None if weight is None else int(weight)
                    )
                    for seq, mid, role, weight in found or ()
                )
                peek = int(mapping["peek"])
            else:
                known = None
        return cls(
            next_seq=next_seq,
            system_count=int(mapping["system_count"]),
            other_count=int(mapping["other_count"]),
            weight_counter=mapping["weight_counter"],
            system_weight=mapping["system_weight"],
            other_weight=mapping["other_weight"],
            known=known,
            expires_at=mapping.get("expires_at"),
            oldest=oldest,
            peek=peek,
            system_batch=_optional_int(mapping.get("system_batch")),
            system_last=_optional_int(mapping.get("system_last")),
            system_as_of=_optional_int(mapping.get("system_as_of")),
        )


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


class SqlDialect:
    """Portable defaults; subclass and override what your database does differently.

    Attributes:
        name: The product this dialect is for, as SQLAlchemy names it
            (``engine.dialect.name``, or ``"mariadb"``).
    """

    name: ClassVar[str] = "sql"
    #: The dialect's ``upsert_conversation`` returns the state and the count
    #: of known ids: locking a conversation is one statement.
    lock_returns_state: ClassVar[bool] = False
    #: A write transaction already excludes every other writer of the
    #: database (SQLite's ``BEGIN IMMEDIATE``, DuckDB's in-process lock), so
    #: :meth:`lock_many` reads and creates rows without locking each.
    writes_exclusively: ClassVar[bool] = False

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

    def raw_timestamp(self, column: Any) -> Any:
        """``column`` (a timestamp) as the read gets it, without result processing.

        The driver's value goes to :func:`chatledger_sql.rows.moment`: ISO
        text in UTC, a naive ``datetime`` in UTC, or an aware ``datetime``.
        """
        return type_coerce(column, NullType())

    def table_options(self) -> dict[str, Any]:
        """Extra ``Table`` keyword arguments (``mysql_charset`` and the like)."""
        return {}

    def id_pair_key_options(self) -> dict[str, Any]:
        """Extra keyword arguments of a primary key made of two id columns.

        The evicted-id record's key, ``(conversation_id, message_id)``, can be
        wider than some databases allow a clustered key to be.
        """
        return {}

    # -- DDL -------------------------------------------------------------------

    def create_statements(self, tables: list[Table]) -> list[ExecutableDDLElement]:
        """DDL that creates each table only if it is missing."""
        return [CreateTable(table, if_not_exists=True) for table in tables]

    #: The statement :meth:`add_column` runs; a dialect whose syntax differs
    #: sets its own.
    add_column_template = "ALTER TABLE {table} ADD COLUMN {column} {type}"

    def add_column(
        self, connection: Connection, table: Table, column: Column[Any]
    ) -> None:
        """Add ``column`` (nullable, no default) to an existing ``table``.

        Only the columns a later release added run through here, on a table
        an earlier one made (see ``create_schema``). The default is the
        standard ``ALTER TABLE ... ADD COLUMN``.
        """
        preparer = connection.dialect.identifier_preparer
        sql = self.add_column_template.format(
            table=preparer.format_table(table),
            column=preparer.format_column(column),
            type=column.type.compile(dialect=connection.dialect),
        )
        connection.exec_driver_sql(sql)

    #: The conversations table has the listing's indexes
    #: (:func:`chatledger_sql.schema.conversation_indexes`).
    keeps_conversation_indexes: ClassVar[bool] = True

    #: A member of ``UNION ALL`` may carry its own ``ORDER BY`` and
    #: ``LIMIT`` in parentheses (a view's newest rows); else that member is
    #: read from a derived table, which SQLite's grammar needs.
    limits_union_members: ClassVar[bool] = False

    def existing_indexes(self, connection: Connection, table: Table) -> set[str]:
        """The names of ``table``'s indexes in the database, in lower case."""
        inspector = sqlalchemy_inspect(connection)
        found = inspector.get_indexes(table.name, schema=table.schema)
        return {str(index["name"]).lower() for index in found if index["name"]}

    def create_index(self, connection: Connection, index: Index) -> None:
        """Create ``index``, which :meth:`existing_indexes` did not find.

        Unguarded: a racing creator makes it fail as already existing, and
        the step runs again, finding it (so only one creator reports it).
        """
        connection.execute(self.index_ddl(index, connection.dialect))

    def index_ddl(self, index: Index, engine_dialect: Dialect) -> Any:
        """The DDL of ``index`` for the engine's dialect (SQLAlchemy's own)."""
        return CreateIndex(index)

    def prepare_database(self, connection: Connection) -> None:
        """Run once before the DDL (SQLite turns on WAL here)."""

    def is_already_exists(self, error: exc.DBAPIError) -> bool:
        """True when DDL failed because another process created the object first."""
        text = str(error.orig).lower()
        return "already exist" in text or "duplicate" in text

    # -- transactions ----------------------------------------------------------

    def begin_write(self, connection: Connection) -> None:
        """Start a write transaction (the default lets SQLAlchemy autobegin)."""

    def write_begins(
        self, info: MutableMapping[Any, Any], in_transaction: bool
    ) -> list[str] | None:
        """What :meth:`begin_write` sends to the driver's connection, for a
        caller that sends it itself (an asyncio driver's); ``None`` when the
        dialect begins its writes otherwise (the default).

        Args:
            info: The pool's record of the connection (``ConnectionRecord.info``).
            in_transaction: Whether the driver has a transaction open already.
        """
        return None

    def begin_on_driver(
        self, calls: RawCalls, in_transaction: bool, gate: WriteGate
    ) -> bool:
        """Begin a write on the driver's connection, as :meth:`write_begins` says.

        ``False`` when ``gate`` said, while the begin waited for a lock, that
        the write is no longer wanted: nothing was begun. The default sends
        :meth:`write_begins` and waits as the driver waits.
        """
        for statement in self.write_begins(calls.info, in_transaction) or ():
            calls.execute_text(statement)
        return True

    @contextlib.contextmanager
    def writing(self, connection: Connection) -> Iterator[None]:
        """Hold one write transaction: the repository's write runs inside.

        The body ends with :meth:`commit_write`; leaving it by an exception
        rolls back (the connection's close does, unless the dialect keeps
        state of its own to undo). The default only calls :meth:`begin_write`.
        """
        self.begin_write(connection)
        yield

    def commit_write(self, connection: Connection) -> None:
        """Commit the write transaction :meth:`writing` holds."""
        connection.commit()

    def settles_commit(self, connection: Connection) -> bool:
        """Whether an async write cancelled during its commit waits for it.

        True by default (:func:`chatledger.adapters.settled`).
        """
        return True

    def read_options(self, connection: Connection) -> dict[str, Any]:
        """Execution options for a one-statement read (none by default)."""
        return {}

    def raw_read(
        self, connection: Connection, statement: ClauseElement
    ) -> tuple[CompiledStatement, bool]:
        """``statement`` compiled for a read on the DBAPI cursor, and whether
        what is sent also ends the read's transaction.

        The default: the statement alone, its transaction ended after it
        (``chatledger_sql.compiled.fetch_all``).
        """
        return CompiledStatement(connection.dialect, [statement]), False

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

    # -- the listing of conversations ------------------------------------------

    def listing_id(self, column: Any) -> Any:
        """The conversation id as the listing orders it on the dialect's own
        product (see :meth:`native`): by code point.

        The default is the column itself, whose binary collation (or the
        database's byte order of UTF-8) is code point order.
        """
        return column

    def filters_metadata(self, connection: Connection) -> bool:
        """Whether the listing compares metadata in SQL on ``connection``
        (:meth:`metadata_match`); otherwise the repository filters the
        records it reads in the listing's order (the default)."""
        return False

    def metadata_shape(self, key: str, value: Any) -> str | None:
        """The shape of the SQL comparison of a metadata filter's ``key`` and
        ``value`` (a JSON scalar), under which its statement is kept;
        ``None``: not in SQL (then no key of the filter is)."""
        return None

    def metadata_match(self, column: Any, index: int, shape: str) -> Any:
        """The condition that the JSON object in ``column`` holds the key
        ``:mk<index>`` with a value equal to ``:mv<index>``, for a value of
        ``shape`` (see :meth:`metadata_parameters`)."""
        raise NotImplementedError

    def metadata_parameters(self, index: int, key: str, value: Any) -> dict[str, Any]:
        """The bound values of :meth:`metadata_match`'s condition."""
        return {f"mk{index}": key, f"mv{index}": value}

    def upsert_conversation(self, statements: Statements) -> Any:
        """Build a statement that creates-or-locks a conversation row, or ``None``."""
        return None

    def native(self, connection: Connection) -> bool:
        """True when the engine is the product this dialect was written for.

        A dialect serving as the fallback of an unknown product keeps to
        portable statements; the product's own engine gets the fast paths
        (:meth:`probing_lock`, :meth:`write_append`).
        """
        return True

    def probing_lock(self, statements: Statements) -> Any:
        """An upsert returning the state and :meth:`lock_probes`, or ``None``."""
        return None

    def append_routine(self, statements: Statements) -> AppendRoutine | None:
        """The server-side append routine of these tables, or ``None``.

        A dialect that has one creates it with the tables
        (:meth:`create_routines`); the repository calls it, in one statement
        that commits, for the appends it takes, and runs its portable append
        for the others.
        """
        return None

    def runs_routines(self, connection: Connection) -> bool:
        """Whether the server behind ``connection`` can run the routines."""
        return False

    def create_routines(
        self, connection: Connection, statements: Statements
    ) -> list[str]:
        """Create the server-side routines if missing; return the names created.

        The default: there are none.
        """
        return []

    def drop_routines(self, connection: Connection, statements: Statements) -> None:
        """Drop the server-side routines if present (default: there are none)."""

    def is_missing_routine(self, error: exc.DBAPIError) -> bool:
        """True when a call failed because the routine does not exist."""
        return False

    def probing_read(self, statements: Statements) -> Any:
        """A read of a locked row's state and :meth:`lock_probes`, or ``None``.

        For dialects whose lock is a statement of its own that cannot return
        the probes (MySQL and MariaDB).
        """
        return None

    def append_statement(self, statements: Statements) -> Any:
        """Build the statement :meth:`write_append` runs, or ``None``."""
        return None

    #: The one-statement log append (:meth:`log_append_statement`) begins
    #: and commits its own transaction; otherwise it runs in autocommit.
    log_append_commits_itself: ClassVar[bool] = False
    #: The one-statement log append takes a batch of more messages than this
    #: as one array per column (``chatledger_sql.log_steps.row_arrays``);
    #: ``None``: never.
    log_append_arrays_past: ClassVar[int | None] = None

    def raw_log_append(
        self, connection: Connection, statement: Any, ids: int
    ) -> CompiledStatement:
        """The one-statement log append of ``ids`` messages compiled for the
        DBAPI cursor, as :meth:`raw_read` compiles a read.

        The default: the statement alone.
        """
        return CompiledStatement(connection.dialect, [statement])

    def log_append_statement(self, statements: Statements, ids: int) -> Any:
        """Build a log append in one statement that commits alone, or ``None``.

        It takes a batch of ``ids`` messages without a system message (see
        ``chatledger_sql.log_steps.log_append_parameters``), the rows' values
        as ``chatledger_sql.log_steps.row_values`` gives them, and answers rows
        whose first column numbers a message stored: one per message, or the
        last alone; none, or ``NULL``, when it left the append to the
        transaction (an id the conversation holds, an expired conversation).
        """
        return None

    def log_append_takes(self, rows: Sequence[Mapping[str, Any]]) -> bool:
        """Whether the one-statement log append may carry ``rows`` (their
        ``Statements.insert_messages`` values); the default: any."""
        return True

    def log_advance_statement(self, statements: Statements, ids: int) -> Any:
        """Build the first half of a log append in the write transaction, or ``None``.

        For a database whose write transaction excludes every other writer
        (:attr:`writes_exclusively`): one statement creates or advances the
        conversation row for a batch of ``ids`` messages without a system
        message and answers ``(base, sized)``, the number of the batch's first
        message and whether its sizes are kept; the repository inserts the
        rows after it. No row: the conversation holds one of the ids or has
        expired, and the append is left to the transaction.
        """
        return None

    def forget_statement(self, statements: Statements) -> Any:
        """Build one statement that deletes a conversation's messages and
        evicted ids (``cid``), or ``None``: :meth:`forget` runs it."""
        return None

    def forget(
        self, connection: Connection, statements: Statements, conversation_id: str
    ) -> None:
        """Delete the messages and the evicted ids of one locked conversation.

        For a write that replaces or deletes the conversation, or finds it
        expired. One statement where the dialect has one
        (:meth:`forget_statement`, on its own product), else one per table.
        """
        parameters = {"cid": conversation_id}
        if statements.forget is not None and self.native(connection):
            connection.execute(statements.forget, parameters)
            return
        connection.execute(statements.delete_messages, parameters)
        connection.execute(statements.delete_evicted, parameters)

    def write_log(
        self,
        connection: Connection,
        statements: Statements,
        rows: list[dict[str, Any]],
        update: dict[str, Any],
    ) -> bool:
        """Write a log append's rows and its ``Statements.update_log`` at once.

        ``False`` (the default) leaves them to the two portable statements.
        """
        return False

    def write_append(
        self,
        connection: Connection,
        statements: Statements,
        rows: list[dict[str, Any]],
        *,
        drop_system: bool,
        upto: int,
        evicted: list[dict[str, Any]],
        trim_below: int | None,
        update: dict[str, Any],
    ) -> bool:
        """Write an append in one statement if the dialect can; return whether it did.

        ``rows`` are the messages to insert, ``drop_system`` deletes the stored
        system messages first, ``upto`` is the last evicted sequence number
        (``-1``: none), ``evicted`` the rows of ``Statements.insert_evicted``
        (the ids the append took out of the window), ``trim_below`` the
        ``below`` of ``Statements.trim_evicted`` (``None``: no trim) and
        ``update`` the parameters of the conversation update. The default
        returns ``False``: one statement per step.
        """
        return False

    def json_rows(self, *columns: Any) -> Any:
        """An aggregate making one JSON array of ``[columns...]`` arrays, or ``None``.

        Dialects that return it get the oldest rows in their lock statement.
        """
        return None

    def numbered_ids_match(
        self, statements: Statements, count: int, column: Any = None
    ) -> Any:
        """``message_id IN (:id_0, ..., :id_<count-1>)``, or false for none.

        For statements compiled outside SQLAlchemy's execution, which cannot
        expand a list parameter: one parameter per id, as an expanding ``IN``
        makes it, so one id is a plain equality the unique index answers.
        ``column`` is the messages table's ``message_id`` unless given (the
        evicted-id record's).
        """
        if not count:
            return false()
        if column is None:
            column = statements.tables.messages.c.message_id
        return column.in_(
            [bindparam(f"id_{i}", type_=column.type) for i in range(count)]
        )

    def lock_probes(
        self, statements: Statements, *, numbered_ids: int | None = None
    ) -> list[Any]:
        """Columns a ``RETURNING`` lock adds: known ids, oldest rows, last seq.

        ``known`` counts the ids among ``ids`` that are stored or in the
        record of evicted ids (either makes an id a no-op); ``oldest`` holds
        the first ``peek`` non-system rows; ``last_seq`` lets the caller tell
        whether those probes saw the latest commit (see
        :meth:`ConversationState.from_row`). With ``numbered_ids``, the ids
        are ``:id_0`` to ``:id_<n-1>`` instead of the expanding ``:ids``, for
        statements compiled outside SQLAlchemy's execution
        (:meth:`numbered_ids_match`).
        """
        tables = statements.tables
        m = tables.messages.c
        cid: Any = bindparam("cid")
        peek: Any = bindparam("peek", type_=Integer())
        counts = []
        for table in (tables.messages, tables.evicted):
            match = (
                table.c.message_id.in_(bindparam("ids", expanding=True))
                if numbered_ids is None
                else self.numbered_ids_match(
                    statements, numbered_ids, table.c.message_id
                )
            )
            counts.append(
                select(func.count())
                .where(table.c.conversation_id == cid, match)
                .scalar_subquery()
            )
        known = (counts[0] + counts[1]).label("known")
        first = (
            select(m.seq, m.message_id, m.role, m.weight)
            .where(m.conversation_id == cid, m.role != "system")
            .order_by(m.seq)
            .limit(peek)
            .subquery("first_rows")
        )
        oldest = (
            select(
                self.json_rows(
                    first.c.seq, first.c.message_id, first.c.role, first.c.weight
                )
            )
            .scalar_subquery()
            .label("oldest")
        )
        last_seq = (
            select(func.max(m.seq))
            .where(m.conversation_id == cid)
            .scalar_subquery()
            .label("last_seq")
        )
        return [known, oldest, last_seq, peek.label("peek")]

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
        """Lock the row of one conversation, creating it when ``create`` is true.

        Returns the state found, or ``None`` when the row is missing and
        ``create`` is false. Writers of other conversations are not blocked.
        With :attr:`lock_returns_state`, one upsert creates or locks the row
        and returns its state, how many of ``probe_ids`` are stored or
        recorded as evicted, and the ``peek`` oldest non-system rows.
        Otherwise the row is read with a locking read and inserted when
        missing; a concurrent creator makes the insert fail, and the write is
        run again.
        """
        if create and statements.lock_probing is not None and self.native(connection):
            state = connection.execute(
                statements.lock_probing,
                {
                    "cid": conversation_id,
                    "now": now,
                    "ids": probe_ids or [],
                    "peek": peek,
                },
            ).one()
            return ConversationState.from_row(state)
        if create and self.lock_returns_state:
            state = connection.execute(
                statements.upsert_conversation,
                {"cid": conversation_id, "now": now, "ids": probe_ids or []},
            ).one()
            return ConversationState.from_row(state)
        row = connection.execute(
            statements.lock_select, {"cid": conversation_id}
        ).first()
        if row is not None:
            return ConversationState.from_row(row)
        if not create:
            return None
        try:
            connection.execute(
                statements.insert_conversation,
                {"cid": conversation_id, "now": now, "created": now},
            )
        except exc.IntegrityError as error:
            raise RetryTransaction from error
        return ConversationState.empty()

    def lock_many(
        self,
        connection: Connection,
        statements: Statements,
        conversation_ids: list[str],
        now: datetime,
    ) -> dict[str, int]:
        """Lock the rows of several conversations, creating missing ones.

        Returns the ``next_seq`` of each. ``conversation_ids`` come sorted,
        so writers of overlapping sets lock in one order. By default each row
        is locked by :meth:`lock_conversation`, whose first call also begins
        the transaction the dialect's way; with :attr:`writes_exclusively`
        the rows are read in one statement per chunk and the missing ones
        inserted in one.
        """
        if not self.writes_exclusively:
            found: dict[str, int] = {}
            for conversation_id in conversation_ids:
                state = self.lock_conversation(
                    connection, statements, conversation_id, now, create=True
                )
                assert state is not None
                found[conversation_id] = state.next_seq
            return found
        found = {}
        for start in range(0, len(conversation_ids), MAX_IDS_PER_STATEMENT):
            chunk = conversation_ids[start : start + MAX_IDS_PER_STATEMENT]
            rows = connection.execute(statements.next_seqs, {"ids": chunk})
            found.update((cid, int(next_seq)) for cid, next_seq in rows)
        missing = [cid for cid in conversation_ids if cid not in found]
        if missing:
            try:
                connection.execute(
                    statements.insert_conversation,
                    [{"cid": cid, "now": now, "created": now} for cid in missing],
                )
            except exc.IntegrityError as error:
                raise RetryTransaction from error
            found.update((cid, 0) for cid in missing)
        return found


class RoutineDialect(SqlDialect):
    """A dialect whose database runs window appends in a routine of its own.

    The routine (an :class:`~chatledger_sql.dialects.append_routine.AppendRoutine`)
    is created with the tables, dropped with them, and called for the appends
    it takes (its ``takes``); every other append, and every append with
    ``server_append=False``, takes the portable path.

    Args:
        server_append: Call the routine (one round trip per append); false
            keeps every append on the portable path.
    """

    def __init__(self, *, server_append: bool = True) -> None:
        """Call the routine unless ``server_append`` is false."""
        self.server_append = bool(server_append)

    def __repr__(self) -> str:
        options = "" if self.server_append else "server_append=False"
        return f"{type(self).__name__}({options})"

    def routine(self, statements: Statements) -> AppendRoutine:
        """The routine of these tables, called or not."""
        raise NotImplementedError

    def append_routine(self, statements: Statements) -> AppendRoutine | None:
        """:meth:`routine`, unless ``server_append`` is false."""
        return self.routine(statements) if self.server_append else None

    def runs_routines(self, connection: Connection) -> bool:
        """Whether the server can run the routine: the product itself."""
        return self.native(connection)

    def refuses_routine(self, error: exc.DBAPIError) -> bool:
        """True when the role may not create the routine (then appends keep
        to the portable path, with a warning)."""
        return False

    def create_routines(
        self, connection: Connection, statements: Statements
    ) -> list[str]:
        """Create the routine unless it exists (on the product itself); return
        its name when this call created it."""
        routine = statements.append_routine
        if routine is None or not self.runs_routines(connection):
            return []
        if connection.execute(text(routine.exists_sql())).scalar() is not None:
            return []
        try:
            connection.execute(text(routine.create_sql()))
        except exc.DBAPIError as error:
            if not self.refuses_routine(error):
                raise
            connection.rollback()
            warnings.warn(
                f"cannot create the routine {routine.name!r} ({error.orig}); "
                "window appends take the portable path instead of one round trip",
                stacklevel=2,
            )
            return []
        return [routine.name]

    def drop_routines(self, connection: Connection, statements: Statements) -> None:
        """Drop the routine (on the product itself), even when this dialect
        does not call it: another repository may have made it. The routines
        earlier versions made go too; each is dropped only where it is found."""
        if self.native(connection):
            for exists, drop in self.routine(statements).drops_if_present():
                if connection.execute(text(exists)).scalar() is not None:
                    connection.execute(text(drop))
