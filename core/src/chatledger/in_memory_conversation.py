"""One conversation of the in-memory repositories, and how an append plan changes it.

Example:
    from chatledger import Message, MessageWindow
    from chatledger.append_plan import plan_append
    from chatledger.in_memory_conversation import InMemoryConversation

    conversation = InMemoryConversation.of([])
    window = MessageWindow(2)
    fresh = [Message.user("hi")]
    plan = plan_append(conversation.stored_window(window, fresh), fresh, window)
    conversation.apply(plan, window.counter_id)
    conversation.messages   # [the user message]

The sync and the async in-memory repository keep each conversation in one of
these, under their lock; nothing here locks or waits.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from chatledger.append_plan import (
    AppendPlan,
    StoredEntry,
    StoredWindow,
    needs_stored_system,
)
from chatledger.messages import Message, Role
from chatledger.window import Window

__all__ = ["InMemoryConversation"]


@dataclass
class InMemoryConversation:
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
    def of(cls, messages: list[Message]) -> InMemoryConversation:
        """A conversation holding ``messages``, no size measured yet."""
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
        """What :func:`~chatledger.append_plan.plan_append` reads for ``fresh``."""
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
