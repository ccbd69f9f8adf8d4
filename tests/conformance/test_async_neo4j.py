"""The conformance suite on Neo4j 5 through the driver's ``AsyncDriver``."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from neo4j import AsyncDriver, AsyncGraphDatabase

from chatledger.testing import AsyncChatMemoryRepositoryTests
from chatledger.testing.async_runner import EventLoopThread
from chatledger_neo4j import AsyncNeo4jChatMemoryRepository, parse_url
from tests.backends import backend_url


class TestAsyncNeo4jConformance(AsyncChatMemoryRepositoryTests):
    supports_atomic_append = True

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
