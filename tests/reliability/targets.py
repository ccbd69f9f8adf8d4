"""Fresh, isolated stores of every backend for the reliability tests.

Example:
    with open_target("sqlite") as target:
        repository = target.build()

Every store gets a unique table name or key prefix and is removed afterwards,
because other test runs share the same servers.
"""

from __future__ import annotations

import importlib.util
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.backends import backend_url
from tests.reliability.workload import Target

__all__ = ["LOCAL_BACKENDS", "OTHER_BACKENDS", "open_target"]

#: Backends that run on this machine and in CI.
LOCAL_BACKENDS = ["memory", "sqlite", "duckdb", "postgresql", "mariadb", "redis"]
#: Backends wired the same way, run wherever their server is reachable.
OTHER_BACKENDS = ["mongodb", "cassandra", "neo4j"]

_PACKAGES = {
    "sqlite": "chatledger_sql",
    "duckdb": "chatledger_sql",
    "postgresql": "chatledger_sql",
    "mariadb": "chatledger_sql",
    "redis": "chatledger_redis",
    "mongodb": "chatledger_mongodb",
    "cassandra": "chatledger_cassandra",
    "neo4j": "chatledger_neo4j",
}


def unique_name(prefix: str = "rel") -> str:
    """A table name or key prefix no other run uses."""
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


def _require_package(name: str) -> None:
    package = _PACKAGES.get(name)
    if package and importlib.util.find_spec(package) is None:
        pytest.skip(f"{name}: the adapter package {package} is not installed")


@contextmanager
def open_target(name: str, required: set[str] | None = None) -> Iterator[Target]:
    """Yield a :class:`Target` for an empty store of backend ``name``.

    ``required`` names the backends whose missing server fails instead of
    skipping (by default ``CHATLEDGER_REQUIRE_BACKENDS``).
    """
    _require_package(name)
    if name == "memory":
        yield Target(
            "memory",
            "chatledger:InMemoryChatMemoryRepository",
            no_processes="processes cannot share an in-process repository",
        )
        return
    if name in ("sqlite", "duckdb"):
        with tempfile.TemporaryDirectory(prefix=f"chatledger-{name}-") as folder:
            path = Path(folder) / f"store.{name}"
            yield _sql_target(name, f"{name}:///{path}")
        return
    if name in ("postgresql", "mariadb"):
        target = _sql_target(name, backend_url(name, required))
        try:
            yield target
        finally:
            _drop_sql(target)
        return
    if name == "redis":
        target = _redis_target(backend_url("redis", required))
        try:
            yield target
        finally:
            _drop_redis(target)
        return
    url = backend_url(name, required)
    target = _OTHER[name](url)
    try:
        yield target
    finally:
        _drop_other(target)


_DUCKDB_PROCESSES = (
    "DuckDB lets one process at a time open a database file for writing (it "
    "takes a file lock), so several writer processes cannot share one store"
)


def _sql_target(name: str, url: str) -> Target:
    return Target(
        name,
        "chatledger_sql:SqlChatMemoryRepository.from_url",
        (url,),
        {"table_name": unique_name()},
        no_processes=_DUCKDB_PROCESSES if name == "duckdb" else None,
    )


def _drop_sql(target: Target) -> None:
    repository = target.build()
    try:
        repository.drop_schema()
    finally:
        repository.close()


def _redis_target(url: str) -> Target:
    prefix = unique_name("chatledger-rel") + ":"
    return Target(
        "redis",
        "chatledger_redis:RedisChatMemoryRepository.from_url",
        (url,),
        {"key_prefix": prefix, "client_name": prefix.rstrip(":")},
    )


def _drop_redis(target: Target) -> None:
    from redis import Redis

    client = Redis.from_url(target.args[0])
    try:
        for key in list(client.scan_iter(match=f"{target.kwargs['key_prefix']}*")):
            client.unlink(key)
    finally:
        client.close()


def _neo4j_target(url: str) -> Target:
    tag = unique_name("Rel")
    return Target(
        "neo4j",
        "chatledger_neo4j:Neo4jChatMemoryRepository.from_url",
        (url,),
        {
            "conversation_label": f"{tag}Conv",
            "message_label": f"{tag}Msg",
            # Names the repository's Bolt connections, for the killer.
            "user_agent": tag,
        },
    )


def _mongodb_target(url: str) -> Target:
    return Target(
        "mongodb",
        "chatledger_mongodb:MongoDBChatMemoryRepository.from_url",
        (url,),
        {"collection": unique_name()},
    )


def _cassandra_target(url: str) -> Target:
    return Target(
        "cassandra",
        "chatledger_cassandra:CassandraChatMemoryRepository.from_url",
        (url,),
        {"table": unique_name(), "create_keyspace": True},
    )


_OTHER = {
    "neo4j": _neo4j_target,
    "mongodb": _mongodb_target,
    "cassandra": _cassandra_target,
}


def _drop_other(target: Target) -> None:
    """Remove the store with the adapter's own teardown."""
    repository = target.build()
    try:
        if target.name == "neo4j" or target.name == "cassandra":
            repository.drop_schema()
        else:
            for conversation in repository.find_conversation_ids():
                repository.delete_by_conversation_id(conversation)
    finally:
        repository.close()
