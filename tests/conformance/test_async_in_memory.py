"""The conformance suite on the async in-memory repository."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from chatledger import AsyncInMemoryChatMemoryRepository
from chatledger.retention import Retention
from chatledger.testing import AsyncChatMemoryRepositoryTests


class TestAsyncInMemoryRepository(AsyncChatMemoryRepositoryTests):
    supports_atomic_append = True
    supports_retention = True

    @pytest.fixture
    def async_repository(self) -> AsyncInMemoryChatMemoryRepository:
        return AsyncInMemoryChatMemoryRepository()

    @pytest.fixture
    def make_async_repository_with_retention(
        self,
    ) -> Callable[[Retention], AsyncInMemoryChatMemoryRepository]:
        return lambda retention: AsyncInMemoryChatMemoryRepository(retention=retention)
