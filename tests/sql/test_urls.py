"""from_url takes URLs as a reader means them, and refuses the rest before I/O."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from sqlalchemy import Engine, inspect

from chatledger import (
    InvalidOptionError,
    InvalidUrlError,
    Message,
    MissingDriverError,
    StoreNotFoundError,
    connect,
    connect_async,
)
from chatledger.connect import installed_schemes
from chatledger_sql import SqlChatMemoryRepository
from chatledger_sql.urls import async_engine_url, database_file, engine_url
from tests.sql.conftest import unique_table


@pytest.mark.parametrize(
    ("given", "meant"),
    [
        ("SQLITE:///chat.db", "sqlite:///chat.db"),
        ("DuckDB:///chat.duckdb", "duckdb:///chat.duckdb"),
        ("postgres+psycopg://app@db/chat", "postgresql+psycopg://app@db/chat"),
        ("POSTGRESQL+PSYCOPG://app@db/chat", "postgresql+psycopg://app@db/chat"),
        ("sqlite://", "sqlite://"),
    ],
)
def test_engine_url_folds_case_and_aliases(given: str, meant: str) -> None:
    assert engine_url(given).render_as_string() == meant


@pytest.mark.skipif(
    importlib.util.find_spec("MySQLdb") is not None,
    reason="mysqlclient, SQLAlchemy's default MySQL driver, is installed here",
)
def test_a_driverless_url_uses_the_driver_the_extra_installs() -> None:
    assert engine_url("mysql://app@db/chat").drivername == "mysql+pymysql"
    assert engine_url("postgres://app@db/chat").get_backend_name() == "postgresql"


@pytest.mark.skipif(
    importlib.util.find_spec("MySQLdb") is not None,
    reason="mysqlclient, SQLAlchemy's default MySQL driver, is installed here",
)
def test_a_missing_driver_names_its_own_distribution() -> None:
    # The mysql extra installs PyMySQL, which does not serve mysql+mysqldb.
    with pytest.raises(MissingDriverError) as raised:
        connect("mysql+mysqldb://app@db/chat")
    assert str(raised.value).endswith(
        "install it with: pip install chatledger-sql mysqlclient"
    )


@pytest.mark.parametrize("url", ["sqlite://chat.db", "duckdb://chat.duckdb"])
def test_a_host_where_a_path_was_meant_is_refused(url: str) -> None:
    with pytest.raises(InvalidUrlError, match=r"three slashes .*:///chat\."):
        engine_url(url)


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("sqlite:///chat.db", "chat.db"),
        ("sqlite:////var/data/chat.db", "/var/data/chat.db"),
        ("duckdb:///chat.duckdb", "chat.duckdb"),
        ("sqlite://", None),
        ("sqlite:///", None),
        ("sqlite:///:memory:", None),
        ("duckdb:///:memory:", None),
        ("sqlite:///file:chat?mode=memory&uri=true", None),
        ("postgresql+psycopg://app@db/chat", None),
    ],
)
def test_database_file(url: str, path: str | None) -> None:
    found = database_file(engine_url(url))
    assert found == (None if path is None else Path(path))


def test_postgres_is_a_registered_scheme_for_postgresql() -> None:
    assert "postgres" in installed_schemes()
    repository = connect("postgres://nobody@127.0.0.1:1/none", create_schema=False)
    assert isinstance(repository, SqlChatMemoryRepository)
    assert repository.engine.dialect.name == "postgresql"
    assert repository.engine.pool.checkedout() == 0  # type: ignore[attr-defined]


def test_an_unknown_option_is_refused_with_the_valid_ones(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'chat.db'}"
    with pytest.raises(InvalidOptionError, match="takes no option 'tablename'") as e:
        SqlChatMemoryRepository.from_url(url, tablename="x")
    assert "table_name" in str(e.value)
    assert isinstance(e.value, TypeError)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("kind", ["sqlite", "duckdb"])
def test_a_reader_never_creates_a_database_file(tmp_path: Path, kind: str) -> None:
    if kind == "duckdb":
        pytest.importorskip("duckdb_engine")
    path = tmp_path / f"chat.{kind}"
    with pytest.raises(StoreNotFoundError, match="the file does not exist"):
        SqlChatMemoryRepository.from_url(f"{kind}:///{path}", create_schema=False)
    assert list(tmp_path.iterdir()) == []


def test_a_missing_folder_is_named_before_anything_is_created(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'absent' / 'chat.db'}"
    with pytest.raises(StoreNotFoundError, match=r"the folder .*absent' of the sqlite"):
        SqlChatMemoryRepository.from_url(url)
    assert list(tmp_path.iterdir()) == []


def test_a_reader_names_a_missing_table_and_creates_none(any_engine: Engine) -> None:
    table = unique_table()
    repository = SqlChatMemoryRepository(
        any_engine, table_name=table, create_schema=False
    )
    with pytest.raises(StoreNotFoundError, match=f"table '{table}' does not exist"):
        repository.find_conversation_ids()
    with pytest.raises(StoreNotFoundError, match=f"table '{table}' does not exist"):
        repository.find_by_conversation_id("c1")
    assert not inspect(any_engine).has_table(table)


def test_a_reader_of_existing_tables_reads(any_engine: Engine) -> None:
    table = unique_table()
    writer = SqlChatMemoryRepository(any_engine, table_name=table)
    try:
        writer.save_all("c1", [Message.user("hi")])
        reader = SqlChatMemoryRepository(
            any_engine, table_name=table, create_schema=False
        )
        assert reader.find_conversation_ids() == ["c1"]
    finally:
        writer.drop_schema()


@pytest.mark.parametrize(
    "url",
    [
        "sqlite+aiosqlite:///chat.db",
        "postgresql+asyncpg://a@h/d",
        "mysql+asyncmy://a@h/d",
    ],
)
def test_the_sync_repository_refuses_an_asyncio_driver(url: str) -> None:
    with pytest.raises(InvalidUrlError, match="connect_async"):
        connect(url)


@pytest.mark.parametrize(
    ("given", "meant"),
    [
        ("sqlite:///chat.db", "sqlite+aiosqlite:///chat.db"),
        ("SQLITE+AIOSQLITE:///chat.db", "sqlite+aiosqlite:///chat.db"),
        ("postgres://app@db/chat", "postgresql+psycopg://app@db/chat"),
        ("postgresql+asyncpg://app@db/chat", "postgresql+asyncpg://app@db/chat"),
        ("mysql://app@db/chat", "mysql+asyncmy://app@db/chat"),
        ("mariadb+aiomysql://app@db/chat", "mariadb+aiomysql://app@db/chat"),
    ],
)
def test_async_engine_url_picks_an_asyncio_driver(given: str, meant: str) -> None:
    assert async_engine_url(given).render_as_string() == meant


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("mysql+pymysql://a@h/d", "a sync driver"),
        ("sqlite+pysqlite:///chat.db", "a sync driver"),
        ("duckdb:///chat.duckdb", "runs on SQLite, PostgreSQL, MySQL and MariaDB"),
        ("mssql+pyodbc://a@h/d", "runs on SQLite, PostgreSQL, MySQL and MariaDB"),
        ("sqlite://chat.db", "names a host"),
    ],
)
def test_connect_async_refuses_what_it_cannot_open(
    url: str, says: str, tmp_path: Path
) -> None:
    with pytest.raises(InvalidUrlError, match=says):
        connect_async(url)
    assert list(tmp_path.iterdir()) == []


def test_connect_async_names_a_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(StoreNotFoundError, match="does not exist"):
        connect_async(f"sqlite:///{tmp_path / 'missing' / 'chat.db'}")
    assert list(tmp_path.iterdir()) == []
