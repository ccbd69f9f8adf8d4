# sync twin: split_log.py
"""A conversation's log, split into archived and active messages at a boundary.

Example:
    from llama_index.core.storage.chat_store.base_db import MessageStatus

    from chatledger import AsyncInMemoryChatMemoryRepository, Message
    from chatledger_llama_index.async_split_log import AsyncSplitLog

    log = AsyncSplitLog(AsyncInMemoryChatMemoryRepository())
    turn = [Message.user("q1"), Message.assistant("a1")]
    await log.add("c1", turn, MessageStatus.ACTIVE)
    await log.archive_oldest("c1", 1)  # [q1], still stored
    await log.get("c1", MessageStatus.ACTIVE)  # [a1]
    await log.get("c1", None)  # [q1, a1]

The operations of :class:`chatledger_llama_index.ChatLedgerMemoryStore`,
over a repository that keeps each conversation as a log (``append_to_log``,
``find_messages_page``). The archived messages are the log up to the
boundary of :mod:`chatledger_llama_index.archive`, the active ones the rest:
the active ones are read newest first, a page at a time, until the
boundary's message, so their cost grows with them and not with the
archived history. Archiving writes one marker and moves no message.

Each marker names the newest archived messages (up to
:data:`~chatledger_llama_index.archive.MARKER_IDS`), so the boundary holds
when some of them leave the log; a removal here that takes out one of them
writes a marker naming those left. When none of the markers' messages is
left (the archived messages removed by other programs, trimmed by
retention, the conversation replaced), nothing is archived: the view then
shows more, never less.

Messages leave the log only by the removals of ``SupportsLogRemoval``
(``remove_messages``), by ``delete_by_conversation_id`` for the whole
conversation, and by ``save_all`` in ``set``.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.storage.chat_store.base_db import MessageStatus

from chatledger import ContentionError, Message
from chatledger_llama_index.archive import (
    ARCHIVE_SUFFIX,
    MARKER_IDS,
    Boundary,
    archive_conversation_id,
    marker,
    part_count,
    whole_parts,
)
from chatledger_llama_index.async_removal import (
    ATTEMPTS,
    remove_at,
    remove_ids,
)
from chatledger_llama_index.convert import to_llama_index, to_llama_index_parts

__all__ = ["AsyncSplitLog"]

#: How many messages the first page of a read of the active messages asks
#: for; each further page asks for twice as many.
FIRST_PAGE = 64
#: The most messages one page asks for: the most core's pages hold
#: (``chatledger.validation.MAX_PAGE_SIZE``).
LAST_PAGE = 10_000
#: How many markers a read of the boundary takes, the one in force and those
#: it falls back on.
MARKERS_READ = 32


class AsyncSplitLog:
    """Archived and active messages over a repository that keeps logs.

    Args:
        repository: The repository, with ``append_to_log`` and
            ``find_messages_page``; the removals need ``remove_messages``
            too. Keys are checked by the caller.
    """

    def __init__(self, repository: Any) -> None:
        """Keep the repository."""
        self._repository = repository

    # --- The boundary ----------------------------------------------------------

    async def boundary(self, key: str) -> Boundary:
        """The boundary in force for ``key``."""
        page = await self._repository.find_messages_page(
            archive_conversation_id(key), limit=MARKERS_READ, newest_first=True
        )
        return Boundary.of(page.messages, key)

    async def _move(self, key: str, after: Boundary, archived: Sequence[str]) -> bool:
        """Write the marker after ``after`` naming ``archived``, oldest first.

        Returns False when another writer wrote one after ``after`` first.
        """
        writer = uuid.uuid4().hex
        mark = marker(key, after, archived=archived, writer=writer)
        result = await self._repository.append_to_log(
            archive_conversation_id(key), [mark]
        )
        if result.appended:
            return True
        # A marker of this id was there already: another writer's, or this
        # one's, stored by a write whose answer was lost and retried.
        return (await self.boundary(key)).writer == writer

    async def _refresh(self, key: str, removed: set[str]) -> None:
        """After a removal, name in a marker the archived messages left.

        Only when the removal took out a message the markers name; a writer
        that moved the boundary meanwhile named what it found itself.
        """
        boundary = await self.boundary(key)
        if not removed & {i for move in boundary.moves for i in move}:
            return
        archived, _ = await self._split(key, boundary, tail=True)
        await self._move(key, boundary, [m.id for m in archived])

    # --- Reads -------------------------------------------------------------------

    async def _split(
        self, key: str, boundary: Boundary, *, tail: bool = False
    ) -> tuple[list[Message], list[Message]]:
        """The newest archived messages and the active ones, each oldest first.

        The newest are read first, a page at a time, until the boundary's
        message (and, with ``tail``, until :data:`MARKER_IDS` archived ones)
        or the start of the log. Without ``tail``, the archived messages
        given back are those the last page held.
        """
        newest_first: list[Message] = []
        cursor = None
        limit = FIRST_PAGE
        while True:
            page = await self._repository.find_messages_page(
                key, cursor=cursor, limit=limit, newest_first=True
            )
            newest_first += page.messages
            if page.next_cursor is None:
                break
            if boundary.ends_in(newest_first):
                oldest_first = newest_first[::-1]
                if not tail or boundary.archived_count(oldest_first) >= MARKER_IDS:
                    break
            cursor = page.next_cursor
            limit = min(limit * 2, LAST_PAGE)
        oldest_first = newest_first[::-1]
        cut = boundary.archived_count(oldest_first)
        return oldest_first[max(0, cut - MARKER_IDS) : cut], oldest_first[cut:]

    async def active(self, key: str) -> tuple[Boundary, list[Message]]:
        """The boundary and the active messages, oldest first."""
        boundary = await self.boundary(key)
        _, active = await self._split(key, boundary)
        return boundary, active

    async def messages(self, key: str, status: MessageStatus | None) -> list[Message]:
        """The stored messages of ``status`` (all for ``None``), oldest first."""
        if status is MessageStatus.ACTIVE:
            _, active = await self.active(key)
            return active
        boundary = await self.boundary(key) if status is not None else None
        whole: list[Message] = await self._repository.find_by_conversation_id(key)
        if boundary is None:
            return whole
        return whole[: boundary.archived_count(whole)]

    async def get(
        self,
        key: str,
        status: MessageStatus | None,
        limit: int | None = None,
        offset: int | None = None,
    ) -> list[ChatMessage]:
        """The LlamaIndex messages of ``status``, oldest first, paged."""
        chat = to_llama_index(await self.messages(key, status))
        start = offset or 0
        return chat[start:] if limit is None else chat[start : start + limit]

    async def count(self, key: str, status: MessageStatus | None) -> int:
        """How many LlamaIndex messages of ``status`` there are."""
        return part_count(await self.messages(key, status))

    async def keys(self) -> list[str]:
        """Every conversation id but those of the companions."""
        ids: list[str] = await self._repository.find_conversation_ids()
        return [i for i in ids if not i.endswith(ARCHIVE_SUFFIX)]

    # --- Writes ------------------------------------------------------------------

    async def add(
        self, key: str, batch: Sequence[Message], status: MessageStatus
    ) -> None:
        """Append ``batch``; as archived, the boundary moves to its last message.

        Raises:
            ValueError: archived messages for a conversation that has active
                ones (the archived messages are the start of the log).
        """
        if not batch:
            return
        if status is MessageStatus.ACTIVE:
            await self._repository.append_to_log(key, batch)
            return
        _, active = await self.active(key)
        if active:
            raise ValueError(
                f"conversation {key!r} has {part_count(active)} active messages: "
                "archived messages are the start of its log, so they can be "
                "added only before any active one (or with set_messages)"
            )
        result = await self._repository.append_to_log(key, batch)
        if result.appended:
            await self._archive_through(key, result.appended[-1].id)

    async def _archive_through(self, key: str, message_id: str) -> None:
        """Move the boundary to ``message_id`` unless it is no longer active."""
        for _ in range(ATTEMPTS):
            boundary = await self.boundary(key)
            archived, active = await self._split(key, boundary, tail=True)
            ids = [m.id for m in active]
            if message_id not in ids:
                return
            taken = ids[: ids.index(message_id) + 1]
            if await self._move(key, boundary, [m.id for m in archived] + taken):
                return
        raise ContentionError(key, ATTEMPTS, "the archive boundary kept moving")

    async def archive_oldest(self, key: str, count: int) -> list[ChatMessage]:
        """Archive the oldest ``count`` active messages; return them.

        A stored tool message with several responses is archived whole, so
        one more may come back. Two calls never return the same message.
        """
        for _ in range(ATTEMPTS):
            boundary = await self.boundary(key)
            archived, active = await self._split(key, boundary, tail=True)
            taken = whole_parts(to_llama_index_parts(active), count)
            if not taken:
                return []
            ids = [m.id for m in archived]
            ids += dict.fromkeys(active[part.source].id for part in taken)
            if await self._move(key, boundary, ids):
                return [part.message for part in taken]
        raise ContentionError(key, ATTEMPTS, "the archive boundary kept moving")

    async def delete_oldest(self, key: str, count: int) -> list[ChatMessage]:
        """Remove the oldest ``count`` active messages; return those removed."""
        _, active = await self.active(key)
        taken = whole_parts(to_llama_index_parts(active), count)
        doomed = list(dict.fromkeys(active[part.source].id for part in taken))
        removed = {m.id for m in await remove_ids(self._repository, key, doomed)}
        if removed:
            # An archive racing this call may have archived them meanwhile.
            await self._refresh(key, removed)
        return [part.message for part in taken if active[part.source].id in removed]

    async def delete_at(self, key: str, idx: int) -> ChatMessage | None:
        """Remove the LlamaIndex message at ``idx`` of the whole log; return it."""
        removed = await remove_at(self._repository, key, idx)
        if removed is None:
            return None
        await self._refresh(key, {removed[0]})
        return removed[1]

    async def delete(self, key: str, status: MessageStatus | None) -> None:
        """Remove the messages of ``status``; for ``None``, the whole conversation."""
        if status is None:
            await self._repository.delete_by_conversation_id(key)
            await self._repository.delete_by_conversation_id(
                archive_conversation_id(key)
            )
            return
        doomed = await self.messages(key, status)
        removed = await remove_ids(self._repository, key, [m.id for m in doomed])
        if removed:
            await self._refresh(key, {m.id for m in removed})

    async def set(
        self, key: str, batch: Sequence[Message], status: MessageStatus
    ) -> None:
        """Replace the conversation with ``batch``, all of ``status``."""
        await self._repository.delete_by_conversation_id(archive_conversation_id(key))
        await self._repository.save_all(key, batch)
        if batch and status is MessageStatus.ARCHIVED:
            moved = await self._move(key, Boundary.NONE, [m.id for m in batch])
            if not moved:
                raise ContentionError(
                    key, 1, "another writer set the archive boundary meanwhile"
                )
