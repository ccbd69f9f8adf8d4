"""PostgreSQL: one ``INSERT ... ON CONFLICT DO UPDATE ... RETURNING`` locks a row.

Example (needs a PostgreSQL server):
    from sqlalchemy import create_engine
    from chatledger_sql import PostgresDialect, SqlChatMemoryRepository

    engine = create_engine("postgresql+psycopg://app@localhost/chat")
    repository = SqlChatMemoryRepository(engine, dialect=PostgresDialect())

The upsert creates the conversation row or takes its row lock, returns its
state, and counts which of the new message ids are already stored, all in one
round trip. With psycopg 3 a window append is two round trips in all: ``BEGIN``
travels with that upsert and the one write statement with ``COMMIT`` (see
:mod:`chatledger_sql.dialects.pipeline`). Unknown products fall back to this
dialect, so it sticks to SQL that PostgreSQL-compatible databases share.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    Text,
    TextClause,
    bindparam,
    case,
    cast,
    delete,
    exc,
    func,
    literal_column,
    text,
    true,
)
from sqlalchemy.dialects.postgresql import JSONB, TIMESTAMP
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.postgresql.base import PGDialect
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.schema import DDL
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement
from sqlalchemy.types import NullType, TypeEngine

from chatledger_sql.dialects.base import (
    MAX_IDS_PER_STATEMENT,
    ConversationState,
    RoutineDialect,
)
from chatledger_sql.dialects.pipeline import PipelinedWrite
from chatledger_sql.dialects.postgresql_routine import PostgresAppendRoutine
from chatledger_sql.types import UtcDateTime

if TYPE_CHECKING:
    from sqlalchemy import Connection, Index
    from sqlalchemy.engine import Dialect

    from chatledger_sql.statements import Statements

__all__ = ["PostgresDialect"]

# serialization_failure, deadlock_detected
_RETRYABLE = {"40001", "40P01"}
# duplicate_table, duplicate_object, unique_violation (pg_type race),
# duplicate_function
_EXISTS = {"42P07", "42710", "23505", "42723"}
_UNDEFINED_FUNCTION = "42883"
_INSUFFICIENT_PRIVILEGE = "42501"


_PG = PGDialect()  # type: ignore[no-untyped-call]

#: The pipelined write each connection is in, by ``id`` of the connection,
#: for as long as :meth:`PostgresDialect.writing` holds it.
_WRITES: dict[int, PipelinedWrite] = {}


def _sqlstate(error: exc.DBAPIError) -> str | None:
    orig = error.orig
    return getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)


class _UtcWallClock(FunctionElement[Any]):
    """A ``TIMESTAMP WITH TIME ZONE`` column as its wall-clock time in UTC.

    ``timezone('UTC', column)`` on PostgreSQL, a naive value; the column
    itself wherever else the statement is compiled (a product falling back
    to this dialect), whose driver's value :func:`chatledger_sql.rows.moment`
    reads as it is.
    """

    inherit_cache = True
    type = NullType()
    name = "utc_wall_clock"


@compiles(_UtcWallClock)
def _column_itself(element: _UtcWallClock, compiler: SQLCompiler, **kw: Any) -> str:
    return compiler.process(element.clauses, **kw)


@compiles(_UtcWallClock, "postgresql")
def _at_utc(element: _UtcWallClock, compiler: SQLCompiler, **kw: Any) -> str:
    return f"timezone('UTC', {compiler.process(element.clauses, **kw)})"


class PostgresDialect(RoutineDialect):
    """PostgreSQL (also the fallback for products no dialect is registered for).

    Args:
        server_append: Run window appends through the PL/pgSQL function made
            with the tables, one round trip each
            (:mod:`chatledger_sql.dialects.postgresql_routine`); false keeps every
            append on the portable two-round-trip path.
    """

    name = "postgresql"
    lock_returns_state = True

    def timestamp_type(self) -> TypeEngine[Any]:
        """``TIMESTAMP(6) WITH TIME ZONE``."""
        return UtcDateTime(TIMESTAMP(timezone=True, precision=6), aware=True)

    def raw_timestamp(self, column: Any) -> Any:
        """The wall-clock time in UTC (``timezone('UTC', ...)``), a naive value.

        An aware value comes in the session's time zone, which psycopg turns
        into a ``ZoneInfo`` unless the server names it exactly ``UTC``
        (Debian's default is ``Etc/UTC``): building it and converting it back
        to UTC cost a window read of 200 messages ~17% of its time.
        """
        return _UtcWallClock(column)

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

    def listing_id(self, column: Any) -> Any:
        """``conversation_id COLLATE "C"``: code point order whatever the
        database's collation (the indexes are built on it too)."""
        return column.collate("C")

    def index_ddl(self, index: Index, engine_dialect: Dialect) -> Any:
        """On PostgreSQL: the id ``COLLATE "C"``, as the listing orders it."""
        if engine_dialect.name != "postgresql":
            return super().index_ddl(index, engine_dialect)
        preparer = engine_dialect.identifier_preparer
        columns = ", ".join(
            preparer.quote(column.name)
            + (' COLLATE "C"' if column.name == "conversation_id" else "")
            for column in index.columns
        )
        assert index.table is not None
        name = preparer.quote(str(index.name))
        table = preparer.format_table(index.table)
        return DDL(f"CREATE INDEX {name} ON {table} ({columns})")  # type: ignore[no-untyped-call]

    def filters_metadata(self, connection: Connection) -> bool:
        """On PostgreSQL itself: ``jsonb`` compares the values."""
        return self.native(connection)

    def metadata_shape(self, key: str, value: Any) -> str | None:
        """One shape, ``jsonb`` equality telling the JSON types apart; none
        for a NUL, which neither ``text`` nor ``jsonb`` keeps."""
        if "\x00" in key or (isinstance(value, str) and "\x00" in value):
            return None
        return "jsonb"

    def metadata_match(self, column: Any, index: int, shape: str) -> Any:
        """``CAST(metadata AS JSONB) -> :mk<i> = CAST(:mv<i> AS JSONB)``.

        ``jsonb`` equality is the listing's: numbers by value (``1`` equals
        ``1.0``), ``true`` never ``1``, a string only the same string, and a
        missing key (SQL ``NULL``) nothing. Metadata holding ``\u0000``,
        which ``jsonb`` refuses, passes, to be compared by the repository.
        """
        key = bindparam(f"mk{index}", type_=Text())
        value = cast(bindparam(f"mv{index}", type_=Text()), JSONB)
        return case(
            (func.strpos(column, literal_column("'\\u0000'")) > 0, true()),
            else_=cast(column, JSONB).op("->")(key) == value,
        )

    def metadata_parameters(self, index: int, key: str, value: Any) -> dict[str, Any]:
        """The key, and the value as JSON text."""
        return {
            f"mk{index}": key,
            f"mv{index}": json.dumps(value, ensure_ascii=False, allow_nan=False),
        }

    def routine(self, statements: Statements) -> PostgresAppendRoutine:
        """The PL/pgSQL append of :mod:`chatledger_sql.dialects.postgresql_routine`."""
        return PostgresAppendRoutine(statements.tables, self.timestamp_type())

    def refuses_routine(self, error: exc.DBAPIError) -> bool:
        """``insufficient_privilege``: no ``CREATE`` on the schema."""
        return _sqlstate(error) == _INSUFFICIENT_PRIVILEGE

    def is_missing_routine(self, error: exc.DBAPIError) -> bool:
        """``undefined_function``: a store made before the routine existed."""
        return _sqlstate(error) == _UNDEFINED_FUNCTION

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

    @contextlib.contextmanager
    def writing(self, connection: Connection) -> Iterator[None]:
        """On psycopg 3: a :class:`PipelinedWrite` (two round trips per append)."""
        write = PipelinedWrite.start(connection) if self.native(connection) else None
        if write is None:
            with super().writing(connection):
                yield
            return
        key = id(connection)
        _WRITES[key] = write
        try:
            yield
        except BaseException:
            write.abort()
            raise
        finally:
            del _WRITES[key]
        write.finish()

    def commit_write(self, connection: Connection) -> None:
        """``COMMIT``, with the pending write statement when there is one."""
        write = _WRITES.get(id(connection))
        if write is not None and write.began:
            write.commit()
        else:
            connection.commit()

    def settles_commit(self, connection: Connection) -> bool:
        """Not for a pipelined write: its commit is cancelled as before.

        Finishing psycopg's pipelined ``COMMIT`` in a task of its own left,
        in about one run in 25 of the cancellation test on a loaded machine,
        a pooled connection that answered a later ``SELECT`` without rows,
        as one still in pipeline mode does; such a connection is now
        discarded (:meth:`PipelinedWrite.abort`), and this commit keeps its
        old behaviour until settling it is measured again.
        """
        write = _WRITES.get(id(connection))
        return write is None or not write.began

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
        """In a pipelined write: ``BEGIN`` and the probing upsert in one round trip."""
        write = _WRITES.get(id(connection)) if create else None
        if write is not None and statements.lock_probing is not None:
            ids = probe_ids or []
            sql, constants = self._driver_lock(connection, statements, len(ids))
            parameters = dict(constants)
            parameters["cid"] = conversation_id
            parameters["now"] = now
            parameters["peek"] = peek
            for index, message_id in enumerate(ids):
                parameters[f"id_{index}"] = message_id
            found = write.lock(sql, parameters)
            if found is not None:
                return ConversationState.from_mapping(found)
        return super().lock_conversation(
            connection,
            statements,
            conversation_id,
            now,
            create=create,
            probe_ids=probe_ids,
            peek=peek,
        )

    def _driver_lock(
        self, connection: Connection, statements: Statements, ids: int
    ) -> tuple[str, dict[str, Any]]:
        """The probing lock for ``ids`` message ids as psycopg takes it, and its
        constants (the values of a new row, the ``version`` increment).

        One text per batch size, with one parameter per id, as SQLAlchemy's
        expanding ``IN`` makes it: a single id is a plain equality, which
        PostgreSQL always looks up in the unique index, where ``= ANY`` of an
        array could be checked row by row against the whole conversation.
        """

        def build() -> tuple[str, dict[str, Any]]:
            lock = (
                self._upsert(statements)
                .returning(
                    *statements.state_columns,
                    *self.lock_probes(statements, numbered_ids=ids),
                )
                .compile(dialect=connection.dialect)
            )
            given = {"cid", "now", "peek", *(f"id_{i}" for i in range(ids))}
            constants = {
                name: value for name, value in lock.params.items() if name not in given
            }
            return str(lock), constants

        return statements.driver_statement(
            ("psycopg lock", connection.dialect, ids), build
        )

    def _driver_append(self, connection: Connection, statements: Statements) -> str:
        """The append statement as psycopg takes it, compiled once."""
        return statements.driver_statement(
            ("psycopg append", connection.dialect),
            lambda: str(statements.append_all.compile(dialect=connection.dialect)),
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

    def forget_statement(self, statements: Statements) -> Any:
        """Both deletes in one statement: the record's in a CTE."""
        tables = statements.tables
        cid: Any = bindparam("cid")
        record = (
            delete(tables.evicted)
            .where(tables.evicted.c.conversation_id == cid)
            .cte("forgotten_ids")
        )
        return (
            delete(tables.messages)
            .where(tables.messages.c.conversation_id == cid)
            .add_cte(record)
        )

    def append_statement(self, statements: Statements) -> TextClause:
        """Insert, evict, record the evicted ids and update the row in one statement.

        Data-modifying CTEs all see the snapshot the statement started with,
        so the deletes reach only rows stored before, never the new ones. The
        trim of the evicted-id record runs only when asked (``:trim``); the
        records written here are all above its bound.
        """
        preparer = _PG.identifier_preparer
        m = preparer.format_table(statements.tables.messages)
        c = preparer.format_table(statements.tables.conversations)
        e = preparer.format_table(statements.tables.evicted)
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
            "AND role <> 'system' AND seq <= :upto), "
            f"recorded AS (INSERT INTO {e} (conversation_id, message_id, seq) "
            "SELECT :cid, r.message_id, r.seq FROM unnest("
            "CAST(:evicted_ids AS TEXT[]), CAST(:evicted_seqs AS BIGINT[])) "
            "AS r(message_id, seq)), "
            f"trimmed AS (DELETE FROM {e} WHERE conversation_id = :cid "
            "AND seq <= :below AND CAST(:trim AS BOOLEAN)) "
            # A conversation found expired starts a new record
            # (Statements.update_conversation).
            f"UPDATE {c} SET owner = CASE WHEN expires_at <= :now THEN NULL "
            "ELSE owner END, metadata = CASE WHEN expires_at <= :now THEN NULL "
            "ELSE metadata END, created_at = CASE WHEN expires_at <= :now "
            "THEN :now ELSE created_at END, "
            "next_seq = :p_next_seq, version = version + 1, "
            "system_count = :p_system_count, other_count = :p_other_count, "
            "weight_counter = :p_weight_counter, "
            "system_weight = :p_system_weight, other_weight = :p_other_weight, "
            "updated_at = :now, expires_at = :p_expires_at, "
            # A log append records where the current system messages are; a
            # window append leaves that record, which its next_seq outdates.
            "system_batch = CASE WHEN CAST(:p_log AS BOOLEAN) "
            "THEN CAST(:p_system_batch AS BIGINT) ELSE system_batch END, "
            "system_last = CASE WHEN CAST(:p_log AS BOOLEAN) "
            "THEN CAST(:p_system_last AS BIGINT) ELSE system_last END, "
            "system_as_of = CASE WHEN CAST(:p_log AS BOOLEAN) "
            "THEN :p_next_seq ELSE system_as_of END "
            "WHERE conversation_id = :cid"
        ).bindparams(
            bindparam("now", type_=timestamp),
            bindparam("p_expires_at", type_=timestamp),
        )

    def log_append_takes(self, rows: Sequence[Mapping[str, Any]]) -> bool:
        """A batch of at most :data:`MAX_IDS_PER_STATEMENT` messages.

        The statement names each id as a parameter of its own, and a
        statement takes at most 65,535 (asyncpg: 32,767), which the client
        finds out only as it sends it; a larger batch goes to the
        transaction, which checks its ids a chunk at a time.
        """
        return len(rows) <= MAX_IDS_PER_STATEMENT

    log_append_arrays_past = 16

    def log_append_statement(self, statements: Statements, ids: int) -> TextClause:
        """One statement: lock-or-create the row, then insert after its last message.

        The upsert locks the conversation's row and numbers the batch from its
        latest ``next_seq``, whatever the statement's snapshot saw; it does
        nothing, and so nothing is inserted, when the snapshot holds one of
        the ids (stored or evicted) or the conversation has expired. An id
        another writer committed after that snapshot makes the insert fail on
        the unique key, and the write runs again. Sizes are kept as
        ``log_writes`` keeps them; where the current system messages are
        stays known if it was. ``ids``: how many messages the batch holds.
        """
        preparer = _PG.identifier_preparer
        m = preparer.format_table(statements.tables.messages)
        c = preparer.format_table(statements.tables.conversations)
        e = preparer.format_table(statements.tables.evicted)
        timestamp = self.timestamp_type()
        # Each parameter cast where it is used in places of several types
        # (psycopg sends them untyped).
        counter = "CAST(:counter AS TEXT)"
        cid = "CAST(:cid AS TEXT)"
        n = "CAST(:n AS BIGINT)"
        size = "CAST(:size AS BIGINT)"
        empty = "c.system_count + c.other_count = 0"
        sized = f"{counter} IS NOT NULL AND ({empty} OR c.weight_counter = {counter})"
        # One parameter per id, left untyped: an equality on the column's own
        # type is always looked up in the unique index, where = ANY of a text
        # array may be planned (before the table has statistics) as a scan of
        # the whole conversation.
        listed = ", ".join(f":id_{index}" for index in range(ids))
        held = f"conversation_id = {cid} AND message_id IN ({listed})"
        # A turn's few messages go as parameters of their own (psycopg sends
        # scalars faster than it dumps six arrays: -0.2 ms an append); a
        # large batch as arrays (a VALUES list of 1,000 rows plans slower).
        if ids > self.log_append_arrays_past:
            rows = (
                "SELECT * FROM unnest(CAST(:message_ids AS TEXT[]), "
                "CAST(:roles AS TEXT[]), CAST(:contents AS TEXT[]), "
                "CAST(:payloads AS TEXT[]), CAST(:weights AS INTEGER[]), "
                "CAST(:created AS TIMESTAMPTZ[])) WITH ORDINALITY"
            )
        else:
            rows = "VALUES " + ", ".join(
                f"(CAST(:id_{index} AS TEXT), CAST(:r{index}_role AS TEXT), "
                f"CAST(:r{index}_content AS TEXT), CAST(:r{index}_payload AS TEXT), "
                f"CAST(:r{index}_weight AS INTEGER), "
                f"CAST(:r{index}_created_at AS TIMESTAMPTZ), {index + 1})"
                for index in range(ids)
            )
        return text(
            f"WITH c AS (INSERT INTO {c} AS c (conversation_id, next_seq, version, "
            "system_count, other_count, weight_counter, system_weight, "
            "other_weight, updated_at, expires_at, system_batch, system_last, "
            "system_as_of, created_at) "
            f"SELECT {cid}, {n}, 0, 0, {n}, {counter}, "
            f"CASE WHEN {counter} IS NOT NULL THEN 0 END, "
            f"CASE WHEN {counter} IS NOT NULL THEN {size} END, :now, :p_expires_at, "
            f"NULL, NULL, {n}, :now "
            f"WHERE NOT EXISTS (SELECT FROM {m} WHERE {held}) "
            f"AND NOT EXISTS (SELECT FROM {e} WHERE {held}) "
            "ON CONFLICT (conversation_id) DO UPDATE SET "
            f"next_seq = c.next_seq + {n}, version = c.version + 1, "
            f"other_count = c.other_count + {n}, "
            f"weight_counter = CASE WHEN {sized} THEN {counter} END, "
            f"system_weight = CASE WHEN {sized} THEN CASE WHEN {empty} THEN 0 "
            "ELSE COALESCE(c.system_weight, 0) END END, "
            f"other_weight = CASE WHEN {sized} THEN CASE WHEN {empty} THEN 0 "
            f"ELSE COALESCE(c.other_weight, 0) END + {size} END, "
            "updated_at = :now, expires_at = :p_expires_at, "
            "system_as_of = CASE WHEN c.system_as_of = c.next_seq "
            f"THEN c.next_seq + {n} ELSE c.system_as_of END "
            "WHERE c.expires_at IS NULL OR c.expires_at > :now "
            f"RETURNING c.next_seq - {n} AS base, "
            "c.weight_counter IS NOT NULL AS sized) "
            f"INSERT INTO {m} (conversation_id, seq, message_id, role, content, "
            "payload, weight, created_at) "
            f"SELECT {cid}, c.base + r.i - 1, r.message_id, r.role, r.content, "
            "r.payload, CASE WHEN c.sized THEN r.weight END, r.created_at "
            f"FROM c, ({rows}) "
            "AS r(message_id, role, content, payload, weight, created_at, i) "
            "RETURNING seq"
        ).bindparams(
            bindparam("now", type_=timestamp),
            bindparam("p_expires_at", type_=timestamp),
            *(
                bindparam(f"r{index}_created_at", type_=timestamp)
                for index in range(0 if ids > self.log_append_arrays_past else ids)
            ),
        )

    def write_log(
        self,
        connection: Connection,
        statements: Statements,
        rows: list[dict[str, Any]],
        update: dict[str, Any],
    ) -> bool:
        """The statement of :meth:`write_append`, inserting and updating only.

        In a pipelined write its answer comes with the ``COMMIT``'s: a log
        append is then two round trips, the lock and this.
        """
        return self.write_append(
            connection,
            statements,
            rows,
            drop_system=False,
            upto=-1,
            evicted=[],
            trim_below=None,
            update={**update, "p_log": True},
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
        """One statement: the CTE of :meth:`append_statement`.

        In a pipelined write it is sent now and its answer read with the
        ``COMMIT``'s; otherwise it is a round trip of its own.
        """
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
        parameters["evicted_ids"] = [r["message_id"] for r in evicted]
        parameters["evicted_seqs"] = [r["seq"] for r in evicted]
        parameters["trim"] = trim_below is not None
        parameters["below"] = -1 if trim_below is None else trim_below
        parameters.setdefault("p_log", False)
        parameters.setdefault("p_system_batch", None)
        parameters.setdefault("p_system_last", None)
        write = _WRITES.get(id(connection))
        if write is not None and write.began:
            write.send(self._driver_append(connection, statements), parameters)
        else:
            connection.execute(statements.append_all, parameters)
        return True
