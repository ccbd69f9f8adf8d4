"""The ``chatledger`` command, run as the installed console script."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import logging
import os
import pty
import re
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from chatledger import Message, ToolCall, ToolResponse, codec
from chatledger.convert import to_openai, to_openai_responses
from chatledger.testing import every_kind
from tests.cli.conftest import HAVE_SQL, NO_SQL, Cli, file_url
from tests.cli.test_ls_records import sql_keeps_records

SECRET = "hunter2-secret"


def _stamped(messages: list[Message], start: datetime) -> list[Message]:
    return [
        m.stamped(start + timedelta(milliseconds=i)) for i, m in enumerate(messages)
    ]


def _sample() -> dict[str, list[Message]]:
    start = datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=UTC)
    return {
        "alpha/1 ünïcode": _stamped(every_kind(), start),
        "beta": _stamped(
            [
                Message.user("What is 2+2?"),
                Message.assistant(
                    tool_calls=[ToolCall("c1", "calc", '{"expr": "2+2"}')]
                ),
                Message.tool(
                    [ToolResponse("c1", "calc", "4"), ToolResponse("c2", "calc", "5")]
                ),
                Message.assistant("4"),
            ],
            start + timedelta(hours=1),
        ),
    }


def _jsonl(conversations: dict[str, list[Message]]) -> str:
    return "".join(
        json.dumps(
            {"conversation_id": cid, **codec.to_dict(m)},
            ensure_ascii=False,
            separators=(",", ":"),
        )
        + "\n"
        for cid in sorted(conversations)
        for m in conversations[cid]
    )


def _one_line_error(run_err: str) -> str:
    lines = run_err.strip().splitlines()
    assert lines, "expected an error on stderr"
    assert "Traceback" not in run_err
    return lines[-1]


class TestUsage:
    def test_help_and_version(self, cli: Cli) -> None:
        shown = cli("--help", child=True)
        assert shown.code == 0
        for command in ("demo", "ls", "show", "export", "import", "copy", "rm"):
            assert command in shown.out
        version = cli("--version", child=True)
        assert version.code == 0
        assert version.out.startswith("chatledger ")

    def test_missing_argument_is_a_usage_error(self, cli: Cli) -> None:
        done = cli("ls")
        assert done.code == 2
        assert "usage:" in done.err
        assert "Traceback" not in done.err

    def test_unknown_scheme_is_one_line_without_password(self, cli: Cli) -> None:
        done = cli("ls", f"nosuchdb://admin:{SECRET}@db.example:1/x")
        assert done.code == 2
        line = _one_line_error(done.err)
        assert len(done.err.strip().splitlines()) == 1
        assert "unknown URL scheme 'nosuchdb'" in line
        assert "nosuchdb://admin:***@db.example:1/x" in line
        assert SECRET not in done.err + done.out

    def test_missing_adapter_names_pip_install(self, cli: Cli) -> None:
        candidates = {
            "chatledger_cassandra": ("cassandra", "pip install chatledger-cassandra"),
            "chatledger_mongodb": ("mongodb+srv", "pip install chatledger-mongodb"),
            "chatledger_redis": ("rediss", "pip install chatledger-redis"),
            "chatledger_neo4j": ("neo4j+s", "pip install chatledger-neo4j"),
            "chatledger_sql": ("postgresql+psycopg", "pip install 'chatledger-sql"),
        }
        missing = [
            v for k, v in candidates.items() if importlib.util.find_spec(k) is None
        ]
        if not missing:
            pytest.skip("every adapter is installed here (tests/unit covers it)")
        scheme, hint = missing[0]
        done = cli("show", f"{scheme}://app:{SECRET}@db.example/chat", "c1")
        assert done.code == 2
        line = _one_line_error(done.err)
        assert hint in line
        assert f"{scheme}://app:***@db.example/chat" in line
        assert SECRET not in done.err + done.out

    @pytest.mark.skipif(not HAVE_SQL, reason=NO_SQL)
    @pytest.mark.skipif(
        importlib.util.find_spec("oracledb") is not None,
        reason="the Oracle driver is installed here",
    )
    def test_missing_driver_names_the_extra(self, cli: Cli) -> None:
        done = cli("ls", f"oracle+oracledb://app:{SECRET}@db.example:1521/?x=1")
        assert done.code == 2
        line = _one_line_error(done.err)
        assert "No module named 'oracledb'" in line
        assert line.endswith("install it with: pip install 'chatledger-sql[oracle]'")
        assert SECRET not in done.err + done.out

    def test_debug_shows_the_traceback_still_redacted(self, cli: Cli) -> None:
        done = cli("--debug", "ls", f"nosuchdb://admin:{SECRET}@h/x")
        assert done.code == 2
        assert "Traceback" in done.err
        assert "UnknownBackendError" in done.err
        assert SECRET not in done.err + done.out

    def test_debug_error_stays_the_last_line(self) -> None:
        # A driver's pool monitor logs from its own thread, unaware that the
        # command has failed: whatever it logs once the error is shown must
        # not follow the error line.
        from chatledger.cli import main

        root = logging.getLogger()
        handlers, level = list(root.handlers), root.level
        shown = io.StringIO()
        try:
            with contextlib.redirect_stderr(shown):
                code = main(["--debug", "ls", f"nosuchdb://admin:{SECRET}@h/x"])
                logging.getLogger("driver.monitor").debug("heartbeat failed")
        finally:
            root.handlers[:] = handlers
            root.setLevel(level)
        assert code == 2
        last = shown.getvalue().strip().splitlines()[-1]
        assert last.startswith("chatledger: error: "), last

    def test_driver_error_is_one_line_naming_the_store(
        self, cli: Cli, tmp_path: Path
    ) -> None:
        (tmp_path / "broken.json").write_text("{not json", encoding="utf-8")
        url = file_url("testfile", tmp_path / "broken")
        done = cli("ls", url)
        assert done.code == 1
        assert len(done.err.strip().splitlines()) == 1
        line = _one_line_error(done.err)
        assert line.startswith("chatledger: error: JSONDecodeError: ")
        assert line.endswith(f"({url})")

    def test_python_dash_m_runs_the_same_command(self, tmp_path: Path) -> None:
        done = subprocess.run(
            [sys.executable, "-m", "chatledger", "--version"],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0
        assert done.stdout.startswith("chatledger ")

    def test_bad_window_size_is_a_usage_error(self, cli: Cli) -> None:
        done = cli("demo", "--url", "memory://", "--max-messages", "0")
        assert done.code == 2
        assert "--max-messages" in _one_line_error(done.err)


def test_ls_of_an_empty_store_says_so_on_stderr(cli: Cli) -> None:
    done = cli("ls", "memory://")
    assert (done.code, done.out) == (0, "")
    assert done.err == "no conversation is stored in memory://\n"


class TestDemo:
    def test_demo_in_memory_shows_the_window_and_what_left_it(self, cli: Cli) -> None:
        done = cli("demo", "--url", "memory://", "--max-messages", "6")
        assert done.code == 0, done.err
        assert done.err == ""
        assert "the model is sent" in done.out
        assert "-> get_weather(" in done.out
        assert "<- get_weather #call_rome" in done.out
        assert "left the window" in done.out
        # The log keeps what left the window.
        stored = re.search(
            r"stored now: (\d+) messages .*the window shows (\d+)", done.out
        )
        assert stored is not None
        assert int(stored.group(1)) > int(stored.group(2))
        # The window always starts on a user turn after the system prompt.
        for block in done.out.split("the model is sent")[1:]:
            lines = block.splitlines()[1:3]
            assert lines[0].strip().startswith("system")
            assert lines[1].strip().startswith("user")

    def test_demo_persists_between_runs(
        self, cli: Cli, store_kind: str, tmp_path: Path
    ) -> None:
        url = file_url(store_kind, tmp_path / "demo")
        first = cli("demo", "--url", url)
        assert first.code == 0, first.err
        assert "conversations in" in first.out
        second = cli("demo", "--url", url)
        assert second.code == 0, second.err
        listed = cli("ls", url)
        ids = listed.out.split()
        assert len(ids) == 2
        assert all(i.startswith("demo-") for i in ids)
        assert f"({len(ids)}):" in second.out
        shown = cli("show", url, ids[0])
        assert shown.code == 0
        assert "You are a concise travel assistant." in shown.out

    @pytest.mark.skipif(not HAVE_SQL, reason=NO_SQL)
    def test_demo_default_url_is_a_sqlite_file(self, cli: Cli, tmp_path: Path) -> None:
        done = cli("demo")
        assert done.code == 0, done.err
        assert (tmp_path / "chatledger-demo.db").exists()


class TestDataCommands:
    def test_import_export_round_trip_is_exact(
        self, cli: Cli, store_kind: str, tmp_path: Path
    ) -> None:
        url = file_url(store_kind, tmp_path / "store")
        conversations = _sample()
        source = tmp_path / "in.jsonl"
        source.write_text(_jsonl(conversations), encoding="utf-8")
        imported = cli("import", url, str(source))
        assert imported.code == 0, imported.err
        total = sum(map(len, conversations.values()))
        assert f"imported {total} messages in 2 conversations" in imported.out
        exported = cli("export", url)
        assert exported.code == 0, exported.err
        assert exported.out == source.read_text(encoding="utf-8")
        # Importing again replaces, it does not duplicate.
        assert cli("import", url, str(source)).code == 0
        assert cli("export", url).out == exported.out
        assert sorted(cli("ls", url).out.splitlines()) == sorted(conversations)

    def test_export_openai_and_named_ids(
        self, cli: Cli, store_kind: str, tmp_path: Path
    ) -> None:
        url = file_url(store_kind, tmp_path / "store")
        conversations = _sample()
        assert cli("import", url, "-", stdin=_jsonl(conversations)).code == 0
        done = cli("export", url, "beta", "--format", "openai")
        assert done.code == 0, done.err
        [line] = done.out.splitlines()
        assert json.loads(line) == {
            "conversation_id": "beta",
            "messages": to_openai(conversations["beta"]),
        }
        roles = [m["role"] for m in json.loads(line)["messages"]]
        assert roles == ["user", "assistant", "tool", "tool", "assistant"]
        anthropic = cli(
            "export", url, "beta", "--format", "anthropic", "--output", "a.jsonl"
        )
        assert anthropic.code == 0, anthropic.err
        written = json.loads((tmp_path / "a.jsonl").read_text(encoding="utf-8"))
        assert [m["role"] for m in written["messages"]] == [
            "user",
            "assistant",
            "user",
            "assistant",
        ]

    def test_export_openai_responses(
        self, cli: Cli, store_kind: str, tmp_path: Path
    ) -> None:
        url = file_url(store_kind, tmp_path / "store")
        conversations = _sample()
        conversations["named"] = [
            Message.user("hi", metadata={"openai": {"name": "bob"}})
        ]
        assert cli("import", url, "-", stdin=_jsonl(conversations)).code == 0
        done = cli("export", url, "beta", "--format", "openai-responses")
        assert done.code == 0, done.err
        [line] = done.out.splitlines()
        assert json.loads(line) == {
            "conversation_id": "beta",
            "input": to_openai_responses(conversations["beta"]),
        }
        kinds = [i.get("type", i.get("role")) for i in json.loads(line)["input"]]
        assert kinds == [
            "user",
            "function_call",
            "function_call_output",
            "function_call_output",
            "assistant",
        ]
        # The Responses shape has no participant name: refused, not dropped.
        refused = cli("export", url, "named", "--format", "openai-responses")
        assert refused.code == 1
        assert (
            "conversation 'named': messages[0].metadata['openai']['name']: the "
            "Responses API has no participant name" in _one_line_error(refused.err)
        )

    def test_show_ls_long_and_rm(
        self, cli: Cli, store_kind: str, tmp_path: Path
    ) -> None:
        url = file_url(store_kind, tmp_path / "store")
        assert cli("import", url, "-", stdin=_jsonl(_sample())).code == 0
        shown = cli("show", url, "beta")
        assert shown.code == 0
        assert "-> calc(" in shown.out
        assert "2026-01-02T04:04:05.123+00:00" in shown.out
        records = cli("ls", url, "--long")
        if store_kind == "sqlite" and sql_keeps_records():
            columns = [line.split("\t") for line in records.out.splitlines()]
            assert ["beta", "4"] in [[cells[0], cells[2]] for cells in columns]
        else:
            assert records.code == 2
            assert "keeps none" in records.err
        times = cli("ls", url, "--times").out.splitlines()
        assert "beta\t4\t2026-01-02T04:04:05+00:00\t2026-01-02T04:04:05+00:00" in times
        missing = cli("show", url, "nobody")
        assert missing.code == 1
        assert "no conversation 'nobody'" in _one_line_error(missing.err)
        refused = cli("rm", url, "beta", "nobody")
        assert refused.code == 1
        assert "nothing removed" in refused.err
        assert "beta" in cli("ls", url).out.splitlines()
        removed = cli("rm", "--force", url, "beta", "nobody")
        assert removed.code == 0
        assert removed.out == "removed beta\n"
        assert cli("ls", url).out.splitlines() == ["alpha/1 ünïcode"]

    def test_show_prints_the_newest_messages_or_every_one(
        self, cli: Cli, store_kind: str, tmp_path: Path
    ) -> None:
        """The newest ``--last`` (50) by default, numbered by their place;
        ``--all`` every message in order, read a page at a time from a log."""
        url = file_url(store_kind, tmp_path / "store")
        long = [Message.user(f"m{n}") for n in range(1, 621)]
        assert cli("import", url, "-", stdin=_jsonl({"long": long})).code == 0
        newest = cli("show", url, "long", "--last", "5")
        assert newest.code == 0, newest.err
        lines = newest.out.splitlines()
        assert [line.split()[0] for line in lines] == [
            "616",
            "617",
            "618",
            "619",
            "620",
        ]
        assert lines[-1].endswith("m620")
        assert "showing the newest 5 of 620 messages; --all" in newest.err
        default = cli("show", url, "long")
        assert len(default.out.splitlines()) == 50
        every = cli("show", url, "long", "--all")
        assert every.code == 0, every.err
        numbered = [line.split() for line in every.out.splitlines()]
        assert [int(parts[0]) for parts in numbered] == list(range(1, 621))
        assert [parts[-1] for parts in numbered] == [f"m{n}" for n in range(1, 621)]
        assert every.err == ""
        for wrong in (["--last", "0"], ["--all", "--last", "3"]):
            assert cli("show", url, "long", *wrong).code == 2
        assert cli("show", url, "nobody", "--all").code == 1

    def test_import_rejects_a_bad_file_and_writes_nothing(
        self, cli: Cli, store_kind: str, tmp_path: Path
    ) -> None:
        url = file_url(store_kind, tmp_path / "store")
        good = _jsonl(_sample())
        done = cli("import", url, "-", stdin=good + "\n{not json}\n")
        assert done.code == 1
        bad_line = len(good.splitlines()) + 2
        assert f"<stdin>:{bad_line}: not JSON" in _one_line_error(done.err)
        assert cli("ls", url).out == ""
        missing = cli("import", url, str(tmp_path / "absent.jsonl"))
        assert missing.code == 2
        assert "absent.jsonl" in _one_line_error(missing.err)

    def test_copy_is_exact_and_idempotent(
        self, cli: Cli, store_kind: str, tmp_path: Path
    ) -> None:
        source = file_url(store_kind, tmp_path / "source")
        target = file_url("testfile", tmp_path / "target")
        conversations = _sample()
        total = sum(map(len, conversations.values()))
        assert cli("import", source, "-", stdin=_jsonl(conversations)).code == 0
        for _ in range(2):
            copied = cli("copy", source, target, "--no-progress")
            assert copied.code == 0, copied.err
            assert f"copied 2 conversations ({total} messages)" in copied.out
            assert copied.err == ""
            assert cli("export", target).out == cli("export", source).out

    def test_copy_draws_progress_on_a_terminal(
        self, chatledger_script: str, plugin_folder: Path, tmp_path: Path, cli: Cli
    ) -> None:
        source = file_url("testfile", tmp_path / "source")
        target = file_url("testfile", tmp_path / "target")
        assert cli("import", source, "-", stdin=_jsonl(_sample())).code == 0
        controller, terminal = pty.openpty()
        env = dict(os.environ, PYTHONPATH=str(plugin_folder))
        try:
            done = subprocess.run(
                [chatledger_script, "copy", source, target],
                stdout=subprocess.PIPE,
                stderr=terminal,
                env=env,
                timeout=120,
                check=False,
            )
            os.close(terminal)
            drawn = b""
            while True:
                try:
                    chunk = os.read(controller, 4096)
                except OSError:
                    break
                if not chunk:
                    break
                drawn += chunk
        finally:
            os.close(controller)
        assert done.returncode == 0
        assert b"copying [" in drawn
        assert b"2/2" in drawn


class TestConformanceCommand:
    def test_memory_backend_passes(self, cli: Cli) -> None:
        done = cli("conformance", "memory://")
        assert done.code == 0, done.out + done.err
        summary = done.out.strip().splitlines()[-1]
        assert "conformance of memory:// (atomic window append" in summary
        assert " passed" in summary
        assert "failed" not in summary

    def test_async_memory_backend_passes(self, cli: Cli) -> None:
        done = cli("conformance", "--async", "memory://", "--", "-k", "window")
        assert done.code == 0, done.out + done.err
        summary = done.out.strip().splitlines()[-1]
        assert "conformance of memory:// async (atomic window append" in summary
        assert " passed" in summary
        assert "failed" not in summary

    def test_skip_reasons_are_shown_without_asking(self, cli: Cli) -> None:
        done = cli("conformance", "memory://", "--", "-k", "expires_whole")
        assert done.code == 0, done.out + done.err
        assert "SKIPPED [1]" in done.out
        assert "the repository has no TTL" in done.out
        summary = done.out.strip().splitlines()[-1]
        assert "(atomic window append; no TTL): 1 skipped" in summary

    @pytest.mark.skipif(not HAVE_SQL, reason=NO_SQL)
    @pytest.mark.parametrize("twin", [(), ("--async",)], ids=["sync", "async"])
    def test_sqlite_runs_the_ttl_cases(
        self, cli: Cli, tmp_path: Path, twin: tuple[str, ...]
    ) -> None:
        if twin:
            pytest.importorskip("aiosqlite")
        url = f"sqlite:///{tmp_path / 'ttl.db'}"
        done = cli(
            "conformance",
            *twin,
            url,
            "--namespace-option",
            "table_name",
            "--",
            "-k",
            "expires_whole or slides_on_every_write",
        )
        assert done.code == 0, done.out + done.err
        summary = done.out.strip().splitlines()[-1]
        assert summary.endswith("(atomic window append; TTL): 2 passed"), summary

    @pytest.mark.skipif(not HAVE_SQL, reason=NO_SQL)
    @pytest.mark.parametrize("twin", [(), ("--async",)], ids=["sync", "async"])
    def test_runs_the_record_cases_and_clears_records_without_messages(
        self, cli: Cli, tmp_path: Path, twin: tuple[str, ...]
    ) -> None:
        if twin:
            pytest.importorskip("aiosqlite")
        url = f"sqlite:///{tmp_path / 'records.db'}"
        done = cli(
            "conformance",
            *twin,
            url,
            "--",
            "-k",
            "set_on_a_new_id or listing_is_newest_first or owner_filter",
        )
        assert done.code == 0, done.out + done.err
        summary = done.out.strip().splitlines()[-1]
        assert summary.endswith(": 3 passed"), summary
        # The record set_conversation_info made, without messages, is gone too.
        listed = cli("ls", url, "--long")
        assert (listed.code, listed.out) == (0, ""), listed.err

    def test_async_sqlite_runs_in_a_namespace_that_is_dropped(
        self, cli: Cli, tmp_path: Path
    ) -> None:
        pytest.importorskip("aiosqlite")
        path = tmp_path / "async.db"
        url = f"sqlite:///{path}"
        done = cli(
            "conformance",
            "--async",
            url,
            "--namespace-option",
            "table_name",
            "--",
            "-k",
            "round_trip or order",
        )
        assert done.code == 0, done.out + done.err
        assert f"conformance of {url} async (atomic window append" in done.out
        with sqlite3.connect(path) as connection:
            tables = connection.execute("SELECT name FROM sqlite_master").fetchall()
        assert tables == []

    def test_file_backend_passes_and_leaves_it_empty(
        self, cli: Cli, tmp_path: Path
    ) -> None:
        url = file_url("testfile", tmp_path / "conf")
        done = cli("conformance", url, "--", "-k", "round_trip or order or delete")
        assert done.code == 0, done.out + done.err
        assert "(no atomic window append;" in done.out
        assert cli("ls", url).out == ""

    def test_namespace_keeps_the_run_apart_and_is_dropped(
        self, cli: Cli, tmp_path: Path
    ) -> None:
        url = file_url("testfile", tmp_path / "busy")
        assert cli("import", url, "-", stdin=_jsonl(_sample())).code == 0
        before = (tmp_path / "busy.json").read_bytes()
        done = cli(
            "conformance", url, "--namespace-option", "namespace", "--", "-k", "order"
        )
        assert done.code == 0, done.out + done.err
        assert " passed" in done.out
        assert (tmp_path / "busy.json").read_bytes() == before
        assert sorted(p.name for p in tmp_path.glob("busy*")) == ["busy.json"]

    def test_refuses_a_store_that_holds_data(self, cli: Cli, tmp_path: Path) -> None:
        url = file_url("testfile", tmp_path / "busy")
        assert cli("import", url, "-", stdin=_jsonl(_sample())).code == 0
        done = cli("conformance", url)
        assert done.code == 2
        assert "holds 2 conversations" in _one_line_error(done.err)
        assert len(cli("ls", url).out.splitlines()) == 2
