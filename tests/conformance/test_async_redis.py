"""The conformance suite on Redis (and Redis Cluster) through ``redis.asyncio``."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta

import pytest
from redis import Redis
from redis.asyncio import Redis as AsyncRedis
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.cluster import RedisCluster

from chatledger.testing import AsyncChatMemoryRepositoryTests, LogTests
from chatledger.testing.async_runner import (
    EventLoopThread,
    RepositoryFacade,
    repository_facade,
)
from chatledger_redis import AsyncRedisChatMemoryRepository
from tests.backends import backend_url
from tests.conformance.test_redis import small_reads


def _drop(url: str, cluster: bool, prefix: str) -> None:
    # One UNLINK per key: on Cluster the keys of many conversations span slots.
    client = RedisCluster.from_url(url) if cluster else Redis.from_url(url)
    try:
        for key in list(client.scan_iter(match=f"{prefix}*", count=1000)):
            client.unlink(key)
    finally:
        client.close()


class TestAsyncRedisConformance(AsyncChatMemoryRepositoryTests):
    supports_atomic_append = True
    supports_ttl = True
    # SCAN and cursors fetch in batches: the paging test crosses them.
    many_conversations = 10_000
    cluster = False

    @pytest.fixture(scope="class")
    @classmethod
    def async_client(
        cls, async_runner: EventLoopThread
    ) -> Iterator[AsyncRedis | AsyncRedisCluster]:
        url = backend_url("redis_cluster" if cls.cluster else "redis")
        client: AsyncRedis | AsyncRedisCluster = (
            AsyncRedisCluster.from_url(url) if cls.cluster else AsyncRedis.from_url(url)
        )
        yield client
        async_runner.run(client.aclose())

    @pytest.fixture
    def prefix(self) -> Iterator[str]:
        prefix = f"chatledger-test:{uuid.uuid4().hex[:12]}:"
        yield prefix
        name = "redis_cluster" if self.cluster else "redis"
        _drop(backend_url(name), self.cluster, prefix)

    @pytest.fixture
    def async_repository(
        self, async_client: AsyncRedis | AsyncRedisCluster, prefix: str
    ) -> AsyncRedisChatMemoryRepository:
        return AsyncRedisChatMemoryRepository(async_client, key_prefix=prefix)

    @pytest.fixture
    def make_async_repository_with_ttl(
        self, async_client: AsyncRedis | AsyncRedisCluster, prefix: str
    ) -> Callable[[timedelta], AsyncRedisChatMemoryRepository]:
        def make(ttl: timedelta) -> AsyncRedisChatMemoryRepository:
            return AsyncRedisChatMemoryRepository(
                async_client, key_prefix=prefix, ttl=ttl
            )

        return make


class TestAsyncRedisClusterConformance(TestAsyncRedisConformance):
    """The same suite on Redis Cluster: every script must stay in one slot."""

    cluster = True


class TestAsyncRedisLogInSmallReads(LogTests):
    """The log suite through ``redis.asyncio``, views read a row or two at a time."""

    @pytest.fixture(scope="class")
    @classmethod
    def async_runner(cls) -> Iterator[EventLoopThread]:
        runner = EventLoopThread()
        yield runner
        runner.close()

    @pytest.fixture(params=[False, True], ids=["redis", "redis_cluster"])
    def repository(
        self, request: pytest.FixtureRequest, async_runner: EventLoopThread
    ) -> Iterator[RepositoryFacade]:
        cluster: bool = request.param
        url = backend_url("redis_cluster" if cluster else "redis")
        client: AsyncRedis | AsyncRedisCluster = (
            AsyncRedisCluster.from_url(url) if cluster else AsyncRedis.from_url(url)
        )
        prefix = f"chatledger-test:{uuid.uuid4().hex[:12]}:"
        repository = AsyncRedisChatMemoryRepository(client, key_prefix=prefix)
        repository._tail_reads = small_reads
        yield repository_facade(repository, async_runner)
        async_runner.run(client.aclose())
        _drop(url, cluster, prefix)
