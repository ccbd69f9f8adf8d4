"""Conformance tests of time-to-live, for repositories that support it.

A TTL test is about time, and a loaded machine can stall any step for seconds.
Each test therefore measures when its writes and reads happened and judges the
repository only on a run whose timeline proves something: a read is counted as
"before expiry" only if it finished before the earliest moment the conversation
may expire, and as "after expiry" only if it started after the latest one. A
run that a stall made inconclusive is repeated with a TTL four times as long.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from chatledger.messages import Message
from chatledger.testing.async_runner import window_memory
from chatledger.window import MessageWindow

__all__ = ["TTLTests"]

#: TTLs (seconds) of successive attempts: the first is the one a quiet machine
#: uses; the longer ones only run when a stall left an attempt inconclusive.
_EXPIRY_TTLS = (1.5, 6.0, 24.0)
#: The sliding test writes again at half the TTL and reads just after it.
_SLIDING_TTLS = (4.0, 16.0, 64.0)
#: A backend may count a TTL in whole seconds of its own clock (Cassandra), so
#: a conversation may expire up to this much before ``write + ttl``.
_CLOCK_RESOLUTION = 1.0


def _sleep_until(moment: float) -> None:
    """Sleep until ``time.monotonic()`` reaches ``moment``."""
    while (left := moment - time.monotonic()) > 0:
        time.sleep(left)


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
        for attempt, ttl in enumerate(_EXPIRY_TTLS):
            repository = self._ttl_repository(request, timedelta(seconds=ttl))
            memory = window_memory(repository, MessageWindow(10))
            cid = f"ttl-{attempt}"
            started = time.monotonic()
            memory.add(cid, [Message.user("U1"), Message.assistant("A1")])
            written = time.monotonic()
            seen = memory.get(cid)
            if time.monotonic() >= started + ttl - _CLOCK_RESOLUTION:
                continue  # the read may have come after the expiry: try longer
            assert len(seen) == 2
            _sleep_until(written + ttl + self.ttl_grace_seconds)
            assert memory.get(cid) == []
            assert cid not in repository.find_conversation_ids()
            return
        pytest.fail(f"every attempt stalled past its TTL {_EXPIRY_TTLS}")

    def test_ttl_slides_on_every_write(self, request: pytest.FixtureRequest) -> None:
        """Each write refreshes the TTL of the whole conversation, old messages too."""
        for attempt, ttl in enumerate(_SLIDING_TTLS):
            repository = self._ttl_repository(request, timedelta(seconds=ttl))
            memory = window_memory(repository, MessageWindow(10))
            cid = f"slide-{attempt}"
            first_started = time.monotonic()
            memory.add(cid, [Message.user("U1"), Message.assistant("A1")])
            first_written = time.monotonic()
            _sleep_until(first_started + ttl / 2)
            second_started = time.monotonic()
            memory.add(cid, [Message.user("U2")])
            if time.monotonic() >= first_started + ttl - _CLOCK_RESOLUTION:
                continue  # the first write may have expired before the second
            # Read only once the first write's TTL has surely run out.
            _sleep_until(first_written + ttl + 0.1)
            seen = [m.content for m in memory.get(cid)]
            listed = repository.find_conversation_ids()
            if time.monotonic() >= second_started + ttl - _CLOCK_RESOLUTION:
                continue  # the read may have come after the second write expired
            assert seen == ["U1", "A1", "U2"]
            assert cid in listed
            return
        pytest.fail(f"every attempt stalled past its TTL {_SLIDING_TTLS}")
