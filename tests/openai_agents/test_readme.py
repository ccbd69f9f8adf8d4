"""The README's "OpenAI Agents SDK" example runs as written."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.readme import python_examples

pytest.importorskip("agents")
pytest.importorskip("chatledger_sql")
pytest.importorskip("aiosqlite")


def test_openai_agents_example_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    [example] = python_examples("OpenAI Agents SDK")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    exec(compile(example, "README.md (OpenAI Agents SDK)", "exec"), {})
    assert capsys.readouterr().out.strip() == "Paris."
    from chatledger import connect_async
    from chatledger_openai_agents import ChatLedgerSession

    async def stored() -> list[Any]:
        repository: Any = connect_async("sqlite+aiosqlite:///agents.db")
        try:
            return await ChatLedgerSession("user-42", repository).get_items()
        finally:
            await repository.aclose()

    items = asyncio.run(stored())
    assert items[0] == {"role": "user", "content": "Capital of France?"}
    assert [item.get("role") for item in items] == ["user", "assistant"]
