"""Measure the async twin: appends and reads against the driver's async floor.

Example:
    results = asyncio.run(measure_async(ASYNC_BACKENDS["postgresql"], workdir, plan))
    results.latency[("async_append", 20)].p50
    results.throughput[64]            # appends per second of 64 tasks

For every window size, in one round-robin loop on one event loop (so a noisy
neighbour slows every variant alike): our async append
(``AsyncMessageWindowChatMemory.add``), the same driver's async floor append
(one INSERT in autocommit, RPUSH on Redis), our sync append on the same server
(the twin the async one is held to), our async read and the async floor's
ordered SELECT (LRANGE). Then throughput: appends per second of 1, 8 and 64
tasks on one event loop, each task on its own conversation (W = 20).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import inspect
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.backends import server_url
from bench.floors import (
    Floor,
    MariaDBFloor,
    PostgresFloor,
    RedisFloor,
    SQLiteFloor,
    unique_name,
)
from bench.runner import WINDOWS, Plan, Results, Stats
from bench.workload import history, stream
from chatledger import (
    AsyncMessageWindowChatMemory,
    ChatMemoryRepository,
    MessageWindowChatMemory,
    codec,
)
from chatledger.async_repository import AsyncChatMemoryRepository
from chatledger.validation import stamp_messages

__all__ = ["ASYNC_BACKENDS", "TASKS", "AsyncBackend", "AsyncSetup", "measure_async"]

#: Concurrent tasks of the throughput slices.
TASKS = (1, 8, 64)


@dataclass
class AsyncSetup:
    """One backend opened for the async measurement.

    Attributes:
        repository: Our async repository on a fresh table or key prefix.
        sync_repository: Our sync repository on the same server.
        insert: The async floor's append: one encoded message at ``seq``.
        select: The async floor's read of one conversation, in order.
        floor: The sync floor on the same table, used to fill it.
        notes: What to print beside the figures.
    """

    repository: AsyncChatMemoryRepository
    sync_repository: ChatMemoryRepository
    insert: Callable[[str, int, str], Awaitable[object]]
    select: Callable[[str], Awaitable[Sequence[Any]]]
    floor: Floor
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class AsyncBackend:
    """How to open one backend for the async measurement.

    Attributes:
        name: The name ``--backends`` takes.
        label: The name printed in the table.
        floor_name: The async driver of the floor.
        throughput_target: The least 64-task / 1-task throughput ratio aimed
            for, or ``None`` where there is no target.
        opener: Makes the :class:`AsyncSetup`, registering cleanup on the stack.
    """

    name: str
    label: str
    floor_name: str
    throughput_target: float | None
    opener: Callable[[AsyncExitStack, Path], Awaitable[AsyncSetup]]

    @contextlib.asynccontextmanager
    async def open(self, workdir: Path) -> AsyncIterator[AsyncSetup]:
        """Open the backend; everything it created is removed on exit."""
        async with AsyncExitStack() as stack:
            yield await self.opener(stack, workdir)


def _sql_pair(
    stack: AsyncExitStack, sync_url: str, async_url: str
) -> tuple[AsyncChatMemoryRepository, ChatMemoryRepository]:
    from chatledger_sql import AsyncSqlChatMemoryRepository, SqlChatMemoryRepository

    ours = AsyncSqlChatMemoryRepository.from_url(async_url, table_name=unique_name())
    twin = SqlChatMemoryRepository.from_url(sync_url, table_name=unique_name())
    # Last in, first out: drop the tables, then close.
    stack.push_async_callback(ours.aclose)
    stack.push_async_callback(ours.drop_schema)
    stack.callback(twin.close)
    stack.callback(twin.drop_schema)
    return ours, twin


async def _postgresql(stack: AsyncExitStack, workdir: Path) -> AsyncSetup:
    import psycopg

    url = server_url("postgresql")
    floor = PostgresFloor(url)
    stack.callback(floor.close)
    scheme, rest = url.split("://", 1)
    connection = await psycopg.AsyncConnection.connect(
        f"{scheme.split('+')[0]}://{rest}", autocommit=True, prepare_threshold=0
    )
    stack.push_async_callback(connection.close)
    insert_sql, select_sql = floor._insert, floor._select

    async def insert(conversation_id: str, seq: int, payload: str) -> object:
        return await connection.execute(insert_sql, (conversation_id, seq, payload))

    async def select(conversation_id: str) -> Sequence[Any]:
        cursor = await connection.execute(select_sql, (conversation_id,))
        return await cursor.fetchall()

    ours, twin = _sql_pair(stack, url, url)
    return AsyncSetup(ours, twin, insert, select, floor)


async def _mariadb(stack: AsyncExitStack, workdir: Path) -> AsyncSetup:
    import asyncmy
    from sqlalchemy.engine import make_url

    url = server_url("mariadb")
    floor = MariaDBFloor(url)
    stack.callback(floor.close)
    parts = make_url(url)
    connection = await asyncmy.connect(
        host=parts.host or "127.0.0.1",
        port=parts.port or 3306,
        user=parts.username or "root",
        password=parts.password or "",
        database=parts.database,
        charset="utf8mb4",
        autocommit=True,
    )
    stack.callback(connection.close)
    insert_sql, select_sql = floor._insert, floor._select

    async def insert(conversation_id: str, seq: int, payload: str) -> object:
        async with connection.cursor() as cursor:
            return await cursor.execute(insert_sql, (conversation_id, seq, payload))

    async def select(conversation_id: str) -> Sequence[Any]:
        async with connection.cursor() as cursor:
            await cursor.execute(select_sql, (conversation_id,))
            return await cursor.fetchall()

    async_url = parts.set(drivername="mysql+asyncmy").render_as_string(False)
    ours, twin = _sql_pair(stack, url, async_url)
    return AsyncSetup(ours, twin, insert, select, floor)


async def _sqlite(stack: AsyncExitStack, workdir: Path) -> AsyncSetup:
    import aiosqlite

    ours, twin = _sql_pair(
        stack,
        f"sqlite:///{workdir / 'ours-sync.db'}",
        f"sqlite+aiosqlite:///{workdir / 'ours.db'}",
    )
    floor = SQLiteFloor(str(workdir / "floor.db"), ["journal_mode=WAL"])
    stack.callback(floor.close)
    connection = await aiosqlite.connect(
        str(workdir / "floor.db"), isolation_level=None
    )
    stack.push_async_callback(connection.close)
    insert_sql, select_sql = floor._insert, floor._select

    async def insert(conversation_id: str, seq: int, payload: str) -> object:
        return await connection.execute(insert_sql, (conversation_id, seq, payload))

    async def select(conversation_id: str) -> Sequence[Any]:
        async with connection.execute(select_sql, (conversation_id,)) as cursor:
            return list(await cursor.fetchall())

    return AsyncSetup(ours, twin, insert, select, floor)


async def _redis(stack: AsyncExitStack, workdir: Path) -> AsyncSetup:
    import redis.asyncio

    from chatledger_redis import (
        AsyncRedisChatMemoryRepository,
        RedisChatMemoryRepository,
    )

    url = server_url("redis")
    floor = RedisFloor(url)
    stack.callback(floor.close)
    client = redis.asyncio.Redis.from_url(url)
    stack.push_async_callback(client.aclose)
    prefix = floor.prefix
    ours_prefix = unique_name("bench-async")
    ours = AsyncRedisChatMemoryRepository.from_url(url, key_prefix=ours_prefix)
    twin = RedisChatMemoryRepository.from_url(url, key_prefix=ours_prefix + "-sync")

    def cleanup() -> None:
        keys = list(floor.client.scan_iter(match=ours_prefix + "*", count=1000))
        if keys:
            floor.client.delete(*keys)

    stack.callback(cleanup)
    stack.push_async_callback(ours.aclose)
    stack.callback(twin.close)

    async def insert(conversation_id: str, seq: int, payload: str) -> object:
        return await client.rpush(prefix + conversation_id, payload)

    async def select(conversation_id: str) -> Sequence[Any]:
        return await client.lrange(prefix + conversation_id, 0, -1)

    return AsyncSetup(ours, twin, insert, select, floor)


ASYNC_BACKENDS: dict[str, AsyncBackend] = {
    b.name: b
    for b in (
        AsyncBackend("sqlite", "SQLite file", "aiosqlite", None, _sqlite),
        AsyncBackend("postgresql", "PostgreSQL", "psycopg async", 3.0, _postgresql),
        AsyncBackend("mariadb", "MariaDB", "asyncmy", None, _mariadb),
        AsyncBackend("redis", "Redis", "redis.asyncio", 3.0, _redis),
    )
}


@dataclass
class _Variant:
    key: tuple[str, int]
    op: Callable[[], object]
    samples: int
    taken: list[int] = field(default_factory=list)
    cpu_ns: int = 0


def _appender(
    add: Callable[[str, Any], object], conversation: str, count: int
) -> Callable[[], object]:
    messages = iter(list(stream(count)))
    return lambda: add(conversation, next(messages))


def _floor_appender(
    setup: AsyncSetup, conversation: str, start: int, count: int
) -> Callable[[], object]:
    payloads = iter([codec.to_json(m) for m in stamp_messages(stream(count))])
    seqs = iter(range(start, start + count))
    insert = setup.insert
    return lambda: insert(conversation, next(seqs), next(payloads))


async def _variants(setup: AsyncSetup, plan: Plan) -> list[_Variant]:
    """Fill every conversation and return one variant per measured operation."""
    total = plan.append + plan.warmup
    found: list[_Variant] = []
    for window in WINDOWS:
        memory = AsyncMessageWindowChatMemory(setup.repository, max_messages=window)
        twin = MessageWindowChatMemory(setup.sync_repository, max_messages=window)
        await setup.repository.save_all(f"append-{window}", history(window))
        setup.sync_repository.save_all(f"append-{window}", history(window))
        await setup.repository.save_all(f"read-{window}", history(window))
        encoded = [codec.to_json(m) for m in stamp_messages(history(window))]
        setup.floor.replace(f"floor-append-{window}", encoded)
        setup.floor.replace(f"floor-read-{window}", encoded)
        found += [
            _Variant(
                ("async_append", window),
                _appender(memory.add, f"append-{window}", total),
                plan.append,
            ),
            _Variant(
                ("sync_append", window),
                _appender(twin.add, f"append-{window}", total),
                plan.append,
            ),
            _Variant(
                ("async_floor_append", window),
                _floor_appender(setup, f"floor-append-{window}", window, total),
                plan.append,
            ),
            _Variant(
                ("async_read", window),
                functools.partial(memory.get, f"read-{window}"),
                plan.read[window],
            ),
            _Variant(
                ("async_floor_read", window),
                functools.partial(setup.select, f"floor-read-{window}"),
                plan.read[window],
            ),
        ]
    return found


async def _call(op: Callable[[], object]) -> None:
    result = op()
    if inspect.isawaitable(result):
        await result


async def _run_interleaved(
    variants: list[_Variant], plan: Plan, results: Results
) -> None:
    live = []
    for variant in variants:
        try:
            for _ in range(plan.warmup):
                await _call(variant.op)
            live.append(variant)
        except Exception as exc:  # a broken variant must not hide the others
            results.errors.append(f"{variant.key}: {type(exc).__name__}: {exc}")
    clock = time.perf_counter_ns
    shuffler = random.Random(42)
    for round_index in range(plan.rounds):
        shuffler.shuffle(live)
        for variant in list(live):
            batch = -(-variant.samples // plan.rounds)
            batch = min(batch, variant.samples - len(variant.taken))
            gc.collect()
            cpu_start = time.thread_time_ns()
            try:
                for _ in range(batch):
                    start = clock()
                    await _call(variant.op)
                    variant.taken.append(clock() - start)
                variant.cpu_ns += time.thread_time_ns() - cpu_start
            except Exception as exc:
                results.errors.append(
                    f"{variant.key} round {round_index}: {type(exc).__name__}: {exc}"
                )
                live.remove(variant)
    for variant in variants:
        if variant.taken:
            results.latency[variant.key] = Stats.of(variant.taken, variant.cpu_ns)


async def _throughput(
    setup: AsyncSetup, tasks: int, seconds: float, salt: str
) -> float:
    """Appends per second of ``tasks`` tasks on one loop, one conversation each."""
    memory = AsyncMessageWindowChatMemory(setup.repository, max_messages=20)
    conversations = [f"tput-{salt}-{tasks}-{i}" for i in range(tasks)]
    for conversation in conversations:
        await setup.repository.save_all(conversation, history(20))
    stop = asyncio.Event()
    counts = [0] * tasks

    async def worker(index: int) -> None:
        n = 0
        while not stop.is_set():
            await memory.add(conversations[index], next(stream(1, n)))
            n += 1
        counts[index] = n

    running = [asyncio.create_task(worker(i)) for i in range(tasks)]
    start = time.perf_counter()
    await asyncio.sleep(seconds)
    stop.set()
    await asyncio.gather(*running)
    elapsed = time.perf_counter() - start
    for conversation in conversations:
        await setup.repository.delete_by_conversation_id(conversation)
    return sum(counts) / elapsed


async def measure_async(
    backend: AsyncBackend, workdir: Path, plan: Plan
) -> tuple[Results, list[str]]:
    """Run every async variant interleaved, then 1, 8 and 64 appending tasks."""
    results = Results()
    async with backend.open(workdir) as setup:
        await _run_interleaved(await _variants(setup, plan), plan, results)
        totals = dict.fromkeys(TASKS, 0.0)
        try:
            # 1, 8, 64, 64, 8, 1: drift over the run weighs on every count alike.
            for index, tasks in enumerate((*TASKS, *reversed(TASKS))):
                totals[tasks] += await _throughput(
                    setup, tasks, plan.throughput_seconds, str(index)
                )
            results.throughput = {k: v / 2 for k, v in totals.items()}
        except Exception as exc:
            results.errors.append(f"throughput: {type(exc).__name__}: {exc}")
        return results, setup.notes
