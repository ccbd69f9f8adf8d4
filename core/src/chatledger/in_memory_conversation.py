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
these, under their lock, and its record (owner, metadata, times) in an
:class:`InMemoryRecord`; nothing here locks or waits.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from chatledger.append_plan import (
    AppendPlan,
    StoredEntry,
    StoredWindow,
    needs_stored_system,
)
from chatledger.conversation_info import ConversationInfo
from chatledger.message_pages import message_page
from chatledger.messages import JsonValue, Message, Role
from chatledger.results import MessagePage
from chatledger.retention import Retention
from chatledger.window import Window, merge_system
from chatledger.window_view import LogRow, TailView, current_system

__all__ = ["InMemoryConversation", "InMemoryRecord"]


@dataclass
class InMemoryConversation:
    """One stored conversation, with what an append needs without a full scan.

    ``sizes`` holds each message's size under the counter named ``counter``
    (a token window's ``counter_id``); a message window needs none. Beside
    each message, ``sequences`` holds its place in the log and ``batches``
    the place of the first message of the append that stored it.
    """

    messages: list[Message]
    ids: set[str]
    system: int
    counter: str | None = None
    sizes: dict[str, int] = field(default_factory=dict)
    system_size: int = 0
    size_total: int = 0
    sequences: list[int] = field(default_factory=list)
    batches: list[int] = field(default_factory=list)
    last_sequence: int = 0

    @classmethod
    def of(cls, messages: list[Message]) -> InMemoryConversation:
        """A conversation holding ``messages`` as one batch, no size measured yet."""
        conversation = cls([], set(), 0)
        conversation.system = sum(1 for m in messages if m.role is Role.SYSTEM)
        conversation._extend(list(messages))
        return conversation

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
        drop_system = plan.replace_system
        left = len(plan.evicted)
        # The evicted are the oldest non-system messages.
        keep = []
        for index, message in enumerate(self.messages):
            if message.role is Role.SYSTEM:
                if not drop_system:
                    keep.append(index)
            elif left:
                left -= 1
            else:
                keep.append(index)
        if len(keep) != len(self.messages):
            self.messages = [self.messages[i] for i in keep]
            self.sequences = [self.sequences[i] for i in keep]
            self.batches = [self.batches[i] for i in keep]
        self._extend(plan.insert)
        self.ids.difference_update(plan.delete_ids)
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

    def _extend(self, fresh: list[Message]) -> None:
        """Add ``fresh`` after the last message, as one batch."""
        batch = self.last_sequence + 1
        self.messages.extend(fresh)
        self.sequences.extend(range(batch, batch + len(fresh)))
        self.batches.extend([batch] * len(fresh))
        self.last_sequence += len(fresh)
        self.ids.update(m.id for m in fresh)

    def append_to_log(
        self, fresh: list[Message], window: Window | None
    ) -> list[Message]:
        """Append ``fresh`` as one batch, skipping redundant system messages.

        Returns the messages appended. Sizes stay stored only while every
        message has one under the same counter.
        """
        appended = merge_system(self.shown_system(), fresh).new
        if not appended:
            return appended
        if window is not None and window.counter_id is not None:
            self.measured(window)  # a new counter measures the history once
            for message in appended:
                size = self.sizes[message.id] = window.measure(message)
                if message.role is Role.SYSTEM:
                    self.system_size += size
                else:
                    self.size_total += size
        else:
            self.counter = None
            self.sizes = {}
        self.system += sum(1 for m in appended if m.role is Role.SYSTEM)
        self._extend(appended)
        return appended

    def _system_rows(self, size: Callable[[Message], int]) -> list[LogRow]:
        return current_system(
            (batch, LogRow(sequence, message, size(message)))
            for sequence, batch, message in zip(
                self.sequences, self.batches, self.messages, strict=True
            )
            if message.role is Role.SYSTEM
        )

    def shown_system(self) -> list[Message]:
        """The system messages a view shows (rule 1), oldest first."""
        return [row.message for row in self._system_rows(_one)]

    def view(self, window: Window) -> list[Message]:
        """The view of ``window`` on the log, read from the newest row back."""
        return self._tail_view(window).messages()

    def _tail_view(self, window: Window) -> TailView:
        size = self.measured(window)
        view = TailView(window, self._system_rows(size))
        view.feed(
            LogRow(self.sequences[i], self.messages[i], size(self.messages[i]))
            for i in range(len(self.messages) - 1, -1, -1)
        )
        return view

    def trim(self, retention: Retention, window: Window | None) -> list[str]:
        """Trim the log as ``retention`` keeps it; return the ids trimmed.

        Call it after an append it made due (:meth:`Retention.trim_due`).
        """
        last = self.last_sequence
        shown_from = None if window is None else self._tail_view(window).shown_from()
        lowest = retention.first_kept(last)
        user_from = next(
            (
                sequence
                for sequence, message in zip(self.sequences, self.messages, strict=True)
                if sequence >= lowest and message.role is Role.USER
            ),
            None,
        )
        cutoff = retention.cutoff(last, user_from=user_from, shown_from=shown_from)
        system = {row.sequence for row in self._system_rows(_one)}
        numbers = self.sequences
        trimmed = self.remove(
            lambda index, _: numbers[index] < cutoff and numbers[index] not in system
        )
        return [m.id for m in trimmed]

    def remove(self, doomed: Callable[[int, Message], bool]) -> list[Message]:
        """Remove the messages ``doomed(index, message)`` picks; return them.

        Their ids are forgotten and their numbers not reused.
        """
        kept = [i for i, message in enumerate(self.messages) if not doomed(i, message)]
        if len(kept) == len(self.messages):
            return []
        chosen = set(kept)
        removed = [m for i, m in enumerate(self.messages) if i not in chosen]
        self.messages = [self.messages[i] for i in kept]
        self.sequences = [self.sequences[i] for i in kept]
        self.batches = [self.batches[i] for i in kept]
        for message in removed:
            self.ids.discard(message.id)
            size = self.sizes.pop(message.id, 0)
            if message.role is Role.SYSTEM:
                self.system -= 1
                self.system_size -= size
            else:
                self.size_total -= size
        return removed

    def page(self, after: int | None, limit: int, newest_first: bool) -> MessagePage:
        """One page of the log after the sequence ``after``, in either order."""
        rows = zip(self.sequences, self.messages, strict=True)
        if newest_first:
            start = (
                len(self.sequences)
                if after is None
                else bisect.bisect_left(self.sequences, after)
            )
            chosen = reversed(list(rows)[max(0, start - limit - 1) : start])
        else:
            start = 0 if after is None else bisect.bisect_right(self.sequences, after)
            chosen = iter(list(rows)[start : start + limit + 1])
        return message_page(chosen, limit, newest_first=newest_first)


@dataclass
class InMemoryRecord:
    """The record of one conversation: whose it is, what about, when it moved.

    It lives beside the messages, from the first write to the conversation
    until it is deleted: a conversation whose messages are all gone keeps it.
    ``metadata`` is read-only already (checked by
    :func:`chatledger.conversation_info.check_conversation_info`).
    """

    id: str
    created_at: datetime
    updated_at: datetime
    owner: str | None = None
    metadata: Mapping[str, JsonValue] = field(default_factory=dict)

    def info(self, message_count: int) -> ConversationInfo:
        """The record as the repository returns it."""
        return ConversationInfo(
            self.id,
            self.created_at,
            self.updated_at,
            message_count,
            self.owner,
            self.metadata,
        )


def _one(message: Message) -> int:
    return 1
