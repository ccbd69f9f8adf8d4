"""Dialect detection, the fallback and mismatch warnings, and registration."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine
from sqlalchemy.dialects import registry
from sqlalchemy.dialects.sqlite.pysqlite import SQLiteDialect_pysqlite

from chatledger import Message, MessageWindowChatMemory, StoreNotFoundError
from chatledger_sql import (
    DialectMismatchWarning,
    MariaDBDialect,
    MySQLDialect,
    PostgresDialect,
    SqlChatMemoryRepository,
    SQLiteDialect,
    UnknownDialectError,
    UnknownDialectWarning,
    register_dialect,
    unregister_dialect,
)
from chatledger_sql.dialects import ENTRY_POINT_GROUP, known_products
from tests.backends import backend_url
from tests.sql.conftest import unique_table

EXPECTED = {
    "sqlite": "SQLiteDialect",
    "duckdb": "DuckDBDialect",
    "postgresql": "PostgresDialect",
    "mariadb": "MariaDBDialect",
}


class AcmeDialect(SQLiteDialect_pysqlite):
    """A real SQLAlchemy dialect under a product name chatledger does not know."""

    name = "acmedb"
    supports_statement_cache = True


registry.register("acmedb", __name__, "AcmeDialect")


@pytest.fixture
def acme_engine(tmp_path: Path) -> Iterator[Engine]:
    engine = create_engine(f"acmedb:///{tmp_path / 'acme.db'}")
    yield engine
    engine.dispose()


def test_detects_the_product_of_real_engines(any_engine: Engine) -> None:
    """SQLite, DuckDB, PostgreSQL and MariaDB (behind a mysql:// URL) are recognised."""
    product = any_engine.dialect.name
    expected = EXPECTED["mariadb" if product == "mysql" else product]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        repository = SqlChatMemoryRepository(any_engine, table_name=unique_table())
        repository.find_conversation_ids()  # MariaDB is told on the first call
    try:
        assert type(repository.dialect).__name__ == expected
    finally:
        repository.drop_schema()


def test_mariadb_behind_a_mysql_url_is_told_apart_before_any_connect() -> None:
    """A fresh ``mysql://`` engine on MariaDB gets MariaDBDialect, not MySQL's,
    on the repository's first call: making it does not connect."""
    url = backend_url("mariadb")
    engine = create_engine(url.replace("mariadb+", "mysql+", 1))
    try:
        assert engine.dialect.name == "mysql"
        repository = SqlChatMemoryRepository(
            engine, table_name=unique_table(), create_schema=False
        )
        assert repository.dialect is None
        with pytest.raises(StoreNotFoundError):  # no table: a read never makes it
            repository.find_conversation_ids()
        assert isinstance(repository.dialect, MariaDBDialect)
    finally:
        engine.dispose()


def test_unknown_product_falls_back_to_postgres_with_a_warning(
    acme_engine: Engine,
) -> None:
    """An unknown product gets PostgresDialect, and the warning says how to register."""
    with pytest.warns(UnknownDialectWarning) as caught:
        repository = SqlChatMemoryRepository(acme_engine, table_name=unique_table())
    text = str(caught[0].message)
    assert "'acmedb'" in text
    assert "register_dialect" in text
    assert ENTRY_POINT_GROUP in text
    assert issubclass(UnknownDialectWarning, Warning)
    assert type(repository.dialect) is PostgresDialect
    # The fallback really works on this PostgreSQL-like product.
    memory = MessageWindowChatMemory(repository, max_messages=2)
    memory.add("c", [Message.user("U1"), Message.assistant("A1")])
    memory.add("c", [Message.user("U2"), Message.assistant("A\x00")])
    assert [m.content for m in memory.get("c")] == ["U2", "A\x00"]


def test_registered_dialect_serves_the_product(acme_engine: Engine) -> None:
    """``register_dialect`` takes a class, an instance or a 'module:Class' string."""
    for spec in (
        SQLiteDialect,
        SQLiteDialect(busy_timeout_ms=1234),
        "chatledger_sql.dialects.sqlite:SQLiteDialect",
    ):
        register_dialect("acmedb", spec)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                repository = SqlChatMemoryRepository(
                    acme_engine, table_name=unique_table()
                )
            assert isinstance(repository.dialect, SQLiteDialect)
            repository.save_all("c", [Message.user("x")])
            assert [m.content for m in repository.find_by_conversation_id("c")] == ["x"]
        finally:
            unregister_dialect("acmedb")
    assert "acmedb" not in known_products()


def test_entry_point_registers_a_dialect(tmp_path: Path, acme_engine: Engine) -> None:
    """A package's ``chatledger.sql_dialects`` entry point is found by product name."""
    package = tmp_path / "site"
    package.mkdir()
    (package / "acme_chat_dialect.py").write_text(
        textwrap.dedent(
            """
            from chatledger_sql.dialects.sqlite import SQLiteDialect

            class AcmeChatDialect(SQLiteDialect):
                name = "acmedb"
            """
        )
    )
    info = package / "acme_chat_dialect-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: acme-chat-dialect\nVersion: 1.0\n"
    )
    (info / "entry_points.txt").write_text(
        f"[{ENTRY_POINT_GROUP}]\nacmedb = acme_chat_dialect:AcmeChatDialect\n"
    )
    sys.path.insert(0, str(package))
    try:
        assert "acmedb" in known_products()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            repository = SqlChatMemoryRepository(acme_engine, table_name=unique_table())
        assert type(repository.dialect).__name__ == "AcmeChatDialect"
    finally:
        sys.path.remove(str(package))
        sys.modules.pop("acme_chat_dialect", None)


