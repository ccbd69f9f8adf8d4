"""The clients ``from_url`` makes, sync and async, and the retry policy they share.

Example:
    from chatledger_redis.clients import redis_client

    client = redis_client("redis://localhost:6379/0", cluster=False, options={})

redis-py retries a command whose connection broke only when its ``Retry``
says so, and ``Redis.from_url`` (like ``ConnectionPool.from_url``) leaves a
connection with none: a server that ends a connection while a command is in
flight, or while an async connection waits in the pool, surfaces as
``ConnectionError``. So every plain client made here gets
:func:`redis_retry` or :func:`async_redis_retry`: the same attempts and
backoff, from the constants below, for both repositories. Sending a write
again is safe: a script's message ids make an append the server already
applied a no-op, ``save_all`` replaces and a delete deletes.

A ``retry`` option (``None`` for no retry) overrides the policy; a client or
``connection_pool`` the caller made keeps its own. Cluster clients retry with
redis-py's cluster policy (on by default) and are left to it.
"""

from __future__ import annotations

from typing import Any

from redis import Redis
from redis.asyncio import BlockingConnectionPool
from redis.asyncio import Redis as AsyncRedis
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import ExponentialWithJitterBackoff
from redis.cluster import RedisCluster
from redis.retry import Retry

__all__ = [
    "BACKOFF_BASE_SECONDS",
    "BACKOFF_CAP_SECONDS",
    "DEFAULT_MAX_CONNECTIONS",
    "RETRIES",
    "async_redis_client",
    "async_redis_retry",
    "redis_client",
    "redis_retry",
]

#: Times a command is sent again after its connection failed, each time on a
#: new one. A dropped connection needs one; three ride out a few drops in a
#: row, while a server that is down still fails within a fraction of a second.
RETRIES = 3
#: Scales the pauses: the n-th retry waits a random time below base * 2 ** n.
BACKOFF_BASE_SECONDS = 0.01
#: The longest pause between two attempts.
BACKOFF_CAP_SECONDS = 1.0
#: Connections an async client made here opens at most (redis-py's default).
DEFAULT_MAX_CONNECTIONS = 100


def _backoff() -> ExponentialWithJitterBackoff:
    return ExponentialWithJitterBackoff(
        base=BACKOFF_BASE_SECONDS, cap=BACKOFF_CAP_SECONDS
    )


def redis_retry() -> Retry:
    """The retry of a ``redis.Redis`` client made here (connection, timeout errors)."""
    return Retry(_backoff(), RETRIES)


def async_redis_retry() -> AsyncRetry:
    """The same policy as :func:`redis_retry`, for a ``redis.asyncio`` client."""
    return AsyncRetry(_backoff(), RETRIES)


def redis_client(
    url: str, *, cluster: bool, options: dict[str, Any]
) -> Redis | RedisCluster:
    """The sync client for ``url``: a ``RedisCluster``, or a ``Redis`` that retries."""
    if cluster:
        return RedisCluster.from_url(url, **options)
    if "connection_pool" not in options:
        options.setdefault("retry", redis_retry())
    return Redis.from_url(url, **options)


def async_redis_client(
    url: str, *, cluster: bool, options: dict[str, Any]
) -> AsyncRedis | AsyncRedisCluster:
    """The async client for ``url``: a ``RedisCluster``, or a ``Redis`` that retries.

    A ``Redis`` client takes its connections from a ``BlockingConnectionPool``:
    when ``max_connections`` calls are in flight, the next one waits for a
    connection (up to the pool's ``timeout``) instead of failing with "Too many
    connections", as an SQL engine's pool does. With ``connection_pool`` or
    ``single_connection_client`` the caller chooses.
    """
    if cluster:
        return AsyncRedisCluster.from_url(url, **options)
    if "connection_pool" in options:
        return AsyncRedis.from_url(url, **options)
    options.setdefault("retry", async_redis_retry())
    if options.get("single_connection_client"):
        return AsyncRedis.from_url(url, **options)
    options.setdefault("max_connections", DEFAULT_MAX_CONNECTIONS)
    return AsyncRedis.from_pool(BlockingConnectionPool.from_url(url, **options))
