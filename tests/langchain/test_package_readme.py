"""The package README's examples run, in order, in one folder, warning nothing.

Each run is a fresh interpreter (LangChain warns once per process), with the
LangChain installed here; a deprecation warning of any kind fails the test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain.agents")
pytest.importorskip("chatledger_sql")

from tests.docs.examples import ROOT

README = ROOT / "packages" / "langchain" / "README.md"


def _run(folder: Path, *args: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "tests.langchain.readme_run", *args],
        capture_output=True,
        text=True,
        cwd=folder,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return found


def test_the_examples_run_and_print_what_they_say(tmp_path: Path) -> None:
    found = _run(tmp_path, str(README))
    assert found["error"] is None, found["error"]
    assert found["stdout"].splitlines() == [
        "You asked about Rome.",
        "['user', 'assistant', 'tool', 'assistant', 'user', 'assistant']",
        "['Remember: blue.', 'Noted.']",
        "True",
        "True",
    ]
    deprecations = [w for w in found["warnings"] if w["deprecation"]]
    assert deprecations == []


def test_a_deprecation_would_be_seen(tmp_path: Path) -> None:
    # What the test above guards against: LangChain's own warning, caught.
    code = (
        "from langchain_core.runnables import RunnableLambda\n"
        "from langchain_core.runnables.history import RunnableWithMessageHistory\n"
        "RunnableWithMessageHistory(RunnableLambda(lambda x: x), lambda s: None)\n"
    )
    found = _run(tmp_path, "--code", code)
    assert found["error"] is None, found["error"]
    assert [w["category"] for w in found["warnings"] if w["deprecation"]] == [
        "LangChainDeprecationWarning"
    ]
