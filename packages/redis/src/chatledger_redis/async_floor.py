# sync twin: floor.py
# sync rename: redis.asyncio -> redis
"""The driver's floor for ``chatledger bench``: RPUSH to append, LRANGE to read.

Example (needs a Redis server):
    from chatledger_redis import AsyncRedisChatMemoryRepository

    repository = AsyncRedisChatMemoryRepository.from_url(
        "redis://127.0.0.1:6379/0", key_prefix="floor-example:"
    )
    floor = await repository.benchmark_floor()   # lists under the key prefix
    await floor.insert("c1", 0, '{"role":"user"}')
    assert len(await floor.select("c1")) == 1
    await floor.aclose()                         # deletes those lists
    await repository.aclose()

One list per conversation on the repository's own client (same URL, same
connection settings, cluster or not): an append is one RPUSH, a read one
LRANGE of the whole list, nothing decoded. The lists live under the
repository's key prefix, in a space no conversation key can take (those all
carry a ``{...}`` hash tag), and :meth:`AsyncRedisBenchmarkFloor.aclose`
deletes every one it made.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

__all__ = ["AsyncRedisBenchmarkFloor"]


class AsyncRedisBenchmarkFloor:
    """Plain lists beside a repository's keys, on its client.

    Args:
        client: The repository's client.
        key_prefix: The repository's key prefix.
    """

    name = "redis-py"

    def __init__(self, client: Redis | RedisCluster, key_prefix: str) -> None:
        """Pick a fresh key space under ``key_prefix``; nothing is written."""
        self._client: Any = client
        self._space = f"{key_prefix}clfloor_{uuid.uuid4().hex[:12]}:"
        self._keys: set[str] = set()

    async def insert(self, conversation_id: str, seq: int, payload: str) -> None:
        """One RPUSH (``seq`` is the list position it lands on)."""
        key = self._space + conversation_id
        self._keys.add(key)
        await self._client.rpush(key, payload)

    async def select(self, conversation_id: str) -> Sequence[Any]:
        """One LRANGE of the whole list."""
        rows: Sequence[Any] = await self._client.lrange(
            self._space + conversation_id, 0, -1
        )
        return rows

    async def aclose(self) -> None:
        """Delete every list this floor wrote (one key a command: cluster-safe)."""
        while self._keys:
            await self._client.unlink(next(iter(self._keys)))
            self._keys.pop()
