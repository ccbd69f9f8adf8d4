"""One async SQL repository serves any event loop: one after another, or several
at once from threads (the Agents SDK's ``Runner.run_sync`` runs a fresh loop in
a new thread; ``asyncio.run`` twice is the plainest case).

A repository that ``from_url`` made has an engine per loop; one given an
engine with a ``NullPool`` shares it among loops, and its own locks must not
tie it to one.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from chatledger import AsyncMessageWindowChatMemory, Message
from chatledger_sql.async_repository import AsyncSqlChatMemoryRepository
from tests.sql.conftest import unique_table
from tests.sql.test_async_repository import async_urls, url_of

THREADS = 4
ROUNDS = 5


def _repository(
    backend: str, driver: str | None, tmp_path: Path
) -> AsyncSqlChatMemoryRepository:
    return AsyncSqlChatMemoryRepository.from_url(
        url_of(backend, driver, tmp_path), table_name=unique_table()
    )


def _given_null_pool(
    backend: str, driver: str | None, tmp_path: Path
) -> AsyncSqlChatMemoryRepository:
    engine = create_async_engine(url_of(backend, driver, tmp_path), poolclass=NullPool)
    return AsyncSqlChatMemoryRepository(engine, table_name=unique_table())


def _cleanup(repository: AsyncSqlChatMemoryRepository) -> None:
    async def main() -> None:
        try:
            await repository.drop_schema()
        finally:
            await repository.aclose()
            if not repository._owns_engine:
                await repository.engine.dispose()

    asyncio.run(main())


MADE = [
    pytest.param(_repository, id="from_url"),
    pytest.param(_given_null_pool, id="given-NullPool"),
]


@pytest.mark.parametrize("make", MADE)
@pytest.mark.parametrize(("backend", "driver"), async_urls())
def test_asyncio_run_twice_on_one_repository(
    backend: str, driver: str | None, make: Any, tmp_path: Path
) -> None:
    repository = make(backend, driver, tmp_path)
    memory = AsyncMessageWindowChatMemory(repository, max_messages=10)
    try:
        for n in range(3):
            asyncio.run(memory.add("c1", Message.user(f"m{n}", id=f"m{n}")))
        stored = asyncio.run(memory.get("c1"))
        assert [m.id for m in stored] == ["m0", "m1", "m2"]
    finally:
        _cleanup(repository)


@pytest.mark.parametrize("make", MADE)
@pytest.mark.parametrize(("backend", "driver"), async_urls())
def test_threads_each_running_their_own_loop_share_one_repository(
    backend: str, driver: str | None, make: Any, tmp_path: Path
) -> None:
    # First use included: no loop has touched the repository before the threads.
    repository = make(backend, driver, tmp_path)
    memory = AsyncMessageWindowChatMemory(repository, max_messages=100)
    start = threading.Barrier(THREADS)
    failures: list[BaseException] = []

    def worker(n: int) -> None:
        async def rounds() -> None:
            for r in range(ROUNDS):
                await memory.add(f"c{n}", Message.user(f"{n}.{r}", id=f"m{n}.{r}"))
                await memory.add("shared", Message.user(f"{n}.{r}", id=f"s{n}.{r}"))
                assert len(await memory.get(f"c{n}")) == r + 1

        try:
            start.wait()
            asyncio.run(rounds())
        except BaseException as error:  # reported below, with its thread's number
            failures.append(error)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(THREADS)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert not any(t.is_alive() for t in threads), "a thread's loop hung"
        assert not failures, failures

        async def read() -> tuple[list[list[str]], list[str]]:
            own = [[m.id for m in await memory.get(f"c{n}")] for n in range(THREADS)]
            return own, [m.id for m in await memory.get("shared")]

        own, shared = asyncio.run(read())
        assert own == [[f"m{n}.{r}" for r in range(ROUNDS)] for n in range(THREADS)]
        assert sorted(shared) == sorted(
            f"s{n}.{r}" for n in range(THREADS) for r in range(ROUNDS)
        )
        for n in range(THREADS):  # each thread's own appends keep their order
            mine = [i for i in shared if i.startswith(f"s{n}.")]
            assert mine == [f"s{n}.{r}" for r in range(ROUNDS)]
    finally:
        _cleanup(repository)


@pytest.mark.parametrize(("backend", "driver"), async_urls())
def test_each_loop_disposes_its_engine_as_it_shuts_down(
    backend: str, driver: str | None, tmp_path: Path
) -> None:
    repository = _repository(backend, driver, tmp_path)
    memory = AsyncMessageWindowChatMemory(repository, max_messages=10)
    engines = []

    async def add(n: int) -> None:
        await memory.add("c1", Message.user(f"m{n}", id=f"m{n}"))
        engines.append(repository.engine)
        assert engines[-1].pool.checkedin() == 1  # type: ignore[attr-defined]

    try:
        for n in range(2):
            asyncio.run(add(n))
        assert engines[0] is not engines[1]
        # Disposed as asyncio.run shut its loop down: a new, empty pool, and
        # no connection of a closed loop left for the garbage collector.
        assert [e.pool.checkedin() for e in engines] == [0, 0]  # type: ignore[attr-defined]
    finally:
        _cleanup(repository)
