"""ChatLedgerSession on real databases: round trips, limits, pop, clear, writers."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

pytest.importorskip("agents")

from agents.memory import Session, SessionSettings

from chatledger import (
    InvalidConversationIdError,
    InvalidMessageError,
    Media,
    Message,
    ToolCall,
    ToolResponse,
    connect,
)
from chatledger_openai_agents import (
    ITEM_KEY,
    ChatLedgerSession,
    ForeignMessageError,
)
from tests.openai_agents.conftest import Run
from tests.unit.test_json_depth import HOSTILE, nested

#: One of every kind of item a session meets, with JSON values of every type.
ITEMS: list[dict[str, Any]] = [
    {"role": "user", "content": "Weather in Rome?"},
    {
        "type": "message",
        "role": "user",
        "content": [
            {"type": "input_text", "text": "And here?"},
            {
                "type": "input_image",
                "image_url": "https://example.com/rome.png",
                "detail": "auto",
            },
        ],
    },
    {
        "type": "message",
        "role": "user",
        "content": [
            {"type": "input_text", "text": "Read it."},
            {"type": "input_file", "file_id": "file-123"},
        ],
    },
    {"role": "system", "content": "Be terse."},
    {"type": "message", "role": "developer", "content": "Answer in Celsius."},
    {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "Look it up."}],
        "encrypted_content": "gAAAAB...",
    },
    {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "weather",
        "arguments": '{"city": "Rome"}',
        "status": "completed",
    },
    {"type": "function_call_output", "call_id": "call_1", "output": '{"temp_c": 24}'},
    {
        "type": "function_call_output",
        "call_id": "call_0",
        "output": [{"type": "input_text", "text": "sunny"}],
    },
    {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [
            {
                "type": "output_text",
                "text": "24 °C and sunny.",
                "annotations": [],
                "logprobs": [],
            }
        ],
    },
    {
        "type": "message",
        "id": "msg_2",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "refusal", "refusal": "I cannot help with that."}],
    },
    {
        "type": "web_search_call",
        "id": "ws_1",
        "status": "completed",
        "action": {"type": "search", "query": "rome weather"},
    },
    {"type": "item_reference", "id": "msg_0"},
    {
        "type": "a_kind_not_yet_invented",
        "payload": {
            "int": 7,
            "huge": 2**63 + 1,
            "float": 0.5,
            "whole_float": 2.0,
            "none": None,
            "flag": False,
            "text": "ÿ ☃ 🐍 \u0000 \n",
            "nested": [1, [2.5, {"deep": [None, True]}], {}],
            "empty": {},
            "empty_list": [],
        },
    },
]


def new_session(session_id: str, repository: Any, **options: Any) -> Any:
    """A session typed loosely: the tests give plain dicts, not the SDK's TypedDicts."""
    return ChatLedgerSession(session_id, repository, **options)


def same(left: list[Any], right: list[Any]) -> bool:
    """Equal as JSON, key order aside: ``1`` is not ``1.0``, ``True`` not ``1``."""
    return [json.dumps(item, sort_keys=True) for item in left] == [
        json.dumps(item, sort_keys=True) for item in right
    ]


def test_every_item_kind_comes_back_exactly(run: Run[Any]) -> None:
    async def scenario(repository: Any) -> None:
        assert isinstance(ChatLedgerSession("s1", repository), Session)
        session = new_session("s1", repository)
        await session.add_items(ITEMS[:5])
        await session.add_items(ITEMS[5:])
        got = await session.get_items()
        assert got == ITEMS
        assert same(got, ITEMS)
        # A new session object (another process, say) reads the same items.
        again = await new_session("s1", repository).get_items()
        assert same(again, ITEMS)
        # What is returned is a copy: changing it changes nothing stored.
        got[0]["content"] = "changed"
        assert same(await session.get_items(), ITEMS)

    run(scenario)


