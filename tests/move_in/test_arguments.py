"""``import --from``'s arguments: a bad one exits 2 before any I/O, a bad store 1."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.move_in.conftest import Run


def _sqlite_spring(path: Path) -> str:
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE other (x INTEGER)")
    return f"sqlite:///{path}"


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (["--from", "redis-om", "{source}", "{target}"], "invalid choice: 'redis-om'"),
        (["{target}", "x.jsonl", "--table", "t"], "--table: only with --from FORMAT"),
        (
            ["--from", "jsonl", "x.jsonl", "{target}", "--drop-uncarriable"],
            "--drop-uncarriable: only with --from FORMAT",
        ),
        (
            ["--from", "langchain-postgres", "{source}", "{target}"],
            "--from langchain-postgres needs --table",
        ),
        (
            ["--from", "spring-ai-jdbc", "{source}", "{target}", "--table", "a;b"],
            "table 'a;b': expected NAME or SCHEMA.NAME",
        ),
        (
            [
                "--from",
                "langchain-sql",
                "{source}",
                "{target}",
                "--source-timezone",
                "Mars/Olympus",
            ],
            "--source-timezone 'Mars/Olympus' is not a time zone",
        ),
        (
            ["--from", "agents-sqlalchemy", "{async_source}", "{target}"],
            "the source is read with a sync driver, not aiosqlite: give sqlite://",
        ),
        (
            ["--from", "spring-ai-jdbc", "sqlite:///{tmp}/nowhere.db", "{target}"],
            "no SQLite file",
        ),
        (
            ["--from", "spring-ai-jdbc", "not a url", "{target}"],
            "is not a SQLAlchemy URL",
        ),
        (
            ["--from", "llama-index-simple", "{tmp}/nowhere.json", "{target}"],
            "no file",
        ),
        (
            ["--from", "spring-ai-jdbc", "{source}", "sqlite://"],
            "keeps data in this process only",
        ),
    ],
)
def test_a_bad_argument_exits_2_and_writes_nothing_sqlite(
    chatledger: Any, tmp_path: Path, arguments: list[str], expected: str
) -> None:
    source = _sqlite_spring(tmp_path / "source.db")
    target = tmp_path / "chat.db"
    given = [
        a.format(
            source=source,
            async_source=source.replace("sqlite://", "sqlite+aiosqlite://"),
            target=f"sqlite:///{target}",
            tmp=tmp_path,
        )
        for a in arguments
    ]
    done: Run = chatledger("import", *given)
    assert done.code == 2, done.err
    assert expected in done.err
    assert not target.exists()
    assert not (tmp_path / "nowhere.db").exists()


def test_a_missing_table_exits_1_and_names_table_option_sqlite(
    chatledger: Any, tmp_path: Path
) -> None:
    source = _sqlite_spring(tmp_path / "source.db")
    done: Run = chatledger(
        "import", "--from", "spring-ai-jdbc", source, f"sqlite:///{tmp_path}/c.db"
    )
    assert done.code == 1
    assert "no table 'SPRING_AI_CHAT_MEMORY' in sqlite:///" in done.err
    assert "give the table's name with --table" in done.err


def test_a_table_of_another_layout_exits_1_and_lists_its_columns_sqlite(
    chatledger: Any, tmp_path: Path
) -> None:
    source = _sqlite_spring(tmp_path / "source.db")
    done: Run = chatledger(
        "import", "--from", "langchain-sql", source, f"sqlite:///{tmp_path}/c.db",
        "--table", "other",
    )  # fmt: skip
    assert done.code == 1
    assert "table 'other' has no column id, session_id, message" in done.err
    assert "(its columns: x)" in done.err


@pytest.mark.parametrize(
    ("module", "fmt", "install"),
    [
        ("sqlalchemy", "spring-ai-jdbc", "pip install chatledger-sql"),
        ("chatledger_langchain", "langchain-sql", "pip install chatledger-langchain"),
        (
            "chatledger_llama_index",
            "llama-index-postgres",
            "pip install chatledger-llama-index",
        ),
    ],
)
def test_a_missing_library_names_its_install_line_sqlite(
    chatledger: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    module: str,
    fmt: str,
    install: str,
) -> None:
    source = _sqlite_spring(tmp_path / "source.db")
    for name in [module, *(m for m in sys.modules if m.startswith(f"{module}."))]:
        monkeypatch.setitem(sys.modules, name, None)  # what an absent one raises
    done: Run = chatledger(
        "import", "--from", fmt, source, f"sqlite:///{tmp_path}/c.db"
    )
    assert done.code == 2
    assert install in done.err


def test_from_jsonl_reads_an_export_source_first_sqlite(
    chatledger: Any, tmp_path: Path
) -> None:
    first, second = f"sqlite:///{tmp_path}/a.db", f"sqlite:///{tmp_path}/b.db"
    assert chatledger("demo", "--url", first, "--conversation", "c1").code == 0
    exported: Run = chatledger("export", first, "--output", f"{tmp_path}/c.jsonl")
    assert exported.code == 0
    done: Run = chatledger(
        "import", "--from", "jsonl", f"{tmp_path}/c.jsonl", second, "--no-progress"
    )
    assert done.code == 0, done.err
    assert chatledger("export", second).out == chatledger("export", first).out


def test_a_source_id_chatledger_cannot_take_is_reported_sqlite(
    chatledger: Any, tmp_path: Path
) -> None:
    path = tmp_path / "agents.db"
    with sqlite3.connect(path) as connection:
        connection.execute(
            "CREATE TABLE agent_messages (id INTEGER PRIMARY KEY, session_id TEXT,"
            " message_data TEXT, created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP)"
        )
        connection.executemany(
            "INSERT INTO agent_messages (session_id, message_data) VALUES (?, ?)",
            [(" padded", '{"role": "user", "content": "Hi"}'), ("fine", "{}")],
        )
    done: Run = chatledger(
        "import", "--from", "agents-sqlite", str(path), f"sqlite:///{tmp_path}/c.db"
    )
    assert done.code == 1
    assert "conversation ' padded': not imported: its id cannot be" in done.err
    assert "imported 1 message in 1 conversation" in done.out
