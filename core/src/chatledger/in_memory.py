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
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Self

from chatledger.messages import Message, Role
from chatledger.repository import AppendResult
from chatledger.validation import (
    stamp_messages,
    validate_conversation_id,
    validate_messages,
)
from chatledger.window import Window, apply_window, count_evictions, merge_system

__all__ = ["InMemoryChatMemoryRepository"]


@dataclass
class _Conversation:
    """One stored conversation, with what an append needs without a full scan."""

    messages: list[Message]
    ids: set[str]
    system: int

    @classmethod
    def of(cls, messages: list[Message]) -> _Conversation:
        return cls(
            messages,
            {m.id for m in messages},
            sum(1 for m in messages if m.role is Role.SYSTEM),
        )


def _non_system(messages: Sequence[Message]) -> Iterator[tuple[Role, int]]:
    return ((m.role, 1) for m in messages if m.role is not Role.SYSTEM)


class InMemoryChatMemoryRepository:
    """Conversations in a dict guarded by a lock; nothing survives the process."""

    def __init__(self) -> None:
        """Create an empty repository."""
        self._lock = threading.Lock()
        self._conversations: dict[str, _Conversation] = {}

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
            stored = self._conversations.get(conversation_id)
            return [] if stored is None else list(stored.messages)

    def save_all(self, conversation_id: str, messages: Sequence[Message]) -> None:
        """Replace one conversation; an empty list removes it."""
        validate_conversation_id(conversation_id)
        batch = stamp_messages(validate_messages(messages))
        with self._lock:
            if batch:
                self._conversations[conversation_id] = _Conversation.of(batch)
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
        """Append and trim under the repository lock (see ``SupportsWindowAppend``).

        With a message window the cost grows with the new, evicted and system
        messages, not with the history; a token window re-measures the history.
        """
        validate_conversation_id(conversation_id)
        batch = validate_messages(messages)
        if not batch:
            return AppendResult()
        with self._lock:
            stored = self._conversations.get(conversation_id)
            if stored is None:
                stored = _Conversation([], set(), 0)
            fresh = stamp_messages(m for m in batch if m.id not in stored.ids)
            if not fresh:
                return AppendResult()
            if window.counter_id is None:
                result = self._append_counted(stored, fresh, window.limit)
            else:
                update = apply_window(stored.messages, fresh, window)
                stored = _Conversation.of(update.messages)
                result = AppendResult(update.appended, [m.id for m in update.evicted])
            if stored.messages:
                self._conversations[conversation_id] = stored
            else:
                self._conversations.pop(conversation_id, None)
            return result

    @staticmethod
    def _append_counted(
        stored: _Conversation, fresh: list[Message], limit: int
    ) -> AppendResult:
        """The window append when every message counts as one, in place."""
        evicted: list[Message] = []
        new = fresh
        if any(m.role is Role.SYSTEM for m in fresh):
            system = [m for m in stored.messages if m.role is Role.SYSTEM]
            merge = merge_system(system, fresh)
            new = merge.new
            if merge.replace_stored:
                evicted.extend(system)
                stored.messages = [
                    m for m in stored.messages if m.role is not Role.SYSTEM
                ]
                stored.system = 0
        history = stored.messages
        history.extend(new)
        stored.system += sum(1 for m in new if m.role is Role.SYSTEM)
        total = len(history) - stored.system
        cut = count_evictions(limit, stored.system, total, _non_system(history))
        if cut:
            kept_system: list[Message] = []
            dropped = end = 0
            for end, message in enumerate(history, 1):  # noqa: B007 - used below
                if message.role is Role.SYSTEM:
                    kept_system.append(message)
                    continue
                evicted.append(message)
                dropped += 1
                if dropped == cut:
                    break
            stored.messages = kept_system + history[end:]
        stored.ids.difference_update(m.id for m in evicted)
        stored.ids.update(m.id for m in new)
        return AppendResult(new, [m.id for m in evicted])
