"""MySQL and MariaDB: ``utf8mb4``, ``LONGTEXT``, ``DATETIME(6)`` and an upsert lock.

Example (needs a MySQL or MariaDB server):
    from sqlalchemy import create_engine
    from chatledger_sql import MySQLDialect, SqlChatMemoryRepository

    engine = create_engine("mysql+pymysql://app@localhost/chat")
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

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

from sqlalchemy import (
    Select,
    TextClause,
    bindparam,
    cast,
    exc,
    func,
    insert,
    select,
    text,
    type_coerce,
)
from sqlalchemy.dialects.mysql import CHAR, DATETIME, LONGTEXT, VARCHAR
from sqlalchemy.dialects.mysql import insert as mysql_insert
from sqlalchemy.dialects.mysql.base import MySQLDialect as SAMySQLDialect
from sqlalchemy.sql.elements import ClauseElement
from sqlalchemy.types import NullType, TypeEngine

from chatledger_sql.compiled import CompiledStatement
from chatledger_sql.dialects.base import ConversationState, RoutineDialect, SqlDialect
from chatledger_sql.dialects.compound import PARAMSTYLES, CompoundStatement
from chatledger_sql.dialects.mariadb_routine import MariaDBAppendRoutine
from chatledger_sql.dialects.prepared import PreparedStatement
from chatledger_sql.types import UtcDateTime

if TYPE_CHECKING:
    from sqlalchemy import Connection, Table

    from chatledger_sql.statements import Statements

__all__ = ["MariaDBDialect", "MySQLDialect"]

_MARIADB = SAMySQLDialect(is_mariadb=True)  # type: ignore[no-untyped-call]
_ROLLBACK = text("ROLLBACK")

# ER_LOCK_DEADLOCK, ER_LOCK_WAIT_TIMEOUT is not retried (it signals a stuck writer)
_RETRYABLE = {1213}
# ER_TABLE_EXISTS_ERROR, ER_DUP_KEYNAME, ER_SP_ALREADY_EXISTS
_EXISTS = {1050, 1061, 1304}
# ER_SP_DOES_NOT_EXIST
_NO_PROCEDURE = 1305
# ER_DBACCESS_DENIED_ERROR, ER_TABLEACCESS_DENIED_ERROR,
# ER_SPECIFIC_ACCESS_DENIED_ERROR
_DENIED = {1044, 1142, 1227}
#: The most characters of message text a compound write statement carries:
#: 1 MB once escaped and in UTF-8, the smallest ``max_allowed_packet``.
MAX_BLOCK_TEXT = 128 * 1024


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
    #: MariaDB materializes a derived table in a temporary table of its own:
    #: the view's newest rows read from one took about half of a
    #: 20-message view's server time.
    limits_union_members = True

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


class MariaDBDialect(RoutineDialect, MySQLDialect):
    """MariaDB 10.5 and later (detected even behind a ``mysql://`` URL).

    On MariaDB 10.6 and later a window append is one ``CALL`` of a stored
    procedure made with the tables
    (:mod:`chatledger_sql.dialects.mariadb_routine`), for the appends it
    takes. Otherwise, with a ``pyformat`` or ``format`` driver (PyMySQL, the
    default; asyncmy and aiomysql) a window append sends its statements as
    two compound statements (``BEGIN NOT ATOMIC ... END``): the upsert with
    the probing read, then the deletes, the insert and the conversation
    update. The locks taken, and their order, are those of the statements
    sent one by one.

    Args:
        server_append: Call the procedure; false keeps every append on the
            compound statements.
    """

    name = "mariadb"
    #: MariaDB's binary, no-pad collation.
    id_collation = "utf8mb4_nopad_bin"

    log_append_commits_itself = True
    #: The largest batch whose log append is prepared on each connection.
    prepared_batches_up_to: ClassVar[int] = 8

    def log_append_statement(self, statements: Statements, ids: int) -> TextClause:
        """A log append of ``ids`` messages in one compound statement that commits.

        It begins its transaction, advances the conversation row (the lock:
        the batch's numbers, counts and sizes as ``log_writes`` keeps them),
        checks the ids with a read that starts after that lock, inserts the
        rows and commits. A conversation without a row gets one, made as
        the upsert of the portable lock makes it, in a transaction begun
        again so that no gap lock of the failed update is held meanwhile. It
        answers one row: the number of the last message stored, or ``NULL``
        when it rolled back and left the append to the transaction (an id
        the conversation holds or held; the row expired, judged by the
        client's clock as of after the lock's wait, or made by another
        writer meanwhile).
        """
        preparer = _MARIADB.identifier_preparer
        m = preparer.format_table(statements.tables.messages)
        c = preparer.format_table(statements.tables.conversations)
        e = preparer.format_table(statements.tables.evicted)
        empty = "system_count + other_count = 0"
        sized = f":counter IS NOT NULL AND ({empty} OR weight_counter = :counter)"
        listed = ", ".join(f":id_{index}" for index in range(ids))
        held = f"conversation_id = :cid AND message_id IN ({listed})"
        rows = ", ".join(
            f"(:cid, v_base + {index}, :r{index}_message_id, :r{index}_role, "
            f":r{index}_content, :r{index}_payload, "
            f"IF(v_sized, :r{index}_weight, NULL), :r{index}_created_at)"
            for index in range(ids)
        )
        timestamp = self.timestamp_type()
        return text(
            "BEGIN NOT ATOMIC "
            "DECLARE v_base BIGINT DEFAULT NULL; "
            "DECLARE v_sized BOOLEAN DEFAULT FALSE; "
            "DECLARE v_known BIGINT DEFAULT 0; "
            "DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END; "
            "work: BEGIN "
            "START TRANSACTION; "
            # Every expression reads only columns set after it (or itself):
            # the same under MariaDB's left-to-right assignment and under
            # SIMULTANEOUS_ASSIGNMENT.
            f"UPDATE {c} SET system_as_of = IF(system_as_of = next_seq, "
            "next_seq + :n, system_as_of), "
            f"system_weight = IF({sized}, IF({empty}, 0, "
            "COALESCE(system_weight, 0)), NULL), "
            f"other_weight = IF({sized}, IF({empty}, 0, "
            "COALESCE(other_weight, 0)) + :size, NULL), "
            f"weight_counter = IF({sized}, :counter, NULL), "
            "other_count = other_count + :n, next_seq = next_seq + :n, "
            "version = version + 1, updated_at = :now, expires_at = :p_expires_at "
            "WHERE conversation_id = :cid AND (expires_at IS NULL OR expires_at > "
            ":now + INTERVAL timestampdiff(MICROSECOND, now(6), sysdate(6)) "
            "MICROSECOND); "
            "IF ROW_COUNT() = 0 THEN "
            "ROLLBACK; "
            "START TRANSACTION; "
            f"INSERT INTO {c} (conversation_id, next_seq, version, system_count, "
            "other_count, weight_counter, system_weight, other_weight, updated_at, "
            "expires_at, system_batch, system_last, system_as_of, created_at) "
            "VALUES (:cid, :n, 0, 0, :n, :counter, IF(:counter IS NULL, NULL, 0), "
            "IF(:counter IS NULL, NULL, :size), :now, :p_expires_at, NULL, NULL, :n, "
            ":now) "
            "ON DUPLICATE KEY UPDATE version = version + 1; "
            "IF ROW_COUNT() <> 1 THEN ROLLBACK; LEAVE work; END IF; "
            "END IF; "
            "SELECT next_seq - :n, weight_counter IS NOT NULL, "
            f"(SELECT count(*) FROM {m} WHERE {held}) "
            f"+ (SELECT count(*) FROM {e} WHERE {held}) "
            f"INTO v_base, v_sized, v_known FROM {c} WHERE conversation_id = :cid; "
            "IF v_known > 0 THEN ROLLBACK; SET v_base = NULL; LEAVE work; END IF; "
            f"INSERT INTO {m} (conversation_id, seq, message_id, role, content, "
            f"payload, weight, created_at) VALUES {rows}; "
            "COMMIT; "
            "END work; "
            "SELECT v_base + :n - 1 AS last_seq; "
            "END"
        ).bindparams(
            bindparam("now", type_=timestamp),
            bindparam("p_expires_at", type_=timestamp),
            *(
                bindparam(f"r{index}_created_at", type_=timestamp)
                for index in range(ids)
            ),
        )

    def raw_read(
        self, connection: Connection, statement: ClauseElement
    ) -> tuple[CompiledStatement, bool]:
        """The read and a ``ROLLBACK`` in one compound statement.

        A read with autocommit off begins an InnoDB transaction, whose
        snapshot must not outlive it, and the server status does not flag
        it: the read ends it itself, where a ``ROLLBACK`` after it would be
        a round trip of its own. The compound statement is prepared on each
        connection (:mod:`chatledger_sql.dialects.prepared`): its parse
        otherwise costs more server time than the read.
        """
        if not self.native(connection):
            return super().raw_read(connection, statement)
        compound = CompoundStatement(connection.dialect, [statement, _ROLLBACK])
        return PreparedStatement(compound), True

    def raw_log_append(
        self, connection: Connection, statement: Any, ids: int
    ) -> CompiledStatement:
        """Prepared on each connection (:mod:`chatledger_sql.dialects.prepared`)
        for a batch of up to :attr:`prepared_batches_up_to` messages.

        Parsing the compound statement is a good part of its server time
        (``python -m bench``); a larger batch is rare, and prepared
        statements are a per-connection, server-wide limited resource.
        """
        compiled = super().raw_log_append(connection, statement, ids)
        if ids > self.prepared_batches_up_to:
            return compiled
        return PreparedStatement(compiled)

    def log_append_takes(self, rows: Sequence[Mapping[str, Any]]) -> bool:
        """Rows whose text fits one packet of the smallest ``max_allowed_packet``.

        The compound statement carries the whole batch, where the server's
        limit was checked against each row alone.
        """
        return _text_size(rows) <= MAX_BLOCK_TEXT

    def routine(self, statements: Statements) -> MariaDBAppendRoutine:
        """The stored procedure of :mod:`chatledger_sql.dialects.mariadb_routine`."""
        return MariaDBAppendRoutine(
            statements.tables, self.timestamp_type(), self.id_collation
        )

    def runs_routines(self, connection: Connection) -> bool:
        """MariaDB 10.6 or later (JSON_TABLE reads the batch)."""
        version = connection.dialect.server_version_info or ()
        return self.native(connection) and tuple(version[:2]) >= (10, 6)

    def refuses_routine(self, error: exc.DBAPIError) -> bool:
        """No ``CREATE ROUTINE`` privilege (access denied to the database)."""
        return _errno(error) in _DENIED

    def is_missing_routine(self, error: exc.DBAPIError) -> bool:
        """``ER_SP_DOES_NOT_EXIST``: a store made before the procedure existed."""
        return _errno(error) == _NO_PROCEDURE

    def native(self, connection: Connection) -> bool:
        """MariaDB through a driver whose parameter style compound statements take."""
        dialect = connection.dialect
        return bool(getattr(dialect, "is_mariadb", False)) and (
            dialect.paramstyle in PARAMSTYLES
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
        """The upsert and the probing read in one compound statement."""
        if not (create and probe_ids is not None and self.native(connection)):
            return super().lock_conversation(
                connection,
                statements,
                conversation_id,
                now,
                create=create,
                probe_ids=probe_ids,
                peek=peek,
            )
        block = self._lock_block(connection, statements, len(probe_ids))
        values: dict[str, Any] = {"cid": conversation_id, "now": now, "peek": peek}
        for index, message_id in enumerate(probe_ids):
            values[f"id_{index}"] = message_id
        row = connection.exec_driver_sql(block.sql, block.parameters(values)).one()
        state = dict(row._mapping)
        expires_at = state["expires_at"]
        if expires_at is not None and expires_at.tzinfo is None:
            state["expires_at"] = expires_at.replace(tzinfo=UTC)
        return ConversationState.from_mapping(state)

    def forget(
        self, connection: Connection, statements: Statements, conversation_id: str
    ) -> None:
        """Both deletes in one compound statement."""
        if not self.native(connection):
            super().forget(connection, statements, conversation_id)
            return
        block = statements.driver_statement(
            ("forget", connection.dialect),
            lambda: CompoundStatement(
                connection.dialect,
                [statements.delete_messages, statements.delete_evicted],
            ),
        )
        connection.exec_driver_sql(
            block.sql, block.parameters({"cid": conversation_id})
        )

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
        """The deletes, the inserts and the update in one compound statement.

        Large batches (or many evicted ids) are sent as separate statements
        instead: the block would carry every row in one packet, where the
        server's ``max_allowed_packet`` was checked only against each row.
        """
        size = _text_size(rows) + sum(len(r["message_id"]) for r in evicted)
        if not self.native(connection) or size > MAX_BLOCK_TEXT:
            return False
        trims = trim_below is not None
        block = self._write_block(
            connection,
            statements,
            _WriteShape(len(rows), drop_system, upto >= 0, len(evicted), trims),
        )
        values = dict(update)
        values["upto"] = upto
        values["below"] = trim_below
        for index, row in enumerate(rows):
            for column, value in row.items():
                values[f"r{index}_{column}"] = value
        for index, record in enumerate(evicted):
            for column, value in record.items():
                values[f"e{index}_{column}"] = value
        connection.exec_driver_sql(block.sql, block.parameters(values))
        return True

    def _lock_block(
        self, connection: Connection, statements: Statements, ids: int
    ) -> CompoundStatement:
        def build() -> CompoundStatement:
            c = statements.tables.conversations.c
            read = select(
                *statements.state_columns,
                *self.lock_probes(statements, numbered_ids=ids),
            ).where(c.conversation_id == bindparam("cid"))
            return CompoundStatement(
                connection.dialect, [statements.upsert_conversation, read]
            )

        return statements.driver_statement(("lock", connection.dialect, ids), build)

    def _write_block(
        self, connection: Connection, statements: Statements, shape: _WriteShape
    ) -> CompoundStatement:
        def build() -> CompoundStatement:
            parts: list[Any] = []
            if shape.drop_system:
                parts.append(statements.delete_system)
            if shape.rows:
                messages = statements.tables.messages
                parts.append(_numbered_insert(messages, "r", shape.rows))
            if shape.evict:
                parts.append(statements.delete_oldest)
            if shape.records:
                parts.append(
                    _numbered_insert(statements.tables.evicted, "e", shape.records)
                )
            if shape.trim:
                parts.append(statements.trim_evicted)
            parts.append(statements.update_conversation)
            return CompoundStatement(connection.dialect, parts)

        key = ("write", connection.dialect, shape)
        return statements.driver_statement(key, build)


class _WriteShape(NamedTuple):
    """What one compound write statement holds (its cache key, with the dialect).

    Attributes:
        rows: Messages to insert.
        drop_system: Delete the stored system messages first.
        evict: Delete the oldest rows up to ``upto``.
        records: Evicted ids to record.
        trim: Trim the evicted-id record below ``below``.
    """

    rows: int
    drop_system: bool
    evict: bool
    records: int
    trim: bool


def _numbered_insert(table: Table, prefix: str, count: int) -> Any:
    """A multi-row insert into ``table`` with parameters ``<prefix><i>_<column>``."""
    values = [
        {
            column.name: bindparam(f"{prefix}{i}_{column.name}", type_=column.type)
            for column in table.columns
        }
        for i in range(count)
    ]
    return insert(table).values(values)


def _text_size(rows: Sequence[Mapping[str, Any]]) -> int:
    return sum(len(row["payload"]) + len(row["content"] or "") for row in rows)
