"""ChatLedgerMiddleware: create_agent's memory on real databases, sync and async."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("langchain.agents")

from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Command

from chatledger import (
    AsyncMessageWindowChatMemory,
    InvalidConversationIdError,
    Message,
    MessageWindowChatMemory,
    Role,
    TokenWindowChatMemory,
    ToolCall,
    ToolResponse,
)
from chatledger.convert import UnsupportedContentError
from chatledger_langchain import ChatLedgerMessageHistory, ChatLedgerMiddleware
from tests.langchain.conftest import open_async
from tests.langchain.models import (
    Hanging,
    ScriptedModel,
    broken,
    call,
    interrupted,
    script,
    weather,
)

C42: Any = {"configurable": {"conversation_id": "user-42"}}


def _said(messages: list[BaseMessage]) -> list[tuple[str, Any]]:
    return [(m.type, m.content) for m in messages]


def _user(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def _rome_agent(memory: Any, *more: AIMessage | str, **options: Any) -> Any:
    model = ScriptedModel(
        messages=script(call("weather", "call-1", city="Rome"), "Sunny.", *more)
    )
    middleware = ChatLedgerMiddleware(memory, **options)
    return model, create_agent(model, tools=[weather], middleware=[middleware])


def test_a_run_reads_the_window_and_stores_its_turn_once(repository: Any) -> None:
    memory = MessageWindowChatMemory(repository, max_messages=40)
    model, agent = _rome_agent(memory, "You asked about Rome.")
    first = agent.invoke(_user("Weather in Rome?"), C42)["messages"]
    assert _said(first) == [
        ("human", "Weather in Rome?"),
        ("ai", ""),
        ("tool", "Sunny in Rome"),
        ("ai", "Sunny."),
    ]
    stored = repository.find_by_conversation_id("user-42")
    assert [m.role for m in stored] == [
        Role.USER,
        Role.ASSISTANT,
        Role.TOOL,
        Role.ASSISTANT,
    ]
    assert stored[1].tool_calls == (ToolCall("call-1", "weather", '{"city":"Rome"}'),)
    assert stored[2].tool_responses == (
        ToolResponse("call-1", "weather", "Sunny in Rome"),
    )
    assert [m.id for m in stored] == [m.id for m in first]

    second = agent.invoke(_user("What did I ask?"), C42)["messages"]
    # The model saw the stored turn as run 1 left it: ids, tool calls, results.
    assert model.seen[2] == [*first, second[4]]
    assert second[:4] == first
    stored = repository.find_by_conversation_id("user-42")
    assert [m.content for m in stored][4:] == [
        "What did I ask?",
        "You asked about Rome.",
    ]
    assert len({m.id for m in stored}) == len(stored) == 6


def test_the_model_sees_the_window_while_the_log_keeps_all(repository: Any) -> None:
    memory = MessageWindowChatMemory(repository, max_messages=3)
    model = ScriptedModel(messages=script("A1", "A2", "A3"))
    agent: Any = create_agent(model, middleware=[ChatLedgerMiddleware(memory)])
    for question in ("Q1", "Q2", "Q3"):
        agent.invoke(_user(question), C42)
    # Whole turns only: Q2 A2 then the new question.
    assert _said(model.seen[2]) == [("human", "Q2"), ("ai", "A2"), ("human", "Q3")]
    stored = repository.find_by_conversation_id("user-42")
    assert [m.content for m in stored] == ["Q1", "A1", "Q2", "A2", "Q3", "A3"]


def test_system_messages_go_first_and_a_resent_one_is_stored_once(
    repository: Any,
) -> None:
    memory = MessageWindowChatMemory(repository)
    model = ScriptedModel(messages=script("A1", "A2"))
    agent: Any = create_agent(
        model, system_prompt="Be brief.", middleware=[ChatLedgerMiddleware(memory)]
    )
    rules = SystemMessage("Answer in French.")
    agent.invoke({"messages": [rules, HumanMessage("Q1")]}, C42)
    agent.invoke({"messages": [SystemMessage("Answer in French."), "Q2"]}, C42)
    assert _said(model.seen[1]) == [
        ("system", "Be brief."),
        ("system", "Answer in French."),
        ("human", "Q1"),
        ("ai", "A1"),
        ("human", "Q2"),
    ]
    stored = repository.find_by_conversation_id("user-42")
    assert [m.content for m in stored] == ["Answer in French.", "Q1", "A1", "Q2", "A2"]


def test_stored_messages_round_trip_without_duplicates(repository: Any) -> None:
    # A tool message of two responses is two ToolMessages with one id, and a
    # message the history stored without an id gets the store's in the view.
    memory = MessageWindowChatMemory(repository)
    memory.add(
        "user-42",
        [
            Message.user("Rome and Oslo?", id="u1"),
            Message.assistant(
                None,
                tool_calls=[
                    ToolCall("c1", "weather", '{"city":"Rome"}'),
                    ToolCall("c2", "weather", '{"city":"Oslo"}'),
                ],
                id="a1",
            ),
            Message.tool(
                [
                    ToolResponse("c1", "weather", "24"),
                    ToolResponse("c2", "weather", "3"),
                ],
                id="t1",
            ),
        ],
    )
    ChatLedgerMessageHistory(repository, "user-42").add_messages(
        [AIMessage("Rome 24, Oslo 3.")]
    )
    model = ScriptedModel(messages=script("Warmer in Rome."))
    agent: Any = create_agent(model, middleware=[ChatLedgerMiddleware(memory)])
    agent.invoke(_user("Which is warmer?"), C42)
    seen = model.seen[0]
    assert [(m.type, m.id) for m in seen[:4]] == [
        ("human", "u1"),
        ("ai", "a1"),
        ("tool", "t1"),
        ("tool", "t1"),
    ]
    assert [m.tool_call_id for m in seen[2:4] if isinstance(m, ToolMessage)] == [
        "c1",
        "c2",
    ]
    stored = repository.find_by_conversation_id("user-42")
    assert seen[4].id == stored[3].id
    assert [m.content for m in stored] == [
        "Rome and Oslo?",
        None,
        None,
        "Rome 24, Oslo 3.",
        "Which is warmer?",
        "Warmer in Rome.",
    ]


def test_the_conversation_comes_from_the_config(repository: Any) -> None:
    memory = MessageWindowChatMemory(repository)
    model = ScriptedModel(messages=script("A1", "A2"))
    agent: Any = create_agent(model, middleware=[ChatLedgerMiddleware(memory)])
    agent.invoke(_user("Q1"), {"configurable": {"thread_id": "t-7"}})
    both: Any = {"configurable": {"thread_id": "t-7", "conversation_id": "c-9"}}
    agent.invoke(_user("Q2"), both)
    assert sorted(repository.find_conversation_ids()) == ["c-9", "t-7"]
    with pytest.raises(InvalidConversationIdError, match="conversation_id"):
        agent.invoke(_user("Q3"))
    with pytest.raises(InvalidConversationIdError, match="whitespace"):
        agent.invoke(_user("Q3"), {"configurable": {"conversation_id": " c "}})
    assert len(model.seen) == 2
    assert sorted(repository.find_conversation_ids()) == ["c-9", "t-7"]


def test_input_chatledger_cannot_store_is_refused_before_the_model(
    repository: Any,
) -> None:
    memory = MessageWindowChatMemory(repository)
    model = ScriptedModel(messages=script("A1"))
    agent: Any = create_agent(model, middleware=[ChatLedgerMiddleware(memory)])
    odd = FunctionMessage(content="x", name="f")
    with pytest.raises(UnsupportedContentError, match="FunctionMessage"):
        agent.invoke({"messages": [HumanMessage("Q"), odd]}, C42)
    assert model.seen == []
    assert repository.find_conversation_ids() == []


@pytest.mark.parametrize("on_error", ["discard", "keep_prompt"])
@pytest.mark.parametrize("failure", ["model", "tool", "keyboard"])
def test_a_failed_run_stores_nothing_or_its_prompt(
    repository: Any, on_error: str, failure: str
) -> None:
    memory = MessageWindowChatMemory(repository)
    ChatLedgerMessageHistory(memory, "user-42").add_messages(
        [HumanMessage("Q0", id="q0"), AIMessage("A0", id="a0")]
    )
    scripts: dict[str, list[Any]] = {
        "model": [RuntimeError("model down")],
        "tool": [call("broken", "c1", city="Rome")],
        "keyboard": [call("interrupted", "c1", city="Rome")],
    }
    model = ScriptedModel(messages=script(*scripts[failure]))
    agent: Any = create_agent(
        model,
        tools=[broken, interrupted],
        middleware=[ChatLedgerMiddleware(memory, on_error=on_error)],  # type: ignore[arg-type]
    )
    raised = KeyboardInterrupt if failure == "keyboard" else RuntimeError
    question = HumanMessage("Weather?")
    with pytest.raises(raised):
        agent.invoke({"messages": [SystemMessage("Be brief."), question]}, C42)
    kept = [m.content for m in repository.find_by_conversation_id("user-42")]
    if on_error == "discard":
        assert kept == ["Q0", "A0"]
    else:
        assert kept == ["Q0", "A0", "Be brief.", "Weather?"]


@pytest.mark.parametrize("on_error", ["discard", "keep_prompt"])
def test_a_cancelled_run_stores_nothing_or_its_prompt(
    async_repository_url: str, on_error: str
) -> None:
    async def main() -> list[Any]:
        repository = open_async(async_repository_url)
        try:
            memory = AsyncMessageWindowChatMemory(repository)
            model = Hanging(messages=script())
            middleware = ChatLedgerMiddleware(memory, on_error=on_error)  # type: ignore[arg-type]
            agent: Any = create_agent(model, middleware=[middleware])
            run = asyncio.ensure_future(agent.ainvoke(_user("Weather?"), C42))
            await model.started.wait()
            run.cancel()
            with pytest.raises(asyncio.CancelledError):
                await run
            return [
                m.content for m in await repository.find_by_conversation_id("user-42")
            ]
        finally:
            await repository.drop_schema()
            await repository.aclose()

    kept = asyncio.run(main())
    assert kept == ([] if on_error == "discard" else ["Weather?"])


def test_an_async_memory_serves_ainvoke(async_repository_url: str) -> None:
    async def main() -> tuple[list[Message], list[list[BaseMessage]]]:
        repository = open_async(async_repository_url)
        try:
            memory = AsyncMessageWindowChatMemory(repository, max_messages=40)
            model, agent = _rome_agent(memory, "You asked about Rome.")
            await agent.ainvoke(_user("Weather in Rome?"), C42)
            await agent.ainvoke(_user("What did I ask?"), C42)
            with pytest.raises(TypeError, match="ainvoke"):
                agent.invoke(_user("Sync?"), C42)
            return await repository.find_by_conversation_id("user-42"), model.seen
        finally:
            await repository.drop_schema()
            await repository.aclose()

    stored, seen = asyncio.run(main())
    assert [m.content for m in stored] == [
        "Weather in Rome?",
        "",
        None,
        "Sunny.",
        "What did I ask?",
        "You asked about Rome.",
    ]
    assert [m.id for m in seen[2][:4]] == [m.id for m in stored[:4]]


def test_a_sync_memory_serves_ainvoke_too(repository: Any) -> None:
    memory = MessageWindowChatMemory(repository)
    _, agent = _rome_agent(memory)
    asyncio.run(agent.ainvoke(_user("Weather in Rome?"), C42))
    assert len(repository.find_by_conversation_id("user-42")) == 4


def test_an_interrupted_run_stores_its_turn_when_resumed(repository: Any) -> None:
    memory = MessageWindowChatMemory(repository)
    model = ScriptedModel(
        messages=script(call("weather", "call-1", city="Rome"), "Sunny.", "Again.")
    )
    # Any: LangChain's types make a list of two middleware state types neither.
    middleware: list[Any] = [
        ChatLedgerMiddleware(memory),
        HumanInTheLoopMiddleware(interrupt_on={"weather": True}),
    ]
    agent: Any = create_agent(
        model, tools=[weather], middleware=middleware, checkpointer=InMemorySaver()
    )
    config: Any = {"configurable": {"thread_id": "t-1"}}
    paused = agent.invoke(_user("Weather in Rome?"), config)
    assert "__interrupt__" in paused
    assert repository.find_conversation_ids() == []
    approve = {"decisions": [{"type": "approve"}]}
    done = agent.invoke(Command(resume=approve), config)["messages"]
    assert _said(done)[-2:] == [("tool", "Sunny in Rome"), ("ai", "Sunny.")]
    stored = repository.find_by_conversation_id("t-1")
    assert [m.id for m in stored] == [m.id for m in done]
    # The next run on the thread: its checkpoint holds run 1, stored already.
    again = agent.invoke(_user("And now?"), config)["messages"]
    stored = repository.find_by_conversation_id("t-1")
    assert [m.id for m in stored] == [m.id for m in again]
    assert len(stored) == 6


class _Graph(MessagesState):
    steps: list[str]


def test_the_agent_inside_a_langgraph_graph(repository: Any) -> None:
    memory = MessageWindowChatMemory(repository)
    model = ScriptedModel(messages=script("A1", "A2"))
    agent: Any = create_agent(model, middleware=[ChatLedgerMiddleware(memory)])

    def ask(state: _Graph) -> dict[str, Any]:
        return {"messages": [HumanMessage(f"Q{len(state['steps']) + 1}")]}

    def note(state: _Graph) -> dict[str, Any]:
        return {"steps": [*state["steps"], str(state["messages"][-1].content)]}

    builder = StateGraph(_Graph)
    builder.add_node("ask", ask)
    builder.add_node("agent", agent)
    builder.add_node("note", note)
    builder.add_edge(START, "ask")
    builder.add_edge("ask", "agent")
    builder.add_edge("agent", "note")
    builder.add_edge("note", END)
    graph: Any = builder.compile(checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "g-1"}}
    graph.invoke({"messages": [], "steps": []}, config)
    last = graph.invoke({"messages": []}, config)
    assert last["steps"] == ["A1", "A2"]
    assert _said(model.seen[1]) == [("human", "Q1"), ("ai", "A1"), ("human", "Q2")]
    stored = repository.find_by_conversation_id("g-1")
    assert [m.content for m in stored] == ["Q1", "A1", "Q2", "A2"]


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(TypeError, match="memory"):
        ChatLedgerMiddleware(object())
    with pytest.raises(ValueError, match="on_error"):
        ChatLedgerMiddleware(MessageWindowChatMemory(), on_error="keep")  # type: ignore[arg-type]


def test_a_token_window_and_a_streamed_run(repository: Any) -> None:
    memory = TokenWindowChatMemory(repository, max_tokens=30)
    model = ScriptedModel(messages=script("A" * 40, "B" * 40, "C"))
    agent: Any = create_agent(model, middleware=[ChatLedgerMiddleware(memory)])
    for question in ("Q1", "Q2"):
        agent.invoke(_user(question), C42)
    chunks = list(agent.stream(_user("Q3"), C42, stream_mode="values"))
    assert _said(chunks[-1]["messages"])[-1] == ("ai", "C")
    # The budget holds the newest turn and the new question only.
    assert _said(model.seen[2]) == [("human", "Q2"), ("ai", "B" * 40), ("human", "Q3")]
    stored = repository.find_by_conversation_id("user-42")
    assert [m.content for m in stored] == ["Q1", "A" * 40, "Q2", "B" * 40, "Q3", "C"]


def test_a_graph_that_keeps_every_message_still_shows_the_window(
    repository: Any,
) -> None:
    # The parent graph's checkpoint gathers every run's messages and hands
    # them all to the agent: what the window holds and what came before it
    # are stored already; the new input is what follows them.
    memory = MessageWindowChatMemory(repository, max_messages=3)
    model = ScriptedModel(messages=script("A1", "A2", "A3"))
    agent = create_agent(model, middleware=[ChatLedgerMiddleware(memory)])
    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", END)
    graph: Any = builder.compile(checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "g-2"}}
    for question in ("Q1", "Q2", "Q3"):
        graph.invoke(_user(question), config)
    assert _said(model.seen[2]) == [("human", "Q2"), ("ai", "A2"), ("human", "Q3")]
    stored = repository.find_by_conversation_id("g-2")
    assert [m.content for m in stored] == ["Q1", "A1", "Q2", "A2", "Q3", "A3"]