def test_messages_carry_the_natural_role_and_content(run: Run[Any]) -> None:
    async def scenario(repository: Any) -> list[Message]:
        await new_session("s1", repository).add_items(ITEMS)
        stored: list[Message] = await repository.find_by_conversation_id("s1")
        return stored

    stored = run(scenario)
    bare = Message.assistant()
    expected = [
        Message.user("Weather in Rome?"),
        Message.user(
            "And here?", media=[Media("image/png", "https://example.com/rome.png")]
        ),
        Message.user("Read it."),
        bare,  # system: a system message would replace or merge with others
        bare,  # developer: likewise
        bare,  # reasoning
        Message.assistant(
            tool_calls=[ToolCall("call_1", "weather", '{"city": "Rome"}')]
        ),
        Message.tool(ToolResponse("call_1", "weather", '{"temp_c": 24}')),
        Message.tool(ToolResponse("call_0", "", "sunny")),  # its call is elsewhere
        Message.assistant("24 °C and sunny."),
        bare,  # a refusal has no text
        bare,
        bare,
        bare,
    ]
    readable = [Message(**_fields(m)) for m in stored]
    assert readable == expected
    assert [m.metadata[ITEM_KEY] for m in stored] == ITEMS
    assert len({m.id for m in stored}) == len(ITEMS)


def _fields(message: Message) -> dict[str, Any]:
    return {
        "role": message.role,
        "content": message.content,
        "tool_calls": message.tool_calls,
        "tool_responses": message.tool_responses,
        "media": message.media,
    }


@pytest.mark.parametrize(
    "first",
    [
        {"type": "function_call_output", "call_id": "call_1", "output": "24"},
        {"role": "system", "content": "Be terse."},
        {"type": "reasoning", "id": "rs_1", "summary": []},
    ],
    ids=["tool-output", "system", "reasoning"],
)
def test_any_item_may_open_a_session_and_repeat(
    run: Run[Any], first: dict[str, Any]
) -> None:
    # The window rules act on a leading tool message and on system messages;
    # no item is stored in a form they would drop, replace or merge.
    other_system = {"role": "system", "content": "Be verbose."}

    async def scenario(repository: Any) -> list[Any]:
        session = new_session("s1", repository)
        await session.add_items([first])
        await session.add_items([first])
        await session.add_items([other_system, first])
        await session.add_items([{"role": "user", "content": "Hi"}, first])
        items: list[Any] = await session.get_items()
        return items

    got = run(scenario)
    assert same(
        got,
        [first, first, other_system, first, {"role": "user", "content": "Hi"}, first],
    )


def test_limit_returns_the_newest_items_oldest_first(run: Run[Any]) -> None:
    items = [{"role": "user", "content": f"m{i}"} for i in range(7)]

    async def scenario(repository: Any) -> None:
        session = new_session("s1", repository)
        assert await session.get_items() == []
        assert await session.get_items(limit=3) == []
        await session.add_items(items[:4])
        await session.add_items(items[4:])
        assert await session.get_items() == items
        assert await session.get_items(None) == items
        assert await session.get_items(limit=1) == items[-1:]
        assert await session.get_items(limit=3) == items[-3:]
        assert await session.get_items(limit=7) == items
        assert await session.get_items(limit=100) == items
        assert await session.get_items(limit=0) == []
        for bad, error in [(-1, ValueError), (True, TypeError), ("2", TypeError)]:
            with pytest.raises(error, match="limit"):
                await session.get_items(limit=bad)
        # The session's settings give the limit when the call gives none.
        limited = new_session(
            "s1", repository, session_settings=SessionSettings(limit=2)
        )
        assert limited.session_settings == SessionSettings(limit=2)
        assert await limited.get_items() == items[-2:]
        assert await limited.get_items(limit=4) == items[-4:]
        as_dict = new_session("s1", repository, session_settings={"limit": 5})
        assert await as_dict.get_items() == items[-5:]

    run(scenario)


