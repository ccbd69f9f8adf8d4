"""SQLite: the pool rolls back a returned connection only when a transaction is open.

``from_url`` has the pool ask the driver (sqlite3, aiosqlite) whether one is
open; uncommitted work must still never leak. (That an async append sends no
ROLLBACK after its COMMIT is counted in ``test_raw_aiosqlite``.)
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import text

from chatledger import Message
from chatledger_sql import SqlChatMemoryRepository
from chatledger_sql.compiled import transaction_open

aiosqlite = pytest.importorskip("aiosqlite")

LEAK = (
    "INSERT INTO {table} (conversation_id, next_seq, version, system_count, "
    "other_count, updated_at) VALUES ('leak', 0, 0, 0, 0, '2026-01-01 00:00:00')"
)


def test_aiosqlite_tells_the_pool_whether_a_transaction_is_open(
    tmp_path: Path,
) -> None:
    """The pool's check reads aiosqlite's flag, as it reads sqlite3's below."""

    async def scenario() -> None:
        async with aiosqlite.connect(tmp_path / "chat.db") as driver:
            await driver.execute("CREATE TABLE t (x INTEGER)")
            await driver.commit()
            assert not transaction_open(driver)
            await driver.execute("BEGIN IMMEDIATE")
            await driver.execute("INSERT INTO t VALUES (1)")
            assert transaction_open(driver)
            await driver.rollback()
            assert not transaction_open(driver)

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
