"""The async clients' pool: past ``max_connections`` a call waits for a connection.

Against the real server: calls past the bound wait and all complete on no
more connections than the bound, a checkout that waits too long fails as
``BlockingConnectionPool``'s does, and no permit is lost to a cancelled
waiter or a failed connection.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError

from chatledger_redis import AsyncRedisChatMemoryRepository
from chatledger_redis.waiting_pool import WaitingConnectionPool


def _one_held(
    url: str,
    scenario: Callable[[WaitingConnectionPool, Any], Awaitable[None]],
    **options: Any,
) -> None:
    """Run ``scenario`` on a pool of one connection, that one checked out."""

    async def main() -> None:
        pool = WaitingConnectionPool.from_url(url, max_connections=1, **options)
        try:
            await scenario(pool, await pool.get_connection())
        finally:
            await pool.disconnect()

    asyncio.run(main())


def test_the_repositorys_client_waits_rather_than_fails(redis_url: str) -> None:
    async def main() -> None:
        repository = AsyncRedisChatMemoryRepository.from_url(
            redis_url, max_connections=2
        )
        try:
            client = repository.client
            assert isinstance(client, Redis)
            pool = client.connection_pool
            assert isinstance(pool, WaitingConnectionPool)
            peak = 0
            real_get = pool.get_connection

            async def counted(*args: Any, **options: Any) -> Any:
                nonlocal peak
                connection = await real_get(*args, **options)
                peak = max(peak, len(pool._in_use_connections))
                return connection

            pool.get_connection = counted  # type: ignore[method-assign]
            answers = await asyncio.gather(*(client.ping() for _ in range(40)))
            assert answers == [True] * 40
            assert peak == 2
        finally:
            await repository.aclose()

    asyncio.run(main())


def test_a_checkout_waits_for_a_return_then_takes_that_connection(
    redis_url: str,
) -> None:
    async def scenario(pool: WaitingConnectionPool, held: Any) -> None:
        waiting = asyncio.create_task(pool.get_connection())
        await asyncio.sleep(0.05)
        assert not waiting.done()
        await pool.release(held)
        assert await asyncio.wait_for(waiting, 5) is held
        await pool.release(held)

    _one_held(redis_url, scenario)


def test_a_checkout_that_waits_past_the_timeout_fails_as_blockings_does(
    redis_url: str,
) -> None:
    async def scenario(pool: WaitingConnectionPool, held: Any) -> None:
        with pytest.raises(RedisConnectionError, match="No connection available"):
            await pool.get_connection()
        await pool.release(held)
        again = await pool.get_connection()  # the failed wait kept no permit
        await pool.release(again)

    _one_held(redis_url, scenario, timeout=0.05)


def test_a_cancelled_waiter_keeps_no_permit(redis_url: str) -> None:
    async def scenario(pool: WaitingConnectionPool, held: Any) -> None:
        waiting = asyncio.create_task(pool.get_connection())
        await asyncio.sleep(0.01)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        await pool.release(held)
        connection = await asyncio.wait_for(pool.get_connection(), 5)
        await pool.release(connection)

    _one_held(redis_url, scenario)


def test_a_failed_connect_gives_its_permit_back_once() -> None:
    async def main() -> None:
        # Nothing listens on port 1: each checkout fails to connect, and
        # gives its permit back once (not twice: the pool stays bounded).
        refused = WaitingConnectionPool.from_url(
            "redis://127.0.0.1:1/0", max_connections=1, timeout=0.05
        )
        client = Redis.from_pool(refused)
        try:
            for _ in range(3):
                with pytest.raises(RedisConnectionError, match="Error 111"):
                    await client.ping()
            assert refused._permits._value == 1
        finally:
            await client.aclose()

    asyncio.run(main())
