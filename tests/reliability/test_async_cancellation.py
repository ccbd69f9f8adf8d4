"""Cancelled async writes leave the old state or the new, and a clean pool.

Each write is run as a task and cancelled for real: at each named fault point
(the handler cancels the running task, so the next await raises), and from
outside after a growing number of loop turns, so the cancellation lands on
every await of the write in turn. After each, the conversation must hold
exactly what it held before or exactly what the write writes, every
connection must be back in its pool outside any transaction, and the next
write to the same conversation must go through (a leaked row lock would hold
it forever).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from sqlalchemy import event, text
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine

from chatledger import AsyncMessageWindowChatMemory, Message, connect_async
from chatledger.adapters import FAULT_POINTS
from chatledger_sql.dialects import MariaDBDialect
from tests.backends import backend_url
from tests.conformance.test_async_sql import with_driver
from tests.window_append_memory import AsyncWindowAppendMemory

#: Loop turns before an outside cancellation: enough to reach past the commit.
OUTSIDE_TURNS = 40

BACKENDS = [
    pytest.param("postgresql", "psycopg", id="postgresql-psycopg"),
    pytest.param("postgresql", "asyncpg", id="postgresql-asyncpg"),
    pytest.param("mariadb", "asyncmy", id="mariadb-asyncmy"),
    pytest.param("mariadb", "aiomysql", id="mariadb-aiomysql"),
    pytest.param("redis", None, id="redis"),
    pytest.param("neo4j", None, id="neo4j"),
    pytest.param("cassandra", None, id="cassandra"),
]
#: How long a cancelled Cassandra request may take to come back from the server.
CASSANDRA_SETTLE_SECONDS = 10.0


def repository_spec(backend: str, driver: str | None) -> tuple[str, dict[str, Any]]:
    """The URL and options of a fresh store of ``backend``, under names of its own."""
    tag = uuid.uuid4().hex[:12]
    if backend == "redis":
        return backend_url("redis"), {"key_prefix": f"chatledger-test:{tag}:"}
    if backend == "neo4j":
        return backend_url("neo4j"), {
            "conversation_label": f"ConversationX{tag}",
            "message_label": f"MessageX{tag}",
        }
    if backend == "cassandra":
        return backend_url("cassandra"), {"table": f"cl_{tag}", "create_keyspace": True}
    assert driver is not None
    return with_driver(backend_url(backend), driver), {"table_name": f"cl_{tag}"}


def open_repository(backend: str, driver: str | None) -> Any:
    url, options = repository_spec(backend, driver)
    return connect_async(url, **options)


def in_transaction(connection: Any) -> bool:
    """Whether a driver's own connection has a transaction open."""
    if hasattr(connection, "is_in_transaction"):  # asyncpg
        return bool(connection.is_in_transaction())
    if hasattr(connection, "info"):  # psycopg
        return int(connection.info.transaction_status) != 0
    if hasattr(connection, "in_transaction"):  # aiosqlite
        return bool(connection.in_transaction)
    return bool(connection.server_status & 1)  # MySQL protocol: IN_TRANS


