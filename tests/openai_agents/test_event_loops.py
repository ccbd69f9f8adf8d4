"""One session serves every event loop: successive asyncio.run calls and threads.

``Runner.run_sync`` runs its own event loop, in whatever thread calls it; a
web server's worker threads each have theirs. The session and its
repository are made once, outside any loop, and used from all of them.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import Agent, RunConfig, Runner
from agents.testing import ScriptedModel, assistant_message

from chatledger_openai_agents import ChatLedgerSession
from tests.openai_agents.conftest import open_repository

CONFIG = RunConfig(tracing_disabled=True)


def test_asyncio_run_twice_and_run_sync_in_fresh_threads(database_url: str) -> None:
    repository = open_repository(database_url)
    chat: Any = ChatLedgerSession("s1", repository)
    model = ScriptedModel(
        [
            [assistant_message(f"answer {turn}", item_id=f"msg_{turn}")]
            for turn in range(3)
        ]
    )
    agent = Agent(name="Assistant", model=model)
    try:
        asyncio.run(chat.add_items([{"role": "user", "content": "first loop"}]))
        assert asyncio.run(chat.get_items()) == [
            {"role": "user", "content": "first loop"}
        ]
        asyncio.run(Runner.run(agent, "second loop", session=chat, run_config=CONFIG))

        outcomes: list[Any] = []

        def in_a_thread(question: str) -> None:
            try:
                result = Runner.run_sync(
                    agent, question, session=chat, run_config=CONFIG
                )
                outcomes.append(result.final_output)
            except BaseException as error:  # reported by the assertion below
                outcomes.append(error)

        for question in ("thread one", "thread two"):
            # One after another: the scripted model answers in order.
            thread = threading.Thread(target=in_a_thread, args=(question,))
            thread.start()
            thread.join()
        assert outcomes == ["answer 1", "answer 2"]

        items = asyncio.run(chat.get_items())
        asked = [item["content"] for item in items if item.get("role") == "user"]
        assert asked == [
            "first loop",
            "second loop",
            "thread one",
            "thread two",
        ]
        assert asyncio.run(chat.pop_item()) == items[-1]
        assert len(asyncio.run(chat.get_items())) == len(items) - 1
        model.assert_complete()
    finally:

        async def drop() -> None:
            await repository.drop_schema()
            await repository.aclose()

        asyncio.run(drop())
