"""Run the installed ``chatledger`` console script as a subprocess."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cli import filestore

HAVE_SQL = importlib.util.find_spec("chatledger_sql") is not None
#: Arguments after ``chatledger conformance URL`` that leave out the suite's
#: slowest cases on a server: tests/conformance runs the whole suite there,
#: and these tests are about the command and its namespace.
QUICK_SUITE = (
    "--",
    "-k",
    "not window_matches_the_pure_policy and not listing_is_complete and not concurrent",
)
NO_SQL = "chatledger-sql is not installed (pip install -e ./packages/sql)"


@dataclass(frozen=True)
class Run:
    """What one command did."""

    code: int
    out: str
    err: str


Cli = Callable[..., Run]


@pytest.fixture(scope="session")
def chatledger_script() -> str:
    """The console script installed beside this interpreter."""
    found = shutil.which("chatledger", path=str(Path(sys.executable).parent))
    if found is None:
        pytest.fail(
            "the chatledger console script is not installed next to "
            f"{sys.executable}: pip install -e ./core"
        )
    return found


@pytest.fixture(scope="session")
def plugin_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder on PYTHONPATH that registers the testfile:// adapter."""
    return filestore.install(tmp_path_factory.mktemp("site"))


@pytest.fixture
def cli(chatledger_script: str, plugin_folder: Path, tmp_path: Path) -> Cli:
    """Run ``chatledger ARGS...`` in tmp_path; returns exit code and output."""

    def run(*args: str, stdin: str | None = None, timeout: float = 180) -> Run:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(plugin_folder), env.get("PYTHONPATH")) if p
        )
        env["PYTHONIOENCODING"] = "utf-8"
        done = subprocess.run(
            [chatledger_script, *args],
            input=stdin,
            capture_output=True,
            text=True,
            encoding="utf-8",
            cwd=tmp_path,
            env=env,
            timeout=timeout,
            check=False,
        )
        return Run(done.returncode, done.stdout, done.stderr)

    return run


def file_url(kind: str, path: Path) -> str:
    """The URL of a file-backed store of ``kind`` at ``path`` (no suffix)."""
    if kind == "sqlite":
        return f"sqlite:///{path.with_suffix('.db')}"
    return f"{filestore.SCHEME}://{path.with_suffix('.json')}"


@pytest.fixture(
    params=[
        "testfile",
        pytest.param("sqlite", marks=pytest.mark.skipif(not HAVE_SQL, reason=NO_SQL)),
    ]
)
def store_kind(request: pytest.FixtureRequest) -> str:
    """A kind of store that outlives one process."""
    kind: str = request.param
    return kind
