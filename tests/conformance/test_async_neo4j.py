"""The conformance suite on Neo4j 5 through the driver's ``AsyncDriver``."""

from __future__ import annotations

import uuid
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
        self, async_driver: AsyncDriver, async_runner: EventLoopThread
    ) -> Iterator[AsyncNeo4jChatMemoryRepository]:
        tag = uuid.uuid4().hex[:12]
        repository = AsyncNeo4jChatMemoryRepository(
            async_driver,
            conversation_label=f"ConversationA{tag}",
            message_label=f"MessageA{tag}",
        )
        try:
            yield repository
        finally:
            async_runner.run(repository.drop_schema())

    @pytest.fixture
    def make_async_repository_with_retention(
        self, async_driver: AsyncDriver, async_runner: EventLoopThread
    ) -> Iterator[Callable[[Retention], AsyncNeo4jChatMemoryRepository]]:
        made: list[AsyncNeo4jChatMemoryRepository] = []

        def make(retention: Retention) -> AsyncNeo4jChatMemoryRepository:
            tag = uuid.uuid4().hex[:12]
            made.append(
                AsyncNeo4jChatMemoryRepository(
                    async_driver,
                    conversation_label=f"ConversationK{tag}",
                    message_label=f"MessageK{tag}",
                    retention=retention,
                )
            )
            return made[-1]

        try:
            yield make
        finally:
            for repository in made:
                async_runner.run(repository.drop_schema())


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
        self, required: set[str], async_runner: EventLoopThread
    ) -> Iterator[RepositoryFacade]:
        tag = uuid.uuid4().hex[:12]
        repository = AsyncNeo4jChatMemoryRepository.from_url(
            backend_url("neo4j", required),
            conversation_label=f"ConversationB{tag}",
            message_label=f"MessageB{tag}",
        )
        repository._view_reads = small_reads
        try:
            yield repository_facade(repository, async_runner)
        finally:
            async_runner.run(repository.drop_schema())
            async_runner.run(repository.aclose())
