"""The README examples of the Agents SDK session run as written."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
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


PACKAGE_README = (
    Path(__file__).resolve().parents[2] / "packages/openai-agents/README.md"
)

#: Runs each README's blocks in one namespace, in order, every README in the
#: working folder, with every warning of a deprecation shown.
_RUNNER = """
import json, sys
for blocks in json.loads(sys.argv[1]):
    namespace = {"__name__": "__main__"}
    for block in blocks:
        exec(compile(block, "README", "exec"), namespace)
"""


def test_every_example_runs_in_one_folder_without_a_warning(tmp_path: Path) -> None:
    text = PACKAGE_README.read_text(encoding="utf-8")
    package = re.findall(r"^```python\n(.*?)^```", text, re.M | re.S)
    assert len(package) >= 2
    readmes = [python_examples("OpenAI Agents SDK"), package]
    environment = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    kinds = ("DeprecationWarning", "PendingDeprecationWarning", "FutureWarning")
    shown = [f"-Walways::{kind}" for kind in kinds]
    done = subprocess.run(
        [sys.executable, *shown, "-c", _RUNNER, json.dumps(readmes)],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert done.stdout.splitlines() == [
        "Paris.",  # the main README's example
        "Paris.",
        "You asked about France.",
        "4",
        "[{'role': 'assistant', 'content': 'Hello!'}]",
    ]
