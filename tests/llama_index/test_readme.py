"""The README's "LlamaIndex" example runs as written."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.readme import python_examples

pytest.importorskip("llama_index.core")
pytest.importorskip("chatledger_sql")


def test_llama_index_example_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    [example] = python_examples("LlamaIndex")
    monkeypatch.chdir(tmp_path)
    exec(compile(example, "README.md (LlamaIndex)", "exec"), {})
    assert capsys.readouterr().out.strip() == str(
        ["user", "assistant", "user", "assistant"]
    )
    from chatledger import Role, connect

    stored = connect("sqlite:///llama_index.db").find_by_conversation_id("alice")
    assert [(m.role, m.content) for m in stored][::2] == [
        (Role.USER, "Capital of France?"),
        (Role.USER, "And of Italy?"),
    ]
    # The second answer was made from a prompt that held the first turn.
    assert (stored[1].content or "") in (stored[3].content or "")
