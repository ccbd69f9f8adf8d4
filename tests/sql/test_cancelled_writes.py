"""An async write cancelled at any moment leaves the database writable.

A cancelled write's connection may hold its transaction's lock (SQLite's
``BEGIN IMMEDIATE`` locks the whole file, a server's ``SELECT ... FOR UPDATE``
the conversation's row). Unless the write rolls back or drops that connection
before the cancellation returns, the next write waits on the lock until its
busy or lock timeout and fails ("database is locked"), or the cancelled call
never returns at all.

Each round cancels an ``add`` at a random moment of its run (up to one and a
half times as long as the last ``add`` took), then requires that it returned
and that the next ``add`` succeeds. The lock timeouts are short, so that a
lock left behind fails the test within seconds instead of waiting 30; a call
that never returns fails it too, after a generous bound, naming the call.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import threading
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from chatledger import AsyncMessageWindowChatMemory, Message
from chatledger_sql.async_repository import AsyncSqlChatMemoryRepository
from chatledger_sql.dialects import SQLiteDialect
from tests.sql.conftest import unique_table
from tests.sql.test_async_repository import async_urls, url_of

ROUNDS = 60
#: A generous bound on the whole test: reaching it means a call hung.
HANG_SECONDS = 120
#: A server's wait for a row lock, cut to 2 s. SQLite's wait for its write
#: lock is the dialect's ``busy_timeout_ms``, set for each write.
LOCK_TIMEOUT_SQL = {
    "postgresql": "SET lock_timeout = 2000",
    "mysql": "SET SESSION innodb_lock_wait_timeout = 2",
}


def _short_lock_timeout(repository: AsyncSqlChatMemoryRepository) -> None:
    """Have the running loop's engine wait 2 s at most for a row lock."""
    engine = repository.engine.sync_engine
    statement = LOCK_TIMEOUT_SQL.get(engine.dialect.name)
    if statement is None:
        return

    def on_connect(dbapi_connection: Any, connection_record: Any) -> None:
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(statement)
        finally:
            cursor.close()

    event.listen(engine, "connect", on_connect)


@pytest.mark.parametrize(("backend", "driver"), async_urls())
def test_adds_cancelled_at_random_moments_leave_the_store_writable(
    backend: str, driver: str | None, tmp_path: Path
) -> None:
    seed = random.randrange(2**32)
    chance = random.Random(seed)
    options: dict[str, Any] = {}
    if backend == "sqlite":  # the write lock's own wait, 30 s by default
        options["dialect"] = SQLiteDialect(busy_timeout_ms=2000)
    repository = AsyncSqlChatMemoryRepository.from_url(
        url_of(backend, driver, tmp_path), table_name=unique_table(), **options
    )
    memory = AsyncMessageWindowChatMemory(repository, max_messages=8)
    #: What the loop is doing, for the message of a hang.
    step = ["starting"]

    async def timed_add(message: Message) -> float:
        loop = asyncio.get_running_loop()
        started = loop.time()
        await memory.add("c", message)
        return loop.time() - started

    async def scenario() -> None:
        _short_lock_timeout(repository)
        took = await timed_add(Message.user("first", id="first"))
        for n in range(ROUNDS):
            step[0] = f"round {n}: the cancelled add"
            cancelled = asyncio.create_task(
                memory.add("c", Message.user(f"cancelled {n}", id=f"x{n}"))
            )
            await asyncio.sleep(chance.uniform(0, 1.5 * took))
            cancelled.cancel()
            # Had it finished first, it must have succeeded.
            with contextlib.suppress(asyncio.CancelledError):
                await cancelled
            step[0] = f"round {n}: the add after the cancelled one"
            try:
                took = await timed_add(Message.user(f"next {n}", id=f"n{n}"))
            except Exception as error:
                raise AssertionError(
                    f"round {n}: the add after a cancelled one failed (seed {seed})"
                ) from error
        stored = [m.id for m in await memory.get("c")]
        assert stored[-1] == f"n{ROUNDS - 1}"

    failures: list[BaseException] = []

    async def main() -> None:
        try:
            await scenario()
        except BaseException as error:  # raised below, in the test's thread
            failures.append(error)
        step[0] = "dropping the tables"
        try:
            await repository.drop_schema()
        finally:
            await repository.aclose()

    def run() -> None:
        try:
            asyncio.run(main())
        except BaseException as error:
            failures.append(error)

    # A hung call may never return, nor let its loop finish: it runs in a
    # thread of its own, so that the hang fails the test instead of holding it.
    runner = threading.Thread(target=run, daemon=True)
    runner.start()
    runner.join(HANG_SECONDS)
    if failures:
        raise failures[0]
    assert not runner.is_alive(), f"{step[0]} never returned (seed {seed})"
