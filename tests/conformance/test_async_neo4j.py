"""The conformance suite on Neo4j 5 through the driver's ``AsyncDriver``."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from neo4j import AsyncDriver, AsyncGraphDatabase

from chatledger.retention import Retention
from chatledger.testing import (
    AsyncChatMemoryRepositoryTests,
    ConversationInfoTests,
    LogRemovalTests,
    LogTests,
)
from chatledger.testing.async_runner import (
    EventLoopThread,
    RepositoryFacade,
    repository_facade,
)
from chatledger_neo4j import AsyncNeo4jChatMemoryRepository, parse_url
from tests.backends import backend_url
from tests.conformance.test_neo4j import small_reads
from tests.neo4j.label_pool import LabelPool


@pytest.fixture(scope="module")
def labels(required: set[str]) -> Iterator[LabelPool]:
    """Label pairs this module's tests take and give back emptied."""
    pool = LabelPool(backend_url("neo4j", required), "A")
    yield pool
    pool.close()


class TestAsyncNeo4jConformance(AsyncChatMemoryRepositoryTests, ConversationInfoTests):
    supports_atomic_append = True
    supports_retention = True

    @pytest.fixture(scope="class")
    @classmethod
    def async_driver(
        cls, async_runner: EventLoopThread, required: set[str]
    ) -> Iterator[AsyncDriver]:
        settings = parse_url(backend_url("neo4j", required))
        driver = AsyncGraphDatabase.driver(settings.uri, auth=settings.auth)
        yield driver
        async_runner.run(driver.close())

    @pytest.fixture
    def async_repository(
        self, async_driver: AsyncDriver, labels: LabelPool
    ) -> Iterator[AsyncNeo4jChatMemoryRepository]:
        conversation_label, message_label = labels.take()
        repository = AsyncNeo4jChatMemoryRepository(
            async_driver,
            conversation_label=conversation_label,
            message_label=message_label,
        )
        try:
            yield repository
        finally:
            labels.give_back(repository)

    @pytest.fixture
    def make_async_repository_with_retention(
        self, async_driver: AsyncDriver, labels: LabelPool
    ) -> Iterator[Callable[[Retention], AsyncNeo4jChatMemoryRepository]]:
        made: list[AsyncNeo4jChatMemoryRepository] = []

        def make(retention: Retention) -> AsyncNeo4jChatMemoryRepository:
            conversation_label, message_label = labels.take()
            made.append(
                AsyncNeo4jChatMemoryRepository(
                    async_driver,
                    conversation_label=conversation_label,
                    message_label=message_label,
                    retention=retention,
                )
            )
            return made[-1]

        try:
            yield make
        finally:
            for repository in made:
                labels.give_back(repository)


class TestAsyncNeo4jLogInSmallReads(LogTests, LogRemovalTests):
    """The log and removal suites on ``AsyncDriver``, views read a row or two
    at a time (the views of a log that removals left holes in too)."""

    @pytest.fixture(scope="class")
    @classmethod
    def async_runner(cls) -> Iterator[EventLoopThread]:
        runner = EventLoopThread()
        yield runner
        runner.close()

    @pytest.fixture
    def repository(
        self, required: set[str], async_runner: EventLoopThread, labels: LabelPool
    ) -> Iterator[RepositoryFacade]:
        conversation_label, message_label = labels.take()
        repository = AsyncNeo4jChatMemoryRepository.from_url(
            backend_url("neo4j", required),
            conversation_label=conversation_label,
            message_label=message_label,
        )
        repository._view_reads = small_reads
        try:
            yield repository_facade(repository, async_runner)
        finally:
            try:
                labels.give_back(repository)
            finally:
                async_runner.run(repository.aclose())
