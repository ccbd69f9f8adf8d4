"""The SDK's compaction session replaces a ChatLedgerSession's items in one write.

``OpenAIResponsesCompactionSession`` (agents 0.24) looks for the private hook
``_atomic_replace_items`` on the type of the session it wraps; without it, it
clears the session and adds the compacted items, and on a failure adds the
old ones back. The compaction request goes to a stand-in for OpenAI's
``responses.compact`` (no network), which returns the compacted items given.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import Agent, RunConfig, Runner
from agents.memory import OpenAIResponsesCompactionSession
from agents.testing import ScriptedModel, assistant_message

from chatledger import InvalidMessageError
from chatledger_openai_agents import ChatLedgerSession
from tests.openai_agents.conftest import Run
from tests.openai_agents.wrappers import Recording

HISTORY: list[dict[str, Any]] = [
    {"role": "user", "content": "Capital of France?"},
    {"type": "reasoning", "id": "rs_1", "summary": []},
    {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "Paris.", "annotations": []}],
    },
]
COMPACTED: list[dict[str, Any]] = [
    {"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": "Capital of France?"}
    ]},
    {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAA..."},
]  # fmt: skip


class CompactEndpoint:
    """Stands for ``AsyncOpenAI().responses``: ``compact`` returns ``output``."""

    def __init__(self, output: list[dict[str, Any]]) -> None:
        self.output = output
        self.requests: list[dict[str, Any]] = []

    async def compact(self, **request: Any) -> Any:
        self.requests.append(request)
        return SimpleNamespace(output=self.output, usage=None)


def compacting(session: Any, output: list[dict[str, Any]]) -> Any:
    """The SDK's compaction session over ``session``, compacting after each turn."""
    endpoint = CompactEndpoint(output)
    return OpenAIResponsesCompactionSession(
        session.session_id,
        session,
        client=SimpleNamespace(responses=endpoint),  # type: ignore[arg-type]
        compaction_mode="input",
        should_trigger_compaction=lambda context: True,
    )


def test_manual_compaction_replaces_the_items_in_one_write(run: Run[Any]) -> None:
    async def scenario(repository: Any) -> None:
        recording = Recording(repository)
        chat: Any = ChatLedgerSession("s1", recording)
        await chat.add_items(HISTORY)
        recording.calls.clear()
        compaction = compacting(chat, COMPACTED)
        await compaction.run_compaction({"force": True})
        assert await chat.get_items() == COMPACTED
        writes = [n for n in recording.names() if not n.startswith("find_")]
        assert writes == ["save_all"]

    run(scenario)


def test_compacted_items_that_cannot_be_stored_leave_the_history_as_it_was(
    run: Run[Any],
) -> None:
    async def scenario(repository: Any) -> None:
        chat: Any = ChatLedgerSession("s1", repository)
        await chat.add_items(HISTORY)
        before = await repository.find_by_conversation_id("s1")
        unstorable = [*COMPACTED, {"type": "odd", "value": float("nan")}]
        with pytest.raises(InvalidMessageError, match=r"items\[2\]"):
            await compacting(chat, unstorable).run_compaction({"force": True})
        after = await repository.find_by_conversation_id("s1")
        # The very messages, not copies added back after a clear.
        assert [(m.id, m.created_at) for m in after] == [
            (m.id, m.created_at) for m in before
        ]
        assert await chat.get_items() == HISTORY

    run(scenario)


def test_each_run_compacts_the_whole_history_the_model_saw(run: Run[Any]) -> None:
    model = ScriptedModel(
        [
            [assistant_message("Paris.", item_id="msg_1")],
            [assistant_message("Rome.", item_id="msg_2")],
        ]
    )
    agent = Agent(name="Assistant", model=model)

    async def scenario(repository: Any) -> list[Any]:
        recording = Recording(repository)
        chat: Any = ChatLedgerSession("s1", recording)
        compaction = compacting(chat, COMPACTED)
        config = RunConfig(tracing_disabled=True)
        await Runner.run(
            agent, "Capital of France?", session=compaction, run_config=config
        )
        # The next turn's model call sees the compacted history, which is then
        # the whole stored history again: it is compacted in turn.
        await Runner.run(agent, "And of Italy?", session=compaction, run_config=config)
        assert model.calls[1].input == [
            *COMPACTED,
            {"role": "user", "content": "And of Italy?"},
        ]
        first, second = compaction.client.responses.requests
        assert [item.get("role") for item in first["input"]] == ["user", "assistant"]
        assert second["input"][-2]["content"] == "And of Italy?"
        writes = [n for n in recording.names() if not n.startswith("find_")]
        # Per turn: the input, then the output, then the compacted items in one write.
        assert writes == ["append_to_log", "append_to_log", "save_all"] * 2
        items: list[Any] = await chat.get_items()
        return items

    assert run(scenario) == COMPACTED


def test_history_the_model_did_not_see_is_kept_and_nothing_compacted(
    run: Run[Any],
) -> None:
    # Without a suffix snapshot, the SDK compacts only a history the model saw
    # whole; with a limit it saw the newest items only, so it skips.
    model = ScriptedModel([[assistant_message("Rome.", item_id="msg_2")]])
    agent = Agent(name="Assistant", model=model)

    async def scenario(repository: Any) -> None:
        chat: Any = ChatLedgerSession("s1", repository, session_settings={"limit": 2})
        await chat.add_items(HISTORY)
        compaction = compacting(chat, COMPACTED)
        config = RunConfig(tracing_disabled=True)
        await Runner.run(agent, "And of Italy?", session=compaction, run_config=config)
        assert compaction.client.responses.requests == []
        items = await chat.get_items(limit=100)
        assert items[:3] == HISTORY
        assert [item.get("role") for item in items[3:]] == ["user", "assistant"]

    run(scenario)


def test_a_subclass_is_left_to_the_sdks_clear_and_add(run: Run[Any]) -> None:
    # A subclass may change how items are stored: the hook must not bypass it.
    class Tagged(ChatLedgerSession):
        async def add_items(self, items: list[Any]) -> None:
            tagged: list[Any] = [{**item, "tag": 1} for item in items]
            await super().add_items(tagged)

    async def scenario(repository: Any) -> None:
        chat: Any = Tagged("s1", repository)
        await chat.add_items(HISTORY[:1])
        await compacting(chat, COMPACTED).run_compaction({"force": True})
        assert await chat.get_items() == [{**item, "tag": 1} for item in COMPACTED]

    run(scenario)
