"""ChatLedgerMessageHistory on real databases, in LangChain's own flows."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from typing import Any

import pytest

pytest.importorskip("langchain_core")

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import RunnableLambda
from langchain_core.runnables.history import RunnableWithMessageHistory

from chatledger import (
    InvalidConversationIdError,
    Message,
    MessageWindowChatMemory,
    Role,
)
from chatledger.convert import UnsupportedContentError
from chatledger_langchain import ChatLedgerMessageHistory
from tests.langchain.conftest import open_async

deprecated_runnable = pytest.mark.filterwarnings(
    "ignore:RunnableWithMessageHistory is deprecated"
)


def _texts(messages: Sequence[BaseMessage]) -> list[tuple[str, Any]]:
    return [(m.type, m.content) for m in messages]


def test_history_is_a_langchain_chat_history(repository: Any) -> None:
    memory = MessageWindowChatMemory(repository, max_messages=4)
    history = ChatLedgerMessageHistory(memory, "c1")
    assert isinstance(history, BaseChatMessageHistory)
    history.add_user_message("U1")
    history.add_ai_message("A1")
    history.add_messages([HumanMessage("U2"), AIMessage("A2"), HumanMessage("U3")])
    # The window (4 messages, whole turns) decides what is kept.
    assert _texts(history.messages) == [("human", "U2"), ("ai", "A2"), ("human", "U3")]
    assert [m.content for m in memory.get("c1")] == ["U2", "A2", "U3"]
    history.clear()
    assert history.messages == []
    assert repository.find_conversation_ids() == []


def test_history_over_a_repository_keeps_every_message(repository: Any) -> None:
    history = ChatLedgerMessageHistory(repository, "c1")
    batch = [HumanMessage(f"U{i}", id=f"h{i}") for i in range(30)]
    history.add_messages(batch)
    history.add_messages(batch[-2:])  # a retry: the ids are stored already
    assert history.messages == batch


def test_tool_rounds_come_back_as_they_were_added(repository: Any) -> None:
    history = ChatLedgerMessageHistory(repository, "tools")
    added = [
        HumanMessage("Weather in Rome?", id="h1"),
        AIMessage(
            "",
            id="a1",
            tool_calls=[
                {"name": "weather", "args": {"city": "Rome"}, "id": "c1"},
                {"name": "weather", "args": {"city": "Oslo"}, "id": "c2"},
            ],
        ),
        ToolMessage("24", tool_call_id="c1", name="weather", id="t1"),
        ToolMessage("3", tool_call_id="c2", name="weather", id="t2"),
        AIMessage("Rome 24, Oslo 3.", id="a2", response_metadata={"model": "fake"}),
    ]
    history.add_messages(added)
    assert history.messages == added
    stored = repository.find_by_conversation_id("tools")
    assert [m.role for m in stored] == [
        Role.USER,
        Role.ASSISTANT,
        Role.TOOL,
        Role.TOOL,
        Role.ASSISTANT,
    ]
    assert stored[1].tool_calls[1].arguments == '{"city":"Oslo"}'


@deprecated_runnable
def test_runnable_with_message_history(repository: Any) -> None:
    memory = MessageWindowChatMemory(repository, max_messages=20)
    seen: list[list[BaseMessage]] = []

    def record(prompt_value: Any) -> Any:
        seen.append(prompt_value.to_messages())
        return prompt_value

    prompt = ChatPromptTemplate.from_messages(
        [
            ("system", "You are terse."),
            MessagesPlaceholder(variable_name="history"),
            ("human", "{question}"),
        ]
    )
    model = FakeListChatModel(responses=["Paris.", "About 2 million.", "Yes."])
    chain = RunnableWithMessageHistory(
        prompt | RunnableLambda(record) | model,
        lambda session_id: ChatLedgerMessageHistory(memory, session_id),
        input_messages_key="question",
        history_messages_key="history",
    )
    config: Any = {"configurable": {"session_id": "user-42"}}
    first = chain.invoke({"question": "Capital of France?"}, config=config)
    second = chain.invoke({"question": "Population?"}, config=config)
    third = asyncio.run(chain.ainvoke({"question": "Sure?"}, config=config))
    assert [first.content, second.content, third.content] == [
        "Paris.",
        "About 2 million.",
        "Yes.",
    ]
    assert _texts(seen[1]) == [
        ("system", "You are terse."),
        ("human", "Capital of France?"),
        ("ai", "Paris."),
        ("human", "Population?"),
    ]
    assert [(m.role, m.content) for m in memory.get("user-42")] == [
        (Role.USER, "Capital of France?"),
        (Role.ASSISTANT, "Paris."),
        (Role.USER, "Population?"),
        (Role.ASSISTANT, "About 2 million."),
        (Role.USER, "Sure?"),
        (Role.ASSISTANT, "Yes."),
    ]
    other: Any = {"configurable": {"session_id": "user-7"}}
    chain.invoke({"question": "Hi"}, config=other)
    assert sorted(repository.find_conversation_ids()) == ["user-42", "user-7"]


def test_concurrent_writers_lose_nothing(repository: Any) -> None:
    memory = MessageWindowChatMemory(repository, max_messages=10_000)
    writers, batches = 8, 10
    errors: list[BaseException] = []

    def write(writer: int) -> None:
        history = ChatLedgerMessageHistory(memory, "shared")
        try:
            for number in range(batches):
                name = f"{writer}-{number}"
                history.add_messages(
                    [HumanMessage(name, id=f"h{name}"), AIMessage(name, id=f"a{name}")]
                )
        except BaseException as exc:  # re-raised in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    stored = ChatLedgerMessageHistory(memory, "shared").messages
    assert len(stored) == writers * batches * 2
    assert sorted(m.id or "" for m in stored) == sorted(
        f"{kind}{w}-{n}"
        for kind in "ha"
        for w in range(writers)
        for n in range(batches)
    )
    for human, ai in zip(stored[::2], stored[1::2], strict=True):
        assert (human.type, ai.type, human.content) == ("human", "ai", ai.content)


class _AsyncMemory:
    """An async memory: ``add``, ``get`` and ``clear`` are coroutine functions."""

    def __init__(self, memory: MessageWindowChatMemory) -> None:
        self.memory = memory
        self.calls: list[str] = []

    async def add(self, conversation_id: str, messages: Sequence[Message]) -> None:
        self.calls.append("add")
        self.memory.add(conversation_id, messages)

    async def get(self, conversation_id: str) -> list[Message]:
        self.calls.append("get")
        return self.memory.get(conversation_id)

    async def clear(self, conversation_id: str) -> None:
        self.calls.append("clear")
        self.memory.clear(conversation_id)


def test_async_methods_use_an_async_memory(repository: Any) -> None:
    store = _AsyncMemory(MessageWindowChatMemory(repository))
    history = ChatLedgerMessageHistory(store, "c1")

    async def run() -> list[BaseMessage]:
        await history.aadd_messages([HumanMessage("U", id="u"), AIMessage("A", id="a")])
        found = await history.aget_messages()
        await history.aclear()
        return found

    assert asyncio.run(run()) == [HumanMessage("U", id="u"), AIMessage("A", id="a")]
    assert store.calls == ["add", "get", "clear"]
    assert repository.find_conversation_ids() == []
    with pytest.raises(TypeError, match="async"):
        _ = history.messages


def test_async_methods_of_a_sync_store_run_it_in_a_thread(repository: Any) -> None:
    history = ChatLedgerMessageHistory(repository, "c1")

    async def run() -> list[BaseMessage]:
        await history.aadd_messages([HumanMessage("U", id="u")])
        return await history.aget_messages()

    assert asyncio.run(run()) == [HumanMessage("U", id="u")]


def test_bad_input_is_refused_before_any_write(repository: Any) -> None:
    with pytest.raises(TypeError, match="memory"):
        ChatLedgerMessageHistory(object(), "c1")
    with pytest.raises(InvalidConversationIdError):
        ChatLedgerMessageHistory(repository, " padded ")
    history = ChatLedgerMessageHistory(repository, "c1")
    bad = ToolMessage("x", tool_call_id="t", artifact=object())
    with pytest.raises(UnsupportedContentError, match=r"messages\[1\]"):
        history.add_messages([HumanMessage("kept out"), bad])
    assert repository.find_conversation_ids() == []


@pytest.mark.parametrize("over", ["repository", "memory"])
def test_a_message_reads_back_as_it_was_given(repository: Any, over: str) -> None:
    store = repository if over == "repository" else MessageWindowChatMemory(repository)
    history = ChatLedgerMessageHistory(store, "c1")
    history.add_messages([HumanMessage("hello")])
    history.add_messages([HumanMessage("hello")])  # no id: a message of its own
    assert history.messages == [HumanMessage("hello"), HumanMessage("hello")]
    stored = repository.find_by_conversation_id("c1")
    assert len({m.id for m in stored}) == 2  # the store's ids, kept inside


def test_a_repository_keeps_every_message_it_is_given(repository: Any) -> None:
    history = ChatLedgerMessageHistory(repository, "c1")
    given = [
        SystemMessage("Be brief."),
        HumanMessage("Hi"),
        AIMessage("Hello."),
        SystemMessage("Be kind."),
        ToolMessage("late result", tool_call_id="never-called"),
        HumanMessage("Still there?"),
    ]
    history.add_messages(given[:3])
    history.add_messages(given[3:])
    assert history.messages == given
    assert str(history).splitlines()[0] == "System: Be brief."


def test_an_async_repository_serves_the_async_methods(
    async_repository_url: str,
) -> None:
    async def main() -> tuple[list[BaseMessage], list[BaseMessage], list[str]]:
        repository = open_async(async_repository_url)
        try:
            history = ChatLedgerMessageHistory(repository, "c1")
            await history.aadd_messages([HumanMessage("hello"), AIMessage("hi")])
            found = await history.aget_messages()
            with pytest.raises(TypeError, match="aget_messages"):
                _ = history.messages
            with pytest.raises(TypeError, match="aadd_messages"):
                history.add_messages([HumanMessage("sync")])
            with pytest.raises(TypeError, match="aclear"):
                history.clear()
            await history.aclear()
            emptied = await history.aget_messages()
            return found, emptied, await repository.find_conversation_ids()
        finally:
            await repository.drop_schema()
            await repository.aclose()

    found, emptied, left = asyncio.run(main())
    assert found == [HumanMessage("hello"), AIMessage("hi")]
    assert (emptied, left) == ([], [])


@deprecated_runnable
def test_runnable_with_message_history_over_an_async_repository(
    async_repository_url: str,
) -> None:
    async def main() -> list[Any]:
        repository = open_async(async_repository_url)
        try:
            chain = RunnableWithMessageHistory(
                FakeListChatModel(responses=["Paris.", "Yes."]),
                lambda session_id: ChatLedgerMessageHistory(repository, session_id),
            )
            config: Any = {"configurable": {"session_id": "user-42"}}
            await chain.ainvoke([HumanMessage("Capital of France?")], config)
            await chain.ainvoke([HumanMessage("Sure?")], config)
            return [
                m.content for m in await repository.find_by_conversation_id("user-42")
            ]
        finally:
            await repository.drop_schema()
            await repository.aclose()

    assert asyncio.run(main()) == ["Capital of France?", "Paris.", "Sure?", "Yes."]


def test_a_repository_without_a_log_is_refused() -> None:
    class WindowOnly:
        def find_conversation_ids(self) -> list[str]:
            return []

        def find_by_conversation_id(self, conversation_id: str) -> list[Message]:
            return []

        def save_all(self, conversation_id: str, messages: Sequence[Message]) -> None:
            pass

        def delete_by_conversation_id(self, conversation_id: str) -> None:
            pass

    with pytest.raises(TypeError, match="SupportsLog"):
        ChatLedgerMessageHistory(WindowOnly(), "c1")
