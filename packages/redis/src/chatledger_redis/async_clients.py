# sync twin: clients.py
# sync rename: redis.asyncio -> redis
"""The clients ``from_url`` makes, and the retry policy they share with the sync ones.

Example:
    from chatledger_redis.async_clients import async_redis_client

    client = async_redis_client("redis://localhost:6379/0", cluster=False, options={})

redis-py retries a command whose connection broke only when its ``Retry``
says so, and ``Redis.from_url`` (like ``ConnectionPool.from_url``) leaves a
connection with none: a server that ends a connection while a command is in
flight, or while a connection waits in the pool, surfaces as
``ConnectionError``. So every plain client made here gets
:func:`async_redis_retry`: the same attempts and backoff, from the constants
below, for the sync and the async repository (one module is generated from
the other). The server may have run a command whose reply was lost, so
every write must be safe to send again, and is: a script's message ids make
an append the server already applied a no-op, ``save_all`` replaces and a
delete deletes; a removal, which would take other messages the second time,
finds the receipt its first run left under its write token and answers the
same messages (:data:`~chatledger_redis.scripts.REMOVE`). The receipts last
:data:`~chatledger_redis.steps.REMOVAL_RECEIPT_MS` and cover a
conversation's latest :data:`~chatledger_redis.steps.REMOVAL_RECEIPTS`
removals, well past the retries of this policy and of redis-py's cluster
client. A resent append answers that it appended nothing, though (its
messages were stored by the first run).

A ``retry`` option (``None`` for no retry) overrides the policy; a client or
``connection_pool`` the caller made keeps its own. Cluster clients retry with
redis-py's cluster policy (on by default) and are left to it.
"""

from __future__ import annotations

from typing import Any

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff

from chatledger_redis.waiting_pool import WaitingConnectionPool  # async-only

__all__ = [
    "BACKOFF_BASE_SECONDS",
    "BACKOFF_CAP_SECONDS",
    "RETRIES",
    "async_redis_client",
    "async_redis_retry",
]

#: Times a command is sent again after its connection failed, each time on a
#: new one. A dropped connection needs one; three ride out a few drops in a
#: row, while a server that is down still fails within a fraction of a second.
RETRIES = 3
#: Scales the pauses: the n-th retry waits a random time below base * 2 ** n.
BACKOFF_BASE_SECONDS = 0.01
#: The longest pause between two attempts.
BACKOFF_CAP_SECONDS = 1.0
if True:  # async
    #: Connections an async client made here opens at most (redis-py's default).
    DEFAULT_MAX_CONNECTIONS = 100
    __all__ += ["DEFAULT_MAX_CONNECTIONS"]


def async_redis_retry() -> Retry:
    """The retry of a ``redis.asyncio.Redis`` client made here.

    It sends a command again after a connection or timeout error.
    """
    return Retry(
        ExponentialWithJitterBackoff(
            base=BACKOFF_BASE_SECONDS, cap=BACKOFF_CAP_SECONDS
        ),
        RETRIES,
    )


def async_redis_client(
    url: str, *, cluster: bool, options: dict[str, Any]
) -> Redis | RedisCluster:
    """The client for ``url``: a ``RedisCluster``, or a ``Redis`` that retries.

    ``options`` go to the client's ``from_url``, and are left unchanged.
    """
    options = dict(options)
    if cluster:
        return RedisCluster.from_url(url, **options)
    if "connection_pool" in options:
        return Redis.from_url(url, **options)
    options.setdefault("retry", async_redis_retry())
    if True:  # async
        # When max_connections calls are in flight, the next one waits for a
        # connection (up to the pool's timeout) instead of failing with "Too
        # many connections", as an SQL engine's pool does.
        if not options.get("single_connection_client"):
            options.setdefault("max_connections", DEFAULT_MAX_CONNECTIONS)
            return Redis.from_pool(WaitingConnectionPool.from_url(url, **options))
    return Redis.from_url(url, **options)
