"""The README's "LangChain" example runs as written."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.readme import python_examples

pytest.importorskip("langchain_core")
pytest.importorskip("chatledger_sql")


@pytest.mark.filterwarnings("ignore:RunnableWithMessageHistory is deprecated")
def test_langchain_example_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    [example] = python_examples("LangChain")
    monkeypatch.chdir(tmp_path)
    exec(compile(example, "README.md (LangChain)", "exec"), {})
    assert capsys.readouterr().out.strip() == "Paris."
    from chatledger import connect

    stored = connect("sqlite:///langchain.db").find_by_conversation_id("user-42")
    assert [m.content for m in stored] == ["Capital of France?", "Paris."]
