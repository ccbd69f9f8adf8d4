"""The conformance suite on Cassandra (or ScyllaDB).

The server comes from ``CHATLEDGER_TEST_CASSANDRA_URL`` (for example
``cassandra://127.0.0.1:9042/chatledger_test``), else a ``cassandra:5``
testcontainer, else the tests are skipped with the reason. Every test gets a
table of its own in that keyspace, dropped afterwards.
"""

from __future__ import annotations

import uuid
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


def _fresh(root: CassandraChatMemoryRepository, **options: Any) -> Any:
    return CassandraChatMemoryRepository(
        root.session,
        keyspace=root.keyspace,
        table=f"t_{uuid.uuid4().hex[:20]}",
        **options,
    )


class TestCassandraConformance(ChatMemoryRepositoryTests, ConversationInfoTests):
    supports_atomic_append = True
    supports_ttl = True
    supports_retention = True

    @pytest.fixture
    def repository(
        self, cassandra_root: CassandraChatMemoryRepository
    ) -> Iterator[CassandraChatMemoryRepository]:
        repository = _fresh(cassandra_root)
        yield repository
        repository.drop_schema()

    @pytest.fixture
    def make_repository_with_ttl(
        self, cassandra_root: CassandraChatMemoryRepository
    ) -> Iterator[Callable[[timedelta], CassandraChatMemoryRepository]]:
        made: list[CassandraChatMemoryRepository] = []

        def make(ttl: timedelta) -> CassandraChatMemoryRepository:
            made.append(_fresh(cassandra_root, ttl=ttl))
            return made[-1]

        yield make
        for repository in made:
            repository.drop_schema()

    @pytest.fixture
    def make_repository_with_retention(
        self, cassandra_root: CassandraChatMemoryRepository
    ) -> Iterator[Callable[[Retention], CassandraChatMemoryRepository]]:
        made: list[CassandraChatMemoryRepository] = []

        def make(retention: Retention) -> CassandraChatMemoryRepository:
            made.append(_fresh(cassandra_root, retention=retention))
            return made[-1]

        yield make
        for repository in made:
            repository.drop_schema()


class TestCassandraRemovalsUnderTTL(LogRemovalTests):
    """The removal suite on a repository with a TTL.

    A removal there reads the whole conversation and writes every cell left
    again under the TTL, as a log append does: another way to the same
    answers than the one the whole suite above takes.
    """

    @pytest.fixture
    def repository(
        self, cassandra_root: CassandraChatMemoryRepository
    ) -> Iterator[CassandraChatMemoryRepository]:
        repository = _fresh(cassandra_root, ttl=timedelta(hours=1))
        yield repository
        repository.drop_schema()
