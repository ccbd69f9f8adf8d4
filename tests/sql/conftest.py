"""Engines for the SQL adapter's own tests: real databases, unique table names."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine

from tests.backends import backend_url

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