def test_pop_removes_and_returns_the_newest_item(run: Run[Any]) -> None:
    async def scenario(repository: Any) -> None:
        session = new_session("s1", repository)
        assert await session.pop_item() is None
        assert await repository.find_conversation_ids() == []
        await session.add_items(ITEMS[:6])
        await session.add_items(ITEMS[6:])
        before = await repository.find_by_conversation_id("s1")
        assert same([await session.pop_item()], [ITEMS[-1]])
        assert same([await session.pop_item()], [ITEMS[-2]])
        assert same(await session.get_items(), ITEMS[:-2])
        after = await repository.find_by_conversation_id("s1")
        # The messages left are the same ones: same ids, same times.
        assert [(m.id, m.created_at) for m in after] == [
            (m.id, m.created_at) for m in before[:-2]
        ]
        await session.add_items([{"role": "user", "content": "again"}])
        assert same([await session.pop_item()], [{"role": "user", "content": "again"}])
        popped = [await session.pop_item() for _ in range(len(ITEMS) - 2)]
        assert same(popped, list(reversed(ITEMS[:-2])))
        assert await session.pop_item() is None
        assert await session.get_items() == []
        assert await repository.find_conversation_ids() == []

    run(scenario)


def test_clear_deletes_the_conversation_and_nothing_else(run: Run[Any]) -> None:
    async def scenario(repository: Any) -> None:
        session = new_session("s1", repository)
        other = new_session("s2", repository)
        await session.add_items(ITEMS)
        await other.add_items(ITEMS[:2])
        await session.clear_session()
        assert await session.get_items() == []
        assert await repository.find_conversation_ids() == ["s2"]
        assert same(await other.get_items(), ITEMS[:2])
        await session.clear_session()  # clearing an empty session does nothing
        await session.add_items(ITEMS[:1])
        assert same(await session.get_items(), ITEMS[:1])

    run(scenario)


@pytest.mark.parametrize("shared", [False, True], ids=["own-objects", "one-object"])
def test_concurrent_writers_lose_nothing_and_duplicate_nothing(
    run: Run[Any], shared: bool
) -> None:
    writers, batches = 8, 12

    async def write(repository: Any, writer: int, session: Any) -> None:
        session = session or new_session("s1", repository)
        for batch in range(batches):
            await session.add_items(
                [
                    {"role": "user", "content": f"w{writer} b{batch} question"},
                    {
                        "type": "function_call_output",
                        "call_id": f"c{writer}-{batch}",
                        "output": f"w{writer} b{batch} answer",
                    },
                ]
            )

    async def scenario(repository: Any) -> list[Any]:
        await repository.create_schema()
        one = new_session("s1", repository) if shared else None
        await asyncio.gather(*(write(repository, w, one) for w in range(writers)))
        items: list[Any] = await new_session("s1", repository).get_items()
        return items

    items = run(scenario)
    assert len(items) == writers * batches * 2
    keys = [json.dumps(item, sort_keys=True) for item in items]
    assert len(set(keys)) == len(keys)
    for index in range(0, len(items), 2):
        # Each batch is one append: its two items stay together, in order.
        question, answer = items[index], items[index + 1]
        writer_batch = question["content"].removesuffix(" question")
        assert answer["output"] == f"{writer_batch} answer"
    for writer in range(writers):
        order = [
            int(item["content"].split()[1][1:])
            for item in items
            if item.get("content", "").startswith(f"w{writer} ")
        ]
        assert order == list(range(batches))


def test_bad_input_is_refused_before_any_io(run: Run[Any]) -> None:
    async def scenario(repository: Any) -> None:
        session = new_session("s1", repository)
        await session.add_items(ITEMS[:1])
        with pytest.raises(TypeError, match=r"items\[1\] must be a dict"):
            await session.add_items([ITEMS[1], "hello"])  # type: ignore[list-item]
        with pytest.raises(TypeError, match="items must be a list"):
            await session.add_items({"role": "user", "content": "x"})  # type: ignore[arg-type]
        for value in (float("nan"), object(), {1: "x"}, "\ud800"):
            bad = {"type": "odd", "value": value}
            with pytest.raises(InvalidMessageError, match=r"items\[1\]"):
                await session.add_items([ITEMS[1], bad])  # type: ignore[list-item]
        assert same(await session.get_items(), ITEMS[:1])
        await session.add_items([])
        assert same(await session.get_items(), ITEMS[:1])

        with pytest.raises(InvalidConversationIdError):
            ChatLedgerSession(" ", repository)
        with pytest.raises(TypeError, match="session_settings"):
            new_session("s1", repository, session_settings=3)

    run(scenario)


