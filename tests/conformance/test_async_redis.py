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

from chatledger.retention import Retention
from chatledger.testing import (
    AsyncChatMemoryRepositoryTests,
    ConversationInfoTests,
    LogRemovalTests,
    LogTests,
    RetentionTests,
)
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


class TestAsyncRedisConformance(AsyncChatMemoryRepositoryTests, ConversationInfoTests):
    supports_atomic_append = True
    supports_ttl = True
    supports_retention = True
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

    @pytest.fixture
    def make_async_repository_with_retention(
        self, async_client: AsyncRedis | AsyncRedisCluster, prefix: str
    ) -> Callable[[Retention], AsyncRedisChatMemoryRepository]:
        # A prefix of its own each: a case compares two repositories.
        def make(retention: Retention) -> AsyncRedisChatMemoryRepository:
            return AsyncRedisChatMemoryRepository(
                async_client,
                key_prefix=f"{prefix}{uuid.uuid4().hex[:6]}:",
                retention=retention,
            )

        return make


class TestAsyncRedisClusterConformance(TestAsyncRedisConformance):
    """The same suite on Redis Cluster: every script must stay in one slot."""

    cluster = True


class TestAsyncRedisLogInSmallReads(LogTests, LogRemovalTests, RetentionTests):
    """The log suite through ``redis.asyncio``, views read a row or two at a time.

    A bounded log's trims read their views so too, and so do the views of a
    log that removals took messages from.
    """

    supports_retention = True

    @pytest.fixture(scope="class")
    @classmethod
    def async_runner(cls) -> Iterator[EventLoopThread]:
        runner = EventLoopThread()
        yield runner
        runner.close()

    # Autouse, so every case runs on both: the suite's bounded cases ask for
    # their repositories by name, and a fixture asked for so is not
    # parametrized.
    @pytest.fixture(params=[False, True], ids=["redis", "redis_cluster"], autouse=True)
    def cluster(self, request: pytest.FixtureRequest) -> bool:
        on_cluster: bool = request.param
        return on_cluster

    @pytest.fixture
    def prefix(self, cluster: bool) -> Iterator[str]:
        prefix = f"chatledger-test:{uuid.uuid4().hex[:12]}:"
        yield prefix
        _drop(backend_url("redis_cluster" if cluster else "redis"), cluster, prefix)

    @pytest.fixture
    def async_client(
        self, cluster: bool, async_runner: EventLoopThread
    ) -> Iterator[AsyncRedis | AsyncRedisCluster]:
        url = backend_url("redis_cluster" if cluster else "redis")
        client: AsyncRedis | AsyncRedisCluster = (
            AsyncRedisCluster.from_url(url) if cluster else AsyncRedis.from_url(url)
        )
        yield client
        async_runner.run(client.aclose())

    @pytest.fixture
    def repository(
        self,
        async_client: AsyncRedis | AsyncRedisCluster,
        prefix: str,
        async_runner: EventLoopThread,
    ) -> RepositoryFacade:
        repository = AsyncRedisChatMemoryRepository(async_client, key_prefix=prefix)
        repository._tail_reads = small_reads
        return repository_facade(repository, async_runner)

    @pytest.fixture
    def make_repository_with_retention(
        self,
        async_client: AsyncRedis | AsyncRedisCluster,
        prefix: str,
        async_runner: EventLoopThread,
    ) -> Callable[[Retention], RepositoryFacade]:
        def make(retention: Retention) -> RepositoryFacade:
            repository = AsyncRedisChatMemoryRepository(
                async_client,
                key_prefix=f"{prefix}{uuid.uuid4().hex[:6]}:",
                retention=retention,
            )
            repository._tail_reads = small_reads
            return repository_facade(repository, async_runner)

        return make
