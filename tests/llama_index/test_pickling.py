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
from llama_index.core.memory import ChatMemoryBuffer

from chatledger import InMemoryChatMemoryRepository
from chatledger_llama_index import ChatLedgerChatStore, StoreNotPicklableError
from tests.llama_index.conftest import Database


def chat(role: str, text: str) -> ChatMessage:
    return ChatMessage(role=role, content=text)


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
    chat_store = ChatLedgerChatStore(InMemoryChatMemoryRepository())
    memories: list[Any] = [
        chat_store,
        # Not silently swapped for ChatMemoryBuffer's default in-memory store,
        # nor handed back without its repository.
        ChatMemoryBuffer.from_defaults(chat_store=chat_store, chat_store_key="bob"),
    ]
    for pickled in memories:
        data = pickle.dumps(pickled)
        with pytest.raises(StoreNotPicklableError, match=r"from_url\(url\)"):
            pickle.loads(data)


def test_a_store_of_one_process_refuses_to_be_unpickled() -> None:
    chat_store = ChatLedgerChatStore.from_url("memory://")
    with pytest.raises(StoreNotPicklableError, match="lives in the process"):
        pickle.loads(pickle.dumps(chat_store))
