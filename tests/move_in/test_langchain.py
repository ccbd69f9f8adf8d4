"""LangChain's SQL histories move in, written by langchain-community and -postgres.

The moved-in conversation reads back through chatledger's LangChain bridge as
the history itself reads it: every message, in order, with its tool calls.
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from chatledger import Role
from tests.backends import backend_url
from tests.move_in.conftest import Run, Source, conversation_ids, stored

pytest.importorskip("chatledger_langchain")
messages_module = pytest.importorskip("langchain_core.messages")
with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # langchain-community's sunset
    histories = pytest.importorskip(
        "langchain_community.chat_message_histories",
        reason="pip install langchain-community",
    )

from chatledger_langchain import to_langchain  # noqa: E402

AIMessage = messages_module.AIMessage
ChatMessage = messages_module.ChatMessage
HumanMessage = messages_module.HumanMessage
SystemMessage = messages_module.SystemMessage
ToolMessage = messages_module.ToolMessage


def _chat() -> list[Any]:
    call = {"id": "call_1", "name": "weather", "args": {"city": "Rome"}}
    return [
        SystemMessage("Be brief."),
        HumanMessage("Weather in Rome?"),
        AIMessage("", tool_calls=[call], id="run-1"),
        ToolMessage("24 °C", tool_call_id="call_1", name="weather"),
        AIMessage("Sunny, 24 °C.", usage_metadata=None),
        HumanMessage([{"type": "text", "text": "Thanks"}]),
    ]


def _same_as_written(read: list[Any], written: list[Any]) -> None:
    """``read`` is ``written``, the ids LangChain left empty filled in."""
    assert len(read) == len(written)
    for got, wrote in zip(read, written, strict=True):
        assert got.id
        if wrote.id is None:
            got = got.model_copy(update={"id": None})
        assert got == wrote


def _import(chatledger: Any, fmt: str, url: str, table: str, target: str) -> Run:
    run: Run = chatledger(
        "import", "--from", fmt, url, target, "--table", table, "--no-progress"
    )
    return run


def test_sql_chat_message_history_moves_in(
    chatledger: Any, source: Source, target: str
) -> None:
    table = source.table("message_store")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        history = histories.SQLChatMessageHistory(
            "user-42", connection=source.url, table_name=table
        )
        other = histories.SQLChatMessageHistory(
            "user-7", connection=source.url, table_name=table
        )
    written = _chat()
    history.add_messages(written[:3])
    other.add_message(HumanMessage("Hi"))
    other.add_message(ChatMessage("Judged: fine.", role="critic"))
    history.add_messages(written[3:])

    done = _import(chatledger, "langchain-sql", source.url, table, target)

    assert done.code == 1
    assert "imported 6 messages in 1 conversation" in done.out
    assert "conversation 'user-7': not imported: 1 row cannot be carried" in done.err
    assert "row id 5: message.type: a ChatMessage" in done.err
    messages = stored(target, "user-42")
    assert [m.role for m in messages] == [
        Role.SYSTEM, Role.USER, Role.ASSISTANT, Role.TOOL, Role.ASSISTANT, Role.USER,
    ]  # fmt: skip
    assert messages[2].tool_calls[0].name == "weather"
    assert messages[2].id == "run-1"
    assert messages[3].tool_responses[0].data == "24 °C"
    _same_as_written(to_langchain(messages), history.messages)

    again = _import(chatledger, "langchain-sql", source.url, table, target)
    assert "imported 0 messages in 0 conversations" in again.out
    assert conversation_ids(target) == ["user-42"]
    assert [m.id for m in stored(target, "user-42")] == [m.id for m in messages]

    history.add_message(AIMessage("You are welcome."))
    more = _import(chatledger, "langchain-sql", source.url, table, target)
    assert "imported 1 message in 1 conversation" in more.out
    assert stored(target, "user-42")[-1].content == "You are welcome."


def test_postgres_chat_message_history_moves_in_on_postgresql(
    chatledger: Any, target: str
) -> None:
    postgres = pytest.importorskip(
        "langchain_postgres", reason="pip install langchain-postgres"
    )
    psycopg = pytest.importorskip("psycopg")
    import uuid

    source = Source("postgresql", backend_url("postgresql"))
    table = f"chat_history_{uuid.uuid4().hex[:10]}"
    dsn = source.url.replace("postgresql+psycopg://", "postgresql://")
    session = str(uuid.uuid4())
    with psycopg.connect(dsn) as connection:
        postgres.PostgresChatMessageHistory.create_tables(connection, table)
        history = postgres.PostgresChatMessageHistory(
            table, session, sync_connection=connection
        )
        written = _chat()
        history.add_messages(written)
        rows = connection.execute(
            f"SELECT created_at FROM {table} ORDER BY id"  # type: ignore[arg-type]
        ).fetchall()
        try:
            done = _import(chatledger, "langchain-postgres", source.url, table, target)
            assert done.code == 0, done.err
            messages = stored(target, session)
            _same_as_written(to_langchain(messages), history.messages)
            assert [m.created_at for m in messages] == [row[0] for row in rows]
            again = _import(chatledger, "langchain-postgres", source.url, table, target)
            assert again.code == 0
            assert "1 conversation already there" in again.out
            assert len(stored(target, session)) == len(written)
        finally:
            postgres.PostgresChatMessageHistory.drop_table(connection, table)
