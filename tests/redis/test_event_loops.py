"""One async repository serves any event loop: one after another, or several at
once from threads each running ``asyncio.run``, on Redis and Redis Cluster."""

from __future__ import annotations

import asyncio
import os
import threading
import uuid
from collections.abc import Iterator

import pytest
from redis import Redis
from redis.cluster import RedisCluster

from chatledger import Message, MessageWindow
from chatledger_redis import AsyncRedisChatMemoryRepository

THREADS = 4
APPENDS = 5


@pytest.fixture(params=["redis", "redis+cluster"])
def url(request: pytest.FixtureRequest, redis_url: str) -> Iterator[str]:
    """A plain server's URL, then a cluster's (a ``redis+cluster://`` URL)."""
    if request.param == "redis":
        yield redis_url
        return
    cluster = os.environ.get("CHATLEDGER_TEST_REDIS_CLUSTER_URL")
    if not cluster:
        pytest.skip("set CHATLEDGER_TEST_REDIS_CLUSTER_URL to a Redis Cluster node")
    yield cluster.replace("redis://", "redis+cluster://", 1)


@pytest.fixture
def loop_prefix(url: str) -> Iterator[str]:
    prefix = f"chatledger-test:{uuid.uuid4().hex[:12]}:"
    yield prefix
    plain = url.replace("+cluster", "")
    client = (
        RedisCluster.from_url(plain) if "+cluster" in url else Redis.from_url(plain)
    )
    try:
        for key in list(client.scan_iter(match=f"{prefix}*", count=1000)):
            client.unlink(key)
    finally:
        client.close()


def test_asyncio_run_twice_on_one_repository(url: str, loop_prefix: str) -> None:
    repository = AsyncRedisChatMemoryRepository.from_url(url, key_prefix=loop_prefix)

    async def append(content: str) -> list[str | None]:
        await repository.append_to_window(
            "c", [Message.user(content)], MessageWindow(9)
        )
        return [m.content for m in await repository.find_by_conversation_id("c")]

    assert asyncio.run(append("first")) == ["first"]
    assert asyncio.run(append("second")) == ["first", "second"]
    asyncio.run(repository.aclose())


def test_threads_each_running_asyncio_run_share_one_repository(
    url: str, loop_prefix: str
) -> None:
    """Every thread's first call is the repository's first use on its loop."""
    repository = AsyncRedisChatMemoryRepository.from_url(url, key_prefix=loop_prefix)
    start = threading.Barrier(THREADS)
    failures: list[BaseException] = []

    async def work(thread: int) -> None:
        for n in range(APPENDS):
            message = Message.user(f"{thread}:{n}")
            await repository.append_to_window(
                f"c{thread}", [message], MessageWindow(99)
            )
            await repository.append_to_window("shared", [message], MessageWindow(99))
            stored = await repository.find_by_conversation_id(f"c{thread}")
            assert [m.content for m in stored] == [
                f"{thread}:{i}" for i in range(n + 1)
            ]
        await repository.aclose()

    def run(thread: int) -> None:
        try:
            start.wait()
            asyncio.run(work(thread))
        except BaseException as exc:  # reported below, with the thread's traceback
            failures.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []

    async def shared() -> int:
        try:
            return await repository.count_messages("shared")
        finally:
            await repository.aclose()

    assert asyncio.run(shared()) == THREADS * APPENDS
