"""The SDK's own flow, ``Runner.run(agent, input, session=session)``, on real databases.

The model is the SDK's scripted test model: no network, no API key, no
tracing.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("agents")

from agents import Agent, RunConfig, Runner, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call

from chatledger import Role
from chatledger_openai_agents import ChatLedgerSession
from tests.openai_agents.conftest import Run


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """No key to reach OpenAI with, and no trace to send there."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_AGENTS_DISABLE_TRACING", "1")


@function_tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"24 C and sunny in {city}"


def test_two_turns_see_the_first_turns_items(run: Run[Any]) -> None:
    model = ScriptedModel(
        [
            [function_call("weather", {"city": "Rome"}, call_id="call_1")],
            [assistant_message("24 C and sunny.", item_id="msg_1")],
            [assistant_message("You asked about Rome.", item_id="msg_2")],
        ]
    )
    agent = Agent(
        name="Assistant", instructions="Be terse.", model=model, tools=[weather]
    )
    config = RunConfig(tracing_disabled=True)

    async def scenario(repository: Any) -> tuple[list[Any], list[Any], list[Any]]:
        session = ChatLedgerSession("user-42", repository)
        first = await Runner.run(
            agent, "Weather in Rome?", session=session, run_config=config
        )
        assert first.final_output == "24 C and sunny."
        after_first = await session.get_items()
        # Another session object over the same store: a new request, say.
        session = ChatLedgerSession("user-42", repository)
        second = await Runner.run(
            agent, "What did I ask?", session=session, run_config=config
        )
        assert second.final_output == "You asked about Rome."
        stored = await repository.find_by_conversation_id("user-42")
        return after_first, await session.get_items(), stored

    after_first, after_second, stored = run(scenario)
    model.assert_complete()

    kinds = [(item.get("type"), item.get("role")) for item in after_first]
    assert kinds == [
        (None, "user"),
        ("function_call", None),
        ("function_call_output", None),
        ("message", "assistant"),
    ]
    assert after_first[0]["content"] == "Weather in Rome?"
    assert after_first[1]["call_id"] == after_first[2]["call_id"] == "call_1"
    assert after_first[2]["output"] == "24 C and sunny in Rome"

    # The second turn's model call got the first turn's items, then the question.
    second_turn_input = model.calls[2].input
    assert second_turn_input == [
        *after_first,
        {"role": "user", "content": "What did I ask?"},
    ]
    assert after_second[: len(after_first)] == after_first
    assert after_second[len(after_first)]["content"] == "What did I ask?"
    assert after_second[-1]["id"] == "msg_2"
    assert len(after_second) == len(after_first) + 2

    # Stored as messages other readers understand, too.
    assert [m.role for m in stored] == [
        Role.USER,
        Role.ASSISTANT,
        Role.TOOL,
        Role.ASSISTANT,
        Role.USER,
        Role.ASSISTANT,
    ]
    assert stored[2].tool_responses[0].name == "weather"
    assert stored[-1].content == "You asked about Rome."
