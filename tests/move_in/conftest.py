"""Sources written by the real libraries, and the command that moves them in.

A source database is a SQLite file of the test, or the PostgreSQL or MariaDB
test server (``CHATLEDGER_TEST_POSTGRESQL_URL``, ``CHATLEDGER_TEST_MARIADB_URL``)
with tables of the test's own names, dropped afterwards. The target is a
SQLite file of the test.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from chatledger import Message, connect
from chatledger.cli.stores import close
from tests.backends import backend_url

sqlalchemy = pytest.importorskip("sqlalchemy")
pytest.importorskip("chatledger_sql")

#: The source databases a library may write to, as test ids.
SQL_SOURCES = ["sqlite", "postgresql", "mariadb"]


@dataclass(frozen=True)
class Run:
    """What one command did."""

    code: int
    out: str
    err: str


@dataclass
class Source:
    """A database to write a source into, and the tables made there."""

    name: str
    url: str
    tables: list[str] = field(default_factory=list)

    def table(self, stem: str) -> str:
        """A new table name, dropped after the test."""
        name = f"{stem}_{uuid.uuid4().hex[:10]}"
        self.tables.append(name)
        return name

    @property
    def async_url(self) -> str:
        """The same database through an asyncio driver."""
        url = sqlalchemy.engine.make_url(self.url)
        driver = {
            "sqlite": "sqlite+aiosqlite",
            "postgresql": "postgresql+psycopg",
            "mariadb": "mysql+aiomysql",
        }[self.name]
        rendered: str = url.set(drivername=driver).render_as_string(hide_password=False)
        return rendered


@pytest.fixture(params=SQL_SOURCES)
def source(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Source]:
    """A source database: a SQLite file, or a test server."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'source.db'}"
    else:
        url = backend_url(request.param)
    found = Source(request.param, url)
    yield found
    engine = sqlalchemy.create_engine(url)
    with engine.begin() as connection:
        for name in reversed(found.tables):
            quoted = engine.dialect.identifier_preparer.quote(name)
            connection.exec_driver_sql(f"DROP TABLE IF EXISTS {quoted}")
    engine.dispose()


@pytest.fixture
def target(tmp_path: Path) -> str:
    """The store moved into: a SQLite file of the test."""
    return f"sqlite:///{tmp_path / 'chat.db'}"


@pytest.fixture
def chatledger(capsys: pytest.CaptureFixture[str]) -> Any:
    """Run ``chatledger ARGS...`` in this process; returns its code and output."""
    from chatledger.cli import main, output

    def run(*args: str) -> Run:
        capsys.readouterr()
        root = logging.getLogger()
        handlers, level, secrets = list(root.handlers), root.level, output.SECRETS
        output.SECRETS = output.Secrets()
        try:
            code = main(list(args))
        finally:
            root.handlers[:] = handlers
            root.setLevel(level)
            output.SECRETS = secrets
        captured = capsys.readouterr()
        return Run(code, captured.out, captured.err)

    return run


def stored(target: str, conversation_id: str) -> list[Message]:
    """The messages of one conversation in the target."""
    repository = connect(target)
    try:
        return repository.find_by_conversation_id(conversation_id)
    finally:
        close(repository)


def conversation_ids(target: str) -> list[str]:
    """Every conversation of the target, sorted."""
    repository = connect(target)
    try:
        return sorted(repository.find_conversation_ids())
    finally:
        close(repository)
