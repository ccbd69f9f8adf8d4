"""An asyncio repository that keeps conversations in this process.

Example:
    import asyncio

    from chatledger import (
        AsyncInMemoryChatMemoryRepository,
        AsyncMessageWindowChatMemory,
        Message,
    )

    async def main():
        memory = AsyncMessageWindowChatMemory(
            AsyncInMemoryChatMemoryRepository(), max_messages=10
        )
        await memory.add("c1", Message.user("Hello"))
        await memory.get("c1")

    asyncio.run(main())

It is the reference implementation of the async contracts, and it is
:class:`chatledger.InMemoryChatMemoryRepository` behind coroutines: the same
store, copies in and out, and a window append that is atomic under one lock.
Nothing here waits on I/O, so each call runs to its end once started, and a
cancelled call either has not started or is complete.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Self

from chatledger.closing import AsyncClosingContext
from chatledger.in_memory import InMemoryChatMemoryRepository
from chatledger.messages import Message
from chatledger.repository import AppendResult, ConversationPage
from chatledger.window import Window

__all__ = ["AsyncInMemoryChatMemoryRepository"]


class AsyncInMemoryChatMemoryRepository(AsyncClosingContext):
    """Conversations in a dict guarded by a lock; nothing survives the process."""

    def __init__(self) -> None:
        """Create an empty repository."""
        self._store = InMemoryChatMemoryRepository()

    def __repr__(self) -> str:
        return repr(self._store).replace("InMemory", "AsyncInMemory", 1)

    @classmethod
    def from_url(cls, url: str = "memory://", **options: object) -> Self:
        """Create an empty repository for a ``memory://`` URL.

        Every call gives a new, empty repository, as
        :meth:`chatledger.InMemoryChatMemoryRepository.from_url` does.

        Raises:
            ValueError: if ``url`` is not a ``memory:`` URL.
            TypeError: if any option is given (there is none).
        """
        InMemoryChatMemoryRepository.from_url(url, **options)
        return cls()

    async def create_schema(self) -> None:
        """Do nothing: there is no schema. Here so every repository has the call."""

    async def drop_schema(self) -> None:
        """Forget every conversation."""
        for conversation_id in self._store.find_conversation_ids():
            self._store.delete_by_conversation_id(conversation_id)

    async def aclose(self) -> None:
        """Do nothing: the repository owns no connection."""

    async def find_conversation_ids(self) -> list[str]:
        """Return the id of every stored conversation."""
        return self._store.find_conversation_ids()

    async def find_by_conversation_id(self, conversation_id: str) -> list[Message]:
        """Return a copy of one conversation, oldest first."""
        return self._store.find_by_conversation_id(conversation_id)

    async def count_messages(self, conversation_id: str) -> int:
        """Return how many messages a conversation holds."""
        return self._store.count_messages(conversation_id)

    async def find_conversation_ids_page(
        self, cursor: str | None = None, limit: int = 100
    ) -> ConversationPage:
        """Return up to ``limit`` conversation ids after ``cursor``, in id order."""
        return self._store.find_conversation_ids_page(cursor, limit)

    async def save_all(self, conversation_id: str, messages: Sequence[Message]) -> None:
        """Replace one conversation; an empty list removes it."""
        self._store.save_all(conversation_id, messages)

    async def delete_by_conversation_id(self, conversation_id: str) -> None:
        """Remove one conversation, if it exists."""
        self._store.delete_by_conversation_id(conversation_id)

    async def append_to_window(
        self, conversation_id: str, messages: Sequence[Message], window: Window
    ) -> AppendResult:
        """Append and trim under the store's lock (``AsyncSupportsWindowAppend``)."""
        return self._store.append_to_window(conversation_id, messages, window)
