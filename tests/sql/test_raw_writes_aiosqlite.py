"""Async SQLite log appends on aiosqlite's own connection: four trips to its thread.

``BEGIN IMMEDIATE``, the conversation row's advance, the insert and the
commit each go to aiosqlite in one call, where SQLAlchemy's cursor took ten
trips in all. A cancelled append leaves neither a lock nor part of itself.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from chatledger import AsyncMessageWindowChatMemory, Message
from chatledger_sql.async_repository import AsyncSqlChatMemoryRepository

aiosqlite = pytest.importorskip("aiosqlite")

#: The aiosqlite calls that each take one trip to its thread.
TRIPS = ("cursor", "execute", "execute_fetchall", "executemany", "commit", "rollback")


@pytest.fixture
def trips(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The aiosqlite calls made (the real ones still run)."""
    made: list[str] = []
    for name in TRIPS:
        real = getattr(aiosqlite.Connection, name)

        def counting(
            self: Any, *args: Any, _real: Any = real, _name: str = name
        ) -> Any:
            made.append(_name)
            return _real(self, *args)

        monkeypatch.setattr(aiosqlite.Connection, name, counting)
    return made


def test_a_log_append_takes_four_trips_and_a_retry_stores_nothing(
    tmp_path: Path, trips: list[str]
) -> None:
    async def scenario() -> None:
        repository = AsyncSqlChatMemoryRepository.from_url(
            f"sqlite+aiosqlite:///{tmp_path / 'chat.db'}"
        )
        try:
            memory = AsyncMessageWindowChatMemory(repository, max_messages=10)
            await memory.add("c", Message.user("first"))
            reply = Message.assistant("second")
            trips.clear()
            await memory.add("c", reply)
            assert trips == [
                "execute_fetchall",  # BEGIN IMMEDIATE
                "execute_fetchall",  # the conversation row's advance
                "executemany",  # the rows
                "commit",
            ]
            await memory.add("c", reply)  # a retry: the id is held
            assert [m.content for m in await memory.get("c")] == ["first", "second"]
            assert repository.engine.pool.checkedout() == 0  # type: ignore[attr-defined]
        finally:
            await repository.aclose()

    asyncio.run(scenario())


def test_an_append_cancelled_while_it_waits_for_the_lock_leaves_none(
    tmp_path: Path,
) -> None:
    path = tmp_path / "chat.db"

    async def scenario() -> None:
        repository = AsyncSqlChatMemoryRepository.from_url(
            f"sqlite+aiosqlite:///{path}"
        )
        blocker = sqlite3.connect(path, isolation_level=None)
        try:
            memory = AsyncMessageWindowChatMemory(repository, max_messages=10)
            await memory.add("c", Message.user("first"))
            blocker.execute("BEGIN IMMEDIATE")  # holds the write lock
            waiting = asyncio.create_task(memory.add("c", Message.user("cancelled")))
            await asyncio.sleep(0.3)  # in BEGIN IMMEDIATE, under the busy timeout
            assert not waiting.done()
            waiting.cancel()
            await asyncio.sleep(0.1)
            blocker.execute("ROLLBACK")
            with pytest.raises(asyncio.CancelledError):
                await waiting
            start = time.monotonic()
            await memory.add("c", Message.assistant("after"))
            assert time.monotonic() - start < 5  # no lock was left behind
            stored = await repository.find_by_conversation_id("c")
            assert [m.content for m in stored] == ["first", "after"]
        finally:
            blocker.close()
            await repository.aclose()

    asyncio.run(scenario())
