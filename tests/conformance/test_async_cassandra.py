"""The conformance suite on Cassandra (or ScyllaDB), through ``execute_async``.

The server comes from ``CHATLEDGER_TEST_CASSANDRA_URL`` as for the sync suite
(``tests/conformance/test_cassandra.py``), else a ``cassandra:5``
testcontainer, else the tests are skipped with the reason, or fail when the
backend is required. Every test gets a table of its own, dropped afterwards.
The repositories share the session of one sync repository; the driver runs
their statements on its own thread and hands each answer to the suite's
event loop.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest

from chatledger.retention import Retention
from chatledger.testing import (
    AsyncChatMemoryRepositoryTests,
    ConversationInfoTests,
    LogRemovalTests,
)
from chatledger.testing.async_runner import (
    EventLoopThread,
    RepositoryFacade,
    repository_facade,
)
from chatledger_cassandra import (
    AsyncCassandraChatMemoryRepository,
    CassandraChatMemoryRepository,
    parse_url,
)
from tests.backends import backend_url
from tests.cassandra.table_pool import TablePool


@pytest.fixture(scope="module")
def cassandra_root(required: set[str]) -> Iterator[CassandraChatMemoryRepository]:
    """A sync repository that owns the cluster; its session serves every test."""
    url = backend_url("cassandra", required)
    keyspace = parse_url(url).keyspace or "chatledger_test"
    root = CassandraChatMemoryRepository.from_url(
        url, keyspace=keyspace, create_keyspace=True, create_schema=False
    )
    yield root
    root.close()


@pytest.fixture(scope="module")
def tables(cassandra_root: CassandraChatMemoryRepository) -> Iterator[TablePool]:
    """Tables this module's tests take and give back emptied."""
    pool = TablePool(cassandra_root, "a")
    yield pool
    pool.close()


def _fresh(tables: TablePool, **options: Any) -> Any:
    return AsyncCassandraChatMemoryRepository(
        tables.root.session,
        keyspace=tables.root.keyspace,
        table=tables.take(),
        **options,
    )


class TestAsyncCassandraConformance(
    AsyncChatMemoryRepositoryTests, ConversationInfoTests
):
    supports_atomic_append = True
    supports_ttl = True
    supports_retention = True

    @pytest.fixture
    def async_repository(
        self,
        tables: TablePool,
        async_runner: EventLoopThread,
    ) -> Iterator[AsyncCassandraChatMemoryRepository]:
        repository = _fresh(tables)
        yield repository
        tables.give_back(repository)

    @pytest.fixture
    def make_async_repository_with_ttl(
        self,
        tables: TablePool,
        async_runner: EventLoopThread,
    ) -> Iterator[Callable[[timedelta], AsyncCassandraChatMemoryRepository]]:
        made: list[AsyncCassandraChatMemoryRepository] = []

        def make(ttl: timedelta) -> AsyncCassandraChatMemoryRepository:
            made.append(_fresh(tables, ttl=ttl))
            return made[-1]

        yield make
        for repository in made:
            tables.give_back(repository)

    @pytest.fixture
    def make_async_repository_with_retention(
        self,
        tables: TablePool,
        async_runner: EventLoopThread,
    ) -> Iterator[Callable[[Retention], AsyncCassandraChatMemoryRepository]]:
        made: list[AsyncCassandraChatMemoryRepository] = []

        def make(retention: Retention) -> AsyncCassandraChatMemoryRepository:
            made.append(_fresh(tables, retention=retention))
            return made[-1]

        yield make
        for repository in made:
            tables.give_back(repository)


class TestAsyncCassandraRemovalsUnderTTL(LogRemovalTests):
    """The removal suite through ``execute_async``, on a repository with a TTL
    (a removal there reads the whole conversation and writes every cell left
    again under it)."""

    @pytest.fixture(scope="class")
    @classmethod
    def async_runner(cls) -> Iterator[EventLoopThread]:
        runner = EventLoopThread()
        yield runner
        runner.close()

    @pytest.fixture
    def repository(
        self,
        tables: TablePool,
        async_runner: EventLoopThread,
    ) -> Iterator[RepositoryFacade]:
        repository = _fresh(tables, ttl=timedelta(hours=1))
        yield repository_facade(repository, async_runner)
        tables.give_back(repository)
