"""LlamaIndex's chat stores move in: SimpleChatStore's file and PostgresChatStore.

The moved-in conversation reads back through chatledger's LlamaIndex bridge
as the store itself gives it: every message, in order, with its tool calls.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from chatledger import Role
from tests.backends import backend_url
from tests.move_in.conftest import Run, conversation_ids, sqlalchemy, stored

pytest.importorskip("chatledger_llama_index")
llms = pytest.importorskip(
    "llama_index.core.llms", reason="pip install llama-index-core"
)
chat_stores = pytest.importorskip("llama_index.core.storage.chat_store")

from chatledger_llama_index import to_llama_index  # noqa: E402

ChatMessage = llms.ChatMessage


def _chat() -> list[Any]:
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "weather", "arguments": '{"city": "Rome"}'},
    }
    answer = {"tool_call_id": "call_1"}
    return [
        ChatMessage(role="system", content="Be brief."),
        ChatMessage(role="user", content="Weather in Rome?"),
        ChatMessage(
            role="assistant", content=None, additional_kwargs={"tool_calls": [call]}
        ),
        ChatMessage(role="tool", content="24 °C", additional_kwargs=answer),
        ChatMessage(role="assistant", content="Sunny, 24 °C."),
    ]


def test_simple_chat_store_file_moves_into_sqlite(
    chatledger: Any, tmp_path: Path, target: str
) -> None:
    store = chat_stores.SimpleChatStore()
    for message in _chat():
        store.add_message("user-42", message)
    store.add_message("user-7", ChatMessage(role="user", content="Hi"))
    store.add_message("user-7", ChatMessage(role="chatbot", content="Hello"))
    path = tmp_path / "chat_store.json"
    store.persist(str(path))
    kept = chat_stores.SimpleChatStore.from_persist_path(str(path))

    def move(*more: str) -> Run:
        run: Run = chatledger(
            "import", "--from", "llama-index-simple", str(path), target,
            "--no-progress", *more,
        )  # fmt: skip
        return run

    done = move()

    assert done.code == 1
    assert "imported 5 messages in 1 conversation" in done.out
    assert "conversation 'user-7': not imported: 1 row cannot be carried" in done.err
    assert "message 2: message.role: the role 'chatbot'" in done.err
    messages = stored(target, "user-42")
    assert [m.role for m in messages] == [
        Role.SYSTEM, Role.USER, Role.ASSISTANT, Role.TOOL, Role.ASSISTANT,
    ]  # fmt: skip
    assert messages[2].tool_calls[0].arguments == '{"city": "Rome"}'
    assert messages[3].tool_responses[0].name == "weather"
    assert to_llama_index(messages) == kept.get_messages("user-42")

    again = move()
    assert "imported 0 messages in 0 conversations" in again.out
    assert conversation_ids(target) == ["user-42"]

    store.add_message("user-42", ChatMessage(role="user", content="Thanks"))
    store.persist(str(path))
    more = move("--drop-uncarriable")
    assert "imported 2 messages in 2 conversations" in more.out
    assert "conversation 'user-7': imported, 1 row left out:" in more.err
    assert [m.content for m in stored(target, "user-42")][-1] == "Thanks"
    assert [m.content for m in stored(target, "user-7")] == ["Hi"]


def test_postgres_chat_store_moves_in_on_postgresql(
    chatledger: Any, target: str
) -> None:
    postgres = pytest.importorskip(
        "llama_index.storage.chat_store.postgres",
        reason="pip install llama-index-storage-chat-store-postgres",
    )
    url = backend_url("postgresql")
    plain = sqlalchemy.engine.make_url(url).set(drivername="postgresql")
    table = f"chatstore_{uuid.uuid4().hex[:10]}"
    store = postgres.PostgresChatStore.from_uri(
        plain.render_as_string(hide_password=False), table_name=table, use_jsonb=True
    )
    try:
        chat = _chat()
        store.set_messages("user-42", chat[:2])
        for message in chat[2:]:
            store.add_message("user-42", message)

        done: Run = chatledger(
            "import", "--from", "llama-index-postgres", url, target,
            "--table", table, "--no-progress",
        )  # fmt: skip

        assert done.code == 0, done.err
        messages = stored(target, "user-42")
        assert to_llama_index(messages) == store.get_messages("user-42")
        assert messages[3].tool_responses[0].name == "weather"
    finally:
        engine = sqlalchemy.create_engine(url)
        with engine.begin() as connection:
            connection.exec_driver_sql(f"DROP TABLE IF EXISTS {table}")
        engine.dispose()
