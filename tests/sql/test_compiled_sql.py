"""The SQL that SQL Server and Oracle get, compiled by SQLAlchemy's own dialects.

No SQL Server or Oracle server runs here; their conformance runs are in
``tests/conformance/test_sql.py`` and need ``CHATLEDGER_TEST_MSSQL_URL`` or
``CHATLEDGER_TEST_ORACLE_URL``. These tests pin what matters in the SQL text.
"""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy.dialects import mssql, mysql, oracle, postgresql
from sqlalchemy.engine import Dialect

from chatledger_sql.dialects import (
    MySQLDialect,
    OracleDialect,
    PostgresDialect,
    SQLServerDialect,
)
from chatledger_sql.dialects.base import SqlDialect
from chatledger_sql.schema import build_tables, conversation_indexes
from chatledger_sql.statements import Statements


def ddl(dialect: SqlDialect, engine_dialect: Dialect, schema: str | None) -> list[str]:
    tables = build_tables(dialect, "Chat_Memory", schema)
    statements = dialect.create_statements(tables.all)
    return [str(s.compile(dialect=engine_dialect)) for s in statements]


def compiled(dialect: SqlDialect, engine_dialect: Dialect) -> dict[str, str]:
    statements = Statements(build_tables(dialect, "chat_memory", "app"), dialect)
    out = {}
    for name, statement in statements.all().items():
        if name == "oldest":
            statement = statement.limit(5)
        out[name] = " ".join(str(statement.compile(dialect=engine_dialect)).split())
    return out


def index_ddl(dialect: SqlDialect, engine_dialect: Dialect) -> list[str]:
    """The listing's indexes as ``create_index`` makes them."""
    tables = build_tables(dialect, "chat_memory", "app")
    return [
        str(dialect.index_ddl(index, engine_dialect).compile(dialect=engine_dialect))
        for index in conversation_indexes(tables)
    ]


def listings(dialect: SqlDialect, engine_dialect: Dialect) -> dict[str, str]:
    """The listing's query in each shape, with a page's limit."""
    statements = Statements(build_tables(dialect, "chat_memory", "app"), dialect)
    out = {}
    for owner in (False, True):
        for before in (False, True):
            for after in (False, True):
                query = statements.limited(
                    statements.listing(owner=owner, before=before, after=after), 11
                )
                key = f"owner={owner} before={before} after={after}"
                out[key] = " ".join(str(query.compile(dialect=engine_dialect)).split())
    return out


