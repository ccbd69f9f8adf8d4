# sync twin: in_memory.py
"""A repository that keeps conversations in this process, safe across threads.

Example:
    from chatledger import (
        AsyncInMemoryChatMemoryRepository,
        AsyncMessageWindowChatMemory,
        Message,
    )

    memory = AsyncMessageWindowChatMemory(
        AsyncInMemoryChatMemoryRepository(), max_messages=10
    )
    await memory.add("c1", Message.user("Hello"))
    await memory.get("c1")

It is the reference implementation of the contracts: it copies in and out (a
list you pass or get back can be changed without touching what is stored) and
its window append is atomic under one lock. Nothing here waits on I/O, so
each call runs to its end once started: an async call that is cancelled
either has not started or is complete.
"""

from __future__ import annotations

import bisect
import heapq
import threading
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Literal, Self

from chatledger.append_plan import plan_append
from chatledger.closing import AsyncClosingContext
from chatledger.conversation_info import (
    DEFAULT_CONVERSATION_PAGE_SIZE,
    UNSET,
    ConversationInfo,
    ConversationInfoPage,
    Unset,
    check_conversation_info,
    check_find_conversations,
    listing_key,
)
from chatledger.evicted_ids import EvictedIds
from chatledger.in_memory_conversation import InMemoryConversation, InMemoryRecord
from chatledger.message_pages import DEFAULT_MESSAGE_PAGE_SIZE, check_message_page
from chatledger.messages import JsonValue, Message
from chatledger.results import AppendResult, ConversationPage, MessagePage
from chatledger.retention import Retention, to_retention
from chatledger.validation import (
    stamp_messages,
    utc_now,
    validate_conversation_id,
    validate_message_ids,
    validate_messages,
    validate_page_request,
    validate_removal_count,
)
from chatledger.window import Window

__all__ = ["AsyncInMemoryChatMemoryRepository"]


