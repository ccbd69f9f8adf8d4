"""Run ``chatledger`` commands the way the installed console script runs them."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import logging
import os
import shutil
import subprocess
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

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
    """Run ``chatledger ARGS...`` in tmp_path; returns exit code and output.

    Commands run in this process through :func:`chatledger.cli.main` (a new
    Python per command cost most of these tests' time), but ``conformance``,
    which runs pytest and cannot nest in this one, and any command given
    ``child=True``, which runs the installed console script in a new process.
    """

    def run(
        *args: str, stdin: str | None = None, timeout: float = 180, child: bool = False
    ) -> Run:
        if child or (args and args[0] == "conformance"):
            script = chatledger_script
            return _in_child(script, plugin_folder, tmp_path, args, stdin, timeout)
        return _in_process(plugin_folder, tmp_path, args, stdin)

    return run


def _in_child(
    script: str,
    plugin_folder: Path,
    cwd: Path,
    args: tuple[str, ...],
    stdin: str | None,
    timeout: float,
) -> Run:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(plugin_folder), env.get("PYTHONPATH")) if p
    )
    env["PYTHONIOENCODING"] = "utf-8"
    done = subprocess.run(
        [script, *args],
        input=stdin,
        capture_output=True,
        text=True,
        encoding="utf-8",
        cwd=cwd,
        env=env,
        timeout=timeout,
        check=False,
    )
    return Run(done.returncode, done.stdout, done.stderr)


def _text_stream(data: bytes = b"") -> io.TextIOWrapper:
    """A standard stream as a console script has one (text over bytes, UTF-8)."""
    return io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", newline=None)


def _in_process(
    plugin_folder: Path, cwd: Path, args: tuple[str, ...], stdin: str | None
) -> Run:
    """``chatledger.cli.main(args)`` with the process state a fresh run starts with.

    Standard streams, the working folder, ``sys.path`` (the testfile:// adapter),
    warnings shown on stderr as Python shows them (pytest would record them),
    the root logger and the command's memory of passwords are each the run's
    own and put back afterwards.
    """
    from chatledger import cli as cli_module
    from chatledger.cli import output

    out, err = _text_stream(), _text_stream()
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    saved = (sys.stdin, sys.stdout, sys.stderr, list(sys.path), output.SECRETS)

    def show(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> None:
        shown = warnings.formatwarning(message, category, filename, lineno, line)
        sys.stderr.write(shown)

    try:
        sys.stdin = _text_stream((stdin or "").encode("utf-8"))
        sys.stdout, sys.stderr = out, err
        sys.path.insert(0, str(plugin_folder))
        output.SECRETS = output.Secrets()
        with contextlib.chdir(cwd), warnings.catch_warnings():
            warnings.resetwarnings()
            warnings.simplefilter("default")
            warnings.showwarning = show
            code = cli_module.main(list(args))
    finally:
        sys.stdin, sys.stdout, sys.stderr, sys.path[:], output.SECRETS = saved
        root.handlers[:] = handlers
        root.setLevel(level)
    return Run(code, _drained(out), _drained(err))


def _drained(stream: io.TextIOWrapper) -> str:
    stream.flush()
    raw = stream.buffer
    assert isinstance(raw, io.BytesIO)
    return raw.getvalue().decode("utf-8").replace("\r\n", "\n")


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
