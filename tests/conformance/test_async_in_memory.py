"""The conformance suite on the async in-memory repository."""

from __future__ import annotations

import pytest

from chatledger import AsyncInMemoryChatMemoryRepository
from chatledger.testing import AsyncChatMemoryRepositoryTests


class TestAsyncInMemoryRepository(AsyncChatMemoryRepositoryTests):
    supports_atomic_append = True

    @pytest.fixture
    def async_repository(self) -> AsyncInMemoryChatMemoryRepository:
        return AsyncInMemoryChatMemoryRepository()
