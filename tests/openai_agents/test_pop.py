"""pop_item is one atomic removal of the newest message, or a clear refusal."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("agents")

from chatledger import AsyncInMemoryChatMemoryRepository, Message
from chatledger_openai_agents import ChatLedgerSession, ForeignMessageError
from tests.openai_agents.conftest import Run
from tests.openai_agents.wrappers import BASIC, LOG, Narrowed, Recording

ITEMS = [{"role": "user", "content": f"m{i}"} for i in range(4)]


def test_a_pop_is_one_removal_of_the_newest_message(run: Run[Any]) -> None:
    async def scenario(repository: Any) -> None:
        await ChatLedgerSession("s1", repository).add_items(ITEMS)  # type: ignore[arg-type]
        before = await repository.find_by_conversation_id("s1")
        recording = Recording(repository)
        chat: Any = ChatLedgerSession("s1", recording)
        assert await chat.pop_item() == ITEMS[-1]
        assert recording.calls == [("remove_newest", ("s1", 1), {})]
        after = await repository.find_by_conversation_id("s1")
        assert [(m.id, m.created_at) for m in after] == [
            (m.id, m.created_at) for m in before[:-1]
        ]
        recording.calls.clear()
        assert await chat.pop_item() == ITEMS[-2]
        assert await chat.pop_item() == ITEMS[-3]
        assert await chat.pop_item() == ITEMS[-4]
        assert await chat.pop_item() is None
        assert recording.names() == ["remove_newest"] * 4
        assert await repository.find_conversation_ids() == []

    run(scenario)


def test_a_repository_without_log_removal_refuses_to_pop() -> None:
    async def scenario() -> None:
        repository = AsyncInMemoryChatMemoryRepository()
        without_removal = Narrowed(repository, BASIC + LOG)
        chat: Any = ChatLedgerSession("s1", without_removal)  # type: ignore[arg-type]
        await chat.add_items(ITEMS)
        with pytest.raises(
            TypeError, match=r"AsyncSupportsLogRemoval: remove_newest"
        ) as raised:
            await chat.pop_item()
        assert "Narrowed cannot remove messages" in str(raised.value)
        assert await chat.get_items() == ITEMS

    asyncio.run(scenario())


def test_a_popped_message_of_another_client_is_put_back(run: Run[Any]) -> None:
    async def scenario(repository: Any) -> None:
        chat: Any = ChatLedgerSession("s1", repository)
        await chat.add_items(ITEMS[:2])
        foreign = Message.user("written by another client", id="foreign-1")
        await repository.append_to_log("s1", [foreign])
        with pytest.raises(
            ForeignMessageError, match=r"foreign-1 .*put it back as the newest"
        ):
            await chat.pop_item()
        stored = await repository.find_by_conversation_id("s1")
        assert [m.id for m in stored][-1] == "foreign-1"
        assert stored[-1].content == "written by another client"
        assert len(stored) == 3

    run(scenario)
