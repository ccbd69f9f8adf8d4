"""Development sessions: ``python -m nox -s tests`` runs every test that can run here.

Sessions:
    tests      the test suite but the tests marked long and the stress runs
               (server backends per CHATLEDGER_TEST_*_URL, testcontainers where
               Docker answers, else skipped; the skips summed up in ten lines
               at most, each saying how to run them)
    servers    the server backends' tests and the long tests, every server
               whose URL is set required (the rest is left to ``tests``)
    stress     the long stress runs of the reliability tests (--run-slow)
    backend    the tests of one backend: ``nox -s "backend(name='sqlite')"``
    lint       ruff check, ruff format --check, and no stale generated sync module
    typecheck  mypy --strict over every package and the tests
    bench      the benchmarks under bench/ (prints ratios; not a test)
    demo       the scripted demo on SQLite
    docs       the documentation site, built strictly into site/ (mkdocs)
    wheels     every wheel and sdist built into dist/, then each backend's and
               bridge's wheel installed alone with core's in a fresh virtualenv,
               imported, and given ``chatledger conformance`` on a local store
"""

from __future__ import annotations

import os
import shutil
import sys
import time
import uuid
from dataclasses import dataclass
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

#: The libraries whose stores tests/move_in writes, each through its own API,
#: for ``chatledger import --from`` to read (within the bridges' pins). pydantic
#: before 2.14: llama-index-core's SimpleChatStore cannot persist on 2.14,
#: which refuses the ``info`` its wrap serializer passes as ``index_key``.
MOVE_IN_SOURCES = (
    "langchain-community>=0.4",
    "langchain-postgres>=0.0.15",
    "openai-agents[sqlalchemy]>=0.24,<1",
    "llama-index-storage-chat-store-postgres>=0.5",
    "pydantic<2.14",
)


def _install_everything(
    session: nox.Session, *groups: str, also: tuple[str, ...] = ()
) -> None:
    """Install core and every adapter in editable mode, with their test extras."""
    editable = [f"{ROOT / 'core'}[testing,tiktoken]"]
    editable += [f"{package}[test]" for package in PACKAGES]
    requirements = [
        r
        for g in ("test", *groups)
        for r in nox.project.dependency_groups(PYPROJECT, g)
    ]
    session.install(*[a for e in editable for a in ("-e", e)], *requirements, *also)


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
    _install_everything(session, "containers", also=MOVE_IN_SOURCES)
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
    _install_everything(session, "containers", also=MOVE_IN_SOURCES)
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


@nox.session
def docs(session: nox.Session) -> None:
    """Build the documentation site into site/, any warning an error.

    mkdocstrings reads the API reference from the sources (core/src and each
    package's src), so nothing of the repository is installed.
    """
    session.install("--group", f"{ROOT / 'pyproject.toml'}:docs")
    session.run(
        "mkdocs", "build", "--strict", "--site-dir", str(ROOT / "site"),
        env={"NO_MKDOCS_2_WARNING": "1"},  # Material's notice of its successor
    )  # fmt: skip


#: Where ``nox -s wheels`` builds every wheel and sdist of the family.
DIST = ROOT / "dist"

#: The ``-k`` selection of the conformance runs on installed wheels: the suite
#: but its long cases (random-history seeds, listings of many conversations,
#: concurrency runs), which ``servers`` runs from the checkout.
WHEEL_SUITE = (
    "not window_matches_the_pure_policy and not listing_is_complete and not concurrent"
)


@dataclass(frozen=True)
class WheelTrial:
    """How one distribution's wheel is tried alone with core's.

    Attributes:
        folder: Its folder under ``packages/``.
        extras: Its extras to install (the drivers come from PyPI).
        url: The store ``chatledger conformance`` runs on, ``{tmp}`` standing
            for a folder of the run; or ``None``.
        server: Else the server backend whose ``CHATLEDGER_TEST_<NAME>_URL``
            names the store, when set; a bridge has neither and is imported.
        options: The conformance options that give the run a namespace of its
            own on a shared server (dropped afterwards).
        both_twins: Whether the async suite runs too (``--async``).
        pins: Requirements installed beside it: the oldest release of a
            dependency that its own requirements accept, tried too.
    """

    folder: str
    extras: tuple[str, ...] = ()
    url: str | None = None
    server: str | None = None
    options: tuple[str, ...] = ()
    both_twins: bool = False
    pins: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """The folder, and the pins when there are some."""
        return " ".join([self.folder, *self.pins])


WHEEL_TRIALS = [
    WheelTrial(
        "sql", ("aiosqlite",), url="sqlite:///{tmp}/conformance.db", both_twins=True
    ),
    # The SQLAlchemy the package requires at least (pyproject's lower bound).
    WheelTrial(
        "sql",
        ("aiosqlite",),
        url="sqlite:///{tmp}/conformance.db",
        both_twins=True,
        pins=("sqlalchemy[asyncio]==2.0.30",),
    ),
    WheelTrial("redis", server="redis", options=("--namespace-option", "key_prefix")),
    # The redis-py the package requires at least: the first whose clients
    # honour the retry they are given.
    WheelTrial(
        "redis",
        server="redis",
        options=("--namespace-option", "key_prefix"),
        both_twins=True,
        pins=("redis==6.0.0",),
    ),
    # No MongoDB server runs here: without CHATLEDGER_TEST_MONGODB_URL the wheel
    # is installed and imported, its entry points loaded, and no suite runs.
    WheelTrial(
        "mongodb", server="mongodb", options=("--namespace-option", "collection")
    ),
    WheelTrial(
        "cassandra",
        server="cassandra",
        options=("--namespace-option", "table", "-o", "create_keyspace=true"),
    ),
    WheelTrial(
        "neo4j",
        server="neo4j",
        # The run names its conversation label; the message label is ours,
        # and the run's drop removes the nodes of both.
        options=(
            "--namespace-option",
            "conversation_label",
            "-o",
            f"message_label=Wheels{uuid.uuid4().hex[:10]}",
        ),
    ),
    WheelTrial("langchain"),
    WheelTrial("openai-agents"),
    WheelTrial("llama-index"),
]


