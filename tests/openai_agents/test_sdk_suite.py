"""The Agents SDK's own session tests, run against ChatLedgerSession.

The SDK's sdist carries its tests. The installed version's sdist is fetched
with ``pip download`` into a temporary folder (nothing is kept), and pytest
runs its session test files there, in a process of its own, with
``tests/openai_agents/sdk_plugin/chatledger_sdk_plugin.py`` loaded: where a
test builds a ``SQLiteSession``, an ``AsyncSQLiteSession`` or a
``SQLAlchemySession``, it gets a ``ChatLedgerSession`` over SQLite,
PostgreSQL or Redis instead (each server's case skipped, with the reason,
without its URL). Nothing else of the tests changes. The plugin skips, each
with its reason, the tests of those sessions' own machinery, and leaves out
the tests that build no session.
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.suite_shared.framework_suite import (
    junit_outcomes,
    plugin_path,
    with_outcome,
)

pytest.importorskip("agents")
pytest.importorskip(
    "pytest_asyncio",
    reason="the SDK's tests need pytest-asyncio (chatledger-openai-agents[test])",
)

PLUGIN = Path(__file__).resolve().parent / "sdk_plugin"
#: The SDK's test files about its SQL sessions and what runs on top of them.
SESSION_TESTS = [
    "tests/memory/test_session.py",
    "tests/memory/test_session_limit.py",
    "tests/memory/test_openai_responses_compaction_session.py",
    "tests/memory/test_compaction_model_visibility.py",
    "tests/extensions/memory/test_async_sqlite_session.py",
    "tests/extensions/memory/test_sqlalchemy_session.py",
]

pytestmark = pytest.mark.long


@pytest.fixture(scope="module")
def sdk_source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The installed SDK version's sdist, its tests and its pytest settings."""
    version = importlib.metadata.version("openai-agents")
    pip = [sys.executable, "-m", "pip"]
    if subprocess.run([*pip, "--version"], capture_output=True).returncode != 0:
        found = shutil.which("pip3") or shutil.which("pip")
        if found is None:
            pytest.skip("no pip to download the Agents SDK's sdist with")
        pip = [found]
    folder = tmp_path_factory.mktemp("openai-agents-sdist")
    sdist_only = ["--no-deps", "--no-binary", ":all:", "--dest", str(folder)]
    download = subprocess.run(
        [*pip, "download", *sdist_only, f"openai-agents=={version}"],
        capture_output=True,
        text=True,
        timeout=500,
    )
    if download.returncode != 0:
        pytest.skip(
            f"pip could not download openai-agents {version}: {download.stderr}"
        )
    [sdist] = folder.glob("openai_agents-*.tar.gz")
    root = f"openai_agents-{version}"
    with tarfile.open(sdist) as archive:
        wanted = [
            member
            for member in archive.getmembers()
            if member.name == f"{root}/pyproject.toml"
            or member.name.startswith(f"{root}/tests/")
        ]
        if not any(member.name.startswith(f"{root}/tests/") for member in wanted):
            pytest.fail(f"the sdist of openai-agents {version} has no tests")
        archive.extractall(folder, members=wanted, filter="data")
    return folder / root


def test_the_sdks_session_tests_pass(
    sdk_source: Path, store_url: str, tmp_path: Path
) -> None:
    report = tmp_path / "report.xml"
    plugins = ["-p", "chatledger_sdk_plugin", "-p", "no:cacheprovider"]
    options = ["-q", "--tb=short", f"--junitxml={report}"]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *plugins, *options, *SESSION_TESTS],
        cwd=sdk_source,
        env={
            **os.environ,
            "PYTHONPATH": plugin_path(PLUGIN),
            "CHATLEDGER_SDK_SUITE_URL": store_url,
        },
        capture_output=True,
        text=True,
        timeout=500,
    )
    outcomes = junit_outcomes(report)
    assert with_outcome(outcomes, "failed") == {}, done.stdout[-5000:]
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-5000:]
    passed = with_outcome(outcomes, "passed")
    skipped = with_outcome(outcomes, "skipped")
    assert len(passed) >= 90
    # Every skip is one the plugin names, with its reason.
    assert all("ChatLedgerSession" in why for why in skipped.values()), skipped
