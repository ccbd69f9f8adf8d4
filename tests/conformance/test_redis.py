"""The conformance suite on Redis (and on Redis Cluster, where one is configured)."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta

import pytest
from redis import Redis
from redis.cluster import RedisCluster

from chatledger.retention import Retention
from chatledger.testing import (
    ChatMemoryRepositoryTests,
    ConversationInfoTests,
    LogRemovalTests,
    LogTests,
    RetentionTests,
)
from chatledger.window import Window
from chatledger_redis import RedisChatMemoryRepository
from tests.backends import backend_url


def _unique_prefix() -> str:
    return f"chatledger-test:{uuid.uuid4().hex[:12]}:"


def _drop(client: Redis | RedisCluster, prefix: str) -> None:
    # One UNLINK per key: on Cluster the keys of many conversations span slots.
    for key in list(client.scan_iter(match=f"{prefix}*", count=1000)):
        client.unlink(key)


@pytest.fixture(scope="module")
def redis_client() -> Iterator[Redis]:
    client = Redis.from_url(backend_url("redis"))
    yield client
    client.close()


@pytest.fixture(scope="module")
def cluster_client() -> Iterator[RedisCluster]:
    client = RedisCluster.from_url(backend_url("redis_cluster"))
    yield client
    client.close()


class TestRedisConformance(ChatMemoryRepositoryTests, ConversationInfoTests):
    supports_atomic_append = True
    supports_ttl = True
    supports_retention = True
    # SCAN and cursors fetch in batches: the paging test crosses them.
    many_conversations = 10_000

    @pytest.fixture
    def client(self, redis_client: Redis) -> Redis | RedisCluster:
        return redis_client

    @pytest.fixture
    def prefix(self, client: Redis | RedisCluster) -> Iterator[str]:
        prefix = _unique_prefix()
        yield prefix
        _drop(client, prefix)

    @pytest.fixture
    def repository(
        self, client: Redis | RedisCluster, prefix: str
    ) -> RedisChatMemoryRepository:
        return RedisChatMemoryRepository(client, key_prefix=prefix)

    @pytest.fixture
    def make_repository_with_ttl(
        self, client: Redis | RedisCluster, prefix: str
    ) -> Callable[[timedelta], RedisChatMemoryRepository]:
        def make(ttl: timedelta) -> RedisChatMemoryRepository:
            return RedisChatMemoryRepository(client, key_prefix=prefix, ttl=ttl)

        return make

    @pytest.fixture
    def make_repository_with_retention(
        self, client: Redis | RedisCluster, prefix: str
    ) -> Callable[[Retention], RedisChatMemoryRepository]:
        # A prefix of its own each: a case compares two repositories.
        def make(retention: Retention) -> RedisChatMemoryRepository:
            return RedisChatMemoryRepository(
                client,
                key_prefix=f"{prefix}{uuid.uuid4().hex[:6]}:",
                retention=retention,
            )

        return make


class TestRedisClusterConformance(TestRedisConformance):
    """The same suite on Redis Cluster: every script must stay in one slot."""

    @pytest.fixture
    def client(self, cluster_client: RedisCluster) -> Redis | RedisCluster:
        return cluster_client


def small_reads(window: Window) -> Iterator[int]:
    """One row first, then two a page: every view walks back through pages."""
    yield 1
    yield from itertools.repeat(2)


class TestRedisLogInSmallReads(LogTests, LogRemovalTests, RetentionTests):
    """The log suite with views read a row or two at a time, on Redis and Cluster.

    The suite's own reads (the window's limit plus a few rows) rarely need a
    second one: here every view of the random histories reads further back
    through the ``TAIL`` script, and meets the page boundaries at every row;
    so does the view a bounded log's trim reads, and the views of a log that
    removals left holes in.
    """

    supports_retention = True

    # Autouse, so every case runs on both: the suite's bounded cases ask for
    # their repositories by name, and a fixture asked for so is not
    # parametrized.
    @pytest.fixture(params=["redis", "redis_cluster"], autouse=True)
    def client(self, request: pytest.FixtureRequest) -> Redis | RedisCluster:
        fixture = "redis_client" if request.param == "redis" else "cluster_client"
        client: Redis | RedisCluster = request.getfixturevalue(fixture)
        return client

    @pytest.fixture
    def prefix(self, client: Redis | RedisCluster) -> Iterator[str]:
        prefix = _unique_prefix()
        yield prefix
        _drop(client, prefix)

    @pytest.fixture
    def repository(
        self, client: Redis | RedisCluster, prefix: str
    ) -> RedisChatMemoryRepository:
        repository = RedisChatMemoryRepository(client, key_prefix=prefix)
        repository._tail_reads = small_reads
        return repository

    @pytest.fixture
    def make_repository_with_retention(
        self, client: Redis | RedisCluster, prefix: str
    ) -> Callable[[Retention], RedisChatMemoryRepository]:
        def make(retention: Retention) -> RedisChatMemoryRepository:
            repository = RedisChatMemoryRepository(
                client,
                key_prefix=f"{prefix}{uuid.uuid4().hex[:6]}:",
                retention=retention,
            )
            repository._tail_reads = small_reads
            return repository

        return make
