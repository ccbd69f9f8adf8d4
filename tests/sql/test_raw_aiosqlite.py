"""Async SQLite on aiosqlite's own connection: one trip to its thread a call.

aiosqlite runs every call on its own thread. Through SQLAlchemy's adapter a
read took five trips there and back (cursor, execute, fetch, close, and the
pool's ROLLBACK) and a log append eleven; ``find_by_conversation_id`` and
the window's view now send their SELECT in one ``execute_fetchall``, a log
append its four statements (``BEGIN IMMEDIATE``, the row's advance, the
insert, the commit) in one function run in the thread, and the pool rolls
back only an open transaction. ``echo`` or a cursor-execute listener keeps
SQLAlchemy's path; messages, errors and the pool's state are the same, and a
cancelled append leaves neither a lock nor part of itself.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import exc

from chatledger import (
    AsyncMessageWindowChatMemory,
    Message,
    MessageWindow,
)
from chatledger_sql.async_repository import AsyncSqlChatMemoryRepository
from chatledger_sql.compiled import runs_raw_async
from tests.sql.conftest import (
    a_failed_read_recovers,
    cursor_statements,
    stamped_history,
)

aiosqlite = pytest.importorskip("aiosqlite")


@pytest.fixture
def trips(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The functions sent to aiosqlite's thread, by name (each one trip there
    and back; the real ones still run)."""
    made: list[str] = []
    real = aiosqlite.Connection._execute

    def counting(self: Any, fn: Any, *args: Any, **kwargs: Any) -> Any:
        made.append(getattr(fn, "__name__", type(fn).__name__))
        return real(self, fn, *args, **kwargs)

    monkeypatch.setattr(aiosqlite.Connection, "_execute", counting)
    return made


async def traced(repository: AsyncSqlChatMemoryRepository) -> list[str]:
    """The statements SQLite runs from now on (the pool's one connection)."""
    sent: list[str] = []
    async with repository.engine.connect() as connection:
        driver: Any = (await connection.get_raw_connection()).driver_connection
        await driver._execute(driver._conn.set_trace_callback, sent.append)
    return sent


def _run(
    path: Path, scenario: Callable[[AsyncSqlChatMemoryRepository], Awaitable[None]]
) -> None:
    async def main() -> None:
        repository = AsyncSqlChatMemoryRepository.from_url(
            f"sqlite+aiosqlite:///{path}"
        )
        try:
            await scenario(repository)
        finally:
            await repository.aclose()

    asyncio.run(main())


def test_reads_take_one_trip_and_read_what_sqlalchemy_reads(
    tmp_path: Path, trips: list[str]
) -> None:
    history = stamped_history()

    async def scenario(repository: AsyncSqlChatMemoryRepository) -> None:
        await repository.save_all("c", history)
        assert runs_raw_async(repository.engine)
        trips.clear()
        direct = await repository.find_by_conversation_id("c")
        view = await repository.find_window("c", MessageWindow(100))
        assert trips == ["_execute_fetchall", "_execute_fetchall"]
        assert repository.engine.pool.checkedout() == 0  # type: ignore[attr-defined]
        with cursor_statements(repository.engine.sync_engine) as seen:
            assert not runs_raw_async(repository.engine)
            trips.clear()
            through_sqlalchemy = await repository.find_by_conversation_id("c")
            view_through_sqlalchemy = await repository.find_window(
                "c", MessageWindow(100)
            )
            assert trips
            assert "_execute_fetchall" not in trips
        assert direct == through_sqlalchemy == history
        assert view == view_through_sqlalchemy == history
        assert [m.created_at for m in direct] == [m.created_at for m in history]
        assert any(repository.tables.messages.name in sql for sql in seen)

    _run(tmp_path / "chat.db", scenario)


def test_a_log_append_takes_one_trip_and_a_retry_stores_nothing(
    tmp_path: Path, trips: list[str]
) -> None:
    async def scenario(repository: AsyncSqlChatMemoryRepository) -> None:
        memory = AsyncMessageWindowChatMemory(repository, max_messages=10)
        await memory.add("c", Message.user("first"))
        reply = Message.assistant("second")
        sent = await traced(repository)
        trips.clear()
        await memory.add("c", reply)
        # The conversation row's advance, the rows and the commit in one
        # function; no ROLLBACK from the pool after it.
        assert trips == ["run_together"]
        # The lock is waited for in slices (a cancelled caller stops waiting),
        # the connection's busy timeout set back once it is held.
        sliced, begin, restored, advance, insert, commit = sent
        assert (sliced, restored) == (
            "PRAGMA busy_timeout = 100",
            "PRAGMA busy_timeout = 30000",
        )
        assert (begin, commit) == ("BEGIN IMMEDIATE", "COMMIT")
        assert repository.tables.conversations.name in advance
        assert insert.startswith(f"INSERT INTO {repository.tables.messages.name}")
        await memory.add("c", reply)  # a retry: the id is held
        assert [m.content for m in await memory.get("c")] == ["first", "second"]
        assert repository.engine.pool.checkedout() == 0  # type: ignore[attr-defined]

    _run(tmp_path / "chat.db", scenario)


