# Written by tools/async_to_sync.py from async_split_log.py: edit that one.
"""A conversation's log, split into archived and active messages at a boundary.

Example:
    from llama_index.core.storage.chat_store.base_db import MessageStatus

    from chatledger import InMemoryChatMemoryRepository, Message
    from chatledger_llama_index.split_log import SplitLog

    log = SplitLog(InMemoryChatMemoryRepository())
    turn = [Message.user("q1"), Message.assistant("a1")]
    log.add("c1", turn, MessageStatus.ACTIVE)
    log.archive_oldest("c1", 1)  # [q1], still stored
    log.get("c1", MessageStatus.ACTIVE)  # [a1]
    log.get("c1", None)  # [q1, a1]

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
from chatledger_llama_index.convert import to_llama_index, to_llama_index_parts
from chatledger_llama_index.removal import (
    ATTEMPTS,
    remove_at,
    remove_ids,
)

__all__ = ["SplitLog"]

#: How many messages the first page of a read of the active messages asks
#: for; each further page asks for twice as many.
FIRST_PAGE = 64
#: The most messages one page asks for: the most core's pages hold
#: (``chatledger.validation.MAX_PAGE_SIZE``).
LAST_PAGE = 10_000
#: How many markers a read of the boundary takes, the one in force and those
#: it falls back on.
MARKERS_READ = 32


class SplitLog:
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

    def boundary(self, key: str) -> Boundary:
        """The boundary in force for ``key``."""
        page = self._repository.find_messages_page(
            archive_conversation_id(key), limit=MARKERS_READ, newest_first=True
        )
        return Boundary.of(page.messages, key)

    def _move(self, key: str, after: Boundary, archived: Sequence[str]) -> bool:
        """Write the marker after ``after`` naming ``archived``, oldest first.

        Returns False when another writer wrote one after ``after`` first.
        """
        writer = uuid.uuid4().hex
        mark = marker(key, after, archived=archived, writer=writer)
        result = self._repository.append_to_log(archive_conversation_id(key), [mark])
        if result.appended:
            return True
        # A marker of this id was there already: another writer's, or this
        # one's, stored by a write whose answer was lost and retried.
        return (self.boundary(key)).writer == writer

    def _refresh(self, key: str, removed: set[str]) -> None:
        """After a removal, name in a marker the archived messages left.

        Only when the removal took out a message the markers name; a writer
        that moved the boundary meanwhile named what it found itself.
        """
        boundary = self.boundary(key)
        if not removed & {i for move in boundary.moves for i in move}:
            return
        archived, _ = self._split(key, boundary, tail=True)
        self._move(key, boundary, [m.id for m in archived])

    # --- Reads -------------------------------------------------------------------

    def _split(
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
            page = self._repository.find_messages_page(
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

    def active(self, key: str) -> tuple[Boundary, list[Message]]:
        """The boundary and the active messages, oldest first."""
        boundary = self.boundary(key)
        _, active = self._split(key, boundary)
        return boundary, active

    def messages(self, key: str, status: MessageStatus | None) -> list[Message]:
        """The stored messages of ``status`` (all for ``None``), oldest first."""
        if status is MessageStatus.ACTIVE:
            _, active = self.active(key)
            return active
        boundary = self.boundary(key) if status is not None else None
        whole: list[Message] = self._repository.find_by_conversation_id(key)
        if boundary is None:
            return whole
        return whole[: boundary.archived_count(whole)]

    def get(
        self,
        key: str,
        status: MessageStatus | None,
        limit: int | None = None,
        offset: int | None = None,
    ) -> list[ChatMessage]:
        """The LlamaIndex messages of ``status``, oldest first, paged."""
        chat = to_llama_index(self.messages(key, status))
        start = offset or 0
        return chat[start:] if limit is None else chat[start : start + limit]

    def count(self, key: str, status: MessageStatus | None) -> int:
        """How many LlamaIndex messages of ``status`` there are."""
        return part_count(self.messages(key, status))

    def keys(self) -> list[str]:
        """Every conversation id but those of the companions."""
        ids: list[str] = self._repository.find_conversation_ids()
        return [i for i in ids if not i.endswith(ARCHIVE_SUFFIX)]

    # --- Writes ------------------------------------------------------------------

    def add(self, key: str, batch: Sequence[Message], status: MessageStatus) -> None:
        """Append ``batch``; as archived, the boundary moves to its last message.

        Raises:
            ValueError: archived messages for a conversation that has active
                ones (the archived messages are the start of the log).
        """
        if not batch:
            return
        if status is MessageStatus.ACTIVE:
            self._repository.append_to_log(key, batch)
            return
        _, active = self.active(key)
        if active:
            raise ValueError(
                f"conversation {key!r} has {part_count(active)} active messages: "
                "archived messages are the start of its log, so they can be "
                "added only before any active one (or with set_messages)"
            )
        result = self._repository.append_to_log(key, batch)
        if result.appended:
            self._archive_through(key, result.appended[-1].id)

    def _archive_through(self, key: str, message_id: str) -> None:
        """Move the boundary to ``message_id`` unless it is no longer active."""
        for _ in range(ATTEMPTS):
            boundary = self.boundary(key)
            archived, active = self._split(key, boundary, tail=True)
            ids = [m.id for m in active]
            if message_id not in ids:
                return
            taken = ids[: ids.index(message_id) + 1]
            if self._move(key, boundary, [m.id for m in archived] + taken):
                return
        raise ContentionError(key, ATTEMPTS, "the archive boundary kept moving")

    def archive_oldest(self, key: str, count: int) -> list[ChatMessage]:
        """Archive the oldest ``count`` active messages; return them.

        A stored tool message with several responses is archived whole, so
        one more may come back. Two calls never return the same message.
        """
        for _ in range(ATTEMPTS):
            boundary = self.boundary(key)
            archived, active = self._split(key, boundary, tail=True)
            taken = whole_parts(to_llama_index_parts(active), count)
            if not taken:
                return []
            ids = [m.id for m in archived]
            ids += dict.fromkeys(active[part.source].id for part in taken)
            if self._move(key, boundary, ids):
                return [part.message for part in taken]
        raise ContentionError(key, ATTEMPTS, "the archive boundary kept moving")

    def delete_oldest(self, key: str, count: int) -> list[ChatMessage]:
        """Remove the oldest ``count`` active messages; return those removed."""
        _, active = self.active(key)
        taken = whole_parts(to_llama_index_parts(active), count)
        doomed = list(dict.fromkeys(active[part.source].id for part in taken))
        removed = {m.id for m in remove_ids(self._repository, key, doomed)}
        if removed:
            # An archive racing this call may have archived them meanwhile.
            self._refresh(key, removed)
        return [part.message for part in taken if active[part.source].id in removed]

    def delete_at(self, key: str, idx: int) -> ChatMessage | None:
        """Remove the LlamaIndex message at ``idx`` of the whole log; return it."""
        removed = remove_at(self._repository, key, idx)
        if removed is None:
            return None
        self._refresh(key, {removed[0]})
        return removed[1]

    def delete(self, key: str, status: MessageStatus | None) -> None:
        """Remove the messages of ``status``; for ``None``, the whole conversation."""
        if status is None:
            self._repository.delete_by_conversation_id(key)
            self._repository.delete_by_conversation_id(archive_conversation_id(key))
            return
        doomed = self.messages(key, status)
        removed = remove_ids(self._repository, key, [m.id for m in doomed])
        if removed:
            self._refresh(key, {m.id for m in removed})

    def set(self, key: str, batch: Sequence[Message], status: MessageStatus) -> None:
        """Replace the conversation with ``batch``, all of ``status``."""
        self._repository.delete_by_conversation_id(archive_conversation_id(key))
        self._repository.save_all(key, batch)
        if batch and status is MessageStatus.ARCHIVED:
            moved = self._move(key, Boundary.NONE, [m.id for m in batch])
            if not moved:
                raise ContentionError(
                    key, 1, "another writer set the archive boundary meanwhile"
                )
