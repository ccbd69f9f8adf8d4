"""Every example in the READMEs and the public modules' docstrings runs.

The examples run in one separate process (see :mod:`tests.docs.examples`), so
what they register or leave behind does not reach the other tests.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from tests.docs.examples import ROOT, Example, all_examples, readme_examples

EXAMPLES = all_examples()
#: The file of a SQLite or DuckDB URL (``sqlite+aiosqlite:///chat.db``).
_FILE_URL = re.compile(r"(?:sqlite|duckdb)(?:\+\w+)?:///([^\"'?]+)")


@pytest.fixture(scope="module")
def results() -> dict[str, str | None]:
    """Run every example that can run here, once; map each to its failure."""
    names = [example.name for example in EXAMPLES if example.skip is None]
    done = subprocess.run(
        [sys.executable, "-m", "tests.docs.examples", *names],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    found: dict[str, str | None] = json.loads(done.stdout.splitlines()[-1])
    return found


def test_examples_are_found() -> None:
    names = [example.name for example in EXAMPLES]
    assert len(names) == len(set(names))
    assert any(name.startswith("README.md:") for name in names)
    assert any(name.startswith("core/src/chatledger/repository.py:") for name in names)
    assert all(example.code.strip() for example in EXAMPLES)


def test_each_readme_example_has_a_file_of_its_own() -> None:
    # A reader tries the examples one after another in one folder: two that
    # share a database file would read each other's conversations.
    opened: dict[str, list[str]] = {}
    for example in readme_examples():
        if example.skip is None:
            for name in set(_FILE_URL.findall(example.code)):
                opened.setdefault(name, []).append(example.name)
    assert {name: where for name, where in opened.items() if len(where) > 1} == {}


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda example: example.name)
def test_example_runs(example: Example, results: dict[str, str | None]) -> None:
    if example.skip is not None:
        pytest.skip(example.skip)
    failure = results[example.name]
    if failure is not None:
        pytest.fail(f"the example at {example.name} fails:\n{failure}", pytrace=False)
