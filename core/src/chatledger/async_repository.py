"""The storage contracts for asyncio: the repository protocols, every method async.

Example:
    import asyncio

    from chatledger import (
        AsyncChatMemoryRepository,
        AsyncInMemoryChatMemoryRepository,
        Message,
    )

    async def main():
        repository: AsyncChatMemoryRepository = AsyncInMemoryChatMemoryRepository()
        await repository.save_all("c1", [Message.user("hi")])
        await repository.find_by_conversation_id("c1")

    asyncio.run(main())

Each protocol here is the twin of one in :mod:`chatledger.repository`: the same
method names, arguments, results and contract, as coroutines. Where a
contract is written out (validation before any I/O, replace semantics, the
atomic window append), the sync protocol's docstring is the one that counts.

``isinstance`` checks of these protocols look at method names only, as for
every runtime-checkable protocol; :func:`is_async_repository` also checks that
the methods are coroutine functions.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from chatledger.messages import Message
from chatledger.repository import AppendResult, ConversationPage
from chatledger.window import Window

__all__ = [
    "AsyncChatMemoryRepository",
    "AsyncSupportsConversationPages",
    "AsyncSupportsCountMessages",
    "AsyncSupportsWindowAppend",
    "is_async_repository",
]

_OPERATIONS = (
    "find_conversation_ids",
    "find_by_conversation_id",
    "save_all",
    "delete_by_conversation_id",
)


@runtime_checkable
class AsyncChatMemoryRepository(Protocol):
    """Spring AI's four repository operations, as coroutines.

    The contract is :class:`chatledger.ChatMemoryRepository`'s: every method
    validates its input before any I/O, and a bad input raises and changes
    nothing.
    """

    async def find_conversation_ids(self) -> list[str]:
        """Return the id of every stored conversation, in no particular order."""
        ...

    async def find_by_conversation_id(self, conversation_id: str) -> list[Message]:
        """Return the messages of one conversation, oldest first (``[]`` if none)."""
        ...

    async def save_all(self, conversation_id: str, messages: Sequence[Message]) -> None:
        """Replace the whole conversation with ``messages``, atomically.

        ``save_all(id, [])`` removes the conversation.
        """
        ...

    async def delete_by_conversation_id(self, conversation_id: str) -> None:
        """Remove a conversation; removing an unknown id does nothing."""
        ...


@runtime_checkable
class AsyncSupportsWindowAppend(Protocol):
    """Optional capability: add messages and trim the window in one atomic step.

    The contract is :class:`chatledger.SupportsWindowAppend`'s. A cancelled
    call leaves the conversation as it was before or as it is after the
    append, never in between.
    """

    async def append_to_window(
        self, conversation_id: str, messages: Sequence[Message], window: Window
    ) -> AppendResult:
        """Append ``messages`` and evict by ``window`` in one atomic step."""
        ...


@runtime_checkable
class AsyncSupportsCountMessages(Protocol):
    """Optional capability: count a conversation's messages without loading them."""

    async def count_messages(self, conversation_id: str) -> int:
        """Return how many messages the conversation holds (0 if none)."""
        ...


@runtime_checkable
class AsyncSupportsConversationPages(Protocol):
    """Optional capability: list conversation ids a page at a time.

    The contract is :class:`chatledger.SupportsConversationPages`'s.
    """

    async def find_conversation_ids_page(
        self, cursor: str | None = None, limit: int = 100
    ) -> ConversationPage:
        """Return up to ``limit`` ids after ``cursor`` (from the start if ``None``)."""
        ...


def is_async_repository(repository: object) -> bool:
    """True when ``repository`` has the four operations, each a coroutine function.

    A sync repository has the same method names, so ``isinstance`` alone
    cannot tell the two apart; an async memory refuses a sync repository with
    this check before any I/O.
    """
    return all(
        inspect.iscoroutinefunction(getattr(repository, name, None))
        for name in _OPERATIONS
    )
