"""The conformance suite on every SQL database with an asyncio driver."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from chatledger import Retention
from chatledger.testing import (
    AsyncChatMemoryRepositoryTests,
    ConversationInfoTests,
    LogTests,
)
from chatledger.testing.async_runner import (
    EventLoopThread,
    RepositoryFacade,
    repository_facade,
)
from chatledger_sql.async_repository import AsyncSqlChatMemoryRepository
from chatledger_sql.repository import _sqlite_on_connect
from tests.backends import backend_url
from tests.conformance.test_sql import unique_table
from tests.small_reads import small_reads


def with_driver(url: str, driver: str) -> str:
    """``url`` (a server's test URL) with another driver, as SQLAlchemy spells it."""
    parsed = make_url(url)
    return parsed.set(
        drivername=f"{parsed.get_backend_name()}+{driver}"
    ).render_as_string(hide_password=False)


class _AsyncSqlConformance(AsyncChatMemoryRepositoryTests, ConversationInfoTests):
    """Runs the suite on one async engine; subclasses say which."""

    supports_atomic_append = True
    supports_ttl = True
    supports_retention = True
    #: Every dialect keeps timestamps to the microsecond.
    conversation_time_tolerance = timedelta(microseconds=1)

    @pytest.fixture(scope="class")
    @classmethod
    def async_engine(
        cls, tmp_path_factory: pytest.TempPathFactory, async_runner: EventLoopThread
    ) -> Iterator[AsyncEngine]:
        engine = create_async_engine(cls.url(tmp_path_factory.mktemp("db")))
        if engine.dialect.name == "sqlite":
            # What from_url sets up: WAL and a busy timeout per connection.
            event.listen(engine.sync_engine, "connect", _sqlite_on_connect)
        yield engine
        async_runner.run(engine.dispose())

    @classmethod
    def url(cls, directory: Path) -> str:
        raise NotImplementedError

    @pytest.fixture
    def async_repository(
        self, async_engine: AsyncEngine, async_runner: EventLoopThread
    ) -> Iterator[AsyncSqlChatMemoryRepository]:
        repository = AsyncSqlChatMemoryRepository(
            async_engine, table_name=unique_table()
        )
        yield repository
        async_runner.run(repository.drop_schema())

    @pytest.fixture
    def make_async_repository(
        self, async_engine: AsyncEngine, async_runner: EventLoopThread
    ) -> Iterator[Callable[..., AsyncSqlChatMemoryRepository]]:
        """Empty repositories with options, each on its own tables."""
        made: list[AsyncSqlChatMemoryRepository] = []

        def make(**options: Any) -> AsyncSqlChatMemoryRepository:
            repository = AsyncSqlChatMemoryRepository(
                async_engine, table_name=unique_table(), **options
            )
            made.append(repository)
            return repository

        yield make
        for repository in made:
            async_runner.run(repository.drop_schema())

    @pytest.fixture
    def make_async_repository_with_ttl(
        self, make_async_repository: Callable[..., AsyncSqlChatMemoryRepository]
    ) -> Callable[[timedelta], AsyncSqlChatMemoryRepository]:
        return lambda ttl: make_async_repository(ttl=ttl)

    @pytest.fixture
    def make_async_repository_with_retention(
        self, make_async_repository: Callable[..., AsyncSqlChatMemoryRepository]
    ) -> Callable[[Retention], AsyncSqlChatMemoryRepository]:
        return lambda retention: make_async_repository(retention=retention)


class TestAsyncSqliteConformance(_AsyncSqlConformance):
    @classmethod
    def url(cls, directory: Path) -> str:
        return f"sqlite+aiosqlite:///{directory / 'chat.db'}"


class TestAsyncPostgresqlPsycopgConformance(_AsyncSqlConformance):
    @classmethod
    def url(cls, directory: Path) -> str:
        return with_driver(backend_url("postgresql"), "psycopg")


class TestAsyncPostgresqlAsyncpgConformance(_AsyncSqlConformance):
    @classmethod
    def url(cls, directory: Path) -> str:
        return with_driver(backend_url("postgresql"), "asyncpg")


class TestAsyncMariaDBAsyncmyConformance(_AsyncSqlConformance):
    @classmethod
    def url(cls, directory: Path) -> str:
        return with_driver(backend_url("mariadb"), "asyncmy")


class TestAsyncMariaDBAiomysqlConformance(_AsyncSqlConformance):
    @classmethod
    def url(cls, directory: Path) -> str:
        return with_driver(backend_url("mariadb"), "aiomysql")


class TestAsyncSqlLogInSmallReads(LogTests):
    """The log suite on the async drivers with views read a row or two at a time."""

    @pytest.fixture(scope="class")
    @classmethod
    def async_runner(cls) -> Iterator[EventLoopThread]:
        runner = EventLoopThread()
        yield runner
        runner.close()

    @pytest.fixture(params=["sqlite+aiosqlite", "postgresql+asyncpg", "mysql+asyncmy"])
    def repository(
        self,
        request: pytest.FixtureRequest,
        tmp_path: Path,
        async_runner: EventLoopThread,
    ) -> Iterator[RepositoryFacade]:
        backend, driver = request.param.split("+")
        if backend == "sqlite":
            url = f"{request.param}:///{tmp_path / 'chat.db'}"
        else:
            name = "postgresql" if backend == "postgresql" else "mariadb"
            url = with_driver(backend_url(name), driver)
        repository = AsyncSqlChatMemoryRepository.from_url(
            url, table_name=unique_table()
        )
        repository._view_reads = small_reads
        try:
            yield repository_facade(repository, async_runner)
        finally:
            async_runner.run(repository.drop_schema())
            async_runner.run(repository.aclose())


def test_async_schemes_open_the_async_repository(tmp_path: Path) -> None:
    from chatledger import connect_async

    repository: Any = connect_async(f"sqlite+aiosqlite:///{tmp_path / 'c.db'}")
    assert isinstance(repository, AsyncSqlChatMemoryRepository)