class TestSQLServerCompiled:
    engine_dialect = mssql.dialect()  # type: ignore[no-untyped-call]

    def test_ddl_is_guarded_by_object_id(self) -> None:
        conversations, messages, evicted = ddl(
            SQLServerDialect(), self.engine_dialect, "app"
        )
        assert conversations.startswith(
            "IF OBJECT_ID(N'app.[Chat_Memory_conversation]', N'U') IS NULL"
        )
        assert evicted.startswith(
            "IF OBJECT_ID(N'app.[Chat_Memory_evicted]', N'U') IS NULL"
        )
        assert messages.startswith("IF OBJECT_ID(N'app.[Chat_Memory]', N'U') IS NULL")
        assert "CREATE TABLE app.[Chat_Memory] (" in messages

    def test_types_hold_big_text_exact_ids_and_microseconds(self) -> None:
        _, messages, _ = ddl(SQLServerDialect(), self.engine_dialect, None)
        assert "content NVARCHAR(max) NULL" in messages
        assert "payload NVARCHAR(max) NOT NULL" in messages
        assert "NTEXT" not in messages
        assert (
            "conversation_id NVARCHAR(255) COLLATE Latin1_General_100_BIN2 NOT NULL"
            in messages
        )
        assert "created_at DATETIME2(6) NOT NULL" in messages
        assert "seq BIGINT NOT NULL" in messages
        # The sequence comes from the conversation row, never an IDENTITY.
        assert "IDENTITY" not in messages
        assert "PRIMARY KEY (conversation_id, seq)" in messages
        assert "UNIQUE (conversation_id, message_id)" in messages
        assert "CHECK (role IN (N'system', N'user', N'assistant', N'tool'))" in messages

    def test_evicted_id_key_is_nonclustered(self) -> None:
        """Two NVARCHAR(255) ids make a 1020-byte key: past a clustered key's 900."""
        _, _, evicted = ddl(SQLServerDialect(), self.engine_dialect, None)
        assert "PRIMARY KEY NONCLUSTERED (conversation_id, message_id)" in evicted
        assert (
            "message_id NVARCHAR(255) COLLATE Latin1_General_100_BIN2 NOT NULL"
            in evicted
        )
        assert "seq BIGINT NOT NULL" in evicted

    def test_conversation_lock_takes_update_and_range_locks(self) -> None:
        lock = compiled(SQLServerDialect(), self.engine_dialect)["lock_select"]
        assert "FROM app.chat_memory_conversation WITH (UPDLOCK, HOLDLOCK)" in lock

    def test_every_statement_binds_its_values(self) -> None:
        statements = compiled(SQLServerDialect(), self.engine_dialect)
        assert "conversation_id = :cid" in statements["read"]
        assert statements["read"].endswith("ORDER BY app.chat_memory.seq")
        assert statements["oldest"].startswith("SELECT TOP __[POSTCOMPILE_param_1]")
        assert "seq <= :upto" in statements["delete_oldest"]
        assert "'" not in " ".join(statements.values())

    def test_listing_indexes_are_plain_nonunique_indexes(self) -> None:
        by_owner, by_update = index_ddl(SQLServerDialect(), self.engine_dialect)
        # NVARCHAR(255) is 510 bytes: the key is 1028, under a nonclustered
        # index's 1700.
        assert by_owner == (
            "CREATE INDEX chat_memory_conversations_by_owner ON "
            "app.chat_memory_conversation (owner, updated_at, conversation_id)"
        )
        assert by_update == (
            "CREATE INDEX chat_memory_conversations_by_update ON "
            "app.chat_memory_conversation (updated_at, conversation_id)"
        )

    def test_listing_is_a_keyset_top_n(self) -> None:
        shapes = listings(SQLServerDialect(), self.engine_dialect)
        assert len(shapes) == 8
        for query in shapes.values():
            assert query.startswith("SELECT TOP __[POSTCOMPILE_param_1] ")
            assert query.endswith(
                "ORDER BY app.chat_memory_conversation.updated_at DESC, "
                "app.chat_memory_conversation.conversation_id DESC"
            )
        mine = shapes["owner=True before=False after=True"]
        assert "app.chat_memory_conversation.owner = :owner" in mine
        assert "app.chat_memory_conversation.updated_at <= :after_at AND (" in mine
        assert "conversation_id < :after_id" in mine

    def test_the_record_columns_and_their_writes(self) -> None:
        conversations, _, _ = ddl(SQLServerDialect(), self.engine_dialect, None)
        assert (
            "owner NVARCHAR(255) COLLATE Latin1_General_100_BIN2 NULL" in conversations
        )
        assert "metadata NVARCHAR(max) NULL" in conversations
        assert "created_at DATETIME2(6) NULL" in conversations
        statements = compiled(SQLServerDialect(), self.engine_dialect)
        assert statements["set_info"].startswith(
            "UPDATE app.chat_memory_conversation SET expires_at=:p_expires_at, "
            "owner=CASE WHEN (:p_keep_owner = :param_1) THEN"
        )
        assert "updated_at" not in statements["set_info"]
        assert "updated_at" not in statements["untally_trimmed"]
        assert "updated_at=:now" in statements["untally"]


class TestOracleCompiled:
    engine_dialect = oracle.dialect()  # type: ignore[no-untyped-call]

    def test_ddl_ignores_only_name_already_used(self) -> None:
        for block in ddl(OracleDialect(), self.engine_dialect, "app"):
            assert block.startswith("BEGIN\n  EXECUTE IMMEDIATE '")
            assert "IF SQLCODE != -955 THEN RAISE; END IF;" in block
            assert block.rstrip().endswith("END;")

    def test_quotes_inside_the_block_are_doubled(self) -> None:
        _, messages, _ = ddl(OracleDialect(), self.engine_dialect, None)
        assert "CHECK (role IN (''system'', ''user'', ''assistant'', ''tool''))" in (
            messages
        )
        assert 'CREATE TABLE "Chat_Memory" (' in messages

    def test_types_hold_big_text_and_microseconds(self) -> None:
        _, messages, evicted = ddl(OracleDialect(), self.engine_dialect, None)
        assert 'CREATE TABLE "Chat_Memory_evicted" (' in evicted
        assert "PRIMARY KEY (conversation_id, message_id)" in evicted
        assert "content CLOB," in messages
        assert "payload CLOB NOT NULL" in messages
        assert "conversation_id VARCHAR2(255 CHAR) NOT NULL" in messages
        assert "seq NUMBER(19) NOT NULL" in messages
        assert "created_at TIMESTAMP NOT NULL" in messages  # 6 fractional digits
        assert "IDENTITY" not in messages
        assert "SEQUENCE" not in messages.upper().replace("SEQ NUMBER", "")

    def test_conversation_lock_is_for_update(self) -> None:
        statements = compiled(OracleDialect(), self.engine_dialect)
        assert statements["lock_select"].endswith("FOR UPDATE")
        assert "FETCH FIRST __[POSTCOMPILE_param_1] ROWS ONLY" in statements["oldest"]

    def test_listing_indexes_are_plain_nonunique_indexes(self) -> None:
        by_owner, by_update = index_ddl(OracleDialect(), self.engine_dialect)
        assert by_owner == (
            "CREATE INDEX app.chat_memory_conversations_by_owner ON "
            "app.chat_memory_conversation (owner, updated_at, conversation_id)"
        )
        assert by_update == (
            "CREATE INDEX app.chat_memory_conversations_by_update ON "
            "app.chat_memory_conversation (updated_at, conversation_id)"
        )

    def test_listing_is_a_keyset_fetch_first(self) -> None:
        shapes = listings(OracleDialect(), self.engine_dialect)
        for query in shapes.values():
            assert query.endswith(
                "ORDER BY app.chat_memory_conversation.updated_at DESC, "
                "app.chat_memory_conversation.conversation_id DESC "
                "FETCH FIRST __[POSTCOMPILE_param_1] ROWS ONLY"
            )
        everyone = shapes["owner=False before=True after=True"]
        assert "owner" not in everyone.split(" FROM ")[1]
        assert "app.chat_memory_conversation.updated_at < :before" in everyone

    def test_the_record_columns(self) -> None:
        conversations, _, _ = ddl(OracleDialect(), self.engine_dialect, None)
        assert "owner VARCHAR2(255 CHAR)," in conversations
        assert "metadata CLOB," in conversations
        assert "created_at TIMESTAMP," in conversations
        statements = compiled(OracleDialect(), self.engine_dialect)
        assert "created_at=coalesce((SELECT min(" in statements["fill_created_at"]
        assert statements["fill_created_at"].endswith(
            "WHERE app.chat_memory_conversation.created_at IS NULL"
        )


