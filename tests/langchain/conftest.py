"""Real databases for the LangChain bridge's tests: SQLite, PostgreSQL, Redis.

``repository`` is an empty sync SQL repository on SQLite and on PostgreSQL;
``async_repository_url`` names an asyncio one (``open_async`` opens it in the
running event loop); ``store_url`` adds Redis for the concurrency runs.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.backends import backend_url

pytest.importorskip("langchain_core")
sqlalchemy = pytest.importorskip("sqlalchemy")
chatledger_sql = pytest.importorskip("chatledger_sql")


def _url(backend: str, tmp_path: Path, asyncio: bool) -> str:
    if backend == "sqlite":
        driver = "sqlite+aiosqlite" if asyncio else "sqlite"
        return f"{driver}:///{tmp_path / 'chat.db'}"
    url = backend_url(backend)
    if backend == "postgresql":
        made = sqlalchemy.engine.make_url(url).set(drivername="postgresql+psycopg")
        return str(made.render_as_string(hide_password=False))
    return url


@pytest.fixture(params=["sqlite", "postgresql"])
def repository(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """An empty SQL repository on each database, in a table of its own."""
    repository = open_sync(_url(request.param, tmp_path, asyncio=False))
    yield repository
    repository.drop_schema()
    repository.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def async_repository_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The asyncio URL of a SQLite file or of the PostgreSQL test server."""
    if request.param == "sqlite":
        pytest.importorskip("aiosqlite")
    return _url(request.param, tmp_path, asyncio=True)


@pytest.fixture(params=["sqlite", "postgresql", "redis"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The URL of a SQLite file, the PostgreSQL or the Redis test server."""
    return _url(request.param, tmp_path, asyncio=False)


def _name() -> str:
    return f"cl_{uuid.uuid4().hex[:16]}"


def open_sync(url: str) -> Any:
    """A sync repository on ``url``, in a table or key prefix of its own."""
    if url.startswith("redis"):
        redis = pytest.importorskip("chatledger_redis")
        return redis.RedisChatMemoryRepository.from_url(url, key_prefix=f"{_name()}:")
    return chatledger_sql.SqlChatMemoryRepository.from_url(url, table_name=_name())


def open_async(url: str) -> Any:
    """An asyncio repository on ``url`` (a sync URL is made async), of its own."""
    if url.startswith("redis"):
        redis = pytest.importorskip("chatledger_redis")
        return redis.AsyncRedisChatMemoryRepository.from_url(
            url, key_prefix=f"{_name()}:"
        )
    if url.startswith("sqlite:"):
        pytest.importorskip("aiosqlite")
        url = url.replace("sqlite:", "sqlite+aiosqlite:", 1)
    return chatledger_sql.AsyncSqlChatMemoryRepository.from_url(url, table_name=_name())
