"""One lock per conversation, so the writers of one process take turns.

Example:
    from chatledger_cassandra.locks import ConversationLocks

    locks = ConversationLocks()
    with locks.hold("c1"):
        ...  # read, plan and commit one write of conversation c1

Every write of a conversation is a lightweight transaction that loses when
another writer changed the conversation since it was read; the loser reads
again and retries. Writers in different processes (or on different hosts) can
only meet that way, but writers that share one repository need not: racing
each other would cost a Paxos round and a read per lost race, and under heavy
contention most rounds are lost. Taking turns on a local lock first leaves the
lightweight transaction to settle only the races between processes.

A lock exists only while some thread holds or waits for it, so the table of
locks never grows with the number of conversations ever written.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["ConversationLocks"]


class ConversationLocks:
    """Per-conversation mutual exclusion between the threads of one process."""

    def __init__(self) -> None:
        """Start with no lock."""
        self._guard = threading.Lock()
        # conversation id -> (its lock, how many threads hold or wait for it)
        self._locks: dict[str, tuple[threading.Lock, int]] = {}

    @contextmanager
    def hold(self, conversation_id: str) -> Iterator[None]:
        """Hold the lock of ``conversation_id`` for the ``with`` block."""
        with self._guard:
            lock, users = self._locks.get(conversation_id, (threading.Lock(), 0))
            self._locks[conversation_id] = (lock, users + 1)
        try:
            with lock:
                yield
        finally:
            with self._guard:
                lock, users = self._locks[conversation_id]
                if users == 1:
                    del self._locks[conversation_id]
                else:
                    self._locks[conversation_id] = (lock, users - 1)

    def __len__(self) -> int:
        """How many conversations have a thread holding or waiting for their lock."""
        with self._guard:
            return len(self._locks)