def _wheel(folder: Path) -> tuple[str, str, Path]:
    """The project name, version and built wheel of the distribution in ``folder``."""
    project = nox.project.load_toml(folder / "pyproject.toml")["project"]
    stem = project["name"].replace("-", "_")
    return (
        project["name"],
        project["version"],
        DIST / (f"{stem}-{project['version']}-py3-none-any.whl"),
    )


def _build_family(session: nox.Session) -> None:
    """Build every distribution's sdist, and its wheel from that sdist, into DIST."""
    shutil.rmtree(DIST, ignore_errors=True)
    for folder in [ROOT / "core", *PACKAGES]:
        session.run(
            "python", "-m", "build", "--installer", "uv", "--outdir", str(DIST),
            str(folder),
        )  # fmt: skip


def _try_alone(
    session: nox.Session, trial: WheelTrial, workspace: Path, required: set[str]
) -> str:
    """Install ``trial``'s wheel alone with core's, check it, run its suite.

    Returns what was done, for the session's closing line.
    """
    name, version, wheel = _wheel(ROOT / "packages" / trial.folder)
    _, _, core_wheel = _wheel(ROOT / "core")
    folder = workspace / trial.folder
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    url = None
    if trial.url is not None:
        url = trial.url.format(tmp=folder.as_posix())
    elif trial.server is not None:
        variable = f"CHATLEDGER_TEST_{trial.server.upper()}_URL"
        url = os.environ.get(variable)
        if url is None and trial.server in required:
            session.error(
                f"{trial.server} is required (CHATLEDGER_REQUIRE_BACKENDS) but "
                f"{variable} is not set"
            )
    venv = folder / "venv"
    session.run("uv", "venv", "--quiet", "--python", sys.executable, str(venv))
    core = "chatledger[testing]" if url else "chatledger"
    extras = f"[{','.join(trial.extras)}]" if trial.extras else ""
    session.run(
        "uv", "pip", "install", "--quiet", "--python", str(venv / "bin" / "python"),
        f"{core} @ {core_wheel.as_uri()}", f"{name}{extras} @ {wheel.as_uri()}",
        *trial.pins,
    )  # fmt: skip
    with session.chdir(folder):
        session.run(
            str(venv / "bin" / "python"), str(ROOT / "tools" / "check_installed.py"),
            name, name.replace("-", "_"), version, external=True,
        )  # fmt: skip
        if url is None:
            if trial.server is None:
                return "imported"
            session.log(
                f"{name}: CHATLEDGER_TEST_{trial.server.upper()}_URL is not set, so "
                "the wheel was installed and imported only (no server to run the "
                "suite on)"
            )
            return "imported (no server)"
        selection = session.posargs or ["-k", WHEEL_SUITE]
        for twin in [[], ["--async"]] if trial.both_twins else [[]]:
            session.run(
                str(venv / "bin" / "chatledger"), "conformance", url,
                *trial.options, *twin, "--no-progress", "--", *selection,
                external=True,
            )  # fmt: skip
    shutil.rmtree(folder)
    return "conformance" + (" sync and async" if trial.both_twins else "")


@nox.session
def wheels(session: nox.Session) -> None:
    """Build every wheel and sdist into dist/ and try each wheel alone.

    Every distribution builds an sdist and a wheel from it (``python -m
    build``); ``tools/check_dists.py`` and ``twine check`` check the files.
    Then each backend's and bridge's wheel goes into a new virtualenv with
    core's wheel and nothing else of the repository (its drivers come from
    PyPI, through uv's cache), must import and load its entry points, and a
    backend then passes ``chatledger conformance``: SQL on a SQLite file, sync
    and async, on the newest SQLAlchemy and on the oldest it accepts; Redis,
    MongoDB, Cassandra and Neo4j on the servers their
    ``CHATLEDGER_TEST_<NAME>_URL`` names, in a namespace of their own (without
    its URL a backend is installed and imported only, and one named in
    ``CHATLEDGER_REQUIRE_BACKENDS`` fails). Arguments go to the conformance
    runs' pytest in place of the default selection: ``nox -s wheels -- -k ""``
    runs the whole suite.
    """
    untried = {p.name for p in PACKAGES} - {t.folder for t in WHEEL_TRIALS}
    if untried:
        session.error(f"no wheel trial for packages/{', packages/'.join(untried)}")
    session.install("--group", f"{ROOT / 'pyproject.toml'}:wheels")
    began = time.monotonic()
    _build_family(session)
    files = sorted(str(path) for path in DIST.iterdir())
    session.run("python", "tools/check_dists.py", str(DIST))
    session.run("twine", "check", "--strict", *files)
    timings = [
        f"{len(files)} files built and checked in {time.monotonic() - began:.0f} s"
    ]

    required = {
        name.strip()
        for name in os.environ.get("CHATLEDGER_REQUIRE_BACKENDS", "").split(",")
    }
    workspace = Path(session.create_tmp()).resolve() / "alone"
    for trial in WHEEL_TRIALS:
        began = time.monotonic()
        done = _try_alone(session, trial, workspace, required)
        timings.append(f"{trial.name} {done} {time.monotonic() - began:.0f} s")
    session.log("wheels: " + ", ".join(timings))
