"""The conformance suite on a real MongoDB server, through ``AsyncMongoClient``.

The server comes from ``CHATLEDGER_TEST_MONGODB_URL`` (e.g.
``mongodb://127.0.0.1:27017/?replicaSet=rs0``), else a ``mongo:8`` container
where a Docker daemon answers, else the tests are skipped with that reason.
Each test gets its own collection in the database ``chatledger_test`` and drops
it afterwards.
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
    LogTests,
    RetentionTests,
)
from chatledger.testing.async_runner import (
    EventLoopThread,
    RepositoryFacade,
    repository_facade,
)
from tests.backends import backend_url
from tests.conformance.test_mongodb import small_reads

pymongo = pytest.importorskip("pymongo")
chatledger_mongodb = pytest.importorskip("chatledger_mongodb")

DATABASE = "chatledger_test"


class TestAsyncMongoDBConformance(
    AsyncChatMemoryRepositoryTests, ConversationInfoTests
):
    """The whole suite against a real MongoDB server, on pymongo's async API."""

    supports_atomic_append = True
    supports_ttl = True
    supports_retention = True
    # Cursors fetch in batches: the paging test crosses them.
    many_conversations = 10_000

    @pytest.fixture(scope="class")
    @classmethod
    def async_client(cls, async_runner: EventLoopThread) -> Iterator[Any]:
        client = pymongo.AsyncMongoClient(backend_url("mongodb"))
        yield client
        async_runner.run(client.close())

    @pytest.fixture
    def collections(
        self, async_client: Any, async_runner: EventLoopThread
    ) -> Iterator[list[str]]:
        names: list[str] = []
        yield names
        for name in names:
            async_runner.run(async_client[DATABASE].drop_collection(name))

    def _make(self, client: Any, names: list[str], **options: Any) -> Any:
        name = f"cl_{uuid.uuid4().hex}"
        names.append(name)
        return chatledger_mongodb.AsyncMongoDBChatMemoryRepository(
            client, database=DATABASE, collection=name, **options
        )

    @pytest.fixture
    def async_repository(self, async_client: Any, collections: list[str]) -> Any:
        return self._make(async_client, collections)

    @pytest.fixture
    def make_async_repository_with_ttl(
        self, async_client: Any, collections: list[str]
    ) -> Callable[[timedelta], Any]:
        return lambda ttl: self._make(async_client, collections, ttl=ttl)

    @pytest.fixture
    def make_async_repository_with_retention(
        self, async_client: Any, collections: list[str]
    ) -> Callable[[Retention], Any]:
        return lambda retention: self._make(
            async_client, collections, retention=retention
        )


class TestAsyncMongoDBLogInSmallReads(LogTests, LogRemovalTests, RetentionTests):
    """The log suite on ``AsyncMongoClient``, views read a row or two at a time.

    A bounded log's trims read their views so too.
    """

    supports_retention = True

    @pytest.fixture(scope="class")
    @classmethod
    def async_runner(cls) -> Iterator[EventLoopThread]:
        runner = EventLoopThread()
        yield runner
        runner.close()

    @pytest.fixture
    def repository(
        self, required: set[str], async_runner: EventLoopThread
    ) -> Iterator[RepositoryFacade]:
        client = pymongo.AsyncMongoClient(backend_url("mongodb", required))
        name = f"cl_{uuid.uuid4().hex}"
        repository = chatledger_mongodb.AsyncMongoDBChatMemoryRepository(
            client, database=DATABASE, collection=name
        )
        repository._view_reads = small_reads
        yield repository_facade(repository, async_runner)
        async_runner.run(client[DATABASE].drop_collection(name))
        async_runner.run(client.close())

    @pytest.fixture
    def make_repository_with_retention(
        self, required: set[str], async_runner: EventLoopThread
    ) -> Iterator[Callable[[Retention], RepositoryFacade]]:
        client = pymongo.AsyncMongoClient(backend_url("mongodb", required))
        names: list[str] = []

        def make(retention: Retention) -> RepositoryFacade:
            name = f"cl_{uuid.uuid4().hex}"
            names.append(name)
            repository = chatledger_mongodb.AsyncMongoDBChatMemoryRepository(
                client, database=DATABASE, collection=name, retention=retention
            )
            repository._view_reads = small_reads
            return repository_facade(repository, async_runner)

        yield make
        for name in names:
            async_runner.run(client[DATABASE].drop_collection(name))
        async_runner.run(client.close())
