"""The session keeps its items as the conversation's log: one append, tail reads."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("agents")

from chatledger import AsyncInMemoryChatMemoryRepository
from chatledger.validation import MAX_PAGE_SIZE
from chatledger_openai_agents import ChatLedgerSession, session
from tests.openai_agents.conftest import Run
from tests.openai_agents.wrappers import BASIC, LOG, Narrowed, Recording

ITEMS = [{"role": "user", "content": f"m{i}"} for i in range(7)]


def test_add_items_is_one_append_to_the_log(run: Run[Any]) -> None:
    async def scenario(repository: Any) -> None:
        recording = Recording(repository)
        chat: Any = ChatLedgerSession("s1", recording)
        await chat.add_items(ITEMS[:3])
        assert recording.names() == ["append_to_log"]
        [(_, (conversation_id, messages), _)] = recording.calls
        assert conversation_id == "s1"
        assert [m.content for m in messages] == ["m0", "m1", "m2"]
        recording.calls.clear()
        await chat.add_items([])
        assert recording.calls == []

    run(scenario)


def test_a_limit_reads_the_newest_items_only(run: Run[Any]) -> None:
    async def scenario(repository: Any) -> None:
        chat: Any = ChatLedgerSession("s1", repository)
        await chat.add_items(ITEMS)
        recording = Recording(repository)
        reader: Any = ChatLedgerSession("s1", recording)
        assert await reader.get_items(limit=3) == ITEMS[-3:]
        [(name, args, kwargs)] = recording.calls
        assert (name, args[0], kwargs["limit"], kwargs["newest_first"]) == (
            "find_messages_page",
            "s1",
            3,
            True,
        )
        recording.calls.clear()
        # Without a limit the log is read whole, in one call.
        assert await reader.get_items() == ITEMS
        assert recording.names() == ["find_by_conversation_id"]

    run(scenario)


def test_a_limit_beyond_one_page_walks_the_pages(
    run: Run[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(session, "TAIL_PAGE", 2)

    async def scenario(repository: Any) -> None:
        await ChatLedgerSession("s1", repository).add_items(ITEMS)  # type: ignore[arg-type]
        recording = Recording(repository)
        reader: Any = ChatLedgerSession("s1", recording)
        assert await reader.get_items(limit=5) == ITEMS[-5:]
        assert [kwargs["limit"] for _, _, kwargs in recording.calls] == [2, 2, 1]
        recording.calls.clear()
        assert await reader.get_items(limit=100) == ITEMS
        assert [kwargs["limit"] for _, _, kwargs in recording.calls] == [2, 2, 2, 2]
        limited: Any = ChatLedgerSession("s1", recording, session_settings={"limit": 3})
        assert await limited.get_items() == ITEMS[-3:]

    run(scenario)


def test_one_page_is_as_large_as_chatledger_gives() -> None:
    assert session.TAIL_PAGE == MAX_PAGE_SIZE


def test_a_repository_that_keeps_no_log_is_refused_before_any_io() -> None:
    repository = Recording(AsyncInMemoryChatMemoryRepository())
    without_log = Narrowed(repository, BASIC)
    with pytest.raises(TypeError, match=r"AsyncSupportsLog: append_to_log"):
        ChatLedgerSession("s1", without_log)  # type: ignore[arg-type]
    # With the log it is taken.
    ChatLedgerSession("s1", Narrowed(repository, BASIC + LOG))  # type: ignore[arg-type]
    assert repository.calls == []
