"""What the async SQL repository adds to the suite: no I/O before use, one schema
creation under concurrent first calls, detection, retries and closing."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import exc

from chatledger import AsyncMessageWindowChatMemory, ContentionError, Message
from chatledger.adapters import InvalidNameError, InvalidTTLError, InvalidUrlError
from chatledger_sql import MariaDBDialect, SQLiteDialect
from chatledger_sql.async_repository import AsyncSqlChatMemoryRepository
from chatledger_sql.dialects.base import RetryTransaction
from tests.backends import backend_url
from tests.conformance.test_async_sql import with_driver
from tests.sql.conftest import unique_table

ASYNC_DRIVERS = {
    "sqlite": None,
    "postgresql": ["psycopg", "asyncpg"],
    "mariadb": ["asyncmy", "aiomysql"],
}


def async_urls() -> list[Any]:
    """One pytest param per database and async driver."""
    params: list[Any] = [pytest.param("sqlite", None, id="sqlite-aiosqlite")]
    for server in ("postgresql", "mariadb"):
        for driver in ASYNC_DRIVERS[server] or ():
            params.append(pytest.param(server, driver, id=f"{server}-{driver}"))
    return params


def url_of(backend: str, driver: str | None, directory: Path) -> str:
    if backend == "sqlite":
        return f"sqlite+aiosqlite:///{directory / 'chat.db'}"
    assert driver is not None
    return with_driver(backend_url(backend), driver)


def run(
    repository: AsyncSqlChatMemoryRepository,
    scenario: Callable[[AsyncSqlChatMemoryRepository], Awaitable[None]],
) -> None:
    """Run ``scenario`` on a fresh loop, then drop the tables and close."""

    async def main() -> None:
        try:
            await scenario(repository)
        finally:
            try:
                await repository.drop_schema()
            finally:
                await repository.aclose()

    asyncio.run(main())


def test_from_url_does_no_io_and_the_first_call_connects() -> None:
    # Nothing listens on port 1: making the repository must not notice.
    repository = AsyncSqlChatMemoryRepository.from_url(
        "postgresql+asyncpg://postgres@127.0.0.1:1/test", table_name=unique_table()
    )

    async def first_call() -> None:
        with pytest.raises((OSError, exc.DBAPIError)):
            await repository.find_conversation_ids()
        await repository.aclose()

    asyncio.run(first_call())


def test_bad_options_and_sync_drivers_are_refused_before_any_io(
    tmp_path: Path,
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'c.db'}"
    with pytest.raises(InvalidNameError):
        AsyncSqlChatMemoryRepository.from_url(url, table_name="x; DROP")
    with pytest.raises(InvalidTTLError):
        AsyncSqlChatMemoryRepository.from_url(url, ttl=-1)
    with pytest.raises(InvalidUrlError, match="a sync driver"):
        AsyncSqlChatMemoryRepository.from_url(f"sqlite+pysqlite:///{tmp_path / 'c.db'}")
    with pytest.raises(TypeError, match="AsyncEngine"):
        AsyncSqlChatMemoryRepository(object())  # type: ignore[arg-type]
    assert not (tmp_path / "c.db").exists()


@pytest.mark.parametrize(("backend", "driver"), async_urls())
def test_concurrent_first_calls_create_the_schema_once(
    backend: str, driver: str | None, tmp_path: Path
) -> None:
    repository = AsyncSqlChatMemoryRepository.from_url(
        url_of(backend, driver, tmp_path), table_name=unique_table()
    )
    created: list[str] = []
    original = repository._create_tables

    async def counted() -> None:
        created.append("tables")
        await original()

    repository._create_tables = counted  # type: ignore[method-assign]

    async def scenario(repository: AsyncSqlChatMemoryRepository) -> None:
        memory = AsyncMessageWindowChatMemory(repository, max_messages=50)
        await asyncio.gather(
            *(memory.add(f"c{n}", Message.user(f"u{n}")) for n in range(10)),
            *(repository.find_conversation_ids() for _ in range(10)),
        )
        assert created == ["tables"]
        assert sorted(await repository.find_conversation_ids()) == sorted(
            f"c{n}" for n in range(10)
        )

    run(repository, scenario)


@pytest.mark.parametrize("size", [3, 17])
@pytest.mark.parametrize(("backend", "driver"), async_urls())
def test_a_log_append_stores_its_batch_whole_and_in_order(
    backend: str, driver: str | None, size: int, tmp_path: Path
) -> None:
    """Both forms of PostgreSQL's one-statement log append (parameters of
    their own, arrays past 16 messages) through every async driver."""
    repository = AsyncSqlChatMemoryRepository.from_url(
        url_of(backend, driver, tmp_path), table_name=unique_table()
    )
    batch = [
        Message.user(f"u{index} é") if index % 2 == 0 else Message.assistant("a")
        for index in range(size)
    ]

    first = Message.user("before")

    async def scenario(repository: AsyncSqlChatMemoryRepository) -> None:
        await repository.append_to_log("order", [first])
        assert list((await repository.append_to_log("order", batch)).appended) == batch
        assert await repository.find_by_conversation_id("order") == [first, *batch]

    run(repository, scenario)


def test_mariadb_behind_a_mysql_url_is_told_on_the_first_call() -> None:
    url = with_driver(backend_url("mariadb"), "asyncmy")
    repository = AsyncSqlChatMemoryRepository.from_url(url, table_name=unique_table())
    assert repository.dialect is None

    async def scenario(repository: AsyncSqlChatMemoryRepository) -> None:
        await repository.find_conversation_ids()
        assert isinstance(repository.dialect, MariaDBDialect)

    run(repository, scenario)
    named = url.replace("mysql+", "mariadb+", 1)
    known = AsyncSqlChatMemoryRepository.from_url(named, table_name=unique_table())
    assert isinstance(known.dialect, MariaDBDialect)
    asyncio.run(known.aclose())


def test_sqlite_is_known_at_once(tmp_path: Path) -> None:
    repository = AsyncSqlChatMemoryRepository.from_url(
        f"sqlite+aiosqlite:///{tmp_path / 'c.db'}"
    )
    assert isinstance(repository.dialect, SQLiteDialect)
    asyncio.run(repository.aclose())


@pytest.mark.parametrize(("backend", "driver"), async_urls())
def test_giving_up_under_contention_raises_contention_error(
    backend: str, driver: str | None, tmp_path: Path
) -> None:
    """A write that keeps losing its race stops with ContentionError, unwritten."""
    repository = AsyncSqlChatMemoryRepository.from_url(
        url_of(backend, driver, tmp_path), table_name=unique_table()
    )

    async def scenario(repository: AsyncSqlChatMemoryRepository) -> None:
        memory = AsyncMessageWindowChatMemory(repository, max_messages=5)
        await memory.add("busy", Message.user("before"))
        tries: list[str] = []

        def lose(point: str) -> None:
            tries.append(point)
            raise RetryTransaction

        repository.fault_points.on("after_lock", lose)
        with pytest.raises(ContentionError, match=r"'busy'.* 12 attempts"):
            await memory.add("busy", Message.user("after"))
        assert len(tries) == 12
        repository.fault_points.clear()
        assert [m.content for m in await memory.get("busy")] == ["before"]

    run(repository, scenario)


def test_async_with_disposes_only_an_owned_engine(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'c.db'}"

    async def scenario() -> None:
        async with AsyncSqlChatMemoryRepository.from_url(url) as repository:
            await repository.save_all("c", [Message.user("hi")])
            engine = repository.engine
        assert engine.pool.checkedin() == 0  # type: ignore[attr-defined]  # disposed: a new, empty pool
        await repository.aclose()  # twice is fine
        given = AsyncSqlChatMemoryRepository(engine)
        async with given:
            found = await given.find_by_conversation_id("c")
            assert [m.content for m in found] == ["hi"]
        assert engine.pool.checkedin() == 1  # type: ignore[attr-defined]  # not ours to dispose: still pooled
        await engine.dispose()

    asyncio.run(scenario())
