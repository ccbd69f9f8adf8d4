"""The conformance suite on Cassandra (or ScyllaDB).

The server comes from ``CHATLEDGER_TEST_CASSANDRA_URL`` (for example
``cassandra://127.0.0.1:9042/chatledger_test``), else a ``cassandra:5``
testcontainer, else the tests are skipped with the reason. Every test gets a
table of its own in that keyspace, dropped afterwards.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest

from chatledger.retention import Retention
from chatledger.testing import (
    ChatMemoryRepositoryTests,
    ConversationInfoTests,
    LogRemovalTests,
)
from chatledger_cassandra import CassandraChatMemoryRepository, parse_url
from tests.backends import backend_url
from tests.cassandra.table_pool import TablePool


@pytest.fixture(scope="module")
def cassandra_root(required: set[str]) -> Iterator[CassandraChatMemoryRepository]:
    """A repository that owns the cluster; its session serves every test."""
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
    pool = TablePool(cassandra_root, "t")
    yield pool
    pool.close()


def _fresh(tables: TablePool, **options: Any) -> Any:
    return CassandraChatMemoryRepository(
        tables.root.session,
        keyspace=tables.root.keyspace,
        table=tables.take(),
        **options,
    )


class TestCassandraConformance(ChatMemoryRepositoryTests, ConversationInfoTests):
    supports_atomic_append = True
    supports_ttl = True
    supports_retention = True

    @pytest.fixture
    def repository(self, tables: TablePool) -> Iterator[CassandraChatMemoryRepository]:
        repository = _fresh(tables)
        yield repository
        tables.give_back(repository)

    @pytest.fixture
    def make_repository_with_ttl(
        self, tables: TablePool
    ) -> Iterator[Callable[[timedelta], CassandraChatMemoryRepository]]:
        made: list[CassandraChatMemoryRepository] = []

        def make(ttl: timedelta) -> CassandraChatMemoryRepository:
            made.append(_fresh(tables, ttl=ttl))
            return made[-1]

        yield make
        for repository in made:
            tables.give_back(repository)

    @pytest.fixture
    def make_repository_with_retention(
        self, tables: TablePool
    ) -> Iterator[Callable[[Retention], CassandraChatMemoryRepository]]:
        made: list[CassandraChatMemoryRepository] = []

        def make(retention: Retention) -> CassandraChatMemoryRepository:
            made.append(_fresh(tables, retention=retention))
            return made[-1]

        yield make
        for repository in made:
            tables.give_back(repository)


class TestCassandraRemovalsUnderTTL(LogRemovalTests):
    """The removal suite on a repository with a TTL.

    A removal there reads the whole conversation and writes every cell left
    again under the TTL, as a log append does: another way to the same
    answers than the one the whole suite above takes.
    """

    @pytest.fixture
    def repository(self, tables: TablePool) -> Iterator[CassandraChatMemoryRepository]:
        repository = _fresh(tables, ttl=timedelta(hours=1))
        yield repository
        tables.give_back(repository)
