"""The Agents SDK's sessions move in: written by SQLiteSession and SQLAlchemySession.

The moved-in conversation is what chatledger's bridge stores for the same
items (``items_to_messages``), and ``ChatLedgerSession`` gives back the items
the SDK's session gives.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from chatledger import Role, connect_async
from chatledger.move_in.openai_agents import item_messages
from tests.move_in.conftest import Run, Source, stored

agents = pytest.importorskip("agents", reason="pip install openai-agents")
bridge = pytest.importorskip("chatledger_openai_agents")
sqlalchemy_sessions = pytest.importorskip(
    "agents.extensions.memory.sqlalchemy_session",
    reason="pip install 'openai-agents[sqlalchemy]'",
)
pytest.importorskip("aiosqlite")

ITEMS: list[Any] = [
    {"role": "user", "content": "Weather in Rome?"},
    {"type": "reasoning", "id": "rs_1", "summary": []},
    {
        "type": "function_call",
        "call_id": "call_1",
        "name": "weather",
        "arguments": '{"city": "Rome"}',
    },
    {"type": "function_call_output", "call_id": "call_1", "output": "24 °C"},
    {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "Sunny.", "annotations": []}],
    },
    {"role": "system", "content": "Be brief."},
]


def _same_messages(read: list[Any], made: list[Any]) -> None:
    assert read == made  # ids and created_at take no part in equality
    assert [m.metadata for m in read] == [m.metadata for m in made]


def _items_through_the_bridge(target: str, session_id: str) -> list[Any]:
    async def read() -> list[Any]:
        url = target.replace("sqlite:///", "sqlite+aiosqlite:///")
        repository: Any = connect_async(url)
        try:
            return list(
                await bridge.ChatLedgerSession(session_id, repository).get_items()
            )
        finally:
            await repository.aclose()

    return asyncio.run(read())


def test_sqlite_session_moves_in(chatledger: Any, tmp_path: Path, target: str) -> None:
    database = tmp_path / "conversations.db"

    async def write() -> list[Any]:
        session = agents.SQLiteSession("user-42", str(database))
        await session.add_items(ITEMS[:2])
        await session.add_items(ITEMS[2:])
        await agents.SQLiteSession("user-7", str(database)).add_items(ITEMS[:1])
        items = list(await session.get_items())
        session.close()
        return items

    written = asyncio.run(write())
    # A row the SDK skips when it reads: not JSON.
    with sqlite3.connect(database) as connection:
        connection.execute(
            "INSERT INTO agent_messages (session_id, message_data) VALUES (?, ?)",
            ("user-7", "{not json"),
        )

    done: Run = chatledger(
        "import", "--from", "agents-sqlite", str(database), target, "--no-progress"
    )

    assert done.code == 1
    assert "imported 6 messages in 1 conversation" in done.out
    assert "conversation 'user-7': not imported: 1 row cannot be carried" in done.err
    assert "row id 8: message_data is not JSON" in done.err
    messages = stored(target, "user-42")
    _same_messages(messages, bridge.items_to_messages(written))
    assert [m.role for m in messages][2:4] == [Role.ASSISTANT, Role.TOOL]
    assert messages[2].tool_calls[0].arguments == '{"city": "Rome"}'
    assert messages[3].tool_responses[0].name == "weather"
    assert all(m.created_at is not None for m in messages)
    assert _items_through_the_bridge(target, "user-42") == written

    again: Run = chatledger(
        "import", "--from", "agents-sqlite", f"sqlite:///{database}", target,
        "--no-progress", "--drop-uncarriable",
    )  # fmt: skip
    assert "imported 1 message in 1 conversation" in again.out
    assert "1 conversation already there" in again.out
    assert len(stored(target, "user-42")) == len(ITEMS)


# SQLAlchemySession's tables have a VARCHAR without a length, which MySQL and
# MariaDB refuse: the session runs on SQLite and PostgreSQL.
@pytest.mark.parametrize("source", ["sqlite", "postgresql"], indirect=True)
def test_sqlalchemy_session_moves_in(
    chatledger: Any, source: Source, target: str
) -> None:
    sessions_table = source.table("agent_sessions")
    messages_table = source.table("agent_messages")  # dropped first

    async def write() -> list[Any]:
        session = sqlalchemy_sessions.SQLAlchemySession.from_url(
            "user-42",
            url=source.async_url,
            create_tables=True,
            sessions_table=sessions_table,
            messages_table=messages_table,
        )
        for item in ITEMS:
            await session.add_items([item])
        items = list(await session.get_items())
        await session.engine.dispose()
        return items

    written = asyncio.run(write())
    done: Run = chatledger(
        "import", "--from", "agents-sqlalchemy", source.url, target,
        "--table", messages_table, "--no-progress",
    )  # fmt: skip
    assert done.code == 0, done.err
    _same_messages(stored(target, "user-42"), bridge.items_to_messages(written))
    assert _items_through_the_bridge(target, "user-42") == written


def test_the_items_become_what_the_bridge_stores() -> None:
    """The mapping made with core's converters is the bridge's, item for item."""
    odd: list[Any] = [
        {"role": "developer", "content": "Answer in French."},
        {"type": "function_call_output", "call_id": "nobody", "output": "x"},
        {"role": "user", "content": [{"type": "input_text", "text": "Salut"}]},
        {"type": "computer_call", "call_id": "cc_1", "action": {"type": "click"}},
        {"role": "assistant", "content": [{"type": "refusal", "refusal": "No."}]},
        {"type": "function_call_output", "call_id": "nobody", "output": "y"},
    ]
    for items in [ITEMS, odd, odd[1:], [*ITEMS, *odd]]:
        _same_messages(item_messages(items), bridge.items_to_messages(items))
