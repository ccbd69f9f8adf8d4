"""The conformance suite on the async in-memory repository."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest

from chatledger import AsyncInMemoryChatMemoryRepository
from chatledger.retention import Retention
from chatledger.testing import AsyncChatMemoryRepositoryTests, ConversationInfoTests


class TestAsyncInMemoryRepository(
    AsyncChatMemoryRepositoryTests, ConversationInfoTests
):
    supports_atomic_append = True
    supports_retention = True
    conversation_time_tolerance = timedelta(microseconds=1)

    @pytest.fixture
    def async_repository(self) -> AsyncInMemoryChatMemoryRepository:
        return AsyncInMemoryChatMemoryRepository()

    @pytest.fixture
    def make_async_repository_with_retention(
        self,
    ) -> Callable[[Retention], AsyncInMemoryChatMemoryRepository]:
        return lambda retention: AsyncInMemoryChatMemoryRepository(retention=retention)
