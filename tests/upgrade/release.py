"""An environment that runs an earlier release, built from this repository's history.

Example:
    python = release_python("8c4a76d")   # release 0.2's interpreter
    subprocess.run([python, "-I", "script.py"])

The release's distributions (core and the backends) come out of its commit
with ``git archive``, are built into wheels with no dependencies, and go into
a virtualenv of their own with the drivers this environment has, at the
versions it has. Nothing of the checkout is importable there. The virtualenv
is kept, keyed by the commit, the interpreter and the driver versions, under
``.nox/`` (or ``CHATLEDGER_RELEASE_CACHE``), so only the first run builds it;
a lock lets test processes that start together build it once.

uv builds and installs when it is on ``PATH`` (or beside this interpreter);
otherwise ``venv`` and ``pip`` do, which takes longer.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

__all__ = [
    "DRIVERS",
    "ROOT",
    "ReleaseUnavailableError",
    "full_commit",
    "release_python",
]

ROOT = Path(__file__).resolve().parents[2]
#: The distributions of a release, by their folders in its tree.
_DISTRIBUTIONS = (
    "core",
    "packages/sql",
    "packages/redis",
    "packages/cassandra",
    "packages/neo4j",
    "packages/mongodb",
)
#: The drivers the release's backends use, installed at this environment's
#: versions (those installed here; the backends without theirs are skipped).
DRIVERS = (
    "msgspec",
    "SQLAlchemy",
    "psycopg",
    "psycopg-binary",
    "PyMySQL",
    "duckdb",
    "duckdb-engine",
    "redis",
    "cassandra-driver",
    "neo4j",
    "pymongo",
)


class ReleaseUnavailableError(Exception):
    """The release's commit is not in this checkout (a source tarball has none)."""


def full_commit(commit: str) -> str:
    """The full hash of ``commit`` in this checkout.

    Raises:
        ReleaseUnavailableError: there is no git, no repository, or no such commit.
    """
    try:
        found = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--verify", f"{commit}^{{commit}}"],
            capture_output=True,
            text=True,
            check=False,
        )
    except OSError as error:
        raise ReleaseUnavailableError(f"git cannot run: {error}") from error
    if found.returncode != 0:
        raise ReleaseUnavailableError(
            f"commit {commit} is not in this checkout: {found.stderr.strip()}"
        )
    return found.stdout.strip()


def _pins() -> list[str]:
    pins = []
    for name in DRIVERS:
        with contextlib.suppress(metadata.PackageNotFoundError):
            pins.append(f"{name}=={metadata.version(name)}")
    return pins


def _uv() -> str | None:
    beside = Path(sys.executable).parent / "uv"
    return str(beside) if beside.exists() else shutil.which("uv")


def _run(*command: str | Path) -> None:
    done = subprocess.run(
        [str(part) for part in command], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"{' '.join(str(p) for p in command)} failed ({done.returncode}):\n"
            f"{done.stdout}\n{done.stderr}"
        )


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (where the platform has ``fcntl``)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - no lock but where builds run
        yield
        return
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _build(commit: str, folder: Path, pins: list[str]) -> None:
    """Build the release's wheels and install them with ``pins`` into ``folder``."""
    source, wheels, venv = folder / "source", folder / "wheels", folder / "venv"
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", commit, *_DISTRIBUTIONS],
        capture_output=True,
        check=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tree:
        # The archive of a commit of this repository: its own files only.
        if hasattr(tarfile, "data_filter"):  # Python 3.11.4 and later
            tree.extractall(source, filter="data")
        else:  # pragma: no cover
            tree.extractall(source)
    python = venv / "bin" / "python"
    uv = _uv()
    if uv is not None:
        _run(uv, "venv", "--quiet", "--python", sys.executable, venv)
        for distribution in _DISTRIBUTIONS:
            _run(uv, "build", "--quiet", "--wheel", "--out-dir", wheels,
                 source / distribution)  # fmt: skip
        install: list[str | Path] = [
            uv,
            "pip",
            "install",
            "--quiet",
            "--python",
            python,
        ]
    else:
        _run(sys.executable, "-m", "venv", venv)
        for distribution in _DISTRIBUTIONS:
            _run(python, "-m", "pip", "wheel", "--quiet", "--no-deps",
                 "--wheel-dir", wheels, source / distribution)  # fmt: skip
        install = [python, "-m", "pip", "install", "--quiet"]
    _run(*install, *sorted(wheels.glob("*.whl")), *pins)
    shutil.rmtree(source)


def release_python(commit: str) -> Path:
    """The interpreter of an environment holding the release at ``commit``.

    Built on the first call for a commit, interpreter and set of driver
    versions; later calls (and later runs) find it ready.

    Raises:
        ReleaseUnavailableError: the commit is not in this checkout.
    """
    full = full_commit(commit)
    pins = _pins()
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    stamp = json.dumps({"commit": full, "python": version, "pins": pins})
    cache = Path(os.environ.get("CHATLEDGER_RELEASE_CACHE", ROOT / ".nox"))
    folder = cache / f"release-{full[:12]}-py{version}"
    ready = folder / "ready.json"
    cache.mkdir(parents=True, exist_ok=True)
    with _locked(cache / f"{folder.name}.lock"):
        if not ready.exists() or ready.read_text(encoding="utf-8") != stamp:
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            _build(full, folder, pins)
            ready.write_text(stamp, encoding="utf-8")
    return folder / "venv" / "bin" / "python"