def test_a_log_append_failing_in_the_thread_raises_and_stores_nothing(
    tmp_path: Path,
) -> None:
    async def scenario(repository: AsyncSqlChatMemoryRepository) -> None:
        memory = AsyncMessageWindowChatMemory(repository, max_messages=10)
        await memory.add("c", Message.user("first"))
        messages = repository.tables.messages.name
        async with repository.engine.begin() as connection:
            await connection.exec_driver_sql(
                f"CREATE TRIGGER refuse BEFORE INSERT ON {messages} "
                "BEGIN INSERT INTO no_such_table VALUES (1); END"
            )
        with pytest.raises(exc.OperationalError, match="no_such_table") as error:
            await memory.add("c", Message.assistant("refused"))
        # Named as SQLAlchemy names it: the statement that failed, in the thread.
        assert str(error.value.statement).startswith(f"INSERT INTO {messages}")
        assert repository.engine.pool.checkedout() == 0  # type: ignore[attr-defined]
        async with repository.engine.begin() as connection:
            await connection.exec_driver_sql("DROP TRIGGER refuse")
        await memory.add("c", Message.assistant("after"))
        stored = await repository.find_by_conversation_id("c")
        assert [m.content for m in stored] == ["first", "after"]

    _run(tmp_path / "chat.db", scenario)


def test_echo_keeps_async_reads_in_sqlalchemy(tmp_path: Path) -> None:
    async def scenario(repository: AsyncSqlChatMemoryRepository) -> None:
        repository.engine.echo = True
        try:
            assert not runs_raw_async(repository.engine)
        finally:
            repository.engine.echo = False
        assert runs_raw_async(repository.engine)

    _run(tmp_path / "chat.db", scenario)


def test_a_failed_async_read_raises_as_sqlalchemy_would_and_recovers(
    tmp_path: Path,
) -> None:
    _run(tmp_path / "chat.db", a_failed_read_recovers)


def test_an_async_read_sees_what_was_committed_before_it(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"

    async def scenario(reader: AsyncSqlChatMemoryRepository) -> None:
        writer = AsyncSqlChatMemoryRepository.from_url(f"sqlite+aiosqlite:///{path}")
        try:
            window = MessageWindow(5)
            await reader.save_all("c", [Message.user("before")])
            shown = await reader.find_window("c", window)
            assert [m.content for m in shown] == ["before"]
            await writer.save_all("c", [Message.user("after")])
            shown = await reader.find_window("c", window)
            assert [m.content for m in shown] == ["after"]
            await writer.append_to_log("c", [Message.assistant("later")])
            stored = await reader.find_by_conversation_id("c")
            assert [m.content for m in stored] == ["after", "later"]
        finally:
            await writer.aclose()

    _run(path, scenario)


def test_an_append_cancelled_while_it_waits_for_the_lock_stops_and_leaves_none(
    tmp_path: Path,
) -> None:
    path = tmp_path / "chat.db"

    async def scenario(repository: AsyncSqlChatMemoryRepository) -> None:
        blocker = sqlite3.connect(path, isolation_level=None)
        try:
            memory = AsyncMessageWindowChatMemory(repository, max_messages=10)
            await memory.add("c", Message.user("first"))
            blocker.execute("BEGIN IMMEDIATE")  # holds the write lock
            waiting = asyncio.create_task(memory.add("c", Message.user("cancelled")))
            await asyncio.sleep(0.3)  # waiting for the lock, under the busy timeout
            assert not waiting.done()
            waiting.cancel()
            # It stops waiting while the lock is still held: SQLite's own wait
            # would have gone on for the 30 s of the busy timeout.
            start = time.monotonic()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            assert time.monotonic() - start < 5
            blocker.execute("ROLLBACK")
            start = time.monotonic()
            await memory.add("c", Message.assistant("after"))
            assert time.monotonic() - start < 5  # no lock was left behind
            stored = await repository.find_by_conversation_id("c")
            assert [m.content for m in stored] == ["first", "after"]
        finally:
            blocker.close()

    _run(path, scenario)
