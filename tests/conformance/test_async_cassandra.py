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

import uuid
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


def _fresh(root: CassandraChatMemoryRepository, **options: Any) -> Any:
    return AsyncCassandraChatMemoryRepository(
        root.session,
        keyspace=root.keyspace,
        table=f"a_{uuid.uuid4().hex[:20]}",
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
        cassandra_root: CassandraChatMemoryRepository,
        async_runner: EventLoopThread,
    ) -> Iterator[AsyncCassandraChatMemoryRepository]:
        repository = _fresh(cassandra_root)
        yield repository
        async_runner.run(repository.drop_schema())

    @pytest.fixture
    def make_async_repository_with_ttl(
        self,
        cassandra_root: CassandraChatMemoryRepository,
        async_runner: EventLoopThread,
    ) -> Iterator[Callable[[timedelta], AsyncCassandraChatMemoryRepository]]:
        made: list[AsyncCassandraChatMemoryRepository] = []

        def make(ttl: timedelta) -> AsyncCassandraChatMemoryRepository:
            made.append(_fresh(cassandra_root, ttl=ttl))
            return made[-1]

        yield make
        for repository in made:
            async_runner.run(repository.drop_schema())

    @pytest.fixture
    def make_async_repository_with_retention(
        self,
        cassandra_root: CassandraChatMemoryRepository,
        async_runner: EventLoopThread,
    ) -> Iterator[Callable[[Retention], AsyncCassandraChatMemoryRepository]]:
        made: list[AsyncCassandraChatMemoryRepository] = []

        def make(retention: Retention) -> AsyncCassandraChatMemoryRepository:
            made.append(_fresh(cassandra_root, retention=retention))
            return made[-1]

        yield make
        for repository in made:
            async_runner.run(repository.drop_schema())


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
        cassandra_root: CassandraChatMemoryRepository,
        async_runner: EventLoopThread,
    ) -> Iterator[RepositoryFacade]:
        repository = _fresh(cassandra_root, ttl=timedelta(hours=1))
        yield repository_facade(repository, async_runner)
        async_runner.run(repository.drop_schema())