def test_mysql_renews_an_expired_record_before_it_renews_the_expiry() -> None:
    """MySQL and MariaDB assign left to right: the record's columns must read
    the old ``expires_at``, so they come before it in every such SET."""
    statements = compiled(MySQLDialect(), mysql.dialect())  # type: ignore[no-untyped-call]
    for name in ("update_conversation", "update_log"):
        sets = statements[name].split(" SET ", 1)[1]
        assigned = [part.split("=", 1)[0] for part in sets.split(", ")]
        wanted = ["owner", "metadata", "created_at"]
        assert assigned[:3] == wanted, name
        assert assigned.index("expires_at") > 2, name


def test_postgres_lists_ids_by_code_point() -> None:
    """``COLLATE "C"`` in the indexes and the query: code point order, the
    listing's, whatever the database's collation."""
    engine_dialect = postgresql.dialect()  # type: ignore[no-untyped-call]
    by_owner, by_update = index_ddl(PostgresDialect(), engine_dialect)
    assert by_owner == (
        "CREATE INDEX chat_memory_conversations_by_owner ON "
        'app.chat_memory_conversation (owner, updated_at, conversation_id COLLATE "C")'
    )
    assert by_update.endswith('(updated_at, conversation_id COLLATE "C")')
    mine = listings(PostgresDialect(), engine_dialect)[
        "owner=True before=False after=True"
    ]
    assert '(app.chat_memory_conversation.conversation_id COLLATE "C") <' in mine
    assert mine.endswith(
        "ORDER BY app.chat_memory_conversation.updated_at DESC, "
        'app.chat_memory_conversation.conversation_id COLLATE "C" DESC '
        "LIMIT %(param_1)s::INTEGER"
    )


def test_postgres_lock_is_one_upsert_returning_state_and_known_ids() -> None:
    statements = compiled(PostgresDialect(), postgresql.dialect())  # type: ignore[no-untyped-call]
    upsert = statements["upsert_conversation"]
    assert "ON CONFLICT (conversation_id) DO UPDATE SET version =" in upsert
    assert "RETURNING app.chat_memory_conversation.next_seq" in upsert
    assert "(SELECT count(*) AS count_1 FROM app.chat_memory" in upsert
    # The ids of the record of evicted ids count as known, in the same probe.
    assert "(SELECT count(*) AS count_2 FROM app.chat_memory_evicted" in upsert
    _, messages, _ = ddl(PostgresDialect(), postgresql.dialect(), None)  # type: ignore[no-untyped-call]
    assert "CREATE TABLE IF NOT EXISTS" in messages
    assert "created_at TIMESTAMP WITH TIME ZONE NOT NULL" in messages  # microseconds
    assert "payload TEXT NOT NULL" in messages
    assert "JSON" not in messages.upper().replace("PAYLOAD", "")


@pytest.mark.parametrize(
    ("dialect", "engine_dialect"),
    [(SQLServerDialect(), mssql.dialect()), (OracleDialect(), oracle.dialect())],  # type: ignore[no-untyped-call]
    ids=["mssql", "oracle"],
)
def test_every_statement_compiles(dialect: SqlDialect, engine_dialect: Any) -> None:
    statements = compiled(dialect, engine_dialect)
    assert len(statements) >= 15
    assert all(text.strip() for text in statements.values())