def test_explicit_dialect_mismatch_is_used_with_a_warning(any_engine: Engine) -> None:
    """An explicit dialect for another product is used, and the mismatch warns."""
    product = any_engine.dialect.name
    forced = MySQLDialect() if product == "sqlite" else SQLiteDialect()
    if product in ("mysql", "mariadb"):
        forced = MySQLDialect()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        repository = SqlChatMemoryRepository(
            any_engine, dialect=forced, table_name=unique_table(), create_schema=False
        )
        if repository.dialect is None:  # MariaDB behind mysql://: the first call
            with pytest.raises(StoreNotFoundError):
                repository.find_conversation_ids()
    [mismatch] = [w for w in caught if w.category is DialectMismatchWarning]
    assert repository.dialect is forced
    assert "MySQLDialect" in str(mismatch.message) or "SQLiteDialect" in str(
        mismatch.message
    )


def test_explicit_matching_dialect_does_not_warn(tmp_path: Path) -> None:
    """Naming the detected dialect, by class or by product name, is silent."""
    engine = create_engine(f"sqlite:///{tmp_path / 'x.db'}")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            for spec in (SQLiteDialect, "sqlite"):
                repository = SqlChatMemoryRepository(
                    engine, dialect=spec, table_name="t", create_schema=False
                )
                assert isinstance(repository.dialect, SQLiteDialect)
    finally:
        engine.dispose()


def test_unknown_dialect_name_is_an_error(tmp_path: Path) -> None:
    """A dialect asked for by an unknown name raises, listing the known ones."""
    engine = create_engine(f"sqlite:///{tmp_path / 'x.db'}")
    try:
        with pytest.raises(UnknownDialectError, match="register_dialect"):
            SqlChatMemoryRepository(engine, dialect="nosuchdb", create_schema=False)
    finally:
        engine.dispose()


def test_importing_the_package_imports_no_driver() -> None:
    """No DBAPI driver and no dialect module loads before an engine is made."""
    code = textwrap.dedent(
        """
        import sys
        import chatledger_sql
        from chatledger_sql import register_dialect, PostgresDialect
        loaded = sorted(
            m for m in sys.modules
            if m.split(".")[0] in {"psycopg", "psycopg2", "pymysql", "pyodbc",
                                   "oracledb", "duckdb", "duckdb_engine", "sqlite3"}
            or m.startswith(("chatledger_sql.dialects.oracle",
                             "chatledger_sql.dialects.mssql",
                             "chatledger_sql.dialects.mysql"))
        )
        print(",".join(loaded))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == ""
