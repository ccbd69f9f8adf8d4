"""Where the server backends of the test suite come from.

For each server backend, in this order:

1. ``CHATLEDGER_TEST_<BACKEND>_URL`` is set: use that URL, start nothing.
2. testcontainers is installed and a Docker daemon answers a ping: start a
   container from a pinned image, once per test session.
3. Otherwise skip, with a reason that says how to run it. When the backend is
   named in ``CHATLEDGER_REQUIRE_BACKENDS`` (comma separated) or with
   ``--require-backend``, the skip becomes a failure.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass

import pytest

__all__ = [
    "BACKENDS",
    "Backend",
    "backend_url",
    "docker_available",
    "required_backends",
]


@dataclass(frozen=True)
class Backend:
    """A server backend: its environment variable and how to start a container."""

    name: str
    image: str | None
    start: Callable[[str], AbstractContextManager[str]] | None = None

    @property
    def env_var(self) -> str:
        """The environment variable that holds the backend's URL."""
        return f"CHATLEDGER_TEST_{self.name.upper()}_URL"


@contextmanager
def _sqlalchemy_container(
    module: str, cls: str, image: str, driver: str
) -> Iterator[str]:
    import importlib

    container_class = getattr(importlib.import_module(module), cls)
    with container_class(image, driver=driver) as container:
        yield container.get_connection_url()


@contextmanager
def _redis_container(image: str) -> Iterator[str]:
    from testcontainers.redis import RedisContainer

    with RedisContainer(image) as container:
        host = container.get_container_host_ip()
        yield f"redis://{host}:{container.get_exposed_port(6379)}/0"


@contextmanager
def _mongodb_container(image: str) -> Iterator[str]:
    from testcontainers.mongodb import MongoDbContainer

    with MongoDbContainer(image) as container:
        yield container.get_connection_url()


@contextmanager
def _cassandra_container(image: str) -> Iterator[str]:
    from testcontainers.cassandra import CassandraContainer

    with CassandraContainer(image) as container:
        host = container.get_container_host_ip()
        yield f"cassandra://{host}:{container.get_exposed_port(9042)}/chatledger_test"


@contextmanager
def _neo4j_container(image: str) -> Iterator[str]:
    from testcontainers.neo4j import Neo4jContainer

    with Neo4jContainer(image) as container:
        url = container.get_connection_url()
        yield url.replace("bolt://", f"bolt://neo4j:{container.password}@", 1)


BACKENDS: dict[str, Backend] = {
    b.name: b
    for b in [
        Backend(
            "postgresql",
            "postgres:17",
            lambda i: _sqlalchemy_container(
                "testcontainers.postgres", "PostgresContainer", i, "psycopg"
            ),
        ),
        Backend(
            "mysql",
            "mysql:8.4",
            lambda i: _sqlalchemy_container(
                "testcontainers.mysql", "MySqlContainer", i, "pymysql"
            ),
        ),
        Backend(
            "mariadb",
            "mariadb:11.4",
            lambda i: _sqlalchemy_container(
                "testcontainers.mysql", "MySqlContainer", i, "pymysql"
            ),
        ),
        Backend(
            "mssql",
            "mcr.microsoft.com/mssql/server:2022-latest",
            lambda i: _sqlalchemy_container(
                "testcontainers.mssql", "SqlServerContainer", i, "pyodbc"
            ),
        ),
        Backend(
            "oracle",
            "gvenzl/oracle-free:23-slim-faststart",
            lambda i: _sqlalchemy_container(
                "testcontainers.oracle", "OracleDbContainer", i, "oracledb"
            ),
        ),
        Backend("redis", "redis:7.4", _redis_container),
        Backend("redis_cluster", None),
        Backend("mongodb", "mongo:8", _mongodb_container),
        Backend("cassandra", "cassandra:5", _cassandra_container),
        Backend("neo4j", "neo4j:5", _neo4j_container),
    ]
}


def required_backends(option: str | None = None) -> set[str]:
    """Backends whose skip is a failure: the env variable plus ``--require-backend``."""
    names = os.environ.get("CHATLEDGER_REQUIRE_BACKENDS", "")
    for given in (option, _option_given):
        if given:
            names += "," + given
    return {n.strip().lower() for n in names.split(",") if n.strip()}


_option_given = ""


def remember_required_option(option: str) -> None:
    """Keep ``--require-backend`` so every ``backend_url`` call honours it."""
    global _option_given
    _option_given = option


@functools.cache
def docker_available() -> bool:
    """True when testcontainers imports and a Docker daemon answers a ping."""
    try:
        import docker

        client = docker.from_env(timeout=3)
        return bool(client.ping())
    except Exception:
        return False


def _skip_or_fail(backend: Backend, required: set[str], why: str) -> None:
    reason = f"{backend.name}: {why}; set {backend.env_var} to a server URL"
    if backend.start is not None:
        reason += " or start a Docker daemon (testcontainers)"
    if backend.name in required:
        pytest.fail(f"required backend unavailable: {reason}", pytrace=False)
    pytest.skip(reason)


_started: dict[str, str] = {}
_stack: list[AbstractContextManager[str]] = []


def backend_url(name: str, required: set[str] | None = None) -> str:
    """Return a URL for backend ``name``, starting a container if needed, or skip."""
    backend = BACKENDS[name]
    required = required_backends() if required is None else required
    url = os.environ.get(backend.env_var)
    if url:
        return url
    if name in _started:
        return _started[name]
    if backend.start is None or backend.image is None:
        _skip_or_fail(backend, required, "no URL set")
    if not docker_available():
        _skip_or_fail(backend, required, "no Docker daemon answers")
    assert backend.start is not None
    assert backend.image is not None
    manager = backend.start(backend.image)
    _started[name] = manager.__enter__()
    _stack.append(manager)
    return _started[name]


def stop_containers() -> None:
    """Stop every container this session started."""
    while _stack:
        _stack.pop().__exit__(None, None, None)