async def assert_cassandra_settled(repository: Any) -> None:
    """Every request has come back, and every connection is open.

    Cassandra has no transaction to leave open and its connections carry many
    requests at once, so a cancelled call can only leave a request in flight
    (its answer is dropped when it comes) or break a connection.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + CASSANDRA_SETTLE_SECONDS
    while True:
        states = list(repository.session.get_pool_state().values())
        assert states
        assert all(s["open_count"] > 0 and not s["shutdown"] for s in states)
        if sum(sum(s["in_flights"]) for s in states) == 0:
            return
        assert loop.time() < deadline, f"requests still in flight: {states}"
        await asyncio.sleep(0.01)


async def assert_pool_clean(repository: Any) -> None:
    """Every connection is back in its pool, and none is in a transaction."""
    if hasattr(repository, "session"):
        await assert_cassandra_settled(repository)
    elif hasattr(repository, "engine"):
        pool = repository.engine.pool
        assert pool.checkedout() == 0
        connections = [
            await repository.engine.connect() for _ in range(pool.checkedin())
        ]
        try:
            for connection in connections:
                raw = await connection.get_raw_connection()
                assert not in_transaction(raw.driver_connection)
        finally:
            for connection in connections:
                await connection.close()
    elif hasattr(repository, "driver"):
        # A cancelled session kills its connection instead of returning it
        # (the server then rolls its transaction back); none stays in use.
        pool = repository.driver._pool
        connections = [c for kept in pool.connections.values() for c in kept]
        assert not any(c.in_use for c in connections)
    else:
        pool = repository.client.connection_pool
        assert not pool._in_use_connections


async def cancelled(
    write: Callable[[], Awaitable[object]],
    *,
    point: str | None = None,
    turns: int = 0,
    repository: Any,
) -> bool:
    """Run ``write`` as a task and cancel it; return whether it finished anyway."""
    task: asyncio.Task[object] | None = None

    def cancel(_: str) -> None:
        assert task is not None
        task.cancel()

    if point is not None:
        repository.fault_points.on(point, cancel)
    task = asyncio.create_task(write())  # type: ignore[arg-type]
    try:
        if point is None:
            for _ in range(turns):
                await asyncio.sleep(0)
            task.cancel()
        await task
    except asyncio.CancelledError:
        finished = False
    else:
        finished = True
    finally:
        repository.fault_points.clear()
    return finished


def run_on(repository: Any, scenario: Callable[[], Awaitable[None]]) -> None:
    """Run ``scenario`` in a new event loop, then drop and close ``repository``."""

    async def main() -> None:
        try:
            await scenario()
        finally:
            try:
                await repository.drop_schema()
            finally:
                await repository.aclose()

    asyncio.run(main())


def ids(messages: list[Message]) -> list[str]:
    return [m.id for m in messages]


@pytest.mark.parametrize(("backend", "driver"), BACKENDS)
def test_a_cancelled_write_leaves_old_or_new_and_a_clean_pool(
    backend: str, driver: str | None
) -> None:
    repository = open_repository(backend, driver)
    memory = AsyncMessageWindowChatMemory(repository, max_messages=1000)

    async def check(what: str, before: list[str], after: list[str]) -> list[str]:
        found = ids(await repository.find_by_conversation_id("c"))
        assert found in (before, after), (
            f"{what}: a part of a write is visible, or a write landed late: "
            f"found {found}, before {before}, after {after}"
        )
        await assert_pool_clean(repository)
        return found

    async def scenario() -> None:
        await repository.save_all("c", [Message.user("u0"), Message.assistant("a0")])
        cases: list[dict[str, Any]] = [{"point": p} for p in FAULT_POINTS]
        cases += [{"turns": n} for n in range(OUTSIDE_TURNS)]
        outcomes = {"old": 0, "new": 0}
        for case in cases:
            # An append of a whole turn...
            before = ids(await repository.find_by_conversation_id("c"))
            batch = [Message.user("u"), Message.assistant("a")]
            await cancelled(
                functools.partial(memory.add, "c", batch),
                repository=repository,
                **case,
            )
            found = await check(f"append, {case}", before, before + ids(batch))
            outcomes["new" if found != before else "old"] += 1
            # ...and a replacement of the whole conversation.
            before = found
            replacement = [
                Message.system("s"),
                Message.user("r"),
                Message.assistant("b"),
            ]
            await cancelled(
                functools.partial(repository.save_all, "c", replacement),
                repository=repository,
                **case,
            )
            found = await check(f"replacement, {case}", before, ids(replacement))
            outcomes["new" if found != before else "old"] += 1
            # The conversation is not left locked: the next write goes through.
            await memory.add("c", Message.user("next"))
        # Cancellations landed both before and after the writes took effect.
        assert outcomes["old"] > 0
        assert outcomes["new"] > 0

    run_on(repository, scenario)


#: How long a write may take to reach its commit, or the commit to go through.
COMMIT_WAIT_SECONDS = 10.0


async def commits_held(connection: AsyncConnection, sessions: set[int]) -> int:
    """How many of ``sessions`` (MariaDB connection ids) wait for a commit
    that a backup stage holds: the stage holds every session's, and another
    test's commit on the server must not pass for this one's."""
    if not sessions:
        return 0
    listed = ", ".join(str(int(session)) for session in sessions)
    found = await connection.execute(
        text(
            "SELECT COUNT(*) FROM information_schema.PROCESSLIST"
            f" WHERE STATE = 'Waiting for backup lock' AND ID IN ({listed})"
        )
    )
    return int(found.scalar_one())


def sessions_of(engine: Any) -> set[int]:
    """The MariaDB connection ids of every connection ``engine`` opens from now
    on (asyncmy's and aiomysql's ``server_thread_id``)."""
    sessions: set[int] = set()

    def noted(dbapi_connection: Any, record: Any) -> None:
        sessions.add(int(record.driver_connection.server_thread_id[0]))

    event.listen(engine.sync_engine, "connect", noted)
    return sessions


@pytest.mark.parametrize("driver", ["asyncmy", "aiomysql"])
@pytest.mark.parametrize("write", ["routine", "statements", "replacement"])
def test_a_write_cancelled_during_its_commit_has_settled_when_the_cancel_returns(
    driver: str, write: str
) -> None:
    """What a reader sees when the cancellation returns is what stays.

    MariaDB's ``BACKUP STAGE BLOCK_COMMIT`` holds every commit on the server
    while the statements before it run, so the write can be cancelled
    exactly while its commit is on its way. A commit that was sent goes
    through when the stage ends, whatever the client did meanwhile: the
    cancelled write must not return before that, or a reader would see the
    old conversation and then, later, the new one.
    """
    url = with_driver(backend_url("mariadb"), driver)
    repository: Any = connect_async(
        url,
        table_name=f"cl_{uuid.uuid4().hex[:12]}",
        dialect=MariaDBDialect(server_append=write == "routine"),
    )
    memory = AsyncWindowAppendMemory(repository, max_messages=1000)
    admin = create_async_engine(url, isolation_level="AUTOCOMMIT")
    sessions = sessions_of(repository.engine)

    async def until(condition: Callable[[], Awaitable[bool]]) -> None:
        deadline = asyncio.get_running_loop().time() + COMMIT_WAIT_SECONDS
        while not await condition():
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.01)

    async def scenario() -> None:
        await repository.save_all("c", [Message.user("u0"), Message.assistant("a0")])
        before = ids(await repository.find_by_conversation_id("c"))
        call: Callable[[], Awaitable[object]]
        if write == "replacement":
            sent = [Message.system("s"), Message.user("r")]
            call = functools.partial(repository.save_all, "c", sent)
            after = ids(sent)
        else:
            sent = [Message.user("u"), Message.assistant("a")]
            call = functools.partial(memory.add, "c", sent)
            after = before + ids(sent)
        seen: list[str] | None = None
        async with admin.connect() as backup:
            for stage in ("START", "FLUSH", "BLOCK_DDL", "BLOCK_COMMIT"):
                await backup.execute(text(f"BACKUP STAGE {stage}"))
            try:
                task = asyncio.create_task(call())
                await until(lambda: held(backup, task))
                task.cancel()
                await asyncio.wait({task}, timeout=0.5)
                if task.done():
                    seen = ids(await repository.find_by_conversation_id("c"))
            finally:
                await backup.execute(text("BACKUP STAGE END"))
            with contextlib.suppress(asyncio.CancelledError):
                await task
            if seen is None:
                seen = ids(await repository.find_by_conversation_id("c"))
            await until(lambda: settled(backup))
        assert seen == after, "the cancellation returned before the commit landed"
        assert ids(await repository.find_by_conversation_id("c")) == after
        await assert_pool_clean(repository)

    async def held(backup: AsyncConnection, task: asyncio.Task[object]) -> bool:
        assert not task.done(), "the write ended while every commit was held"
        return await commits_held(backup, sessions) > 0

    async def settled(backup: AsyncConnection) -> bool:
        return await commits_held(backup, sessions) == 0

    async def scenario_then_dispose() -> None:
        try:
            await scenario()
        finally:
            await admin.dispose()

    run_on(repository, scenario_then_dispose)


@pytest.mark.parametrize(
    ("backend", "driver"),
    [*BACKENDS, pytest.param("sqlite", None, id="sqlite-aiosqlite")],
)
def test_two_hundred_concurrent_adds_lose_and_duplicate_nothing(
    backend: str, driver: str | None, tmp_path: Any
) -> None:
    repository: Any
    if backend == "sqlite":
        repository = connect_async(f"sqlite+aiosqlite:///{tmp_path / 'c.db'}")
    else:
        repository = open_repository(backend, driver)
    memory = AsyncMessageWindowChatMemory(repository, max_messages=1000)
    sent = [Message.user(f"m{n}") for n in range(200)]

    async def scenario() -> None:
        await asyncio.gather(*(memory.add("race", m) for m in sent))
        stored = await memory.get("race")
        assert len(stored) == 200
        assert sorted(ids(stored)) == sorted(ids(sent))
        assert stored == sorted(stored, key=lambda m: ids(stored).index(m.id))

    run_on(repository, scenario)


@pytest.mark.parametrize(("backend", "driver"), BACKENDS)
def test_a_cancelled_read_leaves_nothing_for_the_next_one(
    backend: str, driver: str | None
) -> None:
    repository = open_repository(backend, driver)
    stored = [Message.user(f"u{n}") for n in range(50)]

    async def scenario() -> None:
        await repository.save_all("c", stored)
        await repository.save_all("other", [Message.user("x")])
        for turns in range(OUTSIDE_TURNS):
            task = asyncio.create_task(repository.find_by_conversation_id("c"))
            for _ in range(turns):
                await asyncio.sleep(0)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await assert_pool_clean(repository)
            # The next reads get their own answers, not the cancelled one's.
            assert ids(await repository.find_by_conversation_id("other")) != ids(stored)
            assert ids(await repository.find_by_conversation_id("c")) == ids(stored)

    run_on(repository, scenario)
