"""SQLite: the pool rolls back a returned connection only when a transaction is open.

``from_url`` has the pool ask the driver (sqlite3, aiosqlite) whether one is
open. aiosqlite's ROLLBACK is a trip to its thread and back, which every
operation paid after its COMMIT; uncommitted work must still never leak.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from chatledger import AsyncMessageWindowChatMemory, Message
from chatledger_sql import SqlChatMemoryRepository
from chatledger_sql.async_repository import (
    AsyncSqlChatMemoryRepository,
    _transaction_open,
)

aiosqlite = pytest.importorskip("aiosqlite")

LEAK = (
    "INSERT INTO {table} (conversation_id, next_seq, version, system_count, "
    "other_count, updated_at) VALUES ('leak', 0, 0, 0, 0, '2026-01-01 00:00:00')"
)


@pytest.fixture
def rollbacks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record every ROLLBACK aiosqlite is asked for (the real one still runs)."""
    sent: list[str] = []
    real = aiosqlite.Connection.rollback

    async def counting(self: Any) -> None:
        sent.append("ROLLBACK")
        await real(self)

    monkeypatch.setattr(aiosqlite.Connection, "rollback", counting)
    return sent


def test_async_appends_send_no_rollback_after_their_commit(
    tmp_path: Path, rollbacks: list[str]
) -> None:
    async def scenario() -> None:
        repository = AsyncSqlChatMemoryRepository.from_url(
            f"sqlite+aiosqlite:///{tmp_path / 'chat.db'}"
        )
        try:
            memory = AsyncMessageWindowChatMemory(repository, max_messages=4)
            await memory.add("c", Message.user("first"))
            rollbacks.clear()
            for turn in range(4):
                await memory.add(
                    "c", [Message.user(f"u{turn}"), Message.assistant(f"a{turn}")]
                )
            assert rollbacks == []
            assert [m.content for m in await memory.get("c")] == [
                "u2",
                "a2",
                "u3",
                "a3",
            ]
        finally:
            await repository.aclose()

    asyncio.run(scenario())


def test_aiosqlite_tells_the_pool_whether_a_transaction_is_open(
    tmp_path: Path,
) -> None:
    """The pool's check reads aiosqlite's flag, as it reads sqlite3's below."""

    async def scenario() -> None:
        async with aiosqlite.connect(tmp_path / "chat.db") as driver:
            await driver.execute("CREATE TABLE t (x INTEGER)")
            await driver.commit()
            assert not _transaction_open(driver)
            await driver.execute("BEGIN IMMEDIATE")
            await driver.execute("INSERT INTO t VALUES (1)")
            assert _transaction_open(driver)
            await driver.rollback()
            assert not _transaction_open(driver)

    asyncio.run(scenario())


def test_sync_open_transaction_is_still_rolled_back_on_return(tmp_path: Path) -> None:
    repository = SqlChatMemoryRepository.from_url(f"sqlite:///{tmp_path / 'chat.db'}")
    try:
        repository.create_schema()
        table = repository.tables.conversations.name
        raw = repository.engine.raw_connection()
        driver = raw.driver_connection
        assert isinstance(driver, sqlite3.Connection)
        driver.execute("BEGIN IMMEDIATE")
        driver.execute(LEAK.format(table=table))
        assert driver.in_transaction
        raw.close()  # back to the pool, transaction still open
        assert not driver.in_transaction
        # The write lock went with it: another writer goes through at once.
        repository.save_all("other", [Message.user("u")])
        with repository.engine.connect() as connection:
            found = connection.execute(
                text(f"SELECT COUNT(*) FROM {table} WHERE conversation_id = 'leak'")
            ).scalar_one()
        assert found == 0
    finally:
        repository.close()
