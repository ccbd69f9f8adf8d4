"""The stores in LlamaIndex's own flows: its memories and a chat engine."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("llama_index.core")

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.chat_engine import SimpleChatEngine
from llama_index.core.llms import MockLLM
from llama_index.core.memory import (
    ChatMemoryBuffer,
    ChatSummaryMemoryBuffer,
    Memory,
)
from pydantic import ValidationError

from chatledger import InMemoryChatMemoryRepository, Role
from chatledger_llama_index import ChatLedgerChatStore, ChatLedgerMemoryStore
from tests.llama_index.conftest import Database


def chat(role: str, text: str) -> ChatMessage:
    return ChatMessage(role=role, content=text)


def test_chat_memory_buffer_keeps_its_history_in_the_database(
    database: Database,
) -> None:
    store = ChatLedgerChatStore(database.repository)
    memory = ChatMemoryBuffer.from_defaults(chat_store=store, chat_store_key="user-42")
    memory.put(chat("user", "Hi"))
    memory.put(chat("assistant", "Hello!"))
    assert memory.get() == [chat("user", "Hi"), chat("assistant", "Hello!")]
    stored = database.repository.find_by_conversation_id("user-42")
    assert [(m.role, m.content) for m in stored] == [
        (Role.USER, "Hi"),
        (Role.ASSISTANT, "Hello!"),
    ]
    # The token limit trims what the memory gives the model, not what is stored.
    small = ChatMemoryBuffer.from_defaults(
        chat_store=store, chat_store_key="user-42", token_limit=2
    )
    assert small.get() == [chat("assistant", "Hello!")]
    memory.set([chat("user", "Again")])
    fresh = ChatMemoryBuffer.from_defaults(
        chat_store=ChatLedgerChatStore(database.new_repository()),
        chat_store_key="user-42",
    )
    assert fresh.get_all() == [chat("user", "Again")]
    memory.reset()
    assert database.repository.find_conversation_ids() == []


def test_chat_summary_memory_buffer_under_its_limit(database: Database) -> None:
    store = ChatLedgerChatStore(database.repository)
    memory = ChatSummaryMemoryBuffer.from_defaults(
        chat_store=store, chat_store_key="user-42", token_limit=1000
    )
    memory.put(chat("user", "Hi"))
    memory.put(chat("assistant", "Hello!"))
    assert memory.get() == store.get_messages("user-42")
    assert len(database.repository.find_by_conversation_id("user-42")) == 2


def test_simple_chat_engine_two_turns(database: Database) -> None:
    store = ChatLedgerChatStore(database.repository)
    memory = ChatMemoryBuffer.from_defaults(chat_store=store, chat_store_key="user-42")
    engine = SimpleChatEngine.from_defaults(llm=MockLLM(), memory=memory)
    first = engine.chat("Capital of France?").response
    second = engine.chat("And of Italy?").response
    # MockLLM answers with its prompt: the second prompt held the first turn.
    assert "Capital of France?" in second
    assert first in second
    stored = database.repository.find_by_conversation_id("user-42")
    assert [(m.role, m.content) for m in stored] == [
        (Role.USER, "Capital of France?"),
        (Role.ASSISTANT, first),
        (Role.USER, "And of Italy?"),
        (Role.ASSISTANT, second),
    ]
    fresh = ChatLedgerChatStore(database.new_repository())
    assert fresh.get_messages("user-42") == engine.chat_history
    again = SimpleChatEngine.from_defaults(
        llm=MockLLM(),
        memory=ChatMemoryBuffer.from_defaults(
            chat_store=fresh, chat_store_key="user-42"
        ),
    )
    third = again.chat("And of Spain?").response
    assert second in third
    assert len(database.repository.find_by_conversation_id("user-42")) == 6


def test_simple_chat_engine_async_two_turns(database: Database) -> None:
    async def scenario(async_repository: Any) -> tuple[str, str, list[ChatMessage]]:
        # ChatMemoryBuffer.aget reads through the sync get_messages in a thread,
        # and aput writes through async_add_message: the engine needs both.
        store = ChatLedgerChatStore(
            database.repository, async_repository=async_repository
        )
        memory = ChatMemoryBuffer.from_defaults(
            chat_store=store, chat_store_key="user-7"
        )
        engine = SimpleChatEngine.from_defaults(llm=MockLLM(), memory=memory)
        first = (await engine.achat("Capital of France?")).response
        second = (await engine.achat("And of Italy?")).response
        return first, second, await store.aget_messages("user-7")

    first, second, read = database.run(scenario)
    assert first in second
    assert read == [
        chat("user", "Capital of France?"),
        chat("assistant", first),
        chat("user", "And of Italy?"),
        chat("assistant", second),
    ]
    fresh = ChatLedgerChatStore(database.new_repository())
    assert fresh.get_messages("user-7") == read


def test_memory_takes_the_memory_store_not_the_chat_store() -> None:
    # Memory stores through an AsyncDBChatStore; ChatLedgerChatStore is a
    # BaseChatStore, for ChatMemoryBuffer. This fails when LlamaIndex changes it.
    store = ChatLedgerChatStore(InMemoryChatMemoryRepository())
    with pytest.raises(ValidationError, match="AsyncDBChatStore"):
        Memory.from_defaults(session_id="user-42", chat_store=store)  # type: ignore[arg-type]
    memory_store = ChatLedgerMemoryStore(InMemoryChatMemoryRepository())
    memory = Memory.from_defaults(session_id="user-42", chat_store=memory_store)
    assert memory.sql_store is memory_store


def test_simple_chat_engine_over_memory_two_turns(database: Database) -> None:
    store = ChatLedgerMemoryStore(database.new_repository())
    memory = Memory.from_defaults(session_id="user-42", chat_store=store)
    engine = SimpleChatEngine.from_defaults(llm=MockLLM(), memory=memory)
    first = engine.chat("Capital of France?").response
    second = engine.chat("And of Italy?").response
    assert first in second
    stored = database.repository.find_by_conversation_id("user-42")
    assert [(m.role, m.content) for m in stored] == [
        (Role.USER, "Capital of France?"),
        (Role.ASSISTANT, first),
        (Role.USER, "And of Italy?"),
        (Role.ASSISTANT, second),
    ]


def test_simple_chat_engine_over_memory_async(database: Database) -> None:
    async def scenario(async_repository: Any) -> tuple[str, str]:
        memory = Memory.from_defaults(
            session_id="user-7", chat_store=ChatLedgerMemoryStore(async_repository)
        )
        engine = SimpleChatEngine.from_defaults(llm=MockLLM(), memory=memory)
        first = (await engine.achat("Capital of France?")).response
        second = (await engine.achat("And of Italy?")).response
        return first, second

    first, second = database.run(scenario)
    assert first in second
    stored = database.repository.find_by_conversation_id("user-7")
    assert [m.content for m in stored] == [
        "Capital of France?",
        first,
        "And of Italy?",
        second,
    ]


def test_function_agent_keeps_its_tool_round_in_the_log(database: Database) -> None:
    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.core.llms import MockFunctionCallingLLM
    from llama_index.core.tools import FunctionTool

    def weather() -> str:
        """The weather in Rome."""
        return "24 C"

    async def scenario(async_repository: Any) -> str:
        memory = Memory.from_defaults(
            session_id="agent-1", chat_store=ChatLedgerMemoryStore(async_repository)
        )
        agent = FunctionAgent(
            tools=[FunctionTool.from_defaults(weather)], llm=MockFunctionCallingLLM()
        )
        return str(await agent.run("Weather in Rome?", memory=memory))

    answer = database.run(scenario)
    stored = database.repository.find_by_conversation_id("agent-1")
    assert [m.role for m in stored] == [
        Role.USER,
        Role.ASSISTANT,
        Role.TOOL,
        Role.ASSISTANT,
    ]
    [call] = stored[1].tool_calls
    [result] = stored[2].tool_responses
    assert (call.name, result.id, result.data) == ("weather", call.id, "24 C")
    assert stored[3].content == answer
