"""One lock per conversation, so the writers of one process take turns.

Example:
    from chatledger_cassandra.locks import AsyncConversationLocks, ConversationLocks

    locks = ConversationLocks()
    with locks.hold("c1"):
        ...  # read, plan and commit one write of conversation c1

    async def write() -> None:
        async with AsyncConversationLocks().hold("c1"):
            ...  # the same, between the tasks of one event loop

Every write of a conversation is a lightweight transaction that loses when
another writer changed the conversation since it was read; the loser reads
again and retries. Writers in different processes (or on different hosts) can
only meet that way, but writers that share one repository need not: racing
each other would cost a Paxos round and a read per lost race, and under heavy
contention most rounds are lost. Taking turns on a local lock first leaves the
lightweight transaction to settle only the races between processes.

:class:`ConversationLocks` serves threads, :class:`AsyncConversationLocks` the
tasks of one event loop. A lock exists only while someone holds or waits for
it, so the table of locks never grows with the number of conversations ever
written.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Generic, TypeVar

__all__ = ["AsyncConversationLocks", "ConversationLocks"]

L = TypeVar("L", threading.Lock, asyncio.Lock)


class _LockTable(Generic[L]):
    """The locks of the conversations someone holds or waits for, counted."""

    def __init__(self, make: Callable[[], L]) -> None:
        self._make: Callable[[], L] = make
        self._guard = threading.Lock()
        # conversation id -> (its lock, how many hold or wait for it)
        self._locks: dict[str, tuple[L, int]] = {}

    def enter(self, conversation_id: str) -> L:
        """Count one more user of the conversation's lock and return it."""
        with self._guard:
            entry = self._locks.get(conversation_id)
            lock, users = (self._make(), 0) if entry is None else entry
            self._locks[conversation_id] = (lock, users + 1)
        return lock

    def leave(self, conversation_id: str) -> None:
        """Count one user less; the last one removes the lock."""
        with self._guard:
            lock, users = self._locks[conversation_id]
            if users == 1:
                del self._locks[conversation_id]
            else:
                self._locks[conversation_id] = (lock, users - 1)

    def __len__(self) -> int:
        """How many conversations have someone holding or waiting for their lock."""
        with self._guard:
            return len(self._locks)


class ConversationLocks(_LockTable[threading.Lock]):
    """Per-conversation mutual exclusion between the threads of one process."""

    def __init__(self) -> None:
        """Start with no lock."""
        super().__init__(threading.Lock)

    @contextmanager
    def hold(self, conversation_id: str) -> Iterator[None]:
        """Hold the lock of ``conversation_id`` for the ``with`` block."""
        lock = self.enter(conversation_id)
        try:
            with lock:
                yield
        finally:
            self.leave(conversation_id)


class AsyncConversationLocks(_LockTable[asyncio.Lock]):
    """Per-conversation mutual exclusion between the tasks of one event loop."""

    def __init__(self) -> None:
        """Start with no lock."""
        super().__init__(asyncio.Lock)

    @asynccontextmanager
    async def hold(self, conversation_id: str) -> AsyncIterator[None]:
        """Hold the lock of ``conversation_id`` for the ``async with`` block.

        A task cancelled while it waits leaves the lock to the others.
        """
        lock = self.enter(conversation_id)
        try:
            async with lock:
                yield
        finally:
            self.leave(conversation_id)
