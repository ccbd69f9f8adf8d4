"""The conformance suite for the async repository on a STAND-IN, not on MongoDB.

As ``test_standin_suite.py`` does for the sync repository: the async
repository drives :class:`tests.mongodb.standin.AsyncStandInClient`, pymongo's
async calls answered by mongomock storage plus a test-only evaluator of the
pipeline's operators, one lock standing in for single-document atomicity. It
checks the async adapter's code and its pipeline's window logic; it says
nothing about a real server, which ``tests/conformance/test_async_mongodb.py``
covers where one is reachable.
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

pytest.importorskip("mongomock")

from chatledger_mongodb import AsyncMongoDBChatMemoryRepository
from tests.conformance.test_mongodb import small_reads
from tests.mongodb.standin import AsyncStandInClient


class TestAsyncMongoDBStandInEvaluator(
    AsyncChatMemoryRepositoryTests, ConversationInfoTests
):
    """Suite on mongomock + the pipeline evaluator: a stand-in, NOT a server."""

    supports_atomic_append = True
    supports_ttl = True
    supports_retention = True

    @pytest.fixture
    def client(self) -> AsyncStandInClient:
        return AsyncStandInClient()

    @pytest.fixture
    def async_repository(
        self, client: AsyncStandInClient
    ) -> AsyncMongoDBChatMemoryRepository:
        return AsyncMongoDBChatMemoryRepository(
            client,  # type: ignore[arg-type]
            collection=f"c_{uuid.uuid4().hex}",
        )

    @pytest.fixture
    def make_async_repository_with_ttl(
        self, client: AsyncStandInClient
    ) -> Callable[[timedelta], Any]:
        return lambda ttl: AsyncMongoDBChatMemoryRepository(
            client,  # type: ignore[arg-type]
            collection=f"c_{uuid.uuid4().hex}",
            ttl=ttl,
        )

    @pytest.fixture
    def make_async_repository_with_retention(
        self, client: AsyncStandInClient
    ) -> Callable[[Retention], Any]:
        return lambda retention: AsyncMongoDBChatMemoryRepository(
            client,  # type: ignore[arg-type]
            collection=f"c_{uuid.uuid4().hex}",
            retention=retention,
        )


class TestAsyncMongoDBStandInLogInSmallReads(LogTests, LogRemovalTests, RetentionTests):
    """The log suite, async, on the stand-in (NOT a server), in small view reads.

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
    def repository(self, async_runner: EventLoopThread) -> RepositoryFacade:
        repository = AsyncMongoDBChatMemoryRepository(
            AsyncStandInClient(),  # type: ignore[arg-type]
            collection=f"c_{uuid.uuid4().hex}",
        )
        repository._view_reads = small_reads
        return repository_facade(repository, async_runner)

    @pytest.fixture
    def make_repository_with_retention(
        self, async_runner: EventLoopThread
    ) -> Callable[[Retention], RepositoryFacade]:
        def make(retention: Retention) -> RepositoryFacade:
            repository = AsyncMongoDBChatMemoryRepository(
                AsyncStandInClient(),  # type: ignore[arg-type]
                collection=f"c_{uuid.uuid4().hex}",
                retention=retention,
            )
            repository._view_reads = small_reads
            return repository_facade(repository, async_runner)

        return make
