"""Every example in the READMEs, the site's pages and the docstrings runs.

The examples run in one separate process (see :mod:`tests.docs.examples`), so
what they register or leave behind does not reach the other tests. A page's
example that needs a server runs in a process of its own, with the server
tests (``long``: ``nox -s servers`` runs it, with its server's URL set).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from tests.docs.examples import (
    ROOT,
    SERVERS,
    Example,
    all_examples,
    page_examples,
    readme_examples,
)

EXAMPLES = all_examples()
OFFLINE = [example for example in EXAMPLES if example.server is None]
ON_SERVERS = [example for example in EXAMPLES if example.server is not None]
#: The file of a SQLite or DuckDB URL (``sqlite+aiosqlite:///chat.db``).
_FILE_URL = re.compile(r"(?:sqlite|duckdb)(?:\+\w+)?:///([^\"'?]+)")


@pytest.fixture(scope="module")
def results() -> dict[str, str | None]:
    """Run every example that can run here, once; map each to its failure."""
    names = [example.name for example in OFFLINE if example.skip is None]
    return _run(names)


def _run(names: list[str]) -> dict[str, str | None]:
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
    assert any(name.startswith("docs/concepts/") for name in names)
    assert all(example.code.strip() for example in EXAMPLES)


def test_each_page_example_that_needs_a_server_says_where() -> None:
    # It stands for the local server of the development setup, whose URL the
    # test replaces by the one of the server to run it against.
    assert {example.server for example in ON_SERVERS} <= set(SERVERS)
    for example in ON_SERVERS:
        assert example.server is not None
        assert SERVERS[example.server][1] in example.code, example.name


def test_each_readme_example_has_a_file_of_its_own() -> None:
    # A reader tries the examples one after another in one folder: two that
    # share a database file would read each other's conversations.
    opened: dict[str, list[str]] = {}
    for example in readme_examples() + page_examples():
        if example.skip is None:
            for name in set(_FILE_URL.findall(example.code)):
                opened.setdefault(f"{example.folder}/{name}", []).append(example.name)
    assert {name: where for name, where in opened.items() if len(where) > 1} == {}


@pytest.mark.parametrize("example", OFFLINE, ids=lambda example: example.name)
def test_example_runs(example: Example, results: dict[str, str | None]) -> None:
    if example.skip is not None:
        pytest.skip(example.skip)
    failure = results[example.name]
    if failure is not None:
        pytest.fail(f"the example at {example.name} fails:\n{failure}", pytrace=False)


@pytest.mark.long
@pytest.mark.parametrize(
    "example",
    ON_SERVERS,
    # The server in the id puts it with that server's tests (tests/conftest.py).
    ids=lambda example: f"{example.name}-{example.server}",
)
def test_example_runs_on_its_server(example: Example) -> None:
    if example.skip is not None:
        pytest.skip(example.skip)
    failure = _run([example.name])[example.name]
    if failure is not None:
        pytest.fail(f"the example at {example.name} fails:\n{failure}", pytrace=False)
