"""The package README's examples run, one after another in one folder, warning-free.

Each block runs as a reader runs it, in a Python process of its own, with
every deprecation warning shown (``-W always``): the test fails on any
output to stderr, so on any deprecation the installed LlamaIndex reports
about what an example calls.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("llama_index.core")
pytest.importorskip("chatledger_sql")
pytest.importorskip("aiosqlite")

README = Path(__file__).resolve().parents[2] / "packages" / "llama-index" / "README.md"

#: What each block prints, in order.
PRINTED = [
    "4 6\nsystem True",
    "['user', 'assistant', 'user', 'assistant']",
    "Hi",
]


def blocks() -> list[str]:
    """The README's ``python`` blocks, in order."""
    text = README.read_text(encoding="utf-8")
    return re.findall(r"^```python\n(.*?)^```", text, re.M | re.S)


def test_every_example_runs_in_one_folder_without_warnings(tmp_path: Path) -> None:
    found = blocks()
    assert len(found) == len(PRINTED)
    for number, (code, printed) in enumerate(zip(found, PRINTED, strict=True)):
        done = subprocess.run(
            [
                sys.executable,
                "-W",
                "always::DeprecationWarning",
                "-W",
                "always::PendingDeprecationWarning",
                "-c",
                code,
            ],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=120,
            check=False,
        )
        where = f"README block {number + 1}"
        assert (done.returncode, done.stderr) == (0, ""), where
        assert done.stdout.strip() == printed, where
    # The examples' stores are where they say, each in a file of its own.
    assert sorted(p.name for p in tmp_path.glob("*.db")) == [
        "llama_buffer.db",
        "llama_engine.db",
        "llama_memory.db",
    ]
