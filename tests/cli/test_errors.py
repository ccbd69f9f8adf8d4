"""Errors a first user meets speak chatledger's voice: what is wrong, what to do.

Each is one line on stderr; usage errors (a URL or option that cannot work, a
missing driver) exit 2 like a missing adapter, and change nothing.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.conftest import HAVE_SQL, NO_SQL, Cli, Run, file_url
from tests.cli.test_cli import _jsonl, _one_line_error, _sample

needs_sql = pytest.mark.skipif(not HAVE_SQL, reason=NO_SQL)


def _without_modules(modules: list[str], *args: str, cwd: Path) -> Run:
    """Run the command in a process where ``modules`` cannot be imported."""
    blocked = "; ".join(f"sys.modules[{name!r}] = None" for name in modules)
    code = f"import sys; {blocked}; from chatledger.cli import main; sys.exit(main())"
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=dict(os.environ, PYTHONIOENCODING="utf-8"),
        timeout=120,
        check=False,
    )
    return Run(done.returncode, done.stdout, done.stderr)


@needs_sql
class TestSqlUrls:
    def test_the_scheme_case_does_not_matter(self, cli: Cli, tmp_path: Path) -> None:
        path = tmp_path / "chat.db"
        done = cli("import", f"SQLITE:///{path}", "-", stdin=_jsonl(_sample()))
        assert done.code == 0, done.err
        assert len(cli("ls", f"sqlite:///{path}").out.splitlines()) == 2
        assert cli("ls", f"SQLite:///{path}").out == cli("ls", f"sqlite:///{path}").out

    def test_two_slashes_say_what_was_meant(self, cli: Cli, tmp_path: Path) -> None:
        done = cli("import", "sqlite://chat.db", "-", stdin=_jsonl(_sample()))
        assert done.code == 2
        line = _one_line_error(done.err)
        assert "'sqlite://chat.db' names a host, not a file" in line
        assert "sqlite:///chat.db" in line
        assert list(tmp_path.iterdir()) == []

    def test_a_missing_folder_is_named(self, cli: Cli, tmp_path: Path) -> None:
        folder = tmp_path / "no" / "such"
        url = f"sqlite:///{folder / 'chat.db'}"
        done = cli("import", url, "-", stdin=_jsonl(_sample()))
        assert done.code == 1
        line = _one_line_error(done.err)
        assert f"the folder '{folder}' of the sqlite database" in line
        assert "does not exist" in line
        assert not (tmp_path / "no").exists()

    def test_an_unknown_option_lists_the_valid_ones(
        self, cli: Cli, tmp_path: Path
    ) -> None:
        url = file_url("sqlite", tmp_path / "chat")
        done = cli("import", url, "-", "-o", "bogus=1", stdin=_jsonl(_sample()))
        assert done.code == 2
        line = _one_line_error(done.err)
        assert "takes no option 'bogus'" in line
        assert (
            "its options are: create_schema, dialect, engine_options, retention, "
            "schema, table_name, ttl" in line
        )
        assert list(tmp_path.iterdir()) == []

    def test_a_missing_duckdb_driver_names_the_extra(self, tmp_path: Path) -> None:
        url = f"duckdb:///{tmp_path / 'chat.duckdb'}"
        done = _without_modules(["duckdb_engine", "duckdb"], "ls", url, cwd=tmp_path)
        assert done.code == 2, done.err
        line = _one_line_error(done.err)
        assert line.startswith(
            "chatledger: error: the database driver for duckdb:// URLs is not installed"
        )
        assert line.endswith("install it with: pip install 'chatledger-sql[duckdb]'")
        assert list(tmp_path.iterdir()) == []

    @pytest.mark.parametrize(
        ("url", "module", "extra"),
        [
            ("postgresql+psycopg://app@db.example/chat", "psycopg", "postgres"),
            ("mysql+pymysql://app@db.example/chat", "pymysql", "mysql"),
        ],
    )
    def test_every_missing_driver_is_a_usage_error(
        self, tmp_path: Path, url: str, module: str, extra: str
    ) -> None:
        done = _without_modules([module], "ls", url, cwd=tmp_path)
        assert done.code == 2, done.err
        line = _one_line_error(done.err)
        assert f"No module named '{module}'" in line or module in line
        assert line.endswith(f"install it with: pip install 'chatledger-sql[{extra}]'")

    def test_an_unknown_driver_is_named(self, cli: Cli) -> None:
        done = cli("ls", "postgresql+nosuch://app@db.example/chat")
        assert done.code == 2
        line = _one_line_error(done.err)
        assert "driver for postgresql+nosuch:// URLs is not installed" in line


def test_show_and_rm_give_the_same_id_error(cli: Cli, tmp_path: Path) -> None:
    url = file_url("testfile", tmp_path / "store")
    assert cli("import", url, "-", stdin=_jsonl(_sample())).code == 0
    lines = set()
    for command in (["show", url, ""], ["rm", url, ""], ["export", url, ""]):
        done = cli(*command)
        assert done.code == 2, command
        lines.add(_one_line_error(done.err))
    assert lines == {"chatledger: error: conversation id must not be empty"}
    assert len(cli("ls", url).out.splitlines()) == 2


@pytest.mark.skipif(
    importlib.util.find_spec("chatledger_mongodb") is None,
    reason="chatledger-mongodb is not installed (pip install -e ./packages/mongodb)",
)
@pytest.mark.parametrize(
    ("extra", "timeout"),
    [
        ((), "3.0s"),
        (("-o", "serverSelectionTimeoutMS=500"), "0.5s"),
        (("-o", "serverselectiontimeoutms=400"), "0.4s"),
        (("?serverSelectionTimeoutMS=700",), "0.7s"),
    ],
)
def test_an_unreachable_mongodb_is_given_seconds_not_half_a_minute(
    cli: Cli, extra: tuple[str, ...], timeout: str
) -> None:
    # Nothing listens on port 1: the command waits for server selection only.
    url = "mongodb://127.0.0.1:1/chat"
    if extra and extra[0].startswith("?"):
        url, extra = url + extra[0], ()
    done = cli("ls", url, *extra)
    assert done.code == 1
    line = _one_line_error(done.err)
    assert line.startswith("chatledger: error: ServerSelectionTimeoutError: ")
    assert f"Timeout: {timeout}," in line


@pytest.mark.skipif(
    importlib.util.find_spec("chatledger_redis") is None,
    reason="chatledger-redis is not installed (pip install -e ./packages/redis)",
)
def test_an_unknown_redis_option_lists_the_valid_ones(cli: Cli) -> None:
    done = cli("ls", "redis://127.0.0.1:1/0", "-o", "bogus=1")
    assert done.code == 2
    line = _one_line_error(done.err)
    assert "takes no option 'bogus'; its options are cluster, key_prefix" in line
