"""A LangChain chat message history stored by chatledger, for 0.3-style code.

LangChain 1.x deprecates ``BaseChatMessageHistory`` and
``RunnableWithMessageHistory`` (see
https://docs.langchain.com/oss/python/langchain/short-term-memory): an agent
made with ``create_agent`` keeps its memory with
:class:`chatledger_langchain.ChatLedgerMiddleware`. This history is for the
code that still reads and writes a history.

Example:
    from langchain_core.messages import AIMessage, HumanMessage

    from chatledger import connect
    from chatledger_langchain import ChatLedgerMessageHistory

    history = ChatLedgerMessageHistory(connect("sqlite:///history.db"), "user-42")
    history.add_messages([HumanMessage("Hi"), AIMessage("Hello!")])
    history.messages   # [HumanMessage("Hi"), AIMessage("Hello!")], as given
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import BaseMessage

from chatledger import (
    AsyncSupportsLog,
    ChatMemoryRepository,
    Message,
    SupportsLog,
    is_async_repository,
    validate_conversation_id,
)
from chatledger_langchain.convert import from_langchain, to_langchain

__all__ = ["ChatLedgerMessageHistory"]

_MEMORY_METHODS = ("add", "get", "clear")


class _Calls:
    """The three calls a history makes, on a memory or on a repository's log."""

    def __init__(self, store: object) -> None:
        methods = [getattr(store, name, None) for name in _MEMORY_METHODS]
        if all(callable(method) for method in methods):
            kinds = {inspect.iscoroutinefunction(method) for method in methods}
            if len(kinds) > 1:
                raise TypeError(
                    f"{type(store).__name__}'s add, get and clear must all be "
                    "coroutine functions (an async memory) or none of them"
                )
            self.is_async = kinds == {True}
            add, get, clear = methods
        elif isinstance(store, ChatMemoryRepository):
            self.is_async = is_async_repository(store)
            log = AsyncSupportsLog if self.is_async else SupportsLog
            if not isinstance(store, log):
                raise TypeError(
                    f"{type(store).__name__} does not keep conversations as logs "
                    f"({log.__name__}), so it cannot keep every message a history "
                    "is given; give a memory of it (MessageWindowChatMemory), "
                    "whose window then decides what is kept"
                )
            repository: Any = store
            add = repository.append_to_log
            get = repository.find_by_conversation_id
            clear = repository.delete_by_conversation_id
        else:
            raise TypeError(
                "memory_or_repository must be a chatledger memory (add, get, "
                "clear), an async memory, or a repository, sync or async, not "
                f"{type(store).__name__}"
            )
        self.add: Callable[[str, list[Message]], Any] = add  # type: ignore[assignment]
        self.get: Callable[[str], Any] = get  # type: ignore[assignment]
        self.clear: Callable[[str], Any] = clear  # type: ignore[assignment]


class ChatLedgerMessageHistory(BaseChatMessageHistory):
    """One conversation of a chatledger store, as LangChain's chat history.

    ``BaseChatMessageHistory`` is deprecated in LangChain 1.x (see
    https://docs.langchain.com/oss/python/langchain/short-term-memory); with
    ``create_agent``, use :class:`chatledger_langchain.ChatLedgerMiddleware`.

    Args:
        memory_or_repository: What stores the conversation:

            - a repository, sync or async, that keeps each conversation as a
              log (every built-in one): every message given is kept, and
              :attr:`messages` is the whole conversation, system messages
              and tool messages included, in the order added;
            - a memory (``add``, ``get`` and ``clear``, such as
              ``MessageWindowChatMemory``) or an async memory (the same
              names, coroutine functions): its window is what
              :attr:`messages` reads, while a memory over a log still stores
              every message.
        conversation_id: The conversation, checked before any I/O.

    Messages convert with :func:`~chatledger_langchain.from_langchain` and
    :func:`~chatledger_langchain.to_langchain`, so they read back equal to
    those added: a message added without an ``id`` is stored under a new one
    and read back without one. ``add_messages`` stores a batch in one atomic
    append: concurrent writers lose nothing, and a message whose ``id`` the
    conversation holds is not stored again (a retried batch is a no-op).
    Following chatledger's rule for a re-sent system prompt, a system
    message equal to the one in force is not stored again.

    A sync store serves the sync methods (``messages``, ``add_messages``,
    ``clear``) and the async ones, which run it in a thread; an async store
    serves the async methods (``aget_messages``, ``aadd_messages``,
    ``aclear``, which ``RunnableWithMessageHistory.ainvoke`` calls), while
    the sync ones raise ``TypeError``.
    """

    def __init__(self, memory_or_repository: object, conversation_id: str) -> None:
        """Keep ``conversation_id`` of ``memory_or_repository``.

        Raises:
            InvalidConversationIdError: for a bad id.
            TypeError: for a store that is neither a memory nor a repository,
                or a repository that does not keep logs.
        """
        super().__init__()
        self.conversation_id = validate_conversation_id(conversation_id)
        self._calls = _Calls(memory_or_repository)
        self.store = memory_or_repository

    def __repr__(self) -> str:
        return f"ChatLedgerMessageHistory({self.store!r}, {self.conversation_id!r})"

    def _sync(self, method: str) -> _Calls:
        if self._calls.is_async:
            raise TypeError(
                f"this history stores through an async store, so {method} cannot "
                "be used: call aget_messages, aadd_messages and aclear (or "
                "ainvoke a RunnableWithMessageHistory)"
            )
        return self._calls

    async def _awaited(self, call: Callable[..., Any], *args: Any) -> Any:
        if self._calls.is_async:
            awaitable: Awaitable[Any] = call(*args)
            return await awaitable
        return await asyncio.to_thread(call, *args)

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The stored messages, oldest first, as LangChain messages."""
        return to_langchain(self._sync("messages").get(self.conversation_id))

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Store ``messages`` in one atomic append.

        Raises:
            UnsupportedContentError: before any I/O, for a message that cannot
                be stored (see :func:`~chatledger_langchain.from_langchain`).
        """
        calls = self._sync("add_messages")
        batch = from_langchain(messages)
        if batch:
            calls.add(self.conversation_id, batch)

    def clear(self) -> None:
        """Delete the conversation."""
        self._sync("clear").clear(self.conversation_id)

    async def aget_messages(self) -> list[BaseMessage]:
        """The stored messages, oldest first, as LangChain messages."""
        return to_langchain(await self._awaited(self._calls.get, self.conversation_id))

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Store ``messages`` in one atomic append (see :meth:`add_messages`)."""
        batch = from_langchain(messages)
        if batch:
            await self._awaited(self._calls.add, self.conversation_id, batch)

    async def aclear(self) -> None:
        """Delete the conversation."""
        await self._awaited(self._calls.clear, self.conversation_id)
