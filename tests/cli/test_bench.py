"""``chatledger bench URL``: the figures, their shapes, and nothing left behind."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from chatledger import Message
from chatledger.cli import main
from chatledger.cli.stores import local_database_file
from tests.backends import backend_url
from tests.cli.conftest import HAVE_SQL, NO_SQL, Cli

HAVE_REDIS = importlib.util.find_spec("chatledger_redis") is not None
HAVE_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None

#: Tiny runs: the figures are noise, the shapes and the clean-up are not.
TINY = ("--samples", "3", "--windows", "4,20")


def _tables(path: Path) -> list[str]:
    connection = sqlite3.connect(path)
    try:
        rows = connection.execute("SELECT name FROM sqlite_master").fetchall()
    finally:
        connection.close()
    return sorted(name for (name,) in rows)


def _table_rows(out: str) -> list[list[str]]:
    """The data rows of the table: W | operation | ours | floor | ratio."""
    rows = []
    for line in out.splitlines():
        cells = [cell.strip() for cell in line.split("|")]
        if len(cells) == 5 and cells[0].isdigit():
            rows.append(cells)
    return rows


def _check_json(out: str, floor: str | None) -> dict[str, Any]:
    report: dict[str, Any] = json.loads(out)
    assert report["floor"] == floor
    assert report["samples"] == 3
    assert report["windows"] == [4, 20]
    assert report["errors"] == []
    assert [(r["window"], r["operation"]) for r in report["results"]] == [
        (4, "append"),
        (4, "read"),
        (20, "append"),
        (20, "read"),
    ]
    for result in report["results"]:
        ours = result["chatledger"]
        assert ours["samples"] == 3
        assert 0 < ours["p50_us"] <= ours["p95_us"]
        if floor is None:
            assert result["floor"] is None
            assert result["ratio"] is None
        else:
            theirs = result["floor"]
            assert theirs["samples"] == 3
            assert 0 < theirs["p50_us"] <= theirs["p95_us"]
            assert result["ratio"] == pytest.approx(ours["p50_us"] / theirs["p50_us"])
    return report


@pytest.mark.skipif(not HAVE_SQL, reason=NO_SQL)
class TestSqliteFile:
    def test_table_of_ours_beside_the_floor_and_nothing_left(
        self, cli: Cli, tmp_path: Path
    ) -> None:
        path = tmp_path / "fresh.db"
        done = cli(
            "bench",
            f"sqlite:///{path}",
            "--namespace-option",
            "table_name",
            "--progress-every",
            "0",
            *TINY,
        )
        assert done.code == 0, done.err
        assert "(floor: sqlite3), 3 samples per figure" in done.out
        rows = _table_rows(done.out)
        assert [(r[0], r[1]) for r in rows] == [
            ("4", "append"),
            ("4", "read"),
            ("20", "append"),
            ("20", "read"),
        ]
        for _, _, ours, floor, factor in rows:
            assert " / " in ours
            assert " / " in floor
            assert float(factor) > 0
        assert "benchmarking: " in done.err
        assert not path.exists()

    def test_json_to_stdout(self, cli: Cli, tmp_path: Path) -> None:
        path = tmp_path / "fresh.db"
        done = cli(
            "bench",
            f"sqlite:///{path}",
            "--namespace-option",
            "table_name",
            "--json",
            "--no-progress",
            *TINY,
        )
        assert done.code == 0, done.err
        assert done.err == ""
        _check_json(done.out, "sqlite3")
        assert not path.exists()

    def test_without_namespace_a_missing_store_is_not_left_behind(
        self, cli: Cli, tmp_path: Path
    ) -> None:
        path = tmp_path / "missing.db"
        done = cli("bench", f"sqlite:///{path}", "--no-progress", *TINY)
        assert done.code == 0, done.err
        assert list(tmp_path.iterdir()) == []

    def test_a_file_that_was_there_stays_with_what_it_held(
        self, cli: Cli, tmp_path: Path
    ) -> None:
        from chatledger_sql import SqlChatMemoryRepository

        path = tmp_path / "used.db"
        url = f"sqlite:///{path}"
        with SqlChatMemoryRepository.from_url(url) as repository:
            repository.save_all("kept", [Message.user("hello")])
        before = _tables(path)
        done = cli("bench", url, "--namespace-option", "table_name", *TINY)
        assert done.code == 0, done.err
        assert _tables(path) == before
        assert cli("ls", url).out == "kept\n"

    def test_without_namespace_an_empty_store_stays_as_it_was(
        self, cli: Cli, tmp_path: Path
    ) -> None:
        from chatledger_sql import SqlChatMemoryRepository

        path = tmp_path / "empty.db"
        url = f"sqlite:///{path}"
        SqlChatMemoryRepository.from_url(url, table_name="mine").close()
        before = _tables(path)
        done = cli("bench", url, "-o", "table_name=mine", "--no-progress", *TINY)
        assert done.code == 0, done.err
        assert _tables(path) == before
        assert cli("ls", url, "-o", "table_name=mine").out == ""

    def test_refuses_a_store_with_data_without_namespace(
        self, cli: Cli, tmp_path: Path
    ) -> None:
        path = tmp_path / "used.db"
        url = f"sqlite:///{path}"
        from chatledger_sql import SqlChatMemoryRepository

        with SqlChatMemoryRepository.from_url(url) as repository:
            repository.save_all("kept", [Message.user("hello")])
        before = _tables(path)
        done = cli("bench", url, *TINY)
        assert done.code == 2
        assert "holds 1 conversations" in done.err
        assert "--namespace-option" in done.err
        assert done.out == ""
        assert _tables(path) == before
        assert cli("ls", url).out == "kept\n"

    def test_a_namespace_option_the_adapter_lacks_is_a_usage_error(
        self, cli: Cli, tmp_path: Path
    ) -> None:
        path = tmp_path / "none.db"
        done = cli("bench", f"sqlite:///{path}", "--namespace-option", "key_prefix")
        assert done.code == 2
        assert "no option 'key_prefix'" in done.err
        assert not path.exists()

    def test_interrupted_run_removes_its_tables(self, tmp_path: Path) -> None:
        path = tmp_path / "interrupted.db"
        script = Path(sys.executable).parent / "chatledger"
        process = subprocess.Popen(
            [
                str(script),
                "bench",
                f"sqlite:///{path}",
                "--namespace-option",
                "table_name",
                "--progress-every",
                "0",
                "--samples",
                "2000",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONIOENCODING": "utf-8"},
            # A parent that ignores SIGINT (a pytest-xdist worker does) passes
            # that on, and Python then raises no KeyboardInterrupt.
            preexec_fn=_default_sigint,
        )
        assert process.stderr is not None
        try:
            line = process.stderr.readline()
            assert line.startswith("benchmarking: "), line
            assert any(t.startswith("clfloor_") for t in _tables(path))
            process.send_signal(signal.SIGINT)
            _, err = process.communicate(timeout=120)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        assert process.returncode == 130, err
        assert "interrupted" in err
        assert not path.exists()


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class TestMemory:
    def test_no_floor_still_measures_ours(self, cli: Cli) -> None:
        done = cli("bench", "memory://", "--no-progress", *TINY)
        assert done.code == 0, done.err
        assert "no floor for this backend" in done.err
        assert "(no floor for this backend)" in done.out
        rows = _table_rows(done.out)
        assert len(rows) == 4
        for _, _, ours, floor, factor in rows:
            assert " / " in ours
            assert (floor, factor) == ("-", "-")

    def test_json_without_floor(self, cli: Cli) -> None:
        done = cli("bench", "memory://", "--json", "--no-progress", *TINY)
        assert done.code == 0, done.err
        _check_json(done.out, None)

    @pytest.mark.parametrize(
        ("flag", "value"),
        [("--windows", "20,x"), ("--windows", "20,20"), ("--samples", "0")],
    )
    def test_bad_numbers_are_usage_errors(
        self, cli: Cli, flag: str, value: str
    ) -> None:
        done = cli("bench", "memory://", flag, value)
        assert done.code == 2
        assert flag in done.err


class TestPlot:
    def test_missing_matplotlib_names_the_extra_before_any_io(
        self,
        tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        monkeypatch.setitem(sys.modules, "matplotlib", None)
        path = tmp_path / "never.db"
        png = tmp_path / "figures.png"
        code = main(["bench", f"sqlite:///{path}", "--plot", str(png), *TINY])
        err = capsys.readouterr().err
        assert code == 2
        assert "--plot needs matplotlib: pip install 'chatledger[plot]'" in err
        assert not path.exists()
        assert not png.exists()

    @pytest.mark.skipif(
        not HAVE_MATPLOTLIB,
        reason="matplotlib is not installed: pip install 'chatledger[plot]'",
    )
    def test_writes_a_png(self, cli: Cli, tmp_path: Path) -> None:
        png = tmp_path / "figures.png"
        done = cli("bench", "memory://", "--no-progress", "--plot", str(png), *TINY)
        assert done.code == 0, done.err
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"plot written to {png}" in done.err


@pytest.mark.skipif(not HAVE_SQL, reason=NO_SQL)
def test_postgresql_psycopg_floor_and_no_table_left(cli: Cli) -> None:
    from sqlalchemy import create_engine, inspect

    url = backend_url("postgresql")
    done = cli(
        "bench",
        url,
        "--namespace-option",
        "table_name",
        "--json",
        "--no-progress",
        *TINY,
    )
    assert done.code == 0, done.err
    _check_json(done.out, "psycopg")
    engine = create_engine(url)
    try:
        left = [
            t
            for t in inspect(engine).get_table_names()
            if t.startswith(("clbench_", "clfloor_"))
        ]
    finally:
        engine.dispose()
    assert left == []


def test_redis_floor_and_no_key_left(cli: Cli) -> None:
    if not HAVE_REDIS:
        pytest.skip(
            "chatledger-redis is not installed (pip install -e ./packages/redis)"
        )
    import redis

    url = backend_url("redis")
    done = cli(
        "bench",
        url,
        "--namespace-option",
        "key_prefix",
        "--json",
        "--no-progress",
        *TINY,
    )
    assert done.code == 0, done.err
    _check_json(done.out, "redis-py")
    client = redis.Redis.from_url(url)
    try:
        assert list(client.scan_iter(match="clbench_*", count=1000)) == []
    finally:
        client.close()


def test_redis_cluster_floor_and_no_key_left(cli: Cli) -> None:
    url = os.environ.get("CHATLEDGER_TEST_REDIS_CLUSTER_URL")
    if not HAVE_REDIS or not url:
        pytest.skip("set CHATLEDGER_TEST_REDIS_CLUSTER_URL to a Redis Cluster node")
    from redis.cluster import RedisCluster

    done = cli(
        "bench",
        url,
        "-o",
        "cluster=true",
        "--namespace-option",
        "key_prefix",
        "--json",
        "--no-progress",
        *TINY,
    )
    assert done.code == 0, done.err
    _check_json(done.out, "redis-py")
    client = RedisCluster.from_url(url)
    try:
        assert list(client.scan_iter(match="clbench_*", count=1000)) == []
    finally:
        client.close()


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("sqlite:///chat.db", Path("chat.db")),
        ("sqlite+aiosqlite:///data/chat.db?timeout=5", Path("data/chat.db")),
        ("sqlite:////var/a%20b.db", Path("/var/a b.db")),
        ("duckdb:///chat.duckdb", Path("chat.duckdb")),
        ("sqlite://", None),
        ("sqlite:///:memory:", None),
        ("sqlite:///shared?mode=memory&cache=shared", None),
        ("sqlite:///file:chat.db?uri=true", None),
        ("duckdb:///:memory:", None),
        ("redis://127.0.0.1:6379/0", None),
        ("memory://", None),
    ],
)
def test_the_database_file_a_url_names(url: str, path: Path | None) -> None:
    assert local_database_file(url) == path
