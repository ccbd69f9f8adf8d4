"""The conformance suite on every SQL database, through one repository class."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any, ClassVar

import pytest
from sqlalchemy import Engine, create_engine

from chatledger import Retention
from chatledger.testing import (
    ChatMemoryRepositoryTests,
    ConversationInfoTests,
    LogTests,
)
from chatledger_sql import MySQLDialect, SqlChatMemoryRepository
from tests.backends import backend_url
from tests.small_reads import small_reads


def unique_table() -> str:
    """A table name no other test, here or on a shared server, uses."""
    return f"cl_{uuid.uuid4().hex[:16]}"


class _SqlConformance(ChatMemoryRepositoryTests, ConversationInfoTests):
    """Runs the suite on one engine; subclasses say which."""

    supports_atomic_append = True
    supports_ttl = True
    supports_retention = True
    #: Every dialect keeps timestamps to the microsecond.
    conversation_time_tolerance = timedelta(microseconds=1)
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
        repository = self.new_repository(engine)
        yield repository
        repository.drop_schema()

    @pytest.fixture
    def make_repository(
        self, engine: Engine
    ) -> Iterator[Callable[..., SqlChatMemoryRepository]]:
        """Empty repositories with options, each on its own tables."""
        made: list[SqlChatMemoryRepository] = []

        def make(**options: Any) -> SqlChatMemoryRepository:
            repository = self.new_repository(engine, **options)
            made.append(repository)
            return repository

        yield make
        for repository in made:
            repository.drop_schema()

    @pytest.fixture
    def make_repository_with_ttl(
        self, make_repository: Callable[..., SqlChatMemoryRepository]
    ) -> Callable[[timedelta], SqlChatMemoryRepository]:
        return lambda ttl: make_repository(ttl=ttl)

    @pytest.fixture
    def make_repository_with_retention(
        self, make_repository: Callable[..., SqlChatMemoryRepository]
    ) -> Callable[[Retention], SqlChatMemoryRepository]:
        return lambda retention: make_repository(retention=retention)

    def new_repository(self, engine: Engine, **options: Any) -> SqlChatMemoryRepository:
        return SqlChatMemoryRepository(
            engine, table_name=unique_table(), dialect=self.dialect, **options
        )


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

    def new_repository(self, engine: Engine, **options: Any) -> SqlChatMemoryRepository:
        # The product of a mysql:// engine is known once it has connected;
        # before that the mismatch warns at the first call (test_lazy_connect).
        with engine.connect():
            pass
        with pytest.warns(UserWarning, match="mariadb"):
            return super().new_repository(engine, **options)

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


class TestSqlLogInSmallReads(LogTests):
    """The log suite with views read a row or two at a time.

    The suite's own views (the window's limit plus a few rows) rarely read
    twice: here every view of the random histories reads further back, a
    row or two per query, and meets a read's boundary at every row.
    """

    @pytest.fixture(params=["sqlite", "postgresql", "mariadb"])
    def repository(
        self, request: pytest.FixtureRequest, tmp_path: Path
    ) -> Iterator[SqlChatMemoryRepository]:
        if request.param == "sqlite":
            url = f"sqlite:///{tmp_path / 'chat.db'}"
        else:
            url = backend_url(request.param)
        repository = SqlChatMemoryRepository.from_url(url, table_name=unique_table())
        repository._view_reads = small_reads
        try:
            yield repository
        finally:
            repository.drop_schema()
            repository.close()
