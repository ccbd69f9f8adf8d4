"""What the async Redis repository adds to the suite: no I/O before use, the
cluster URL, closing, and one layout shared with the sync repository."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from redis import Redis
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.exceptions import ConnectionError as RedisConnectionError

from chatledger import (
    Message,
    MessageWindow,
    TokenWindow,
    ToolResponse,
    connect_async,
)
from chatledger.adapters import InvalidNameError
from chatledger_redis import AsyncRedisChatMemoryRepository, RedisChatMemoryRepository
from tests.window_append_memory import AsyncWindowAppendMemory, WindowAppendMemory


def test_from_url_does_no_io_and_the_first_call_connects() -> None:
    repository = AsyncRedisChatMemoryRepository.from_url("redis://127.0.0.1:1/0")

    async def first_call() -> None:
        with pytest.raises(RedisConnectionError):
            await repository.find_by_conversation_id("c")
        await repository.aclose()

    asyncio.run(first_call())


def test_options_and_clients_are_checked_before_any_io() -> None:
    with pytest.raises(InvalidNameError):
        AsyncRedisChatMemoryRepository.from_url("redis://127.0.0.1:1/0", key_prefix="{")
    with pytest.raises(TypeError, match=r"redis\.asyncio"):
        AsyncRedisChatMemoryRepository(Redis())  # type: ignore[arg-type]
    cluster = AsyncRedisChatMemoryRepository.from_url("redis+cluster://127.0.0.1:1/0")
    assert isinstance(cluster.client, AsyncRedisCluster)
    opened = connect_async("redis://127.0.0.1:1/0", key_prefix="p:")
    assert isinstance(opened, AsyncRedisChatMemoryRepository)


def test_sync_and_async_repositories_share_one_layout(redis_url: str) -> None:
    prefix = f"chatledger-test:{uuid.uuid4().hex[:12]}:"
    sync = RedisChatMemoryRepository.from_url(redis_url, key_prefix=prefix)

    async def scenario() -> None:
        async with AsyncRedisChatMemoryRepository.from_url(
            redis_url, key_prefix=prefix
        ) as repository:
            memory = AsyncWindowAppendMemory(repository, max_messages=3)
            await memory.add("c", [Message.user("U1"), Message.assistant("A1")])
            WindowAppendMemory(sync, max_messages=3).add(
                "c", [Message.user("U2"), Message.assistant("A2")]
            )
            assert [m.content for m in await memory.get("c")] == ["U2", "A2"]
            # A token window measured by one counter is re-measured once by
            # another, whichever repository wrote the sizes.
            await repository.append_to_window(
                "c", [Message.user("U3")], TokenWindow(1000, lambda m: 2)
            )
            assert await repository.count_messages("c") == 3
            await repository.drop_schema()

    try:
        asyncio.run(scenario())
        assert sync.find_conversation_ids() == []
    finally:
        sync.close()


def test_both_repositories_share_the_evicted_record(
    redis_url: str, client: Redis
) -> None:
    """An id the async window evicted is a retry for the sync one; drop_schema
    removes the record a window left when it emptied a conversation."""
    prefix = f"chatledger-test:{uuid.uuid4().hex[:12]}:"
    sync = RedisChatMemoryRepository.from_url(redis_url, key_prefix=prefix)
    # Tool responses without their calls: a window takes them all out (rule 4).
    batch = [Message.tool(ToolResponse(id=c, name="f", data="{}")) for c in "ab"]

    async def scenario() -> None:
        async with AsyncRedisChatMemoryRepository.from_url(
            redis_url, key_prefix=prefix
        ) as repository:
            result = await repository.append_to_window("c", batch, MessageWindow(1))
            assert result.evicted_ids == [m.id for m in batch]
            assert sync.append_to_window("c", batch, MessageWindow(1)).appended == []
            assert await repository.find_conversation_ids() == []
            assert list(client.scan_iter(match=f"{prefix}*"))
            await repository.drop_schema()

    try:
        asyncio.run(scenario())
        assert list(client.scan_iter(match=f"{prefix}*")) == []
    finally:
        sync.close()


def test_the_async_floor_writes_reads_and_removes_its_lists(
    redis_url: str, client: Redis
) -> None:
    prefix = f"chatledger-test:{uuid.uuid4().hex[:12]}:"

    async def scenario() -> None:
        async with AsyncRedisChatMemoryRepository.from_url(
            redis_url, key_prefix=prefix
        ) as repository:
            floor = await repository.benchmark_floor()
            await floor.insert("c", 0, '{"role":"user"}')
            await floor.insert("c", 1, '{"role":"assistant"}')
            assert len(await floor.select("c")) == 2
            assert floor.name == "redis-py"
            assert list(client.scan_iter(match=f"{prefix}*"))
            await floor.aclose()

    asyncio.run(scenario())
    assert list(client.scan_iter(match=f"{prefix}*")) == []
