"""Commands that only read (ls, show, export, copy's source, rm) create nothing.

A typo in a path or a table name is an error naming what is missing, never a
new empty store that the command then reports as empty.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from chatledger import Message, TokenWindow, ToolResponse
from tests.cli.conftest import HAVE_SQL, NO_SQL, Cli, file_url
from tests.cli.test_cli import _jsonl, _one_line_error, _sample
from tests.cli.test_ls_records import sql_keeps_records

needs_sql = pytest.mark.skipif(not HAVE_SQL, reason=NO_SQL)

READERS = [
    ("ls", "{url}"),
    # --long where the SQL adapter keeps records, else --times: both read counts.
    ("ls", "{url}", "--long" if sql_keeps_records() else "--times"),
    ("show", "{url}", "beta"),
    ("export", "{url}"),
    ("export", "{url}", "beta"),
    ("copy", "{url}", "{other}"),
    ("rm", "{url}", "beta"),
]


def _tables(path: Path) -> list[str]:
    with sqlite3.connect(path) as connection:
        rows = connection.execute("SELECT name FROM sqlite_master WHERE type='table'")
        return sorted(name for (name,) in rows)


def _fill(command: tuple[str, ...], url: str, other: str) -> list[str]:
    return [part.format(url=url, other=other) for part in command]


@needs_sql
@pytest.mark.parametrize("kind", ["sqlite", "duckdb"])
@pytest.mark.parametrize("command", READERS, ids=" ".join)
def test_a_missing_database_file_is_named_and_not_created(
    cli: Cli, tmp_path: Path, kind: str, command: tuple[str, ...]
) -> None:
    if kind == "duckdb":
        pytest.importorskip("duckdb_engine")
    path = tmp_path / f"typo.{kind}"
    url = f"{kind}:///{path}"
    done = cli(*_fill(command, url, file_url("testfile", tmp_path / "other")))
    assert done.code == 1, done.out + done.err
    line = _one_line_error(done.err)
    assert f"no {kind} database at '{path}'" in line
    assert not path.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@needs_sql
@pytest.mark.parametrize("command", READERS, ids=" ".join)
def test_a_missing_table_is_named_and_not_created(
    cli: Cli, tmp_path: Path, command: tuple[str, ...]
) -> None:
    url = file_url("sqlite", tmp_path / "store")
    assert cli("import", url, "-", stdin=_jsonl(_sample())).code == 0
    before = _tables(tmp_path / "store.db")
    args = _fill(command, url, file_url("testfile", tmp_path / "other"))
    done = cli(*args, "-o", "table_name=typo")
    assert done.code == 1, done.out + done.err
    assert "table 'typo' does not exist in sqlite:///" in _one_line_error(done.err)
    assert _tables(tmp_path / "store.db") == before


@needs_sql
def test_a_missing_duckdb_table_is_named_and_not_created(
    cli: Cli, tmp_path: Path
) -> None:
    pytest.importorskip("duckdb_engine")
    url = f"duckdb:///{tmp_path / 'store.duckdb'}"
    assert cli("import", url, "-", stdin=_jsonl(_sample())).code == 0
    done = cli("ls", url, "-o", "table_name=typo")
    assert done.code == 1
    assert "table 'typo' does not exist" in _one_line_error(done.err)
    listed = cli("ls", url)
    assert listed.code == 0
    assert len(listed.out.splitlines()) == 2


@needs_sql
def test_reading_an_existing_store_works_and_adds_no_file(
    cli: Cli, tmp_path: Path
) -> None:
    url = file_url("sqlite", tmp_path / "store")
    assert cli("import", url, "-", stdin=_jsonl(_sample())).code == 0
    before = sorted(p.name for p in tmp_path.iterdir())
    for command in READERS[:5]:
        done = cli(*_fill(command, url, ""))
        assert done.code == 0, done.err
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_an_adapter_that_creates_on_opening_is_told_not_to(
    cli: Cli, tmp_path: Path
) -> None:
    # The test adapter declares create_schema, as the first-party ones do.
    url = file_url("testfile", tmp_path / "absent")
    for command in READERS:
        done = cli(*_fill(command, url, file_url("testfile", tmp_path / "other")))
        # ls --long lists records, which the test adapter does not keep.
        assert done.code in ((2,) if "--long" in command else (0, 1)), done.err
        assert not (tmp_path / "absent.json").exists(), command
    assert cli("import", url, "-", stdin=_jsonl(_sample())).code == 0
    assert (tmp_path / "absent.json").exists()


@needs_sql
def test_reading_a_store_from_before_the_evicted_record_adds_no_table(
    cli: Cli, tmp_path: Path
) -> None:
    """ls, show and export read an older store as it is: no table is added."""
    url = file_url("sqlite", tmp_path / "store")
    assert cli("import", url, "-", stdin=_jsonl(_sample())).code == 0
    path = tmp_path / "store.db"
    assert "chat_memory_evicted" in _tables(path)
    with sqlite3.connect(path) as connection:
        connection.execute("DROP TABLE chat_memory_evicted")
    before = _tables(path)
    listed = cli("ls", url, "--long" if sql_keeps_records() else "--times")
    assert listed.code == 0, listed.err
    assert sorted(line.split("\t")[0] for line in listed.out.splitlines()) == sorted(
        _sample()
    )
    for command in READERS[2:5]:
        done = cli(*_fill(command, url, ""))
        assert done.code == 0, done.err
    # rm writes: it names the missing table and how to add it, removing nothing.
    removed = cli("rm", url, "beta")
    assert removed.code == 1
    line = _one_line_error(removed.err)
    assert "table 'chat_memory_evicted' does not exist" in line
    assert "create_schema()" in line
    assert _tables(path) == before
    assert cli("show", url, "beta").code == 0


@needs_sql
def test_a_conversation_its_window_emptied_is_not_listed(
    cli: Cli, tmp_path: Path
) -> None:
    """The record keeps the ids of an emptied conversation; ls shows none of it."""
    from chatledger_sql import SqlChatMemoryRepository  # installed: needs_sql

    url = file_url("sqlite", tmp_path / "store")
    assert cli("import", url, "-", stdin=_jsonl(_sample())).code == 0
    with SqlChatMemoryRepository.from_url(url) as repository:
        window = TokenWindow(5, token_counter=lambda m: len(m.content or ""))
        # A tool response without its call is the one message a window drops
        # at once: any other is kept, at least as the turn in progress.
        orphan = Message.tool(ToolResponse(id="c", name="f", data="{}"))
        emptied = repository.append_to_window("emptied", [orphan], window)
        assert emptied.evicted_ids
        assert repository.find_by_conversation_id("emptied") == []
    assert cli("show", url, "emptied").code == 1
    listed = cli("ls", url)
    assert listed.code == 0, listed.err
    assert listed.out.splitlines() == sorted(_sample())
    if not sql_keeps_records():
        return
    # ls --long lists records: one without messages left shows a count of 0.
    records = cli("ls", url, "--long")
    assert records.code == 0, records.err
    rows = [line.split("\t") for line in records.out.splitlines()]
    assert sorted(cells[0] for cells in rows if cells[2] != "0") == sorted(_sample())
