"""The README's "One turn" examples, sync and async, run as written."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.readme import python_examples

pytest.importorskip("chatledger_sql")
pytest.importorskip("aiosqlite")


def test_one_turn_examples_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    sync_example, async_example = python_examples("One turn")
    monkeypatch.chdir(tmp_path)
    exec(compile(sync_example, "README.md (One turn)", "exec"), {})
    assert capsys.readouterr().out.strip() == (
        "['You are terse.', 'Hi', 'Hello! How can I help?']"
    )
    # On its own, as a reader copies it: the timed-out turn keeps its prompt.
    exec(compile(async_example, "README.md (One turn, async)", "exec"), {})
    assert capsys.readouterr().out.strip() == ("['Hi', 'Hello again!', 'Still there?']")