class AsyncInMemoryChatMemoryRepository(AsyncClosingContext):
    """Conversations in a dict guarded by a lock; nothing survives the process."""

    def __init__(self, *, retention: Retention | int | None = None) -> None:
        """Create an empty repository.

        Args:
            retention: What each conversation's log keeps:
                ``Retention.everything()`` (the default) or
                ``Retention.last(n)`` (``n`` for short); see
                :mod:`chatledger.retention`.

        Raises:
            InvalidRetentionError: ``retention`` is neither.
        """
        self.retention = to_retention(retention)
        # A thread lock, never held across an await: one repository may serve
        # several threads, each with its own event loop.
        self._lock = threading.Lock()
        self._conversations: dict[str, InMemoryConversation] = {}
        # Records outlive their messages: a conversation emptied by removals,
        # or given a title before its first message, is still listed.
        self._records: dict[str, InMemoryRecord] = {}
        # Kept apart from the messages: a window may empty a conversation
        # (it is then not listed) while its evicted ids must still count.
        self._evicted: dict[str, EvictedIds] = {}

    def __repr__(self) -> str:
        bound = "" if not self.retention.bounded else f", retention={self.retention!r}"
        return f"{type(self).__name__}(conversations={len(self._conversations)}{bound})"

    @classmethod
    def from_url(cls, url: str = "memory://", **options: object) -> Self:
        """Create an empty repository for a ``memory://`` URL.

        Every call gives a new, empty repository: nothing is shared between two
        ``connect_async("memory://")`` calls, nor kept after the process ends.

        Raises:
            ValueError: if ``url`` is not a ``memory:`` URL.
            TypeError: if an option other than ``retention`` is given.
        """
        scheme, _, _ = url.partition(":")
        if scheme.lower() != "memory":
            raise ValueError(f"{cls.__name__} takes a memory:// URL")
        unknown = sorted(set(options) - {"retention"})
        if unknown:
            raise TypeError(
                f"{cls.__name__} takes only the retention option, got "
                + ", ".join(unknown)
            )
        return cls(retention=options.get("retention"))  # type: ignore[arg-type]

    async def create_schema(self) -> None:
        """Do nothing: there is no schema. Here so every repository has the call."""

    async def drop_schema(self) -> None:
        """Forget every conversation."""
        with self._lock:
            self._conversations.clear()
            self._records.clear()
            self._evicted.clear()

    async def aclose(self) -> None:
        """Do nothing: the repository owns no connection."""

    async def find_conversation_ids(self) -> list[str]:
        """Return the id of every stored conversation."""
        with self._lock:
            return list(self._conversations)

    async def find_by_conversation_id(self, conversation_id: str) -> list[Message]:
        """Return a copy of one conversation, oldest first."""
        validate_conversation_id(conversation_id)
        with self._lock:
            stored = self._conversations.get(conversation_id)
            return [] if stored is None else list(stored.messages)

    async def count_messages(self, conversation_id: str) -> int:
        """Return how many messages a conversation holds."""
        validate_conversation_id(conversation_id)
        with self._lock:
            stored = self._conversations.get(conversation_id)
            return 0 if stored is None else len(stored.messages)

    async def find_conversation_ids_page(
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

    async def save_all(self, conversation_id: str, messages: Sequence[Message]) -> None:
        """Replace one conversation; an empty list removes it."""
        validate_conversation_id(conversation_id)
        now = utc_now()
        batch = stamp_messages(validate_messages(messages), now)
        with self._lock:
            self._evicted.pop(conversation_id, None)
            if batch:
                self._conversations[conversation_id] = InMemoryConversation.of(batch)
                self._written(conversation_id, now)
            else:
                self._conversations.pop(conversation_id, None)
                self._records.pop(conversation_id, None)

    async def delete_by_conversation_id(self, conversation_id: str) -> None:
        """Remove one conversation, if it exists."""
        validate_conversation_id(conversation_id)
        with self._lock:
            self._conversations.pop(conversation_id, None)
            self._records.pop(conversation_id, None)
            self._evicted.pop(conversation_id, None)

    async def append_to_window(
        self, conversation_id: str, messages: Sequence[Message], window: Window
    ) -> AppendResult:
        """Append and trim under the lock, as ``AsyncSupportsWindowAppend`` asks.

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
                stored = InMemoryConversation([], set(), 0)
            evicted = self._evicted.get(conversation_id, ())
            now = utc_now()
            fresh = stamp_messages(
                (m for m in batch if m.id not in stored.ids and m.id not in evicted),
                now,
            )
            if not fresh:
                return AppendResult()
            plan = plan_append(stored.stored_window(window, fresh), fresh, window)
            stored.apply(plan, window.counter_id)
            self._written(conversation_id, now)
            if plan.evicted_ids:
                self._evicted.setdefault(conversation_id, EvictedIds()).add(
                    plan.evicted_ids
                )
            if plan.empty:
                self._conversations.pop(conversation_id, None)
            else:
                self._conversations[conversation_id] = stored
            return AppendResult(plan.appended, plan.evicted_ids)

    async def append_to_log(
        self,
        conversation_id: str,
        messages: Sequence[Message],
        window: Window | None = None,
    ) -> AppendResult:
        """Append to the log under the lock, as ``AsyncSupportsLog`` asks."""
        validate_conversation_id(conversation_id)
        batch = validate_messages(messages)
        if not batch:
            return AppendResult()
        with self._lock:
            stored = self._conversations.get(conversation_id)
            if stored is None:
                stored = InMemoryConversation([], set(), 0)
            evicted = self._evicted.get(conversation_id, ())
            now = utc_now()
            fresh = stamp_messages(
                (m for m in batch if m.id not in stored.ids and m.id not in evicted),
                now,
            )
            appended = stored.append_to_log(fresh, window) if fresh else []
            if appended:
                self._conversations[conversation_id] = stored
                self._written(conversation_id, now)
                last = stored.last_sequence
                if self.retention.trim_due(last - len(appended) + 1, last):
                    trimmed = stored.trim(self.retention, window)
                    if trimmed:
                        self._evicted.setdefault(conversation_id, EvictedIds()).add(
                            trimmed
                        )
            return AppendResult(appended)

    async def remove_newest(
        self, conversation_id: str, count: int = 1
    ) -> list[Message]:
        """Remove the newest ``count`` messages under the lock; return them."""
        validate_conversation_id(conversation_id)
        validate_removal_count(count)
        with self._lock:
            stored = self._conversations.get(conversation_id)
            if stored is None:
                return []
            first = len(stored.messages) - count
            return self._removed(
                conversation_id, stored, stored.remove(lambda i, _: i >= first)
            )

    async def remove_messages(
        self, conversation_id: str, message_ids: Sequence[str]
    ) -> list[Message]:
        """Remove the messages of ``message_ids`` under the lock; return them."""
        validate_conversation_id(conversation_id)
        doomed = set(validate_message_ids(message_ids))
        with self._lock:
            stored = self._conversations.get(conversation_id)
            if stored is None or not doomed:
                return []
            return self._removed(
                conversation_id, stored, stored.remove(lambda _, m: m.id in doomed)
            )

    def _removed(
        self,
        conversation_id: str,
        stored: InMemoryConversation,
        removed: list[Message],
    ) -> list[Message]:
        """What a removal returns; a conversation left empty is listed no more.

        Its record stays, with no message, until the conversation is deleted.
        """
        if removed:
            self._written(conversation_id, utc_now())
        if not stored.messages:
            self._conversations.pop(conversation_id, None)
        return removed

    def _written(self, conversation_id: str, now: datetime) -> None:
        """Note a write to the messages at ``now``; the first one makes the record."""
        record = self._records.get(conversation_id)
        if record is None:
            self._records[conversation_id] = InMemoryRecord(conversation_id, now, now)
        else:
            record.updated_at = now

    def _count(self, conversation_id: str) -> int:
        stored = self._conversations.get(conversation_id)
        return 0 if stored is None else len(stored.messages)

    async def set_conversation_info(
        self,
        conversation_id: str,
        *,
        owner: str | Literal[Unset.UNSET] | None = UNSET,
        metadata: Mapping[str, Any] | Literal[Unset.UNSET] = UNSET,
    ) -> ConversationInfo:
        """Set the owner or the metadata under the lock; a new id gets a record."""
        update = check_conversation_info(conversation_id, owner, metadata)
        with self._lock:
            record = self._records.get(conversation_id)
            if record is None:
                now = utc_now()
                record = InMemoryRecord(conversation_id, now, now)
                self._records[conversation_id] = record
            record.owner = update.owner_after(record.owner)
            record.metadata = update.metadata_after(record.metadata)
            return record.info(self._count(conversation_id))

    async def get_conversation_info(
        self, conversation_id: str
    ) -> ConversationInfo | None:
        """Return the record of one conversation, or ``None``."""
        validate_conversation_id(conversation_id)
        with self._lock:
            record = self._records.get(conversation_id)
            if record is None:
                return None
            return record.info(self._count(conversation_id))

    async def find_conversations(
        self,
        *,
        owner: str | None = None,
        metadata: Mapping[str, JsonValue] | None = None,
        updated_before: datetime | None = None,
        cursor: str | None = None,
        limit: int = DEFAULT_CONVERSATION_PAGE_SIZE,
    ) -> ConversationInfoPage:
        """Return up to ``limit`` records after ``cursor``, newest first."""
        query = check_find_conversations(
            owner=owner,
            metadata=metadata,
            updated_before=updated_before,
            cursor=cursor,
            limit=limit,
        )
        with self._lock:
            matching = (r for r in self._records.values() if query.matches(r))
            newest = heapq.nlargest(query.limit + 1, matching, key=listing_key)
            return query.page(r.info(self._count(r.id)) for r in newest)

    async def find_window(self, conversation_id: str, window: Window) -> list[Message]:
        """Return the view of ``window`` on the conversation's log."""
        validate_conversation_id(conversation_id)
        if not isinstance(window, Window):
            raise TypeError(f"window must be a Window, not {type(window).__name__}")
        with self._lock:
            stored = self._conversations.get(conversation_id)
            return [] if stored is None else stored.view(window)

    async def find_messages_page(
        self,
        conversation_id: str,
        cursor: str | None = None,
        limit: int = DEFAULT_MESSAGE_PAGE_SIZE,
        newest_first: bool = True,
    ) -> MessagePage:
        """Return up to ``limit`` messages of the log after ``cursor``."""
        validate_conversation_id(conversation_id)
        after, limit = check_message_page(cursor, limit, newest_first=newest_first)
        with self._lock:
            stored = self._conversations.get(conversation_id)
            if stored is None:
                return MessagePage([], None)
            return stored.page(after, limit, newest_first)
