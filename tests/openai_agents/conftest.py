"""Real databases for the Agents SDK session's tests: SQLite, PostgreSQL, Redis.

Each test gets a ``run`` fixture: ``run(scenario)`` opens a fresh async SQL
repository (a table of its own) in a new event loop, awaits
``scenario(repository)`` and drops the table. ``run`` covers SQLite and
PostgreSQL; ``run_on_servers`` covers Redis too (a key prefix of its own).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests.backends import backend_url

pytest.importorskip("agents")
sqlalchemy = pytest.importorskip("sqlalchemy")
chatledger_sql = pytest.importorskip("chatledger_sql")
pytest.importorskip("aiosqlite")

T = TypeVar("T")
Scenario = Callable[[Any], Awaitable[T]]
Run = Callable[[Scenario[T]], T]


def _async_postgresql_url() -> str:
    url = sqlalchemy.engine.make_url(backend_url("postgresql"))
    async_url = url.set(drivername="postgresql+psycopg")
    return str(async_url.render_as_string(hide_password=False))


def _url(backend: str, tmp_path: Path) -> str:
    if backend == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path / 'chat.db'}"
    if backend == "postgresql":
        return _async_postgresql_url()
    return backend_url(backend)


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An asyncio SQLAlchemy URL: a SQLite file, or the PostgreSQL test server."""
    return _url(request.param, tmp_path)


@pytest.fixture(params=["sqlite", "postgresql", "redis"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The URL of a SQLite file, the PostgreSQL or the Redis test server."""
    return _url(request.param, tmp_path)


def open_repository(url: str) -> Any:
    """A repository on ``url`` in a table or key prefix no other test uses (no I/O)."""
    name = f"cl_{uuid.uuid4().hex[:16]}"
    if url.startswith("redis"):
        redis = pytest.importorskip("chatledger_redis")
        return redis.AsyncRedisChatMemoryRepository.from_url(url, key_prefix=f"{name}:")
    return chatledger_sql.AsyncSqlChatMemoryRepository.from_url(url, table_name=name)


def _runner(url: str) -> Run[Any]:
    def run_scenario(scenario: Scenario[T]) -> T:
        async def main() -> T:
            repository = open_repository(url)
            try:
                return await scenario(repository)
            finally:
                await repository.drop_schema()
                await repository.aclose()

        return asyncio.run(main())

    return run_scenario


@pytest.fixture
def run(database_url: str) -> Run[Any]:
    """Run a scenario against an empty repository on the database, then drop it."""
    return _runner(database_url)


@pytest.fixture
def run_on_servers(store_url: str) -> Run[Any]:
    """Run a scenario against an empty repository on SQLite, PostgreSQL or Redis."""
    return _runner(store_url)
