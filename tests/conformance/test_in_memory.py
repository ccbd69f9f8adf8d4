"""The conformance suite on the in-memory repository."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest

from chatledger import InMemoryChatMemoryRepository
from chatledger.retention import Retention
from chatledger.testing import ChatMemoryRepositoryTests, ConversationInfoTests


class TestInMemoryRepository(ChatMemoryRepositoryTests, ConversationInfoTests):
    supports_atomic_append = True
    supports_retention = True
    conversation_time_tolerance = timedelta(microseconds=1)

    @pytest.fixture
    def repository(self) -> InMemoryChatMemoryRepository:
        return InMemoryChatMemoryRepository()

    @pytest.fixture
    def make_repository_with_retention(
        self,
    ) -> Callable[[Retention], InMemoryChatMemoryRepository]:
        return lambda retention: InMemoryChatMemoryRepository(retention=retention)
