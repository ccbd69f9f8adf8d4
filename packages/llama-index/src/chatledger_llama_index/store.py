"""A LlamaIndex ``BaseChatStore`` that keeps each key as a chatledger conversation.

Example:
    from llama_index.core.llms import ChatMessage
    from llama_index.core.memory import ChatMemoryBuffer

    from chatledger import connect
    from chatledger_llama_index import ChatLedgerChatStore

    store = ChatLedgerChatStore(connect("sqlite:///chat.db"))
    memory = ChatMemoryBuffer.from_defaults(chat_store=store, chat_store_key="user-42")
    memory.put(ChatMessage(role="user", content="Hi"))
    store.get_messages("user-42")   # read back from the database

``BaseChatStore`` is the store of ``ChatMemoryBuffer`` and the other
memories LlamaIndex has deprecated; its ``Memory`` takes an
``AsyncDBChatStore``: :class:`chatledger_llama_index.ChatLedgerMemoryStore`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.storage.chat_store.base import BaseChatStore
from pydantic import PrivateAttr

import chatledger
from chatledger import (
    AsyncChatMemoryRepository,
    AsyncMessageWindowChatMemory,
    AsyncSupportsLogRemoval,
    ChatMemoryRepository,
    Message,
    MessageWindowChatMemory,
    SupportsLogRemoval,
    connect_async,
    is_async_repository,
    validate_conversation_id,
)
from chatledger_llama_index import async_removal, removal
from chatledger_llama_index.convert import (
    from_llama_index,
    read_chat_message,
    to_llama_index,
)
from chatledger_llama_index.reopening import refuse, reopen

__all__ = ["UNBOUNDED", "ChatLedgerChatStore"]

#: The window ``add_message`` appends through: more messages than a
#: conversation holds, so no message is evicted for room.
UNBOUNDED = 2**31 - 1


def _sort_repositories(repository: object, async_repository: object) -> tuple[Any, Any]:
    """The sync and the async repository among the two arguments."""
    sync_one: Any = None
    async_one: Any = None
    if repository is not None:
        if is_async_repository(repository):
            if async_repository is not None:
                raise TypeError(
                    "repository is an async repository and async_repository is "
                    "given too: pass the sync repository first, "
                    "ChatLedgerChatStore(repository, async_repository=...)"
                )
            async_one = repository
        elif isinstance(repository, ChatMemoryRepository):
            sync_one = repository
        else:
            raise TypeError(
                "repository must be a chatledger repository (connect(url) or "
                f"connect_async(url)), not {type(repository).__name__}"
            )
    if async_repository is not None:
        if not is_async_repository(async_repository):
            raise TypeError(
                "async_repository must be an async chatledger repository "
                f"(connect_async(url)), not {type(async_repository).__name__}"
            )
        async_one = async_repository
    if sync_one is None and async_one is None:
        raise TypeError(
            "ChatLedgerChatStore needs a repository: "
            "ChatLedgerChatStore(connect(url)), "
            "ChatLedgerChatStore(connect_async(url)), or both: "
            "ChatLedgerChatStore(connect(url), async_repository=connect_async(url))"
        )
    return sync_one, async_one


def _check_index(idx: object) -> int:
    if isinstance(idx, bool) or not isinstance(idx, int):
        raise TypeError(f"idx must be an int, not {type(idx).__name__}")
    return idx


def _message(removed: tuple[str, ChatMessage] | None) -> ChatMessage | None:
    return None if removed is None else removed[1]


def _keep_identities(stored: Sequence[Message], batch: list[Message]) -> list[Message]:
    """``batch``, where a message equals the stored one at its place, that one.

    So a history read and written back keeps its ids and ``created_at``.
    """
    return [
        old if index < len(stored) and (old := stored[index]) == new else new
        for index, new in enumerate(batch)
    ]


class ChatLedgerChatStore(BaseChatStore):
    """LlamaIndex's ``BaseChatStore`` over chatledger repositories.

    Each key is a conversation id, checked before any I/O. Messages convert
    with :func:`~chatledger_llama_index.to_llama_index` and
    :func:`~chatledger_llama_index.from_llama_index`; one that cannot be
    converted raises ``UnsupportedContentError`` before anything is written
    or deleted.

    Args:
        repository: A repository (``connect(url)``), used by the sync methods;
            or an async repository (``connect_async(url)``), used by the async
            ones.
        async_repository: An async repository, to give both: the async
            methods (``aget_messages``, ``async_add_message``, ...) await it,
            never the sync one in a thread. Point both at the same store.

    A method whose repository is missing raises ``TypeError`` naming what to
    pass. LlamaIndex's ``ChatMemoryBuffer.aget`` calls the sync
    ``get_messages`` in a thread, so an async chat engine over that memory
    needs both.

    Writes:

    - ``add_message`` appends in one atomic step. On a repository that keeps
      each conversation as a log (every built-in adapter), the message is
      added to the log and nothing is removed; a system message equal to the
      current one is not stored twice. On one that stores only a window, it
      goes through chatledger's window with :data:`UNBOUNDED` messages, so
      nothing is evicted for room, but the window's other rules hold there:
      a system message that differs from the stored one replaces it, and a
      conversation never opens on a tool response.
    - ``set_messages`` replaces the conversation atomically (``[]`` deletes
      it), exactly as given; a message equal to the stored one at its place
      keeps that one's id and ``created_at``.
    - ``delete_message(key, idx)`` and ``delete_last_message`` read the
      conversation, pick the message at ``idx`` of ``get_messages(key)``
      (negative from the end; out of range removes nothing) and remove that
      stored message by its id in one atomic removal (``remove_messages``):
      a message another writer appends meanwhile is kept, and of two calls
      that picked the same message one removes it and the other reads again.
      They need a repository with ``SupportsLogRemoval`` (``TypeError``
      naming it otherwise). A stored tool message with several responses
      shows as several messages; removing one of them alone is refused
      (``ValueError``).
    - ``delete_messages`` removes the messages it read, by id, in one atomic
      removal per 10,000, and returns exactly those: a message appended
      after the read is kept. On a repository without ``SupportsLogRemoval``
      it deletes the conversation (``delete_by_conversation_id``) and returns
      what it read just before, which misses a message appended in between.
    - Each returns what it removed (``None`` when nothing).

    Pickling: a store made by :meth:`from_url` pickles as its URLs and
    reconnects when unpickled; one made from repository objects cannot be
    rebuilt, and unpickling it raises ``StoreNotPicklableError`` (see
    :mod:`chatledger_llama_index.reopening`).
    """

    _repository: Any = PrivateAttr(default=None)
    _async_repository: Any = PrivateAttr(default=None)
    _memory: Any = PrivateAttr(default=None)
    _async_memory: Any = PrivateAttr(default=None)
    _url_options: Any = PrivateAttr(default=None)

    def __init__(
        self,
        repository: ChatMemoryRepository | AsyncChatMemoryRepository | None = None,
        *,
        async_repository: AsyncChatMemoryRepository | None = None,
    ) -> None:
        """Keep the repositories.

        Raises:
            TypeError: for no repository, an argument that is not one, or an
                async repository given twice.
        """
        sync_one, async_one = _sort_repositories(repository, async_repository)
        super().__init__()
        self._repository = sync_one
        self._async_repository = async_one
        if sync_one is not None:
            self._memory = MessageWindowChatMemory(sync_one, max_messages=UNBOUNDED)
        if async_one is not None:
            self._async_memory = AsyncMessageWindowChatMemory(
                async_one, max_messages=UNBOUNDED
            )

    @classmethod
    def from_url(
        cls, url: str | None = None, *, async_url: str | None = None, **options: Any
    ) -> ChatLedgerChatStore:
        """A store over ``connect(url)``, ``connect_async(async_url)`` or both.

        Give ``url`` for the sync methods, ``async_url`` for the async ones,
        or both (the same URL works for both where the backend's drivers do
        both, as ``sqlite:///chat.db`` and ``postgresql+psycopg://...``).
        ``options`` go to both. Unlike one made from repository objects, a
        store made here pickles: it reconnects to the same URLs when
        unpickled; close the repositories it opened with
        ``store.repository.close()`` and ``await
        store.async_repository.aclose()``.

        Raises:
            TypeError: neither URL is given.
        """
        if url is None and async_url is None:
            raise TypeError(
                "ChatLedgerChatStore.from_url needs a URL: url= for the sync "
                "methods, async_url= for the async ones, or both"
            )
        repository = None if url is None else chatledger.connect(url, **options)
        async_repository = (
            None if async_url is None else connect_async(async_url, **options)
        )
        store = cls(repository, async_repository=async_repository)
        store._url_options = (url, {"async_url": async_url, **options})
        return store

    @classmethod
    def class_name(cls) -> str:
        """The name LlamaIndex records for this store."""
        return "ChatLedgerChatStore"

    def __repr__(self) -> str:
        return (
            f"ChatLedgerChatStore({self._repository!r}, "
            f"async_repository={self._async_repository!r})"
        )

    def __reduce_ex__(self, protocol: object) -> tuple[Any, ...]:
        if self._url_options is None:
            return refuse, (type(self).__name__,)
        url, options = self._url_options
        return reopen, (type(self), url, options)

    @property
    def repository(self) -> ChatMemoryRepository | None:
        """The repository of the sync methods, or ``None``."""
        found: ChatMemoryRepository | None = self._repository
        return found

    @property
    def async_repository(self) -> AsyncChatMemoryRepository | None:
        """The repository of the async methods, or ``None``."""
        found: AsyncChatMemoryRepository | None = self._async_repository
        return found

    def _sync(self) -> Any:
        if self._repository is None:
            raise TypeError(
                "this ChatLedgerChatStore has only an async repository: use the "
                "async methods (aget_messages, async_add_message, ...), or pass a "
                "sync one too: ChatLedgerChatStore(connect(url), "
                "async_repository=...)"
            )
        return self._repository

    def _async(self) -> Any:
        if self._async_repository is None:
            raise TypeError(
                "this ChatLedgerChatStore has no async repository: pass one, "
                "ChatLedgerChatStore(repository, async_repository=connect_async(url)), "
                "or use the sync methods"
            )
        return self._async_repository

    # --- sync -----------------------------------------------------------------

    def set_messages(self, key: str, messages: list[ChatMessage]) -> None:
        """Replace the conversation ``key`` with ``messages``, atomically."""
        validate_conversation_id(key)
        batch = from_llama_index(messages)
        repository = self._sync()
        stored = repository.find_by_conversation_id(key) if batch else []
        repository.save_all(key, _keep_identities(stored, batch))

    def get_messages(self, key: str) -> list[ChatMessage]:
        """The messages of ``key``, oldest first (``[]`` for none)."""
        validate_conversation_id(key)
        return to_llama_index(self._sync().find_by_conversation_id(key))

    def add_message(self, key: str, message: ChatMessage) -> None:
        """Append ``message`` to ``key`` (see the class docs for what is kept)."""
        validate_conversation_id(key)
        converted = read_chat_message(message, "message")
        self._sync()
        self._memory.add(key, converted)

    def delete_messages(self, key: str) -> list[ChatMessage] | None:
        """Remove the messages of ``key``; return them, or ``None`` if none."""
        validate_conversation_id(key)
        repository = self._sync()
        if isinstance(repository, SupportsLogRemoval):
            return removal.remove_all(repository, key)
        stored = repository.find_by_conversation_id(key)
        if not stored:
            return None
        removed = to_llama_index(stored)
        repository.delete_by_conversation_id(key)
        return removed

    def delete_message(self, key: str, idx: int) -> ChatMessage | None:
        """Remove message ``idx`` of ``get_messages(key)``; return it, or ``None``."""
        validate_conversation_id(key)
        _check_index(idx)
        repository = self._sync()
        removal.require_removal(repository, "ChatLedgerChatStore.delete_message")
        return _message(removal.remove_at(repository, key, idx))

    def delete_last_message(self, key: str) -> ChatMessage | None:
        """Remove the last message of ``key``; return it, or ``None`` if none."""
        validate_conversation_id(key)
        repository = self._sync()
        removal.require_removal(repository, "ChatLedgerChatStore.delete_last_message")
        return _message(removal.remove_at(repository, key, -1))

    def get_keys(self) -> list[str]:
        """Every conversation id of the repository."""
        keys: list[str] = self._sync().find_conversation_ids()
        return keys

    # --- async ----------------------------------------------------------------

    async def aset_messages(self, key: str, messages: list[ChatMessage]) -> None:
        """Replace the conversation ``key`` with ``messages``, atomically."""
        validate_conversation_id(key)
        batch = from_llama_index(messages)
        repository = self._async()
        stored = await repository.find_by_conversation_id(key) if batch else []
        await repository.save_all(key, _keep_identities(stored, batch))

    async def aget_messages(self, key: str) -> list[ChatMessage]:
        """The messages of ``key``, oldest first (``[]`` for none)."""
        validate_conversation_id(key)
        return to_llama_index(await self._async().find_by_conversation_id(key))

    async def async_add_message(self, key: str, message: ChatMessage) -> None:
        """Append ``message`` to ``key`` (see the class docs for what is kept)."""
        validate_conversation_id(key)
        converted = read_chat_message(message, "message")
        self._async()
        await self._async_memory.add(key, converted)

    async def adelete_messages(self, key: str) -> list[ChatMessage] | None:
        """Remove the messages of ``key``; return them, or ``None`` if none."""
        validate_conversation_id(key)
        repository = self._async()
        if isinstance(repository, AsyncSupportsLogRemoval):
            return await async_removal.remove_all(repository, key)
        stored = await repository.find_by_conversation_id(key)
        if not stored:
            return None
        removed = to_llama_index(stored)
        await repository.delete_by_conversation_id(key)
        return removed

    async def adelete_message(self, key: str, idx: int) -> ChatMessage | None:
        """Remove message ``idx`` of ``get_messages(key)``; return it, or ``None``."""
        validate_conversation_id(key)
        _check_index(idx)
        repository = self._async()
        async_removal.require_removal(repository, "ChatLedgerChatStore.adelete_message")
        return _message(await async_removal.remove_at(repository, key, idx))

    async def adelete_last_message(self, key: str) -> ChatMessage | None:
        """Remove the last message of ``key``; return it, or ``None`` if none."""
        validate_conversation_id(key)
        repository = self._async()
        async_removal.require_removal(
            repository, "ChatLedgerChatStore.adelete_last_message"
        )
        return _message(await async_removal.remove_at(repository, key, -1))

    async def aget_keys(self) -> list[str]:
        """Every conversation id of the repository."""
        keys: list[str] = await self._async().find_conversation_ids()
        return keys
