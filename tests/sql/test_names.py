"""Hostile table and schema names are refused before any I/O; odd legal ones work."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, inspect

from chatledger import InvalidNameError, Message
from chatledger_sql import SqlChatMemoryRepository
from chatledger_sql.schema import derived_name
from tests.sql.conftest import unique_table

HOSTILE = [
    "",
    "1table",
    "chat memory",
    "chat-memory",
    "chat_memory; DROP TABLE users",
    'chat"memory',
    "chat`memory",
    "chat]memory",
    "chat'memory",
    "schema.table",
    "ta\x00ble",
    "tablé",
    "x" * 64,
    "chat_memory\n",
    None,
    42,
]


@pytest.mark.parametrize("name", HOSTILE, ids=repr)
def test_hostile_table_names_are_refused_before_io(name: object) -> None:
    """A bad table name raises InvalidNameError without touching the engine."""
    engine = create_engine("postgresql+psycopg://nobody@127.0.0.1:1/none")
    with pytest.raises(InvalidNameError):
        SqlChatMemoryRepository(engine, table_name=name)  # type: ignore[arg-type]
    if name is not None:  # schema=None means the connection's default schema
        with pytest.raises(InvalidNameError):
            SqlChatMemoryRepository(engine, schema=name)  # type: ignore[arg-type]
    assert engine.pool.checkedout() == 0  # type: ignore[attr-defined]


def test_reserved_words_and_mixed_case_are_quoted(any_engine: Engine) -> None:
    """Legal names that are SQL keywords or mixed case work, quoted by SQLAlchemy."""
    names = [f"Order_{unique_table()}"]
    if any_engine.dialect.name == "sqlite":  # a private file: fixed names are safe
        names += ["select", "order"]
    for table_name in names:
        repository = SqlChatMemoryRepository(any_engine, table_name=table_name)
        try:
            repository.save_all("c", [Message.user("hi")])
            assert [m.content for m in repository.find_by_conversation_id("c")] == [
                "hi"
            ]
            assert inspect(any_engine).has_table(table_name)
        finally:
            repository.drop_schema()


def test_longest_name_derives_short_companion_tables(tmp_path: Path) -> None:
    """A 63-character table name still gives companion tables within 63."""
    long_name = "t" * 63
    engine = create_engine(f"sqlite:///{tmp_path / 'x.db'}")
    try:
        repository = SqlChatMemoryRepository(engine, table_name=long_name)
        repository.save_all("c", [Message.user("hi")])
        for suffix in ("_conversation", "_evicted"):
            derived = derived_name(long_name, suffix)
            assert len(derived) <= 63
            assert derived.endswith(suffix)
            assert inspect(engine).has_table(derived)
    finally:
        engine.dispose()


@pytest.mark.parametrize(
    ("name", "ending"),
    [
        ("chat_memory_conversation", "_conversation"),
        ("Chat_Memory_CONVERSATION", "_conversation"),
        ("_conversation", "_conversation"),
        ("chat_memory_evicted", "_evicted"),
        ("Chat_Memory_EVICTED", "_evicted"),
        ("_evicted", "_evicted"),
    ],
)
def test_a_companion_table_name_is_refused_before_io(name: str, ending: str) -> None:
    """A name ending like a companion table would share it with another repository."""
    engine = create_engine("postgresql+psycopg://nobody@127.0.0.1:1/none")
    with pytest.raises(InvalidNameError, match=ending) as raised:
        SqlChatMemoryRepository(engine, table_name=name)
    assert "collide" in str(raised.value)
    assert engine.pool.checkedout() == 0  # type: ignore[attr-defined]


def test_two_repositories_never_share_a_table(tmp_path: Path) -> None:
    """The default repository's conversations table cannot be opened as messages."""
    url = f"sqlite:///{tmp_path / 'chat.db'}"
    with SqlChatMemoryRepository.from_url(url) as repository:
        repository.save_all("c", [Message.user("hi")])
        for companion in ("chat_memory_conversation", "chat_memory_evicted"):
            with pytest.raises(InvalidNameError):
                SqlChatMemoryRepository.from_url(url, table_name=companion)
        assert [m.content for m in repository.find_by_conversation_id("c")] == ["hi"]
