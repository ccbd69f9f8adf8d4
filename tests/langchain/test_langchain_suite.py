"""LangChain's own chat-history tests, run on ChatLedgerMessageHistory.

langchain-core's source distribution on PyPI holds its tests. The version
installed here is downloaded (``pip download --no-deps --no-binary :all:``)
into a temporary folder of the test session, and two of its test files run
in a pytest process of their own, on SQLite, PostgreSQL and Redis (each
server's case skipped, with the reason, without its URL):

- ``tests/unit_tests/chat_history/test_chat_history.py``: the chat history
  classes;
- ``tests/unit_tests/runnables/test_history.py``: ``RunnableWithMessageHistory``
  storing through the history.

Only how their history is built changes (see
:mod:`tests.langchain.langchain_suite_plugin`); their conftest is not loaded
(it needs blockbuster and pytest-mock, for fixtures these files do not use).
Every test must pass. A minute's run with a download: ``long``, so ``nox -s
servers`` runs it and the README's quick command leaves it out.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.backends import backend_url
from tests.suite_shared.framework_suite import junit_outcomes

pytestmark = pytest.mark.long

HERE = Path(__file__).resolve().parent
SUITE = (
    "tests/unit_tests/chat_history/test_chat_history.py",
    "tests/unit_tests/runnables/test_history.py",
)


def _pip() -> list[str] | None:
    if importlib.util.find_spec("pip") is not None:
        return [sys.executable, "-m", "pip"]
    found = shutil.which("pip3") or shutil.which("pip")
    return [found] if found else None


@pytest.fixture(scope="session")
def langchain_core_source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The unpacked source distribution of the installed langchain-core."""
    version = importlib.metadata.version("langchain-core")
    pip = _pip()
    if pip is None:
        pytest.skip("no pip here to download langchain-core's sdist with")
    folder = tmp_path_factory.mktemp("langchain-core-sdist")
    done = subprocess.run(
        [
            *pip,
            "download",
            "--no-deps",
            "--no-binary",
            ":all:",
            "--dest",
            str(folder),
            f"langchain-core=={version}",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        pytest.skip(f"pip could not download langchain-core {version}'s sdist: {last}")
    [archive] = folder.glob("langchain_core-*.tar.gz")
    with tarfile.open(archive) as opened:
        opened.extractall(folder, filter="data")
    source = folder / f"langchain_core-{version}"
    missing = [name for name in SUITE if not (source / name).is_file()]
    if missing:
        pytest.skip(f"langchain-core {version}'s sdist has no {', '.join(missing)}")
    return source


def _url(backend: str, tmp_path: Path) -> str:
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'suite.db'}"
    return backend_url(backend)


@pytest.mark.parametrize("backend", ["sqlite", "postgresql", "redis"])
def test_langchain_chat_history_suite(
    backend: str, langchain_core_source: Path, tmp_path: Path
) -> None:
    url = _url(backend, tmp_path)
    ini = tmp_path / "pytest.ini"
    ini.write_text("[pytest]\n", encoding="utf-8")
    report = tmp_path / "report.xml"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "langchain_suite_plugin",
            "--noconftest",
            "-c",
            str(ini),
            "--rootdir",
            str(langchain_core_source),
            "-p",
            "no:cacheprovider",
            "-q",
            f"--junitxml={report}",
            *SUITE,
        ],
        capture_output=True,
        text=True,
        cwd=langchain_core_source,
        env={**os.environ, "PYTHONPATH": str(HERE), "CHATLEDGER_SUITE_URL": url},
        timeout=600,
        check=False,
    )
    outcomes = junit_outcomes(report) if report.exists() else {}
    shown = done.stdout[-6000:] + done.stderr[-3000:]
    assert done.returncode == 0, shown
    assert {n: o for n, o in outcomes.items() if o[0] != "passed"} == {}, shown
    # The tests that build the history under test ran (and passed).
    ran = {name.rpartition("::")[2] for name in outcomes}
    assert {
        "test_in_memory_history_initialization",
        "test_chat_history_deprecated[StoredHistory]",
        "test_interfaces",
        "test_input_messages",
        "test_input_messages_async",
        "test_output_messages",
        "test_using_custom_config_specs_async",
        "test_ignore_session_id",
    } <= ran, done.stdout
