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
def open_target(name: str) -> Iterator[Target]:
    """Yield a :class:`Target` for an empty store of backend ``name``."""
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
        target = _sql_target(name, backend_url(name))
        try:
            yield target
        finally:
            _drop_sql(target)
        return
    if name == "redis":
        target = _redis_target(backend_url("redis"))
        try:
            yield target
        finally:
            _drop_redis(target)
        return
    url = backend_url(name)
    raise NotImplementedError(f"no reliability recipe for {name} at {url}")


def _sql_target(name: str, url: str) -> Target:
    raise NotImplementedError


def _drop_sql(target: Target) -> None:
    raise NotImplementedError


def _redis_target(url: str) -> Target:
    raise NotImplementedError


def _drop_redis(target: Target) -> None:
    raise NotImplementedError
