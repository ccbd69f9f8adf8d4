"""Real databases for the LangChain bridge's tests: SQLite and PostgreSQL."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.backends import backend_url

pytest.importorskip("langchain_core")
sqlalchemy = pytest.importorskip("sqlalchemy")
chatledger_sql = pytest.importorskip("chatledger_sql")


@pytest.fixture(params=["sqlite", "postgresql"])
def repository(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[object]:
    """An empty SQL repository on each database, in a table of its own."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'chat.db'}"
    else:
        url = backend_url("postgresql")
    engine = sqlalchemy.create_engine(url)
    repository = chatledger_sql.SqlChatMemoryRepository(
        engine, table_name=f"cl_{uuid.uuid4().hex[:16]}"
    )
    yield repository
    repository.drop_schema()
    engine.dispose()
