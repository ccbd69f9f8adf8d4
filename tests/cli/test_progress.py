"""Long commands tell how far they are on stderr, terminal or not."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from chatledger.progress import Progress
from tests.cli.conftest import Cli, file_url
from tests.cli.test_cli import _jsonl, _sample

LINE = re.compile(r"^(\w+): (\d+)/(\d+) (\w+) \((\d+\.\d|-) ?/s\)$")


def _lines(err: str, verb: str) -> list[tuple[int, int, str]]:
    found = []
    for line in err.splitlines():
        match = LINE.match(line)
        assert match is not None, line
        assert match.group(1) == verb
        found.append((int(match.group(2)), int(match.group(3)), match.group(4)))
    return found


def _store(cli: Cli, tmp_path: Path, name: str = "source") -> str:
    url = file_url("testfile", tmp_path / name)
    assert cli("import", url, "-", "--no-progress", stdin=_jsonl(_sample())).code == 0
    return url


def test_copy_writes_lines_when_stderr_is_not_a_terminal(
    cli: Cli, tmp_path: Path
) -> None:
    source = _store(cli, tmp_path)
    target = file_url("testfile", tmp_path / "target")
    done = cli("copy", source, target, "--progress-every", "0")
    assert done.code == 0, done.err
    lines = _lines(done.err, "copying")
    assert lines == [(1, 2, "conversations"), (2, 2, "conversations")]


def test_import_and_export_write_lines(cli: Cli, tmp_path: Path) -> None:
    url = file_url("testfile", tmp_path / "store")
    imported = cli("import", url, "-", "--progress-every", "0", stdin=_jsonl(_sample()))
    assert imported.code == 0, imported.err
    assert _lines(imported.err, "importing")[-1] == (2, 2, "conversations")
    exported = cli("export", url, "--progress-every", "0", "--output", "out.jsonl")
    assert exported.code == 0, exported.err
    assert _lines(exported.err, "exporting") == [
        (1, 2, "conversations"),
        (2, 2, "conversations"),
    ]


def test_conformance_counts_tests(cli: Cli) -> None:
    done = cli("conformance", "memory://", "--progress-every", "0", "--", "-k", "order")
    assert done.code == 0, done.out + done.err
    lines = _lines(done.err, "testing")
    total = lines[0][1]
    assert [done for done, _, _ in lines] == list(range(1, total + 1))
    assert {unit for _, _, unit in lines} == {"tests"}


@pytest.mark.parametrize("command", ["copy", "import", "export"])
def test_no_progress_writes_nothing(cli: Cli, tmp_path: Path, command: str) -> None:
    source = _store(cli, tmp_path)
    target = file_url("testfile", tmp_path / "target")
    args = {
        "copy": ["copy", source, target],
        "import": ["import", target, "-"],
        "export": ["export", source],
    }[command]
    done = cli(*args, "--no-progress", "--progress-every", "0", stdin=_jsonl(_sample()))
    assert done.code == 0, done.err
    assert done.err == ""


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_lines_come_every_few_seconds_with_the_rate() -> None:
    clock, log = _Clock(), io.StringIO()
    progress = Progress("copying", 2000, "conversations", stream=log, clock=clock)
    for done, seconds in [(100, 1.0), (200, 4.9), (400, 5.0), (500, 9.0), (900, 10.1)]:
        clock.now = 100.0 + seconds
        progress.update(done)
    progress.close()
    assert log.getvalue().splitlines() == [
        "copying: 400/2000 conversations (80.0/s)",
        "copying: 900/2000 conversations (89.1/s)",
    ]
