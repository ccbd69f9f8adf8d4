"""The conformance suite on every SQL database, through one repository class."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from sqlalchemy import Engine, create_engine

from chatledger.testing import ChatMemoryRepositoryTests
from chatledger_sql import MySQLDialect, SqlChatMemoryRepository
from tests.backends import backend_url


def unique_table() -> str:
    """A table name no other test, here or on a shared server, uses."""
    return f"cl_{uuid.uuid4().hex[:16]}"


class _SqlConformance(ChatMemoryRepositoryTests):
    """Runs the suite on one engine; subclasses say which."""

    supports_atomic_append = True
    dialect: ClassVar[Any] = None

    @pytest.fixture(scope="class")
    @classmethod
    def engine(cls, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
        engine = create_engine(cls.url(tmp_path_factory.mktemp("db")))
        yield engine
        engine.dispose()

    @classmethod
    def url(cls, directory: Path) -> str:
        raise NotImplementedError

    @pytest.fixture
    def repository(self, engine: Engine) -> Iterator[SqlChatMemoryRepository]:
        repository = SqlChatMemoryRepository(
            engine, table_name=unique_table(), dialect=self.dialect
        )
        yield repository
        repository.drop_schema()


class TestSqliteConformance(_SqlConformance):
    @classmethod
    def url(cls, directory: Path) -> str:
        return f"sqlite:///{directory / 'chat.db'}"


class TestDuckDBConformance(_SqlConformance):
    @classmethod
    def url(cls, directory: Path) -> str:
        return f"duckdb:///{directory / 'chat.duckdb'}"


class TestPostgresqlConformance(_SqlConformance):
    @classmethod
    def url(cls, directory: Path) -> str:
        return backend_url("postgresql")


class TestMariaDBConformance(_SqlConformance):
    @classmethod
    def url(cls, directory: Path) -> str:
        return backend_url("mariadb")


class TestMariaDBWithMySQLDialectConformance(_SqlConformance):
    """``MySQLDialect`` forced onto a MariaDB server still passes the suite."""

    dialect = MySQLDialect()

    @pytest.fixture
    def repository(self, engine: Engine) -> Iterator[SqlChatMemoryRepository]:
        with pytest.warns(UserWarning, match="mariadb"):
            repository = SqlChatMemoryRepository(
                engine, table_name=unique_table(), dialect=self.dialect
            )
        yield repository
        repository.drop_schema()

    @classmethod
    def url(cls, directory: Path) -> str:
        return backend_url("mariadb")


class TestMySQLConformance(_SqlConformance):
    @classmethod
    def url(cls, directory: Path) -> str:
        return backend_url("mysql")


class TestMSSQLConformance(_SqlConformance):
    @classmethod
    def url(cls, directory: Path) -> str:
        return backend_url("mssql")


class TestOracleConformance(_SqlConformance):
    @classmethod
    def url(cls, directory: Path) -> str:
        return backend_url("oracle")
