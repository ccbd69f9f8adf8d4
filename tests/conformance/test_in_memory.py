"""The conformance suite on the in-memory repository."""

from __future__ import annotations

import pytest

from chatledger import InMemoryChatMemoryRepository
from chatledger.testing import ChatMemoryRepositoryTests


class TestInMemoryRepository(ChatMemoryRepositoryTests):
    supports_atomic_append = True

    @pytest.fixture
    def repository(self) -> InMemoryChatMemoryRepository:
        return InMemoryChatMemoryRepository()
