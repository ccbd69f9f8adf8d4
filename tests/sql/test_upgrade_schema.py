"""``upgrade_schema``: what an earlier release's tables lack is added and reported.

The stores here are made by this release and then stripped of what 0.1 and
0.2 did not have; ``tests/upgrade`` opens stores that release 0.2 itself
wrote.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import sqlalchemy
from sqlalchemy import Engine, text

from chatledger import (
    AsyncSupportsSchemaUpgrade,
    Message,
    MessageWindow,
    StoreNotFoundError,
    SupportsSchemaUpgrade,
)
from chatledger_sql import AsyncSqlChatMemoryRepository, SqlChatMemoryRepository
from chatledger_sql.dialects.base import RoutineDialect
from chatledger_sql.schema import ADDED_COLUMNS, conversation_indexes
from tests.sql.conftest import unique_table


def _strip_to_release_0_1(repository: SqlChatMemoryRepository) -> bool:
    """Drop what 0.1 lacked: the log's and the record's columns, the listing's
    indexes, the evicted-id record, the routine.

    Returns whether the database runs the routine this release creates.
    """
    dialect = repository.dialect
    assert dialect is not None  # told by the repository's calls before
    tables = repository.tables
    with repository.engine.begin() as connection:
        if dialect.keeps_conversation_indexes:
            for index in conversation_indexes(tables):
                index.drop(connection)
        for column in ADDED_COLUMNS:
            connection.execute(
                text(f"ALTER TABLE {tables.conversations.name} DROP COLUMN {column}")
            )
        tables.evicted.drop(connection)
        routines = isinstance(dialect, RoutineDialect) and dialect.runs_routines(
            connection
        )
        if routines:
            dialect.drop_routines(connection, repository._sql)
    return routines


def test_what_an_older_store_lacks_is_added_once_and_said(any_engine: Engine) -> None:
    table = unique_table()
    repository = SqlChatMemoryRepository(any_engine, table_name=table)
    assert isinstance(repository, SupportsSchemaUpgrade)
    try:
        repository.create_schema()  # what the first call would make
        assert repository.upgrade_schema() == [], "a new store is current"
        window = MessageWindow(3)
        repository.append_to_window(
            "c", [Message.system("S"), Message.user("u")], window
        )
        before = repository.find_by_conversation_id("c")
        routines = _strip_to_release_0_1(repository)
        older = SqlChatMemoryRepository(
            any_engine, table_name=table, create_schema=False
        )
        expected = [
            f"created table {table}_evicted",
            *(f"added column {c} to table {table}_conversation" for c in ADDED_COLUMNS),
        ]
        if repository._dialect().keeps_conversation_indexes:
            expected += [
                f"created index {index.name} on table {table}_conversation"
                for index in conversation_indexes(repository.tables)
            ]
        if routines:
            expected.append(f"created routine {table}_append_v4")
        assert older.upgrade_schema() == expected
        assert older.upgrade_schema() == []
        record = older.get_conversation_info("c")
        assert record is not None
        assert (record.created_at, record.owner, record.message_count) == (
            before[0].created_at,
            None,
            2,
        )
        assert older.find_by_conversation_id("c") == before
        appended = older.append_to_log("c", [Message.user("next")]).appended
        assert older.find_window("c", window) == [*before, *appended]
    finally:
        repository.drop_schema()


def test_a_store_that_does_not_exist_is_not_created(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'chat.db'}"
    with SqlChatMemoryRepository.from_url(url) as made:
        made.create_schema()  # the file, with other tables
    with SqlChatMemoryRepository.from_url(
        url, table_name="mistyped", create_schema=False
    ) as repository:
        with pytest.raises(StoreNotFoundError, match="'mistyped' does not exist"):
            repository.upgrade_schema()
        inspector = sqlalchemy.inspect(repository.engine)
        assert not inspector.has_table("mistyped")
        assert not inspector.has_table("mistyped_conversation")


def test_the_async_twin_upgrades_alike(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'chat.db'}"
    with SqlChatMemoryRepository.from_url(url) as repository:
        repository.save_all("c", [Message.user("kept")])
        _strip_to_release_0_1(repository)

    async def upgrade() -> tuple[list[str], list[str], list[Message]]:
        twin = AsyncSqlChatMemoryRepository.from_url(
            f"sqlite+aiosqlite:///{tmp_path / 'chat.db'}", create_schema=False
        )
        assert isinstance(twin, AsyncSupportsSchemaUpgrade)
        try:
            first = await twin.upgrade_schema()
            return (
                first,
                await twin.upgrade_schema(),
                await twin.find_window("c", MessageWindow(5)),
            )
        finally:
            await twin.aclose()

    first, second, view = asyncio.run(upgrade())
    assert first[0] == "created table chat_memory_evicted"
    assert len(first) == 1 + len(ADDED_COLUMNS) + 2  # and the two indexes
    assert second == []
    assert [m.content for m in view] == ["kept"]
