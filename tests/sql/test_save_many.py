"""save_many writes a batch of conversations in one transaction, few statements."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, event

from chatledger import Message, SupportsSaveMany
from chatledger_sql import SqlChatMemoryRepository
from tests.sql.conftest import unique_table


class _Counts:
    """Commits and statements an engine ran (an executemany is one)."""

    def __init__(self, engine: Engine) -> None:
        self.commits = 0
        self.statements = 0
        event.listen(engine, "commit", self._commit)
        event.listen(engine, "before_cursor_execute", self._statement)

    def _commit(self, connection: object) -> None:
        self.commits += 1

    def _statement(self, *args: object) -> None:
        self.statements += 1


@pytest.fixture
def repository(any_engine: Engine) -> Iterator[SqlChatMemoryRepository]:
    repository = SqlChatMemoryRepository(any_engine, table_name=unique_table())
    repository.create_schema()  # so that a test counts its own statements only
    yield repository
    repository.drop_schema()


def _conversations(count: int) -> dict[str, list[Message]]:
    return {
        f"c{i:04d}": [Message.user(f"q{i}"), Message.assistant(f"a{i}")]
        for i in range(count)
    }


def test_a_batch_is_one_transaction(repository: SqlChatMemoryRepository) -> None:
    assert isinstance(repository, SupportsSaveMany)
    counts = _Counts(repository.engine)
    repository.save_many(_conversations(150))
    assert len(repository.find_conversation_ids()) == 150
    if repository.engine.dialect.name != "postgresql":
        # psycopg's pipelined COMMIT bypasses SQLAlchemy's commit event; the
        # test below shows the batch is all or nothing there too.
        assert counts.commits == 1


def test_an_exclusive_writer_runs_a_few_statements_per_batch(
    tmp_path: Path,
) -> None:
    """SQLite and DuckDB lock the database for a write: no lock per conversation."""
    for url in (f"sqlite:///{tmp_path / 'a.db'}", f"duckdb:///{tmp_path / 'a.db2'}"):
        if url.startswith("duckdb"):
            pytest.importorskip("duckdb_engine")
        with SqlChatMemoryRepository.from_url(url) as repository:
            repository.save_many(_conversations(1))  # the statement limit is known
            counts = _Counts(repository.engine)
            repository.save_many(_conversations(300))
            first = counts.statements
            repository.save_many(_conversations(300))
            assert counts.commits == 2
            assert first <= 8
            assert counts.statements - first <= 8


def test_a_failing_batch_leaves_every_conversation_as_it_was(
    repository: SqlChatMemoryRepository,
) -> None:
    before = _conversations(3)
    repository.save_many(before)

    def fail(point: str) -> None:
        raise RuntimeError(f"lost at {point}")

    repository.fault_points.on("after_insert", fail)
    with pytest.raises(RuntimeError, match="lost at after_insert"):
        repository.save_many({cid: [Message.user("new")] for cid in before})
    repository.fault_points.clear()
    for cid, messages in before.items():
        assert repository.find_by_conversation_id(cid) == messages
