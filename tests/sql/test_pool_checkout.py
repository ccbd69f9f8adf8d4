"""Async connections checked out and in without a greenlet where nothing waits.

On engines ``AsyncSqlChatMemoryRepository.from_url`` makes for aiosqlite,
psycopg and asyncmy, a steady append or read takes its pooled connection and
gives it back as plain calls (``chatledger_sql.pool_checkout``), where
``AsyncEngine.connect()`` spawned a greenlet for each, and one more for the
driver's connection. Anything that may need I/O takes SQLAlchemy's awaiting
path: a pool one of whose connections was invalidated, an open transaction
on return, a pre-ping. Real databases throughout.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import warnings
import weakref
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy.ext.asyncio.engine as async_engine_module
from sqlalchemy import event, text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from chatledger import AsyncMessageWindowChatMemory, Message
from chatledger_sql.async_repository import AsyncSqlChatMemoryRepository
from chatledger_sql.compiled import transaction_open
from chatledger_sql.pool_checkout import (
    QuietPool,
    pooled_connection,
    takes_idle_without_awaiting,
)
from tests.sql.conftest import unique_table
from tests.sql.test_async_repository import run, url_of

#: The async drivers whose engines from_url makes check out quietly.
QUIET = [
    pytest.param("sqlite", None, id="sqlite-aiosqlite"),
    pytest.param("postgresql", "psycopg", id="postgresql-psycopg"),
    pytest.param("mariadb", "asyncmy", id="mariadb-asyncmy"),
]


@pytest.fixture
def spawned(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The greenlets AsyncConnection and AsyncEngine spawn (they still run)."""
    made: list[str] = []
    real = getattr(async_engine_module, "greenlet_spawn")  # noqa: B009

    async def counting(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        made.append(getattr(fn, "__name__", repr(fn)))
        return await real(fn, *args, **kwargs)

    monkeypatch.setattr(async_engine_module, "greenlet_spawn", counting)
    return made


def _run(
    url: str, scenario: Callable[[AsyncSqlChatMemoryRepository], Awaitable[None]]
) -> None:
    run(AsyncSqlChatMemoryRepository.from_url(url, table_name=unique_table()), scenario)


@pytest.mark.parametrize(("backend", "driver"), QUIET)
def test_steady_appends_and_reads_spawn_no_greenlet(
    backend: str, driver: str | None, tmp_path: Path, spawned: list[str]
) -> None:
    async def scenario(repository: AsyncSqlChatMemoryRepository) -> None:
        memory = AsyncMessageWindowChatMemory(repository, max_messages=4)
        await memory.add("c", Message.user("first"))  # connects, makes tables
        await memory.get("c")
        spawned.clear()
        for turn in range(5):
            await memory.add("c", [Message.user(f"u{turn}"), Message.assistant("a")])
            assert [m.content for m in await memory.get("c")][-2:] == [f"u{turn}", "a"]
        assert spawned == []

    _run(url_of(backend, driver, tmp_path), scenario)


def test_a_dropped_connection_is_replaced_and_later_checkouts_await(
    tmp_path: Path, spawned: list[str]
) -> None:
    url = url_of("postgresql", "psycopg", tmp_path)

    async def scenario(repository: AsyncSqlChatMemoryRepository) -> None:
        memory = AsyncMessageWindowChatMemory(repository, max_messages=10)
        await memory.add("c", Message.user("before"))
        async with repository._connect() as connection:
            raw: Any = (await connection.get_raw_connection()).driver_connection
            pid = raw.info.backend_pid
        admin = create_async_engine(url)
        try:
            async with admin.connect() as other:
                await other.execute(
                    text("SELECT pg_terminate_backend(:pid)"), {"pid": pid}
                )
        finally:
            await admin.dispose()
        spawned.clear()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            # Fails on the dead connection, runs again on a new one.
            await memory.add("c", Message.user("after"))
        assert [str(w.message) for w in caught] == []
        assert [m.content for m in await memory.get("c")] == ["before", "after"]
        # The pool had a connection invalidated: checkouts await from now on.
        spawned.clear()
        await memory.get("c")
        assert "connect" in spawned

    _run(url, scenario)


@pytest.mark.parametrize(("backend", "driver"), QUIET)
def test_once_a_connection_invalidated_alone_reconnects_checkouts_are_quiet_again(
    backend: str, driver: str | None, tmp_path: Path, spawned: list[str]
) -> None:
    async def scenario(repository: AsyncSqlChatMemoryRepository) -> None:
        memory = AsyncMessageWindowChatMemory(repository, max_messages=10)
        await memory.add("c", Message.user("first"))
        async with repository._connect() as connection:
            await connection.invalidate()  # as a failed statement's cleanup does
        spawned.clear()
        await memory.add("c", Message.user("second"))  # it reconnects, awaiting
        assert "connect" in spawned
        await _assert_quiet(memory, spawned)
        assert [m.content for m in await memory.get("c")][:2] == ["first", "second"]

    _run(url_of(backend, driver, tmp_path), scenario)


def test_a_cancelled_statement_leaves_the_pool_quiet_once_reconnected(
    tmp_path: Path, spawned: list[str]
) -> None:
    async def scenario(repository: AsyncSqlChatMemoryRepository) -> None:
        memory = AsyncMessageWindowChatMemory(repository, max_messages=10)
        await memory.add("c", Message.user("first"))

        async def slow() -> None:
            async with repository._connect() as connection:
                await connection.execute(text("SELECT pg_sleep(5)"))

        sleeping = asyncio.create_task(slow())
        await asyncio.sleep(0.3)
        sleeping.cancel()  # _connect invalidates the connection it interrupted
        with pytest.raises(asyncio.CancelledError):
            await sleeping
        spawned.clear()
        await memory.add("c", Message.user("second"))
        assert "connect" in spawned
        await _assert_quiet(memory, spawned)

    _run(url_of("postgresql", "psycopg", tmp_path), scenario)


async def _assert_quiet(
    memory: AsyncMessageWindowChatMemory, spawned: list[str]
) -> None:
    """Appends and reads check their connection out and in as plain calls."""
    spawned.clear()
    for turn in range(3):
        await memory.add("c", Message.user(f"u{turn}"))
        await memory.get("c")
    assert spawned == []


@pytest.mark.parametrize(("backend", "driver"), QUIET)
def test_a_connection_returned_in_a_transaction_is_rolled_back(
    backend: str, driver: str | None, tmp_path: Path
) -> None:
    async def scenario(repository: AsyncSqlChatMemoryRepository) -> None:
        memory = AsyncMessageWindowChatMemory(repository, max_messages=4)
        await memory.add("c", Message.user("first"))
        engine = repository.engine
        quiet = repository._quiet
        assert quiet is not None
        async with pooled_connection(engine, quiet) as connection:
            await connection.begin()
            # A write: SQLite begins its transaction at the first one.
            table = repository.tables.messages.name
            await connection.execute(text(f"DELETE FROM {table} WHERE 1 = 0"))
            driver = (await connection.get_raw_connection()).driver_connection
            assert transaction_open(driver)
        # The same connection, back in the pool with its transaction ended.
        assert not transaction_open(driver)
        assert [m.content for m in await memory.get("c")] == ["first"]

    _run(url_of(backend, driver, tmp_path), scenario)


@pytest.mark.parametrize("listened", ["checkout", "reset", "checkin"])
def test_a_pool_listener_added_later_makes_checkouts_await(
    listened: str, tmp_path: Path, spawned: list[str]
) -> None:
    heard: list[str] = []

    async def scenario(repository: AsyncSqlChatMemoryRepository) -> None:
        memory = AsyncMessageWindowChatMemory(repository, max_messages=4)
        await memory.add("c", Message.user("first"))
        spawned.clear()
        await memory.get("c")
        assert spawned == []
        pool = repository.engine.sync_engine.pool
        event.listen(pool, listened, lambda *_: heard.append(listened))
        await memory.get("c")
        assert heard  # it ran, in the greenlet a listener may await in
        # A checkout listener sends the whole call SQLAlchemy's way; a return
        # listener the return only.
        awaited = ["connect", "close"] if listened == "checkout" else ["close"]
        assert spawned == awaited

    _run(url_of("sqlite", None, tmp_path), scenario)


def _idle_engine(directory: Path, **options: Any) -> AsyncEngine:
    # As QuietPool asks: no rollback on the return of a connection without
    # a transaction (these tests open none).
    return create_async_engine(
        f"sqlite+aiosqlite:///{directory / 'x.db'}",
        pool_reset_on_return=None,
        **options,
    )


def test_an_engine_that_pings_or_recycles_always_awaits(tmp_path: Path) -> None:
    async def main() -> None:
        engine = _idle_engine(tmp_path)
        try:
            async with engine.connect():
                pass  # one idle connection in the pool
            steady = QuietPool({})
            quiet_one = steady.connect(engine.sync_engine)
            assert quiet_one is not None
            quiet_one.close()
            for options in ({"pool_pre_ping": True}, {"pool_recycle": 3600}):
                assert QuietPool(options).connect(engine.sync_engine) is None
        finally:
            await engine.dispose()

    asyncio.run(main())


def test_a_pool_without_an_idle_connection_awaits(tmp_path: Path) -> None:
    async def main() -> None:
        engine = _idle_engine(tmp_path)
        try:
            quiet = QuietPool({})
            # Nothing pooled yet: it connects, which awaits.
            assert quiet.connect(engine.sync_engine) is None
            async with pooled_connection(engine, quiet) as connection:
                assert (await connection.execute(text("SELECT 1"))).scalar() == 1
            again = quiet.connect(engine.sync_engine)
            assert again is not None  # now pooled, and taken without I/O
            again.close()
        finally:
            await engine.dispose()

    asyncio.run(main())


def test_a_connection_past_the_pools_size_is_closed_through_the_awaiting_path(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def main() -> None:
        engine = _idle_engine(tmp_path, pool_size=1, max_overflow=1)
        pool: Any = engine.sync_engine.pool
        quiet = QuietPool({})
        try:
            one = await engine.connect()
            overflow = await engine.connect()  # past the pool's size
            await one.close()  # into the pool's one place
            async with pooled_connection(engine, quiet) as taken:
                assert taken.sync_connection is not None
                assert pool.checkedin() == 0  # taken quietly from there
                await overflow.close()  # fills the place again
            # Then the pool had no room: closed, which awaits aiosqlite.
            assert (pool.checkedin(), pool.checkedout()) == (1, 0)
        finally:
            await engine.dispose()

    with caplog.at_level(logging.ERROR, logger="sqlalchemy"):
        asyncio.run(main())
    assert [r.getMessage() for r in caplog.records] == []


@pytest.mark.parametrize(
    ("version", "quiet"),
    [
        ("2.0.30", False),
        ("2.0.54", False),
        ("2.0.55", True),
        ("2.0.58", True),
        ("2.1.0b1", False),
        ("2.1.4", False),
        ("2.1.5", True),
        ("2.1.9", True),
        ("2.2.0b1", True),
        ("3.0.0", True),
    ],
)
def test_releases_whose_pool_awaits_an_idle_connection_never_check_out_quietly(
    version: str, quiet: bool
) -> None:
    # Before these releases AsyncAdaptedQueue.get awaited the queue even with
    # a connection in it, which outside a greenlet raises MissingGreenlet.
    assert takes_idle_without_awaiting(version) is quiet


def test_the_engines_of_finished_loops_are_not_kept(tmp_path: Path) -> None:
    repository = AsyncSqlChatMemoryRepository.from_url(
        url_of("sqlite", None, tmp_path), table_name=unique_table()
    )
    memory = AsyncMessageWindowChatMemory(repository, max_messages=10)
    engines: list[weakref.ref[Any]] = []

    async def add(n: int) -> None:
        await memory.add("c", Message.user(f"m{n}"))
        assert [m.content for m in await memory.get("c")][-1] == f"m{n}"
        engines.append(weakref.ref(repository.engine.sync_engine))

    for n in range(3):
        asyncio.run(add(n))
    gc.collect()
    # The first loop took the engine from_url made, which the repository
    # keeps; each later loop's went with its loop.
    assert [engine() is None for engine in engines] == [False, True, True]
    run(repository, lambda _: asyncio.sleep(0))
