"""Development sessions: ``python -m nox -s tests`` runs every test that can run here.

Sessions:
    tests      the test suite but the tests marked long and the stress runs
               (server backends per CHATLEDGER_TEST_*_URL, testcontainers where
               Docker answers, else skipped with one summary line per backend)
    servers    the server backends' tests and the long tests, every server
               whose URL is set required (the rest is left to ``tests``)
    stress     the long stress runs of the reliability tests (--run-slow)
    backend    the tests of one backend: ``nox -s "backend(name='sqlite')"``
    lint       ruff check, ruff format --check, and no stale generated sync module
    typecheck  mypy --strict over every package and the tests
    bench      the benchmarks under bench/ (prints ratios; not a test)
    demo       the scripted demo on SQLite
"""

from __future__ import annotations

import os
from pathlib import Path

import nox

nox.options.sessions = ["tests"]
nox.options.reuse_existing_virtualenvs = True
# uv builds the sessions' virtualenvs and installs ~150 packages in a fraction of
# pip's time; without uv (a plain `pip install nox`) nox falls back to virtualenv.
nox.options.default_venv_backend = "uv|virtualenv"

ROOT = Path(__file__).parent
PACKAGES = sorted(p.parent for p in (ROOT / "packages").glob("*/pyproject.toml"))
SERVER_BACKENDS = [
    "postgresql",
    "mysql",
    "mariadb",
    "mssql",
    "oracle",
    "redis",
    "mongodb",
    "cassandra",
    "neo4j",
]
LOCAL_BACKENDS = ["memory", "sqlite", "duckdb"]
#: Server backends that have a URL variable of their own but no nox backend.
EXTRA_SERVER_BACKENDS = ["redis_cluster"]


#: Three workers, each server's tests on one of them (the test ids name their
#: server, see tests/conftest.py), so no two workers meet on a server: the
#: tests mostly wait on their servers, so three keep two cores busy.
SERVER_WORKERS = ["-n", "3", "--dist", "loadgroup"]


PYPROJECT = nox.project.load_toml(ROOT / "pyproject.toml")


def _install_everything(session: nox.Session, *groups: str) -> None:
    """Install core and every adapter in editable mode, with their test extras."""
    editable = [f"{ROOT / 'core'}[testing,tiktoken]"]
    editable += [f"{package}[test]" for package in PACKAGES]
    requirements = [
        r
        for g in ("test", *groups)
        for r in nox.project.dependency_groups(PYPROJECT, g)
    ]
    session.install(*[a for e in editable for a in ("-e", e)], *requirements)


def _servers_given() -> list[str]:
    """The server backends whose test URL is set in the environment."""
    return [
        name
        for name in SERVER_BACKENDS + EXTRA_SERVER_BACKENDS
        if os.environ.get(f"CHATLEDGER_TEST_{name.upper()}_URL")
    ]


@nox.session
def tests(session: nox.Session) -> None:
    """Run the suite but its long tests; embedded backends get one worker per core."""
    _install_everything(session, "containers")
    quick = [] if "-m" in session.posargs else ["-m", "not long"]
    parallel = []
    if not _servers_given() and "-n" not in session.posargs:
        # Embedded backends keep to their own temporary files, so tests run
        # side by side; shared servers keep the one-at-a-time run.
        parallel = ["-n", "auto"]
    session.run("pytest", *quick, *parallel, *session.posargs)


@nox.session
def servers(session: nox.Session) -> None:
    """Run the server backends' tests and the long tests, every server required.

    The embedded backends' quick tests and the unit tests are left out:
    ``tests`` runs them (``.ci/run`` runs both sessions).
    """
    given = _servers_given()
    if not given:
        session.error(
            "no CHATLEDGER_TEST_<BACKEND>_URL is set: bash .ci/services up starts "
            "the local servers, and bash .ci/run sets the URLs"
        )
    _install_everything(session, "containers")
    parallel = [] if "-n" in session.posargs else SERVER_WORKERS
    session.run(
        "pytest",
        "--servers-only",
        f"--require-backend={','.join(given)}",
        *parallel,
        *session.posargs,
    )


@nox.session
def stress(session: nox.Session) -> None:
    """Run the long stress tests against the servers whose URLs are set."""
    _install_everything(session)
    parallel = [] if "-n" in session.posargs else SERVER_WORKERS
    # With the stress runs, the concurrency runs that the everyday run scales
    # down (DuckDB, Cassandra), at full size; arguments replace this selection.
    selection = session.posargs or ["-k", "test_stress or duckdb or cassandra"]
    session.run(
        "pytest",
        "tests/reliability/test_stress.py",
        "tests/reliability/test_concurrency.py",
        "--run-slow",
        *parallel,
        *selection,
    )


@nox.session
@nox.parametrize("name", LOCAL_BACKENDS + SERVER_BACKENDS)
def backend(session: nox.Session, name: str) -> None:
    """Run the tests of one backend, requiring it when it is a server."""
    _install_everything(session, "containers")
    args = ["-k", name]
    if name in SERVER_BACKENDS:
        args.append(f"--require-backend={name}")
    session.run("pytest", *args, *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """Check style with ruff."""
    session.install("--group", f"{ROOT / 'pyproject.toml'}:lint")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("python", "tools/async_to_sync.py", "--check")


@nox.session
def typecheck(session: nox.Session) -> None:
    """Type-check every package, the tests and the benchmarks with mypy --strict."""
    _install_everything(session, "typecheck", "containers")
    session.run(
        "mypy", "core/src", *[str(p / "src") for p in PACKAGES], "tests", "bench"
    )


@nox.session
def bench(session: nox.Session) -> None:
    """Run the benchmarks and print their ratio table."""
    _install_everything(session)
    session.run("python", "-m", "bench", *session.posargs)


@nox.session
def demo(session: nox.Session) -> None:
    """Play the scripted demo on an embedded SQLite file."""
    session.install("-e", str(ROOT / "core"), "-e", str(ROOT / "packages" / "sql"))
    session.run("chatledger", "demo", *session.posargs)
