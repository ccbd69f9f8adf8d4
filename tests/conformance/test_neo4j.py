"""The conformance suite on Neo4j 5 (``CHATLEDGER_TEST_NEO4J_URL`` or a container)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from chatledger.testing import ChatMemoryRepositoryTests
from chatledger_neo4j import Neo4jChatMemoryRepository
from tests.backends import backend_url


@pytest.fixture(scope="module")
def neo4j_url(required: set[str]) -> str:
    return backend_url("neo4j", required)


class TestNeo4jConformance(ChatMemoryRepositoryTests):
    supports_atomic_append = True

    @pytest.fixture
    def repository(self, neo4j_url: str) -> Iterator[Neo4jChatMemoryRepository]:
        tag = uuid.uuid4().hex[:12]
        repository = Neo4jChatMemoryRepository.from_url(
            neo4j_url,
            conversation_label=f"ConversationT{tag}",
            message_label=f"MessageT{tag}",
        )
        try:
            yield repository
        finally:
            repository.drop_schema()
            repository.close()
