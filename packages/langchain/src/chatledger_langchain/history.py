"""A LangChain chat message history that stores through chatledger.

Example:
    from langchain_core.language_models.fake_chat_models import FakeListChatModel
    from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
    from langchain_core.runnables.history import RunnableWithMessageHistory

    from chatledger import MessageWindowChatMemory, connect
    from chatledger_langchain import ChatLedgerMessageHistory

    memory = MessageWindowChatMemory(connect("sqlite:///chat.db"), max_messages=40)
    prompt = ChatPromptTemplate.from_messages(
        [MessagesPlaceholder("history"), ("human", "{question}")]
    )
    model = FakeListChatModel(responses=["Hello!"])   # stands for a chat model
    chain = RunnableWithMessageHistory(
        prompt | model,
        lambda session_id: ChatLedgerMessageHistory(memory, session_id),
        input_messages_key="question",
        history_messages_key="history",
    )
    chain.invoke({"question": "Hi"}, {"configurable": {"session_id": "user-42"}})
    memory.get("user-42")   # the question and the answer
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import BaseMessage

from chatledger import (
    ChatMemoryRepository,
    MessageWindowChatMemory,
    validate_conversation_id,
)
from chatledger_langchain.convert import from_langchain, to_langchain

__all__ = ["ChatLedgerMessageHistory"]

#: The window given to a bare repository: more messages than a conversation holds.
UNBOUNDED = 2**31 - 1

_MEMORY_METHODS = ("add", "get", "clear")


def _has_methods(store: object, async_: bool) -> bool:
    methods = [getattr(store, name, None) for name in _MEMORY_METHODS]
    if not all(callable(method) for method in methods):
        return False
    return all(inspect.iscoroutinefunction(m) == async_ for m in methods)


class ChatLedgerMessageHistory(BaseChatMessageHistory):
    """One conversation of a chatledger memory, as LangChain's chat history.

    Args:
        memory_or_repository: A memory (``add``, ``get``, ``clear``, such as
            ``MessageWindowChatMemory``), whose window decides what is kept;
            a repository, which keeps every message (it is used through a
            window memory of :data:`UNBOUNDED` messages, so appends are
            atomic where the repository can do them, and a message whose id
            is stored is not stored again); or an async memory (``add``,
            ``get`` and ``clear`` coroutine functions), used by the async
            methods, while the sync ones raise ``TypeError``. An async
            repository is used through its async window memory.
        conversation_id: The conversation, checked before any I/O.

    The sync methods store through a sync memory or repository; the async
    ones through an async memory, else LangChain's default (the sync method
    in a thread). Messages convert with :func:`from_langchain` and
    :func:`to_langchain`, so nothing LangChain holds is lost; a message
    without an ``id`` gets one when stored.
    """

    def __init__(self, memory_or_repository: object, conversation_id: str) -> None:
        """Keep ``conversation_id`` of ``memory_or_repository``.

        Raises:
            InvalidConversationIdError: for a bad id.
            TypeError: for a store that is neither a memory nor a repository.
        """
        super().__init__()
        self.conversation_id = validate_conversation_id(conversation_id)
        store = memory_or_repository
        self._memory: Any = None
        self._async_memory: Any = None
        if _has_methods(store, async_=True):
            self._async_memory = store
        elif _has_methods(store, async_=False):
            self._memory = store
        elif isinstance(store, ChatMemoryRepository):
            self._memory = MessageWindowChatMemory(store, max_messages=UNBOUNDED)
        else:
            raise TypeError(
                "memory_or_repository must be a chatledger memory (add, get, "
                "clear), an async memory or a repository, not "
                f"{type(store).__name__}"
            )
        self.store = store

    def __repr__(self) -> str:
        return f"ChatLedgerMessageHistory({self.store!r}, {self.conversation_id!r})"

    def _sync_memory(self) -> Any:
        if self._memory is None:
            raise TypeError(
                "this history stores through an async memory: use aget_messages, "
                "aadd_messages and aclear"
            )
        return self._memory

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The stored messages, oldest first, as LangChain messages."""
        return to_langchain(self._sync_memory().get(self.conversation_id))

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Store ``messages`` in one append; ids already stored are skipped.

        Raises:
            UnsupportedContentError: before any I/O, for a message that cannot
                be stored (see :func:`from_langchain`).
        """
        batch = from_langchain(messages)
        memory = self._sync_memory()
        if batch:
            memory.add(self.conversation_id, batch)

    def clear(self) -> None:
        """Delete the conversation."""
        self._sync_memory().clear(self.conversation_id)

    async def aget_messages(self) -> list[BaseMessage]:
        """The stored messages, read through the async memory when there is one."""
        if self._async_memory is None:
            return await super().aget_messages()
        return to_langchain(await self._async_memory.get(self.conversation_id))

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Store ``messages`` in one append, through the async memory if any."""
        if self._async_memory is None:
            await super().aadd_messages(messages)
            return
        batch = from_langchain(messages)
        if batch:
            await self._async_memory.add(self.conversation_id, batch)

    async def aclear(self) -> None:
        """Delete the conversation, through the async memory if any."""
        if self._async_memory is None:
            await super().aclear()
            return
        await self._async_memory.clear(self.conversation_id)