def test_hostile_items_get_chatledgers_error_before_any_io(run: Run[Any]) -> None:
    deep = nested(HOSTILE)
    hostile = [
        {"role": "user", "content": "hi", "name": deep},
        {"role": deep, "content": "hi"},
        {"type": deep},
        {"role": "user", "content": deep},
        {
            "type": "function_call",
            "call_id": "c",
            "name": "f",
            "arguments": "{}",
            "extra": {1, 2},
        },
        {"role": "user", "content": "hi", "raw": b"x"},
    ]

    async def scenario(repository: Any) -> None:
        session = new_session("s1", repository)
        await session.add_items(ITEMS[:1])
        for bad in [*hostile, "hello"]:
            with pytest.raises(InvalidMessageError, match=r"items\[1\]"):
                await session.add_items([ITEMS[1], bad])  # type: ignore[list-item]
        with pytest.raises(InvalidMessageError, match="items must be a list"):
            await session.add_items(5)  # type: ignore[arg-type]
        assert same(await session.get_items(), ITEMS[:1])

    run(scenario)


def test_a_sync_repository_is_refused_with_what_to_pass(
    run: Run[Any], database_url: str
) -> None:
    sync_url = database_url.replace("+aiosqlite", "")
    with pytest.raises(
        TypeError, match=r"connect_async\(url\).*SqlChatMemoryRepository is a sync"
    ):
        ChatLedgerSession("s1", connect(sync_url))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="AsyncSqlChatMemoryRepository"):
        ChatLedgerSession("s1", None)  # type: ignore[arg-type]

    async def scenario(repository: Any) -> None:
        assert repr(ChatLedgerSession("s1", repository)).startswith(
            "ChatLedgerSession('s1', AsyncSqlChatMemoryRepository("
        )

    run(scenario)


def test_a_message_stored_by_something_else_is_named(run: Run[Any]) -> None:
    async def scenario(repository: Any) -> None:
        session = new_session("s1", repository)
        await session.add_items(ITEMS[:2])
        foreign = Message.user("written by another client", id="foreign-1")
        stored = await repository.find_by_conversation_id("s1")
        await repository.save_all("s1", [*stored, foreign])
        assert same(await session.get_items(limit=0), [])
        with pytest.raises(ForeignMessageError, match="foreign-1"):
            await session.get_items()
        with pytest.raises(ForeignMessageError, match="foreign-1"):
            await session.pop_item()
        # The other client's message is still the newest (popped, put back).
        assert [m.id for m in await repository.find_by_conversation_id("s1")][-1] == (
            "foreign-1"
        )

    run(scenario)


def test_settings_default_and_unknown_keys_as_the_sdks_own_sessions() -> None:
    from chatledger import AsyncInMemoryChatMemoryRepository

    repository = AsyncInMemoryChatMemoryRepository()
    session = ChatLedgerSession("s1", repository)
    # The SDK's sessions hold SessionSettings(), never None.
    assert session.session_settings == SessionSettings()
    assert new_session("s1", repository, session_settings=None).session_settings == (
        SessionSettings()
    )
    assert new_session(
        "s1", repository, session_settings={"limit": 0}
    ).session_settings == SessionSettings(limit=0)
    with pytest.raises(TypeError, match="Unknown session settings: limitt"):
        new_session("s1", repository, session_settings={"limitt": 1})
    with pytest.raises(TypeError, match="session_settings must be"):
        new_session("s1", repository, session_settings=[("limit", 1)])
