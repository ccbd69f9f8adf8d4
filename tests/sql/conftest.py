"""Engines for the SQL adapter's own tests: real databases, unique table names."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from sqlalchemy import Engine, create_engine, event

from chatledger import Message, MessageWindow, StoreNotFoundError
from chatledger.testing import every_kind
from tests.backends import backend_url

if TYPE_CHECKING:
    from chatledger_sql.async_repository import AsyncSqlChatMemoryRepository

SERVERS = ["postgresql", "mariadb"]


def unique_table() -> str:
    """A table name no other test, here or on a shared server, uses."""
    return f"cl_{uuid.uuid4().hex[:16]}"


def make_url(name: str, directory: Path) -> str:
    """A URL for ``name``: a file under ``directory`` or a server (or skip)."""
    if name == "sqlite":
        return f"sqlite:///{directory / 'chat.db'}"
    if name == "duckdb":
        return f"duckdb:///{directory / 'chat.duckdb'}"
    return backend_url(name)


@pytest.fixture(params=["sqlite", "duckdb", "postgresql", "mariadb"])
def any_engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    """An engine on each database that runs here."""
    engine = create_engine(make_url(request.param, tmp_path))
    yield engine
    engine.dispose()


@contextlib.contextmanager
def cursor_statements(engine: Engine) -> Iterator[list[str]]:
    """The statements SQLAlchemy's cursor runs on ``engine`` meanwhile.

    The listener that records them also keeps the repositories' raw paths
    off (``chatledger_sql.compiled.runs_raw``), as any tracing would.
    """
    seen: list[str] = []

    def listener(*args: Any) -> None:
        seen.append(args[2])

    event.listen(engine, "before_cursor_execute", listener)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", listener)


def stamped_history() -> list[Message]:
    """Every kind of message, stamped to the microsecond."""
    moment = datetime(2026, 12, 1, 12, 0, 0, 123456, tzinfo=UTC)
    return [m.stamped(moment) for m in every_kind()]


async def a_failed_read_recovers(repository: AsyncSqlChatMemoryRepository) -> None:
    """Reads of dropped tables raise as SQLAlchemy's path raises, leave the pool
    whole, and read again once the tables are back."""
    await repository.save_all("c", stamped_history())
    await repository.drop_schema()
    with pytest.raises(StoreNotFoundError, match=repository.tables.messages.name):
        await repository.find_by_conversation_id("c")
    with pytest.raises(StoreNotFoundError):
        await repository.find_window("c", MessageWindow(5))
    assert repository.engine.pool.checkedout() == 0  # type: ignore[attr-defined]
    await repository.create_schema()
    await repository.save_all("c", stamped_history())
    assert await repository.find_by_conversation_id("c") == stamped_history()
