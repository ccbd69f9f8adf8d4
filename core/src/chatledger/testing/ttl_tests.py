"""Conformance tests of time-to-live, for repositories that support it."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from chatledger.memory import MessageWindowChatMemory
from chatledger.messages import Message

__all__ = ["TTLTests"]


class TTLTests:
    """A conversation expires whole, ``ttl`` after its last write (sliding)."""

    #: Set to True when the repository accepts a ``ttl``.
    supports_ttl: bool = False
    #: How long after the TTL the backend may take to hide an expired conversation.
    ttl_grace_seconds: float = 1.5

    @pytest.fixture
    def make_repository_with_ttl(self) -> Callable[[timedelta], Any]:
        """Return a factory of empty repositories with a TTL; override if supported."""
        raise NotImplementedError(
            "Override `make_repository_with_ttl` when supports_ttl"
        )

    def _ttl_repository(self, request: pytest.FixtureRequest, ttl: timedelta) -> Any:
        if not self.supports_ttl:
            pytest.skip("the repository has no TTL")
        factory = request.getfixturevalue("make_repository_with_ttl")
        return factory(ttl)

    def test_conversation_expires_whole(self, request: pytest.FixtureRequest) -> None:
        """After the TTL the conversation reads empty and leaves the listing."""
        repository = self._ttl_repository(request, timedelta(seconds=1))
        memory = MessageWindowChatMemory(repository, max_messages=10)
        memory.add("ttl", [Message.user("U1"), Message.assistant("A1")])
        assert len(memory.get("ttl")) == 2
        time.sleep(1 + self.ttl_grace_seconds)
        assert memory.get("ttl") == []
        assert "ttl" not in repository.find_conversation_ids()

    def test_ttl_slides_on_every_write(self, request: pytest.FixtureRequest) -> None:
        """Each write refreshes the TTL of the whole conversation, old messages too."""
        repository = self._ttl_repository(request, timedelta(seconds=3))
        memory = MessageWindowChatMemory(repository, max_messages=10)
        memory.add("slide", [Message.user("U1"), Message.assistant("A1")])
        time.sleep(2)
        memory.add("slide", [Message.user("U2")])
        time.sleep(2)
        assert [m.content for m in memory.get("slide")] == ["U1", "A1", "U2"]
        assert "slide" in repository.find_conversation_ids()
