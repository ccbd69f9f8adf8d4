"""Async reads on aiosqlite's own connection: one trip to its thread each.

``find_by_conversation_id`` and the window's view send their SELECT with
aiosqlite's ``execute_fetchall`` where SQLAlchemy's cursor takes four trips
(cursor, execute, fetch, close); ``echo`` or a cursor-execute listener keeps
SQLAlchemy's path. Messages, errors and the pool's state are the same.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from chatledger import Message, MessageWindow, StoreNotFoundError
from chatledger.testing import every_kind
from chatledger_sql.async_repository import AsyncSqlChatMemoryRepository
from chatledger_sql.compiled import runs_raw_async

aiosqlite = pytest.importorskip("aiosqlite")


def _history() -> list[Message]:
    moment = datetime(2026, 12, 1, 12, 0, 0, 123456, tzinfo=UTC)
    return [m.stamped(moment) for m in every_kind()]


@pytest.fixture
def trips(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The aiosqlite calls made (the real ones still run)."""
    made: list[str] = []
    for name in ("cursor", "execute", "execute_fetchall"):
        real = getattr(aiosqlite.Connection, name)

        def counting(
            self: Any, *args: Any, _real: Any = real, _name: str = name
        ) -> Any:
            made.append(_name)
            return _real(self, *args)

        monkeypatch.setattr(aiosqlite.Connection, name, counting)
    return made


def _run(
    tmp_path: Path,
    scenario: Callable[[AsyncSqlChatMemoryRepository], Awaitable[None]],
) -> None:
    async def main() -> None:
        repository = AsyncSqlChatMemoryRepository.from_url(
            f"sqlite+aiosqlite:///{tmp_path / 'chat.db'}"
        )
        try:
            await scenario(repository)
        finally:
            await repository.aclose()

    asyncio.run(main())


def test_reads_take_one_trip_and_read_what_sqlalchemy_reads(
    tmp_path: Path, trips: list[str]
) -> None:
    history = _history()

    async def scenario(repository: AsyncSqlChatMemoryRepository) -> None:
        await repository.save_all("c", history)
        assert runs_raw_async(repository.engine)
        trips.clear()
        direct = await repository.find_by_conversation_id("c")
        view = await repository.find_window("c", MessageWindow(100))
        assert trips == ["execute_fetchall", "execute_fetchall"]
        assert repository.engine.pool.checkedout() == 0  # type: ignore[attr-defined]
        seen: list[str] = []

        def listener(*args: Any) -> None:
            seen.append(args[2])

        sync_engine = repository.engine.sync_engine
        event.listen(sync_engine, "before_cursor_execute", listener)
        try:
            assert not runs_raw_async(repository.engine)
            trips.clear()
            through_sqlalchemy = await repository.find_by_conversation_id("c")
            view_through_sqlalchemy = await repository.find_window(
                "c", MessageWindow(100)
            )
            assert "execute_fetchall" not in trips
        finally:
            event.remove(sync_engine, "before_cursor_execute", listener)
        assert direct == through_sqlalchemy == history
        assert view == view_through_sqlalchemy == history
        assert [m.created_at for m in direct] == [m.created_at for m in history]
        assert any(repository.tables.messages.name in sql for sql in seen)

    _run(tmp_path, scenario)


def test_echo_keeps_async_reads_in_sqlalchemy(tmp_path: Path) -> None:
    async def scenario(repository: AsyncSqlChatMemoryRepository) -> None:
        repository.engine.echo = True
        try:
            assert not runs_raw_async(repository.engine)
        finally:
            repository.engine.echo = False
        assert runs_raw_async(repository.engine)

    _run(tmp_path, scenario)


def test_a_failed_async_read_raises_as_sqlalchemy_would_and_recovers(
    tmp_path: Path,
) -> None:
    async def scenario(repository: AsyncSqlChatMemoryRepository) -> None:
        await repository.save_all("c", _history())
        await repository.drop_schema()
        with pytest.raises(StoreNotFoundError, match=repository.tables.messages.name):
            await repository.find_by_conversation_id("c")
        with pytest.raises(StoreNotFoundError):
            await repository.find_window("c", MessageWindow(5))
        assert repository.engine.pool.checkedout() == 0  # type: ignore[attr-defined]
        await repository.create_schema()
        await repository.save_all("c", _history())
        assert await repository.find_by_conversation_id("c") == _history()

    _run(tmp_path, scenario)


def test_an_async_read_sees_what_was_committed_before_it(tmp_path: Path) -> None:
    async def scenario(reader: AsyncSqlChatMemoryRepository) -> None:
        writer = AsyncSqlChatMemoryRepository.from_url(
            f"sqlite+aiosqlite:///{tmp_path / 'chat.db'}"
        )
        try:
            window = MessageWindow(5)
            await reader.save_all("c", [Message.user("before")])
            assert [m.content for m in await reader.find_window("c", window)] == [
                "before"
            ]
            await writer.save_all("c", [Message.user("after")])
            assert [m.content for m in await reader.find_window("c", window)] == [
                "after"
            ]
            await writer.append_to_log("c", [Message.assistant("later")])
            assert [m.content for m in await reader.find_by_conversation_id("c")] == [
                "after",
                "later",
            ]
        finally:
            await writer.aclose()

    _run(tmp_path, scenario)
