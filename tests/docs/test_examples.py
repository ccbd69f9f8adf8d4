"""Every example in the READMEs and the public modules' docstrings runs.

The examples run in one separate process (see :mod:`tests.docs.examples`), so
what they register or leave behind does not reach the other tests.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.docs.examples import ROOT, Example, all_examples

EXAMPLES = all_examples()


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


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda example: example.name)
def test_example_runs(example: Example, results: dict[str, str | None]) -> None:
    if example.skip is not None:
        pytest.skip(example.skip)
    failure = results[example.name]
    if failure is not None:
        pytest.fail(f"the example at {example.name} fails:\n{failure}", pytrace=False)
