"""The chat store of LlamaIndex's ``Memory``, keeping each session as a chatledger log.

Example:
    from llama_index.core.llms import ChatMessage
    from llama_index.core.memory import Memory

    from chatledger_llama_index import ChatLedgerMemoryStore

    store = ChatLedgerMemoryStore.from_url("sqlite:///chat.db")
    memory = Memory.from_defaults(session_id="user-42", chat_store=store)
    await memory.aput(ChatMessage(role="user", content="Hi"))
    await memory.aget()  # [ChatMessage(role='user', content='Hi')]

``Memory`` keeps a session's messages in an ``AsyncDBChatStore``: the
active ones, which it gives the model, and the archived ones, which it
flushed from the active ones once they outgrew its token limit (and handed
to its memory blocks). Here the session is one chatledger conversation,
kept whole as a log, and the split is a boundary in it:

- **Archived** is the log up to the boundary, the id of the newest archived
  message; **active** is every message after it, the view the model is
  given. ``archive_oldest_messages(key, n)`` moves the boundary forward by
  ``n`` active messages and returns them: no message is moved, rewritten or
  deleted, so the whole conversation stays in the log, readable with
  ``get_messages(key, status=None)``, chatledger's pages, ``chatledger
  show`` and every other bridge. Two calls racing never archive (nor hand to
  the memory blocks) the same message.
- The boundary is kept beside the conversation, in the conversation
  ``key + "#llama-index-archive"``: one small marker message per move,
  naming the newest archived messages (see
  :mod:`chatledger_llama_index.archive`). ``get_keys`` leaves these out, and
  a key ending with that suffix is refused. With a TTL, the boundary
  expires a TTL after the last archive.
- If archived messages leave the log (removed here, by a call racing the
  archive, or by another program), the archive ends at the newest one the
  markers name that is left, so what was archived stays archived; a
  removal here that takes one of them writes a marker naming those left.
  If none is left (the archived messages removed, trimmed by retention, the
  conversation replaced), nothing is archived: every message is active,
  shown rather than hidden, and ``Memory`` archives the excess anew on its
  next write.
- The active messages are read newest first, a page at a time, until the
  boundary: a read costs what the active messages are, however long the
  archived history is.

Writes: ``add_message(s)`` is one atomic append to the log (an equal
system message the view shows is not stored twice); ``set_messages``
replaces the conversation (``save_all``) and moves the boundary to its end
for ``status=ARCHIVED``; ``delete_messages(key)`` deletes the conversation
and its boundary. Removals of some messages (``delete_message``,
``delete_oldest_messages``, ``delete_messages(key, status)``) remove those
messages by id, each time in one atomic removal, so a message appended
meanwhile is kept; they need a repository with ``SupportsLogRemoval`` and
raise ``TypeError`` naming it on one without.

LlamaIndex messages are converted with
:func:`~chatledger_llama_index.from_llama_index` and
:func:`~chatledger_llama_index.to_llama_index`; a stored tool message with
several responses is several LlamaIndex messages, archived or removed
whole.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.storage.chat_store.base_db import AsyncDBChatStore, MessageStatus
from pydantic import PrivateAttr

from chatledger import (
    AsyncSupportsLog,
    ChatMemoryRepository,
    connect_async,
    is_async_repository,
)
from chatledger_llama_index import async_removal, removal
from chatledger_llama_index.archive import (
    archive_conversation_id,
    check_count,
    check_status,
)
from chatledger_llama_index.async_split_log import AsyncSplitLog
from chatledger_llama_index.convert import from_llama_index, read_chat_message
from chatledger_llama_index.reopening import refuse, reopen
from chatledger_llama_index.split_log import SplitLog

__all__ = ["ChatLedgerMemoryStore"]


def _status(status: object) -> MessageStatus:
    checked = check_status(status, optional=False)
    assert checked is not None
    return checked


class ChatLedgerMemoryStore(AsyncDBChatStore):
    """LlamaIndex's ``AsyncDBChatStore`` over a chatledger repository's logs.

    Give it to ``Memory.from_defaults(chat_store=...)``. Each key (a
    ``Memory``'s ``session_id``) is a conversation id, checked before any
    I/O, like every other argument. See the module docs for how the active
    and archived messages map onto the log.

    Args:
        repository: A repository that keeps logs (every built-in one): an
            async one (``connect_async(url)``), awaited by every method, or a
            sync one (``connect(url)``), called in a worker thread so the
            event loop goes on meanwhile.

    Raises:
        TypeError: ``repository`` is not a chatledger repository, or keeps no
            log (``append_to_log``, ``find_messages_page``).
    """

    _repository: Any = PrivateAttr(default=None)
    _split: Any = PrivateAttr(default=None)
    _threaded: bool = PrivateAttr(default=False)
    _url_options: Any = PrivateAttr(default=None)

    def __init__(self, repository: Any) -> None:
        """Keep the repository; nothing is read or written."""
        threaded = isinstance(
            repository, ChatMemoryRepository
        ) and not is_async_repository(repository)
        if not threaded and not is_async_repository(repository):
            raise TypeError(
                "repository must be a chatledger repository (connect_async(url) "
                f"or connect(url)), not {type(repository).__name__}"
            )
        if not isinstance(repository, AsyncSupportsLog):
            raise TypeError(
                f"{type(repository).__name__} keeps no log (SupportsLog: "
                "append_to_log, find_messages_page), which the archived and active "
                "messages of a session are kept in"
            )
        super().__init__()
        self._repository = repository
        self._threaded = threaded
        self._split = SplitLog(repository) if threaded else AsyncSplitLog(repository)

    @classmethod
    def from_url(cls, url: str, **options: Any) -> ChatLedgerMemoryStore:
        """A store over ``connect_async(url, **options)``, which pickles.

        A pickled store made here reconnects to the same URL when unpickled
        (see :mod:`chatledger_llama_index.reopening`); close its repository
        with ``await store.repository.aclose()``.
        """
        store = cls(connect_async(url, **options))
        store._url_options = (url, dict(options))
        return store

    @classmethod
    def class_name(cls) -> str:
        """The name LlamaIndex records for this store."""
        return "ChatLedgerMemoryStore"

    def __repr__(self) -> str:
        return f"ChatLedgerMemoryStore({self._repository!r})"

    def __reduce_ex__(self, protocol: object) -> tuple[Any, ...]:
        if self._url_options is None:
            return refuse, (type(self).__name__,)
        url, options = self._url_options
        return reopen, (type(self), url, options)

    @property
    def repository(self) -> Any:
        """The repository given (or opened by :meth:`from_url`)."""
        return self._repository

    async def _run(self, operation: str, *arguments: Any) -> Any:
        """Run one operation of the split log, in a thread for a sync repository."""
        call: Callable[..., Any] = getattr(self._split, operation)
        if self._threaded:
            return await asyncio.to_thread(call, *arguments)
        return await call(*arguments)

    def _removing(self, operation: str) -> None:
        module = removal if self._threaded else async_removal
        module.require_removal(self._repository, f"ChatLedgerMemoryStore.{operation}")

    # --- Reads ---------------------------------------------------------------------

    async def get_messages(
        self,
        key: str,
        status: MessageStatus | None = MessageStatus.ACTIVE,
        limit: int | None = None,
        offset: int | None = None,
    ) -> list[ChatMessage]:
        """The messages of ``status`` (all for ``None``), oldest first.

        ``offset`` skips that many and ``limit`` keeps at most that many.
        """
        archive_conversation_id(key)
        checked = check_status(status, optional=True)
        check_count(limit, "limit", optional=True)
        check_count(offset, "offset", optional=True)
        found: list[ChatMessage] = await self._run("get", key, checked, limit, offset)
        return found

    async def count_messages(
        self, key: str, status: MessageStatus | None = MessageStatus.ACTIVE
    ) -> int:
        """How many messages of ``status`` (all for ``None``) ``key`` holds."""
        archive_conversation_id(key)
        checked = check_status(status, optional=True)
        counted: int = await self._run("count", key, checked)
        return counted

    async def get_keys(self) -> list[str]:
        """Every key, without the companions that keep the boundaries."""
        keys: list[str] = await self._run("keys")
        return keys

    # --- Writes --------------------------------------------------------------------

    async def add_message(
        self,
        key: str,
        message: ChatMessage,
        status: MessageStatus = MessageStatus.ACTIVE,
    ) -> None:
        """Append ``message``, in one atomic step.

        As ``ARCHIVED``, the boundary then moves to it: archived messages
        are the start of the log, so a conversation with active messages
        refuses it (``ValueError``).
        """
        archive_conversation_id(key)
        batch = [read_chat_message(message, "message")]
        await self._run("add", key, batch, _status(status))

    async def add_messages(
        self,
        key: str,
        messages: list[ChatMessage],
        status: MessageStatus = MessageStatus.ACTIVE,
    ) -> None:
        """Append ``messages`` in one atomic step (see :meth:`add_message`)."""
        archive_conversation_id(key)
        batch = from_llama_index(messages)
        await self._run("add", key, batch, _status(status))

    async def set_messages(
        self,
        key: str,
        messages: list[ChatMessage],
        status: MessageStatus = MessageStatus.ACTIVE,
    ) -> None:
        """Replace the conversation with ``messages``, all of ``status``.

        The conversation is replaced atomically, exactly as given (``[]``
        deletes it); its boundary is reset first, then set to the last
        message for ``ARCHIVED``.
        """
        archive_conversation_id(key)
        batch = from_llama_index(messages)
        await self._run("set", key, batch, _status(status))

    async def archive_oldest_messages(self, key: str, n: int) -> list[ChatMessage]:
        """Archive the oldest ``n`` active messages and return them.

        They stay in the log; only the boundary moves.
        """
        archive_conversation_id(key)
        count = check_count(n, "n")
        archived: list[ChatMessage] = await self._run("archive_oldest", key, count)
        return archived

    async def delete_message(self, key: str, idx: int) -> ChatMessage | None:
        """Remove message ``idx`` of ``get_messages(key, status=None)``; return it.

        ``idx`` indexes the whole conversation, archived messages first, so
        it does not shift when messages are archived; negative counts from
        the end. Out of range, nothing is removed and ``None`` returned.
        """
        archive_conversation_id(key)
        if isinstance(idx, bool) or not isinstance(idx, int):
            raise TypeError(f"idx must be an int, not {type(idx).__name__}")
        self._removing("delete_message")
        removed: ChatMessage | None = await self._run("delete_at", key, idx)
        return removed

    async def delete_messages(
        self, key: str, status: MessageStatus | None = None
    ) -> None:
        """Delete the messages of ``status``; for ``None``, the whole conversation."""
        archive_conversation_id(key)
        checked = check_status(status, optional=True)
        if checked is not None:
            self._removing("delete_messages")
        await self._run("delete", key, checked)

    async def delete_oldest_messages(self, key: str, n: int) -> list[ChatMessage]:
        """Remove the oldest ``n`` active messages; return those removed."""
        archive_conversation_id(key)
        count = check_count(n, "n")
        self._removing("delete_oldest_messages")
        removed: list[ChatMessage] = await self._run("delete_oldest", key, count)
        return removed
