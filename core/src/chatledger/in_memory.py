"""A thread-safe repository that keeps conversations in this process.

Example:
    from chatledger import InMemoryChatMemoryRepository, MessageWindowChatMemory

    memory = MessageWindowChatMemory(InMemoryChatMemoryRepository(), max_messages=10)

It is the reference implementation of the contracts: it copies in and out (a
list you pass or get back can be changed without touching what is stored) and
its window append is atomic under one lock.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Self

from chatledger.messages import Message
from chatledger.repository import AppendResult
from chatledger.validation import (
    stamp_messages,
    validate_conversation_id,
    validate_messages,
)
from chatledger.window import Window, apply_window

__all__ = ["InMemoryChatMemoryRepository"]


class InMemoryChatMemoryRepository:
    """Conversations in a dict guarded by a lock; nothing survives the process."""

    def __init__(self) -> None:
        """Create an empty repository."""
        self._lock = threading.Lock()
        self._conversations: dict[str, list[Message]] = {}

    def __repr__(self) -> str:
        return f"InMemoryChatMemoryRepository(conversations={len(self._conversations)})"

    @classmethod
    def from_url(cls, url: str = "memory://", **options: object) -> Self:
        """Create an empty repository for a ``memory://`` URL.

        Every call gives a new, empty repository: nothing is shared between two
        ``connect("memory://")`` calls, nor kept after the process ends.

        Raises:
            ValueError: if ``url`` is not a ``memory:`` URL.
            TypeError: if any option is given (there is none).
        """
        scheme, _, _ = url.partition(":")
        if scheme.lower() != "memory":
            raise ValueError("InMemoryChatMemoryRepository takes a memory:// URL")
        if options:
            raise TypeError(
                "InMemoryChatMemoryRepository takes no options, got "
                + ", ".join(sorted(options))
            )
        return cls()

    def find_conversation_ids(self) -> list[str]:
        """Return the id of every stored conversation."""
        with self._lock:
            return list(self._conversations)

    def find_by_conversation_id(self, conversation_id: str) -> list[Message]:
        """Return a copy of one conversation, oldest first."""
        validate_conversation_id(conversation_id)
        with self._lock:
            return list(self._conversations.get(conversation_id, ()))

    def save_all(self, conversation_id: str, messages: Sequence[Message]) -> None:
        """Replace one conversation; an empty list removes it."""
        validate_conversation_id(conversation_id)
        batch = stamp_messages(validate_messages(messages))
        with self._lock:
            if batch:
                self._conversations[conversation_id] = batch
            else:
                self._conversations.pop(conversation_id, None)

    def delete_by_conversation_id(self, conversation_id: str) -> None:
        """Remove one conversation, if it exists."""
        validate_conversation_id(conversation_id)
        with self._lock:
            self._conversations.pop(conversation_id, None)

    def append_to_window(
        self, conversation_id: str, messages: Sequence[Message], window: Window
    ) -> AppendResult:
        """Append and trim under the repository lock (see ``SupportsWindowAppend``)."""
        validate_conversation_id(conversation_id)
        batch = validate_messages(messages)
        if not batch:
            return AppendResult()
        with self._lock:
            stored = self._conversations.get(conversation_id, [])
            known = {m.id for m in stored}
            fresh = stamp_messages(m for m in batch if m.id not in known)
            if not fresh:
                return AppendResult()
            update = apply_window(stored, fresh, window)
            if update.messages:
                self._conversations[conversation_id] = update.messages
            else:
                self._conversations.pop(conversation_id, None)
            return AppendResult(update.appended, [m.id for m in update.evicted])
