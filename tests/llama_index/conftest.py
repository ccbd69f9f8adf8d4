"""Real databases for the LlamaIndex bridge's tests: SQLite and PostgreSQL.

Each test gets a fresh table, seen through a sync repository and, inside the
test's event loop, an async one (``aiosqlite`` on the same file, ``psycopg``'s
async API on the same server).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests.backends import backend_url

pytest.importorskip("llama_index.core")
sqlalchemy = pytest.importorskip("sqlalchemy")
chatledger_sql = pytest.importorskip("chatledger_sql")

T = TypeVar("T")


@dataclass
class Database:
    """One table on one database, and the URLs that reach it."""

    name: str
    sync_url: str
    async_url: str
    table_name: str
    repository: Any
    engines: list[Any] = field(default_factory=list)

    def new_repository(self) -> Any:
        """Another sync repository over the same table (a fresh process's view)."""
        engine = sqlalchemy.create_engine(self.sync_url)
        self.engines.append(engine)
        return chatledger_sql.SqlChatMemoryRepository(
            engine, table_name=self.table_name
        )

    @asynccontextmanager
    async def async_repository(self) -> AsyncIterator[Any]:
        """An async repository over the same table, closed on exit."""
        repository = chatledger_sql.AsyncSqlChatMemoryRepository.from_url(
            self.async_url, table_name=self.table_name
        )
        try:
            yield repository
        finally:
            await repository.aclose()

    def run(self, scenario: Callable[[Any], Awaitable[T]]) -> T:
        """Run ``scenario(async_repository)`` on a fresh event loop."""

        async def main() -> T:
            async with self.async_repository() as repository:
                return await scenario(repository)

        return asyncio.run(main())


def _async_url(sync_url: str) -> str:
    url = sqlalchemy.engine.make_url(sync_url)
    driver = "aiosqlite" if url.get_backend_name() == "sqlite" else "psycopg"
    async_url = url.set(drivername=f"{url.get_backend_name()}+{driver}")
    rendered: str = async_url.render_as_string(hide_password=False)
    return rendered


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    """An empty table on each database, dropped afterwards."""
    if request.param == "sqlite":
        sync_url = f"sqlite:///{tmp_path / 'chat.db'}"
    else:
        sync_url = backend_url("postgresql")
    table_name = f"cl_{uuid.uuid4().hex[:16]}"
    engine = sqlalchemy.create_engine(sync_url)
    repository = chatledger_sql.SqlChatMemoryRepository(engine, table_name=table_name)
    found = Database(
        request.param, sync_url, _async_url(sync_url), table_name, repository
    )
    yield found
    repository.drop_schema()
    for used in [engine, *found.engines]:
        used.dispose()


@pytest.fixture
def repository(database: Database) -> Any:
    """The sync repository of ``database``."""
    return database.repository
