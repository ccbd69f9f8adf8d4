"""Fixtures of the Redis adapter tests: a real server, a unique key prefix per test."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from redis import Redis

from chatledger_redis import RedisChatMemoryRepository
from tests.backends import backend_url


@pytest.fixture(scope="module")
def redis_url() -> str:
    return backend_url("redis")


@pytest.fixture(scope="module")
def client(redis_url: str) -> Iterator[Redis]:
    client = Redis.from_url(redis_url)
    yield client
    client.close()


@pytest.fixture
def prefix(client: Redis) -> Iterator[str]:
    prefix = f"chatledger-test:{uuid.uuid4().hex[:12]}:"
    yield prefix
    for key in list(client.scan_iter(match=f"{prefix}*", count=1000)):
        client.unlink(key)


@pytest.fixture
def repository(client: Redis, prefix: str) -> RedisChatMemoryRepository:
    return RedisChatMemoryRepository(client, key_prefix=prefix)
