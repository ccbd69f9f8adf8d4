"""LlamaIndex's own chat-store and memory tests, run against chatledger's stores.

LlamaIndex publishes no tests on PyPI (llama-index-core's sdist and wheel
carry none): they are in its repository, run-llama/llama_index, under
``llama-index-core/tests/storage/chat_store`` and
``llama-index-core/tests/memory``. Set ``CHATLEDGER_LLAMA_INDEX_TESTS`` to a
checkout of it (or a folder holding ``llama-index-core/tests`` or ``tests``
with those two folders); without it these tests skip.

pytest runs those folders there, in processes of their own, without
LlamaIndex's conftest files (which need the rest of its test tree): once as
they are, against LlamaIndex's own stores, and once per database with
``tests/llama_index/llama_suite_plugin/chatledger_llama_suite_plugin.py``
loaded, which builds ``ChatLedgerChatStore`` and ``ChatLedgerMemoryStore``
over SQLite, PostgreSQL or Redis where a test builds a ``SimpleChatStore``,
a ``SQLAlchemyChatStore`` or a memory over one (each server's case skipped,
with the reason, without its URL). Every test that passes against
LlamaIndex's own stores must pass against chatledger's, or be one the
plugin skips with its reason. A test that fails against LlamaIndex's own
stores too (a test of another LlamaIndex version than the one installed)
says nothing of chatledger's and is not counted.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.backends import backend_url
from tests.suite_shared.framework_suite import (
    Outcomes,
    junit_outcomes,
    plugin_path,
    with_outcome,
)

pytest.importorskip("llama_index.core")
pytest.importorskip("pytest_asyncio", reason="LlamaIndex's tests need pytest-asyncio")
sqlalchemy = pytest.importorskip("sqlalchemy")
pytest.importorskip("aiosqlite")

VARIABLE = "CHATLEDGER_LLAMA_INDEX_TESTS"
PLUGIN = Path(__file__).resolve().parent / "llama_suite_plugin"
#: The folders of LlamaIndex's tests about its chat stores and memories.
FOLDERS = ["tests/storage/chat_store", "tests/memory"]

pytestmark = pytest.mark.long


def _root(folder: Path) -> Path | None:
    """The folder under ``folder`` whose ``tests`` holds :data:`FOLDERS`."""
    for candidate in (folder / "llama-index-core", folder):
        if all((candidate / name).is_dir() for name in FOLDERS):
            return candidate
    return None


@pytest.fixture(scope="module")
def llama_tests() -> Path:
    """The folder to run LlamaIndex's tests in."""
    given = os.environ.get(VARIABLE)
    if not given:
        pytest.skip(
            f"set {VARIABLE} to a checkout of github.com/run-llama/llama_index "
            "(LlamaIndex publishes its tests only there, not on PyPI)"
        )
    root = _root(Path(given))
    if root is None:
        pytest.fail(f"{VARIABLE}={given} holds no {' and no '.join(FOLDERS)}")
    return root


def _run(root: Path, report: Path, url: str | None) -> Outcomes:
    """Run :data:`FOLDERS` in ``root``; chatledger's stores on ``url`` if given."""
    environment = dict(os.environ)
    options = ["-q", "--tb=short", "--noconftest", "-p", "no:cacheprovider"]
    if url is not None:
        environment["PYTHONPATH"] = plugin_path(PLUGIN)
        environment["CHATLEDGER_LLAMA_SUITE_URL"] = url
        options += ["-p", "chatledger_llama_suite_plugin"]
    subprocess.run(
        [sys.executable, "-m", "pytest", *options, f"--junitxml={report}", *FOLDERS],
        cwd=root,
        env=environment,
        capture_output=True,
        text=True,
        timeout=500,
    )
    return junit_outcomes(report)


@pytest.fixture(scope="module")
def llama_index_own(
    llama_tests: Path, tmp_path_factory: pytest.TempPathFactory
) -> Outcomes:
    """The tests' outcomes against LlamaIndex's own stores."""
    report = tmp_path_factory.mktemp("llama-own") / "report.xml"
    return _run(llama_tests, report, None)


def _async_url(backend: str, tmp_path: Path) -> str:
    if backend == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path / 'chat.db'}"
    url = backend_url(backend)
    if backend == "postgresql":
        parsed = sqlalchemy.engine.make_url(url).set(drivername="postgresql+psycopg")
        return str(parsed.render_as_string(hide_password=False))
    return url


@pytest.mark.parametrize("backend", ["sqlite", "postgresql", "redis"])
def test_llama_indexs_chat_store_and_memory_tests_pass(
    backend: str, llama_tests: Path, llama_index_own: Outcomes, tmp_path: Path
) -> None:
    if backend == "redis":
        pytest.importorskip("chatledger_redis")
    url = _async_url(backend, tmp_path)
    report = tmp_path / f"report-{uuid.uuid4().hex[:8]}.xml"
    ours = _run(llama_tests, report, url)
    counted = {
        name: outcome
        for name, outcome in ours.items()
        if llama_index_own.get(name, ("", ""))[0] == "passed"
    }
    assert with_outcome(counted, "failed") == {}
    skipped = with_outcome(ours, "skipped")
    # Every skip is one the plugin names, with its reason.
    assert all("ChatLedger" in why for why in skipped.values()), skipped
    assert len(with_outcome(counted, "passed")) >= 40
