"""Real databases for the Agents SDK session's tests: SQLite and PostgreSQL.

Each test gets a ``run`` fixture: ``run(scenario)`` opens a fresh async SQL
repository (a table of its own) in a new event loop, awaits
``scenario(repository)`` and drops the table, so the engine lives and dies
in the loop that uses it.
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


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An asyncio SQLAlchemy URL: a SQLite file, or the PostgreSQL test server."""
    if request.param == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path / 'chat.db'}"
    return _async_postgresql_url()


def open_repository(url: str) -> Any:
    """A repository on ``url`` in a table no other test uses (no I/O yet)."""
    return chatledger_sql.AsyncSqlChatMemoryRepository.from_url(
        url, table_name=f"cl_{uuid.uuid4().hex[:16]}"
    )


@pytest.fixture
def run(database_url: str) -> Run[Any]:
    """Run a scenario against an empty repository on the database, then drop it."""

    def run_scenario(scenario: Scenario[T]) -> T:
        async def main() -> T:
            repository = open_repository(database_url)
            try:
                return await scenario(repository)
            finally:
                await repository.drop_schema()
                await repository.aclose()

        return asyncio.run(main())

    return run_scenario
