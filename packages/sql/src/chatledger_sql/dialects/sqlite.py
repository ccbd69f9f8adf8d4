"""SQLite: ``BEGIN IMMEDIATE`` on a WAL database serialises writers.

Example:
    from chatledger_sql import SqlChatMemoryRepository

    repository = SqlChatMemoryRepository.from_url("sqlite:///chat.db")

A deferred transaction that reads before it writes cannot upgrade its lock
when another writer got there first, and fails with ``SQLITE_BUSY`` whatever
the busy timeout. Every write therefore starts with ``BEGIN IMMEDIATE``, which
waits (up to ``busy_timeout``) for the one write lock. WAL lets readers go on
meanwhile.

Holding the database's one write lock, a log append needs no lock of its own
nor a read of the row: one upsert checks the ids and the expiry and takes the
batch's numbers (:meth:`SQLiteDialect.log_advance_statement`), one insert
stores the rows.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import MutableMapping
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    Select,
    Text,
    TextClause,
    and_,
    bindparam,
    exc,
    exists,
    func,
    literal,
    select,
    text,
)
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.dialects.sqlite.base import SQLiteDialect as SASQLiteDialect

from chatledger_sql.compiled import OPEN_GATE, RawCalls
from chatledger_sql.dialects.base import SqlDialect

if TYPE_CHECKING:
    from sqlalchemy import Connection, Table

    from chatledger_sql.compiled import WriteGate
    from chatledger_sql.statements import Statements

__all__ = ["SQLiteDialect"]

_SQLITE = SASQLiteDialect()
#: The key of the busy timeout set on a pooled connection, in its ``info``.
_BUSY_TIMEOUT = "chatledger_busy_timeout_ms"
#: How long one wait of a cancellable write for the lock lasts before it asks
#: whether it is still wanted (SQLite's own wait cannot be interrupted).
_LOCK_WAIT_SLICE_MS = 100


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
        # Through a cursor, as PEP 249 has it: SQLAlchemy 2.0's aiosqlite
        # adapter has no execute() of its own on the connection.
        dbapi: Any = connection.connection.dbapi_connection
        cursor = dbapi.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {self.busy_timeout_ms}")
            cursor.execute("PRAGMA journal_mode")
            mode = cursor.fetchone()[0]
        finally:
            cursor.close()
        if str(mode).lower() not in ("wal", "memory"):
            connection.exec_driver_sql("PRAGMA journal_mode=WAL")

    def begin_write(self, connection: Connection) -> None:
        """Set the busy timeout (once per connection) and take the write lock now.

        Both go straight to the ``sqlite3`` connection: through SQLAlchemy
        each would cost more than the statements of a small append. The
        timeout set is noted in the pool's record of the connection, which
        lives as long as the connection does.
        """
        pooled = connection.connection
        dbapi: Any = pooled.dbapi_connection
        calls = RawCalls(dbapi, pooled.info)
        try:
            self.begin_on_driver(
                calls, bool(getattr(dbapi, "in_transaction", False)), OPEN_GATE
            )
        finally:
            calls.close()

    def write_begins(
        self, info: MutableMapping[Any, Any], in_transaction: bool
    ) -> list[str]:
        """The busy timeout, once per connection (noted in ``info``), then
        ``BEGIN IMMEDIATE``; see :meth:`begin_write`."""
        begins = []
        if info.get(_BUSY_TIMEOUT) != self.busy_timeout_ms:
            begins.append(f"PRAGMA busy_timeout = {self.busy_timeout_ms}")
            info[_BUSY_TIMEOUT] = self.busy_timeout_ms
        # The engine may already have begun a transaction (an event hook that
        # emits BEGIN); then the lock is taken on the first write instead.
        if not in_transaction:
            begins.append("BEGIN IMMEDIATE")
        return begins

    def begin_on_driver(
        self, calls: RawCalls, in_transaction: bool, gate: WriteGate
    ) -> bool:
        """``BEGIN IMMEDIATE``; for a cancellable write, in slices of the wait.

        SQLite waits for the write lock inside the statement, and neither a
        cancellation nor ``interrupt()`` cuts that wait short. A write whose
        ``gate`` may stop (an async one's) waits instead in slices of
        ``_LOCK_WAIT_SLICE_MS``, asking between them whether it is still
        wanted, up to the same busy timeout in all; the connection's timeout
        is set back after. The last ``database is locked`` is raised when
        the timeout passes.
        """
        if in_transaction or not gate.cancellable:
            return super().begin_on_driver(calls, in_transaction, gate)
        full = self.busy_timeout_ms
        deadline = time.monotonic() + full / 1000
        calls.execute_text(f"PRAGMA busy_timeout = {min(_LOCK_WAIT_SLICE_MS, full)}")
        try:
            while True:
                try:
                    calls.execute_text("BEGIN IMMEDIATE")
                    return True
                except sqlite3.OperationalError as error:
                    busy = error.sqlite_errorcode & 0xFF == sqlite3.SQLITE_BUSY
                    if not busy or time.monotonic() >= deadline:
                        raise
                    if not gate.wanted():
                        return False
        finally:
            calls.execute_text(f"PRAGMA busy_timeout = {full}")
            calls.info[_BUSY_TIMEOUT] = full

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

    def filters_metadata(self, connection: Connection) -> bool:
        """Yes: ``json_each`` reads the metadata's top-level keys."""
        return True

    def metadata_shape(self, key: str, value: Any) -> str | None:
        """By the JSON type the stored value must have: ``null``, ``true``,
        ``false``, ``number`` or ``text``; none for a NUL or an integer
        beyond 64 bits, which SQLite does not compare."""
        if "\x00" in key:
            return None
        if value is None:
            return "null"
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, int):
            return "number" if -(2**63) <= value < 2**63 else None
        if isinstance(value, float):
            return "number"
        return None if "\x00" in value else "text"

    def metadata_match(self, column: Any, index: int, shape: str) -> Any:
        """``EXISTS (SELECT 1 FROM json_each(metadata) WHERE key = :mk<i> ...)``.

        ``json_each`` gives each top-level key with its JSON ``type`` and its
        SQL value (``atom``): a number equals a number by value (``1`` equals
        ``1.0``), ``true`` never ``1``, a string only the same string.
        """
        entry = func.json_each(column).table_valued(
            "key", "type", "atom", name=f"metadata_{index}"
        )
        match = [entry.c.key == bindparam(f"mk{index}", type_=Text())]
        if shape == "number":
            match.append(entry.c.type.in_(["integer", "real"]))
            match.append(entry.c.atom == bindparam(f"mv{index}"))
        elif shape == "text":
            match.append(entry.c.type == "text")
            match.append(entry.c.atom == bindparam(f"mv{index}", type_=Text()))
        else:
            match.append(entry.c.type == shape)
        return exists(select(literal(1)).select_from(entry).where(and_(*match)))

    def metadata_parameters(self, index: int, key: str, value: Any) -> dict[str, Any]:
        """The key, and the value where the shape compares it."""
        if value is None or isinstance(value, bool):
            return {f"mk{index}": key}
        return {f"mk{index}": key, f"mv{index}": value}

    def lock_rows(self, statement: Select[Any], table: Table) -> Select[Any]:
        """No row locks: ``BEGIN IMMEDIATE`` already holds the database's."""
        return statement

    def log_advance_statement(self, statements: Statements, ids: int) -> TextClause:
        """Create-or-advance the row for a log append of ``ids`` messages.

        Run in the write transaction, which no other writer shares: the row
        takes the batch's numbers and counts and answers ``(base, sized)``,
        the number of the batch's first message and whether its sizes are
        kept, as ``log_writes`` keeps them; where the current system messages
        are stays known if it was. It does nothing, and answers no row, when
        the conversation holds or held one of the ids (``:id_0`` ...) or has
        expired: the append is then the transaction's.
        """
        preparer = _SQLITE.identifier_preparer
        m = preparer.format_table(statements.tables.messages)
        c = preparer.format_table(statements.tables.conversations)
        e = preparer.format_table(statements.tables.evicted)
        empty = "c.system_count + c.other_count = 0"
        sized = f":counter IS NOT NULL AND ({empty} OR c.weight_counter = :counter)"
        listed = ", ".join(f":id_{index}" for index in range(ids))
        held = f"conversation_id = :cid AND message_id IN ({listed})"
        # SQLite reads every expression of an UPDATE against the row as it
        # was, as the standard does; the SELECT's WHERE makes the INSERT's
        # source unambiguous before ON CONFLICT.
        return text(
            f"INSERT INTO {c} AS c (conversation_id, next_seq, version, "
            "system_count, other_count, weight_counter, system_weight, "
            "other_weight, updated_at, expires_at, system_batch, system_last, "
            "system_as_of, created_at) "
            "SELECT :cid, :n, 0, 0, :n, :counter, "
            "CASE WHEN :counter IS NOT NULL THEN 0 END, "
            "CASE WHEN :counter IS NOT NULL THEN :size END, :now, :p_expires_at, "
            "NULL, NULL, :n, :now "
            f"WHERE NOT EXISTS (SELECT 1 FROM {m} WHERE {held}) "
            f"AND NOT EXISTS (SELECT 1 FROM {e} WHERE {held}) "
            "ON CONFLICT (conversation_id) DO UPDATE SET "
            "next_seq = c.next_seq + :n, version = c.version + 1, "
            "other_count = c.other_count + :n, "
            f"weight_counter = CASE WHEN {sized} THEN :counter END, "
            f"system_weight = CASE WHEN {sized} THEN CASE WHEN {empty} THEN 0 "
            "ELSE COALESCE(c.system_weight, 0) END END, "
            f"other_weight = CASE WHEN {sized} THEN CASE WHEN {empty} THEN 0 "
            "ELSE COALESCE(c.other_weight, 0) END + :size END, "
            "updated_at = :now, expires_at = :p_expires_at, "
            "system_as_of = CASE WHEN c.system_as_of = c.next_seq "
            "THEN c.next_seq + :n ELSE c.system_as_of END "
            "WHERE c.expires_at IS NULL OR c.expires_at > :now "
            "RETURNING next_seq - :n AS base, weight_counter IS NOT NULL AS sized"
        ).bindparams(
            bindparam("now", type_=self.timestamp_type()),
            bindparam("p_expires_at", type_=self.timestamp_type()),
        )
