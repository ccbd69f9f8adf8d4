"""Pickled stores: made from a URL they reconnect, else unpickling says why.

LlamaIndex's memories pickle their store with them (and leave out, with a
logged warning, a field that refuses to be pickled), so each case pickles the
memory as well as the store.
"""

from __future__ import annotations

import asyncio
import pickle
from typing import Any

import pytest

pytest.importorskip("llama_index.core")

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.memory import ChatMemoryBuffer, Memory

from chatledger import AsyncInMemoryChatMemoryRepository, InMemoryChatMemoryRepository
from chatledger_llama_index import (
    ChatLedgerChatStore,
    ChatLedgerMemoryStore,
    StoreNotPicklableError,
)
from tests.llama_index.conftest import Database


def chat(role: str, text: str) -> ChatMessage:
    return ChatMessage(role=role, content=text)


def test_a_memory_store_from_a_url_reconnects(database: Database) -> None:
    async def scenario() -> tuple[list[ChatMessage], list[ChatMessage], str]:
        store = ChatLedgerMemoryStore.from_url(
            database.sync_url, table_name=database.table_name
        )
        memory = Memory.from_defaults(session_id="alice", chat_store=store)
        await memory.aput(chat("user", "Hi"))
        again: Memory = pickle.loads(pickle.dumps(memory))
        other: ChatLedgerMemoryStore = pickle.loads(pickle.dumps(store))
        try:
            assert again.sql_store is not store
            await again.aput(chat("assistant", "Hello!"))
            return (
                await again.aget_all(),
                await other.get_messages("alice"),
                type(again.sql_store.repository).__name__,  # type: ignore[attr-defined]
            )
        finally:
            for opened in (store, again.sql_store, other):
                await opened.repository.aclose()  # type: ignore[attr-defined]

    seen, read, kind = asyncio.run(scenario())
    assert seen == read == [chat("user", "Hi"), chat("assistant", "Hello!")]
    assert kind == "AsyncSqlChatMemoryRepository"
    stored = database.repository.find_by_conversation_id("alice")
    assert [m.content for m in stored] == ["Hi", "Hello!"]


def test_a_chat_store_from_urls_reconnects(database: Database) -> None:
    store = ChatLedgerChatStore.from_url(
        database.sync_url, async_url=database.async_url, table_name=database.table_name
    )
    memory = ChatMemoryBuffer.from_defaults(chat_store=store, chat_store_key="bob")
    memory.put(chat("user", "Hi"))
    again: ChatMemoryBuffer = pickle.loads(pickle.dumps(memory))
    try:
        again.put(chat("assistant", "Hello!"))
        assert again.get_all() == [chat("user", "Hi"), chat("assistant", "Hello!")]
        reopened = again.chat_store
        assert isinstance(reopened, ChatLedgerChatStore)
        assert reopened.async_repository is not None

        async def read() -> list[ChatMessage]:
            try:
                return await reopened.aget_messages("bob")
            finally:
                await reopened.async_repository.aclose()  # type: ignore[union-attr]
                await store.async_repository.aclose()  # type: ignore[union-attr]

        assert asyncio.run(read()) == again.get_all()
    finally:
        for opened in (store, again.chat_store):
            opened.repository.close()  # type: ignore[attr-defined, union-attr]
    with pytest.raises(TypeError, match="needs a URL"):
        ChatLedgerChatStore.from_url()


def test_a_store_of_repository_objects_refuses_to_be_unpickled() -> None:
    memory_store = ChatLedgerMemoryStore(AsyncInMemoryChatMemoryRepository())
    chat_store = ChatLedgerChatStore(InMemoryChatMemoryRepository())
    memories: list[Any] = [
        memory_store,
        chat_store,
        Memory.from_defaults(session_id="alice", chat_store=memory_store),
        # Not silently swapped for ChatMemoryBuffer's default in-memory store,
        # nor handed back without its repository.
        ChatMemoryBuffer.from_defaults(chat_store=chat_store, chat_store_key="bob"),
    ]
    for pickled in memories:
        data = pickle.dumps(pickled)
        with pytest.raises(StoreNotPicklableError, match=r"from_url\(url\)"):
            pickle.loads(data)


def test_a_store_of_one_process_refuses_to_be_unpickled() -> None:
    store = ChatLedgerMemoryStore.from_url("memory://")
    with pytest.raises(StoreNotPicklableError, match="lives in the process"):
        pickle.loads(pickle.dumps(store))
    chat_store = ChatLedgerChatStore.from_url("memory://")
    with pytest.raises(StoreNotPicklableError, match="'memory://'"):
        pickle.loads(pickle.dumps(chat_store))
