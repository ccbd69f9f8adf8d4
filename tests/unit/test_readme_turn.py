"""The README's "One turn" example runs as written."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.readme import python_examples

pytest.importorskip("chatledger_sql")


def test_one_turn_example_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    [example] = python_examples("One turn")
    monkeypatch.chdir(tmp_path)
    exec(compile(example, "README.md (One turn)", "exec"), {})
    assert capsys.readouterr().out.strip() == (
        "['You are terse.', 'Hi', 'Hello! How can I help?']"
    )
