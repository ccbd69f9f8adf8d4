"""A repository ``from_url`` makes keeps its connections under concurrent calls.

SQLAlchemy's default pool closes every connection past its fifth as it comes
back, so more than five concurrent tasks connect anew nearly every call.
The test counts the connections the real servers accept. (Threads, which
hand their connections back one at a time, did not show it here.)
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sqlalchemy import event

from chatledger import AsyncMessageWindowChatMemory, Message
from chatledger_sql.async_repository import AsyncSqlChatMemoryRepository
from chatledger_sql.urls import POOL_SIZE, async_engine_url, engine_url, steady_pool
from tests.backends import backend_url
from tests.conformance.test_async_sql import with_driver
from tests.sql.conftest import SERVERS, unique_table

#: Concurrent callers: more than SQLAlchemy's default pool keeps, fewer than ours.
CALLERS = 8
#: Appends each caller makes.
ROUNDS = 15
#: The async driver each server is reached with.
ASYNC_DRIVER = {"postgresql": "psycopg", "mariadb": "asyncmy"}


def _counting(engine: Any) -> list[int]:
    """Count the connections ``engine`` opens from now on."""
    opened: list[int] = []
    event.listen(engine, "connect", lambda *_: opened.append(1))
    return opened


@pytest.mark.parametrize("server", SERVERS)
def test_concurrent_tasks_reuse_the_pools_connections(server: str) -> None:
    async def scenario() -> None:
        url = with_driver(backend_url(server), ASYNC_DRIVER[server])
        repository = AsyncSqlChatMemoryRepository.from_url(
            url, table_name=unique_table()
        )
        try:
            await repository.create_schema()
            opened = _counting(repository.engine.sync_engine)
            memory = AsyncMessageWindowChatMemory(repository, max_messages=10)

            async def caller(index: int) -> None:
                for round_ in range(ROUNDS):
                    await memory.add(f"c{index}", Message.user(f"m{round_}"))

            await asyncio.gather(*(caller(i) for i in range(CALLERS)))
            for index in range(CALLERS):
                assert len(await memory.get(f"c{index}")) == 10
            assert len(opened) <= CALLERS
        finally:
            await repository.drop_schema()
            await repository.aclose()

    asyncio.run(scenario())


def test_only_a_server_pool_not_sized_by_the_caller_is_steadied() -> None:
    steady = {"pool_size": POOL_SIZE, "max_overflow": 0}
    for url in ("postgresql://u@h/db", "mysql://u@h/db", "mariadb://u@h/db"):
        assert steady_pool(engine_url(url), {}) == steady
        assert steady_pool(async_engine_url(url), {"echo": True}) == steady
    for given in ({"pool_size": 3}, {"max_overflow": 2}, {"poolclass": object}):
        assert steady_pool(engine_url("postgresql://u@h/db"), given) == {}
    assert steady_pool(engine_url("sqlite:///chat.db"), {}) == {}
    assert steady_pool(engine_url("duckdb:///chat.duckdb"), {}) == {}
