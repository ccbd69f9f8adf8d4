"""The benchmark's long-log read: the two logs, their load, the options, the line.

Nothing here times anything: the figures of ``python -m bench`` are the
benchmark's business. These tests check that a run at a small scale prints
the target line whole, that the two logs end alike, that a load halves a
batch a real server refuses, and that the options are checked before any I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.cli import _parse, _plan, main
from bench.floors import unique_name
from bench.log_size import LOAD_BATCH, SHORT_LOG, bulk_load, long_log
from bench.workload import history
from chatledger import InMemoryChatMemoryRepository, MessageWindowChatMemory
from tests.backends import backend_url

#: A target line of the long-log read, as ``Target.line`` prints it.
TARGET_LINE = re.compile(
    r"^  \[(?:MET   |MISSED)\] (?P<backend>.{12}) read 1k-log/100-log at W=20"
    r" +(?P<value>\d+\.\d\d)  \(target <= 1\.1\)$",
    re.M,
)
#: The line under a backend's table.
SUMMARY_LINE = re.compile(
    r"^   read 1k-log/100-log at W=20: \d+\.\d\d \(p50 [\d.]+ / [\d.]+ us, "
    r"client CPU [\d.]+ / [\d.]+ us, 100 reads each\); "
    r"1,000 messages loaded in \d+\.\d s \(appends of 1,000\), \d+\.\d s in all$",
    re.M,
)


def test_a_small_run_prints_the_target_line_for_sqlite_and_memory(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    pytest.importorskip("chatledger_sql")
    figures = tmp_path / "figures.json"
    argv = ["--backends", "sqlite,memory", "--quick", "--no-async"]
    argv += ["--log-size", "1000", "--json", str(figures)]

    assert main(argv) == 0

    out = capsys.readouterr().out
    assert "ERROR" not in out
    lines = {m.group("backend").strip(): m for m in TARGET_LINE.finditer(out)}
    assert sorted(lines) == ["SQLite file", "in-memory"]
    assert len(SUMMARY_LINE.findall(out)) == 2
    saved = json.loads(figures.read_text())
    for name, label in (("sqlite", "SQLite file"), ("memory", "in-memory")):
        found = saved["backends"][name]["log_size"]
        assert (found["messages"], found["batch"]) == (1000, 1000)
        assert found["long_us"]["n"] == found["short_us"]["n"] == 100
        assert f"{found['ratio']:.2f}" == lines[label].group("value")
        target = next(
            t
            for t in saved["targets"]
            if t["what"].startswith("read 1k-log") and t["backend"] == label
        )
        assert target["limit"] == 1.1


def test_the_long_log_ends_as_the_short_one_with_its_own_ids() -> None:
    long, short = long_log(1000), history(SHORT_LOG)

    assert len(long) == 1000
    assert len({m.id for m in long}) == 1000
    assert long[0].role.value == "system"
    assert [m.role.value for m in long[1:]].count("system") == 0
    ends = [(m.role, m.content, m.tool_calls) for m in long[-(SHORT_LOG - 1) :]]
    assert ends == [(m.role, m.content, m.tool_calls) for m in short[1:]]
    assert not {m.id for m in long} & {m.id for m in short}


def test_both_logs_show_the_same_window_once_loaded() -> None:
    repository = InMemoryChatMemoryRepository()

    assert bulk_load(repository, "long", long_log(12_000)) == LOAD_BATCH
    assert bulk_load(repository, "short", history(SHORT_LOG)) == SHORT_LOG

    assert len(repository.find_by_conversation_id("long")) == 12_000
    memory = MessageWindowChatMemory(repository, max_messages=20)
    shown = [[(m.role, m.content) for m in memory.get(c)] for c in ("long", "short")]
    assert shown[0] == shown[1]
    assert len(shown[0]) > 10


@pytest.fixture
def cassandra_url(required: set[str]) -> str:
    return backend_url("cassandra", required)


@pytest.fixture
def small_writes(cassandra_url: str) -> Iterator[object]:
    """Our Cassandra repository refusing any write over 200 kB."""
    from chatledger_cassandra import CassandraChatMemoryRepository

    repository = CassandraChatMemoryRepository.from_url(
        cassandra_url,
        table=unique_name(),
        create_keyspace=True,
        max_write_bytes=200_000,
    )
    try:
        yield repository
    finally:
        repository.drop_schema()
        repository.close()


def test_bulk_load_halves_the_batches_cassandra_refuses(small_writes: object) -> None:
    from chatledger_cassandra import CassandraChatMemoryRepository

    assert isinstance(small_writes, CassandraChatMemoryRepository)
    messages = long_log(600)

    batch = bulk_load(small_writes, "c1", messages, batch=600)

    assert batch < 600
    assert 600 // batch in (2, 4, 8, 16)
    stored = small_writes.find_by_conversation_id("c1")
    assert [m.id for m in stored] == [m.id for m in messages]


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([], 100_000),
        (["--quick"], 10_000),
        (["--log-size", "2500"], 2500),
        (["--quick", "--log-size", "101"], 101),
        (["--no-long-log"], None),
    ],
)
def test_the_options_choose_the_log_size(argv: list[str], expected: int | None) -> None:
    assert _plan(_parse(argv)).log_size == expected


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--log-size", "100"], "more than the short log's 100 messages, not 100"),
        (["--log-size", "1e5"], "not a whole number: '1e5'"),
        (["--log-size", "1000", "--no-long-log"], "not allowed with argument"),
    ],
)
def test_a_bad_log_size_is_refused_before_any_io(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--backends", "postgresql"])
    assert exit_info.value.code == 2
    assert said in capsys.readouterr().err
