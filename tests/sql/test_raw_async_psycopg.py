"""Async PostgreSQL on psycopg: reads and log appends go to psycopg's connection.

Through SQLAlchemy's adapter each statement costs a greenlet switch and more
client time than its round trip; sent to psycopg's ``AsyncConnection``
directly, a read or a log append is one ``execute``, in autocommit as the
sync raw path runs them. ``echo`` or a cursor-execute listener keeps
SQLAlchemy's path; messages, errors and the connection handed back are the
same.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from chatledger import (
    AsyncMessageWindowChatMemory,
    Message,
    MessageWindow,
)
from chatledger_sql.async_repository import AsyncSqlChatMemoryRepository
from chatledger_sql.compiled import runs_raw_async
from tests.backends import backend_url
from tests.conformance.test_async_sql import with_driver
from tests.sql.conftest import (
    a_failed_read_recovers,
    cursor_statements,
    stamped_history,
    unique_table,
)

psycopg = pytest.importorskip("psycopg")


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The statements sent with psycopg's ``AsyncConnection.execute`` (which
    SQLAlchemy's adapter never calls: it executes on its own cursors)."""
    made: list[str] = []
    real = psycopg.AsyncConnection.execute

    async def counting(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        made.append(str(query))
        return await real(self, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.AsyncConnection, "execute", counting)
    return made


def _run(scenario: Callable[[AsyncSqlChatMemoryRepository], Awaitable[None]]) -> None:
    url = with_driver(backend_url("postgresql"), "psycopg")

    async def main() -> None:
        repository = AsyncSqlChatMemoryRepository.from_url(
            url, table_name=unique_table()
        )
        try:
            await scenario(repository)
        finally:
            await repository.drop_schema()
            await repository.aclose()

    asyncio.run(main())


def test_reads_and_appends_go_to_psycopg_and_read_what_sqlalchemy_reads(
    sent: list[str],
) -> None:
    history = stamped_history()

    async def scenario(repository: AsyncSqlChatMemoryRepository) -> None:
        await repository.save_all("c", history)
        assert runs_raw_async(repository.engine)
        table = repository.tables.messages.name
        sent.clear()
        direct = await repository.find_by_conversation_id("c")
        view = await repository.find_window("c", MessageWindow(100))
        memory = AsyncMessageWindowChatMemory(repository, max_messages=100)
        await memory.add("c", Message.user("one more"))
        assert len(sent) == 3
        assert all(table in sql for sql in sent)
        async with repository.engine.connect() as connection:
            raw = await connection.get_raw_connection()
            assert raw.driver_connection.autocommit is False  # type: ignore[union-attr]
        assert repository.engine.pool.checkedout() == 0  # type: ignore[attr-defined]

        with cursor_statements(repository.engine.sync_engine) as seen:
            assert not runs_raw_async(repository.engine)
            sent.clear()
            through_sqlalchemy = await repository.find_by_conversation_id("c")
            view_through_sqlalchemy = await repository.find_window(
                "c", MessageWindow(100)
            )
            await memory.add("c", Message.assistant("and a reply"))
            assert sent == []
        assert any(table in sql for sql in seen)
        assert direct == view == history
        assert (
            through_sqlalchemy
            == view_through_sqlalchemy
            == [
                *history,
                through_sqlalchemy[-1],
            ]
        )
        assert through_sqlalchemy[-1].content == "one more"
        assert [m.content for m in (await memory.get("c"))[-2:]] == [
            "one more",
            "and a reply",
        ]

    _run(scenario)


def test_a_retried_append_stores_nothing_twice() -> None:
    async def scenario(repository: AsyncSqlChatMemoryRepository) -> None:
        memory = AsyncMessageWindowChatMemory(repository, max_messages=10)
        reply = Message.assistant("once")
        await memory.add("c", Message.user("hi"))
        await memory.add("c", reply)
        await memory.add("c", reply)
        assert [m.content for m in await memory.get("c")] == ["hi", "once"]

    _run(scenario)


def test_a_failed_read_raises_as_sqlalchemy_would_and_recovers() -> None:
    _run(a_failed_read_recovers)
