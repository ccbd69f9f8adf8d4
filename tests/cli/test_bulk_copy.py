"""copy and import write in batches, one transaction each, where the target can.

DuckDB pays several milliseconds per statement and per commit: one save_all
per conversation made a copy of 2,000 conversations six times slower than
into SQLite. Counting commits pins the batching without timing anything.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, event

from chatledger import Message
from chatledger.bulk import MAX_BATCH_CONVERSATIONS
from chatledger.cli import main
from chatledger.jsonl import export_line
from tests.cli.conftest import HAVE_SQL, NO_SQL

pytestmark = pytest.mark.skipif(not HAVE_SQL, reason=NO_SQL)

COUNT = MAX_BATCH_CONVERSATIONS * 2 + 10


@pytest.fixture
def commits() -> Iterator[list[str]]:
    """The URL of every engine commit while the test runs (in this process)."""
    seen: list[str] = []

    def record(connection: object) -> None:
        seen.append(str(connection.engine.url))  # type: ignore[attr-defined]

    event.listen(Engine, "commit", record)
    yield seen
    event.remove(Engine, "commit", record)


def _schema_commits(url: str, commits: list[str]) -> int:
    """How many commits creating the schema of a new store at ``url`` takes."""
    from chatledger_sql import SqlChatMemoryRepository

    repository = SqlChatMemoryRepository.from_url(url)
    try:
        before = len(commits)
        repository.find_conversation_ids()  # the first use creates the schema
        return len(commits) - before
    finally:
        repository.close()


def _export_file(path: Path) -> Path:
    lines = [
        export_line(f"c{i:04d}", message)
        for i in range(COUNT)
        for message in (Message.user(f"q{i}"), Message.assistant(f"a{i}"))
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("kind", ["sqlite", "duckdb"])
def test_import_and_copy_commit_once_per_batch(
    tmp_path: Path, commits: list[str], kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    if kind == "duckdb":
        pytest.importorskip("duckdb_engine")
    source = f"sqlite:///{tmp_path / 'source.db'}"
    target = f"{kind}:///{tmp_path / f'target.{kind}'}"
    scratch = tmp_path / "scratch"
    source_schema = _schema_commits(f"sqlite:///{scratch}.db", commits)
    target_schema = _schema_commits(f"{kind}:///{scratch}.{kind}", commits)
    commits.clear()
    path = _export_file(tmp_path / "in.jsonl")
    assert main(["import", source, str(path), "--no-progress"]) == 0
    assert main(["copy", source, target, "--no-progress"]) == 0
    batches = -(-COUNT // MAX_BATCH_CONVERSATIONS)
    into_source = [url for url in commits if url.endswith("source.db")]
    into_target = [url for url in commits if url.endswith(f"target.{kind}")]
    # The schema's own commits (its tables and indexes), then one per batch.
    assert len(into_source) == source_schema + batches
    assert len(into_target) == target_schema + batches
    out = capsys.readouterr().out
    assert f"imported {2 * COUNT} messages in {COUNT} conversations" in out
    assert f"copied {COUNT} conversations ({2 * COUNT} messages)" in out
    assert main(["export", source]) == 0
    exported = capsys.readouterr().out
    assert len(exported.splitlines()) == 2 * COUNT
    assert main(["export", target]) == 0
    assert capsys.readouterr().out == exported
