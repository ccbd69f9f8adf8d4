"""A thread-safe repository that keeps conversations in this process.

Example:
    from chatledger import InMemoryChatMemoryRepository, MessageWindowChatMemory

    memory = MessageWindowChatMemory(InMemoryChatMemoryRepository(), max_messages=10)

It is the reference implementation of the contracts: it copies in and out (a
list you pass or get back can be changed without touching what is stored) and
its window append is atomic under one lock.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Self

from chatledger.append_plan import (
    AppendPlan,
    StoredEntry,
    StoredWindow,
    needs_stored_system,
    plan_append,
)
from chatledger.evicted_ids import EvictedIds
from chatledger.messages import Message, Role
from chatledger.repository import AppendResult, ConversationPage
from chatledger.validation import (
    stamp_messages,
    validate_conversation_id,
    validate_messages,
    validate_page_request,
)
from chatledger.window import Window

__all__ = ["InMemoryChatMemoryRepository"]


@dataclass
class _Conversation:
    """One stored conversation, with what an append needs without a full scan.

    ``sizes`` holds each message's size under the counter named ``counter``
    (a token window's ``counter_id``); a message window needs none.
    """

    messages: list[Message]
    ids: set[str]
    system: int
    counter: str | None = None
    sizes: dict[str, int] = field(default_factory=dict)
    system_size: int = 0
    size_total: int = 0

    @classmethod
    def of(cls, messages: list[Message]) -> _Conversation:
        return cls(
            messages,
            {m.id for m in messages},
            sum(1 for m in messages if m.role is Role.SYSTEM),
        )

    def measured(self, window: Window) -> Callable[[Message], int]:
        """Return a stored message's size; a new counter measures the history once."""
        counter = window.counter_id
        if counter is None:
            return _one
        if counter != self.counter:
            self.sizes = {m.id: window.measure(m) for m in self.messages}
            self.system_size = sum(
                self.sizes[m.id] for m in self.messages if m.role is Role.SYSTEM
            )
            self.size_total = sum(self.sizes.values()) - self.system_size
            self.counter = counter
        return lambda message: self.sizes[message.id]

    def stored_window(self, window: Window, fresh: list[Message]) -> StoredWindow:
        size = self.measured(window)
        counted = window.counter_id is None
        count = len(self.messages) - self.system

        def read_oldest(expected: int) -> Iterator[StoredEntry]:
            for message in self.messages:
                if message.role is not Role.SYSTEM:
                    yield StoredEntry(message.id, message.role, size(message))

        return StoredWindow(
            system_count=self.system,
            system_size=self.system if counted else self.system_size,
            count=count,
            total=count if counted else self.size_total,
            read_oldest=read_oldest,
            system=[m for m in self.messages if m.role is Role.SYSTEM]
            if needs_stored_system(fresh)
            else None,
        )

    def apply(self, plan: AppendPlan, counter: str | None) -> None:
        """Write a plan made under ``counter``: drop what it deletes, add the rest."""
        if plan.replace_system:
            self.messages = [m for m in self.messages if m.role is not Role.SYSTEM]
        if plan.evicted:
            # The evicted are the oldest non-system messages: walk to the last
            # of them, keeping the system messages met on the way.
            kept: list[Message] = []
            left = len(plan.evicted)
            end = 0
            while left:
                message = self.messages[end]
                end += 1
                if message.role is Role.SYSTEM:
                    kept.append(message)
                else:
                    left -= 1
            self.messages = kept + self.messages[end:]
        self.messages.extend(plan.insert)
        self.ids.difference_update(plan.delete_ids)
        self.ids.update(m.id for m in plan.insert)
        self.system = plan.system_count
        if counter is None:
            # Sizes of another counter would miss these messages: drop them.
            self.counter = None
            self.sizes = {}
        else:
            for message_id in plan.delete_ids:
                self.sizes.pop(message_id, None)
            self.sizes.update(
                (m.id, size)
                for m, size in zip(plan.insert, plan.insert_sizes, strict=True)
            )
            self.system_size = plan.system_size
            self.size_total = plan.size_total


def _one(message: Message) -> int:
    return 1


class InMemoryChatMemoryRepository:
    """Conversations in a dict guarded by a lock; nothing survives the process."""

    def __init__(self) -> None:
        """Create an empty repository."""
        self._lock = threading.Lock()
        self._conversations: dict[str, _Conversation] = {}
        # Kept apart from the messages: a window may empty a conversation
        # (it is then not listed) while its evicted ids must still count.
        self._evicted: dict[str, EvictedIds] = {}

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

    def count_messages(self, conversation_id: str) -> int:
        """Return how many messages a conversation holds."""
        validate_conversation_id(conversation_id)
        with self._lock:
            stored = self._conversations.get(conversation_id)
            return 0 if stored is None else len(stored.messages)

    def find_conversation_ids_page(
        self, cursor: str | None = None, limit: int = 100
    ) -> ConversationPage:
        """Return up to ``limit`` conversation ids after ``cursor``, in id order."""
        after, limit = validate_page_request(cursor, limit)
        with self._lock:
            ids = sorted(self._conversations)
        start = 0 if after is None else bisect.bisect_right(ids, after)
        page = ids[start : start + limit]
        more = start + limit < len(ids)
        return ConversationPage(page, page[-1] if more else None)

    def save_all(self, conversation_id: str, messages: Sequence[Message]) -> None:
        """Replace one conversation; an empty list removes it."""
        validate_conversation_id(conversation_id)
        batch = stamp_messages(validate_messages(messages))
        with self._lock:
            self._evicted.pop(conversation_id, None)
            if batch:
                self._conversations[conversation_id] = _Conversation.of(batch)
            else:
                self._conversations.pop(conversation_id, None)

    def delete_by_conversation_id(self, conversation_id: str) -> None:
        """Remove one conversation, if it exists."""
        validate_conversation_id(conversation_id)
        with self._lock:
            self._conversations.pop(conversation_id, None)
            self._evicted.pop(conversation_id, None)

    def append_to_window(
        self, conversation_id: str, messages: Sequence[Message], window: Window
    ) -> AppendResult:
        """Append and trim under the repository lock (see ``SupportsWindowAppend``).

        The cost grows with the new and evicted messages, not with the
        history; a token window measures each message once (the history again
        only when another counter measured it).
        """
        validate_conversation_id(conversation_id)
        batch = validate_messages(messages)
        if not batch:
            return AppendResult()
        with self._lock:
            stored = self._conversations.get(conversation_id)
            if stored is None:
                stored = _Conversation([], set(), 0)
            evicted = self._evicted.get(conversation_id, ())
            fresh = stamp_messages(
                m for m in batch if m.id not in stored.ids and m.id not in evicted
            )
            if not fresh:
                return AppendResult()
            plan = plan_append(stored.stored_window(window, fresh), fresh, window)
            stored.apply(plan, window.counter_id)
            if plan.evicted_ids:
                self._evicted.setdefault(conversation_id, EvictedIds()).add(
                    plan.evicted_ids
                )
            if plan.empty:
                self._conversations.pop(conversation_id, None)
            else:
                self._conversations[conversation_id] = stored
            return AppendResult(plan.appended, plan.evicted_ids)
