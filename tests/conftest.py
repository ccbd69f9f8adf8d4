"""Shared pytest options and fixtures for every package's tests."""

from __future__ import annotations

import os
import re
from collections import defaultdict
from typing import Any

import pytest

from tests.backends import (
    remember_required_option,
    required_backends,
    stop_containers,
)
from tests.skips import skip_lines


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--require-backend",
        default="",
        help="comma-separated backends whose tests must not be skipped "
        "(also CHATLEDGER_REQUIRE_BACKENDS)",
    )
    parser.addoption(
        "--run-slow",
        action="store_true",
        help="run the long stress tests (marked slow)",
    )
    parser.addoption(
        "--servers-only",
        action="store_true",
        help="leave out what the embedded run covers (tests of SQLite, DuckDB "
        "and the in-memory repository, and tests/unit): for a run after it",
    )
    parser.addoption(
        "--run-install",
        action="store_true",
        help="install the README's lines into fresh virtualenvs (marked install; "
        "also CHATLEDGER_RUN_INSTALL=1)",
    )


def pytest_configure(config: pytest.Config) -> None:
    remember_required_option(config.getoption("--require-backend"))


#: Names in a test id that tie it to a server backend.
_SERVER_NAMES = re.compile(
    r"postgres|mariadb|mysql|mssql|oracle|redis|mongo|cassandra|neo4j", re.I
)
#: A MongoDB test run on the in-process stand-in: it meets no server.
_STAND_IN = re.compile(r"stand.?in", re.I)


def _server_group(nodeid: str) -> str | None:
    """The server a test meets, which no other worker's test meets meanwhile.

    Plain Redis and Redis Cluster are two servers; the MongoDB stand-in is
    none, so its long suites spread over every worker.
    """
    server = _SERVER_NAMES.search(nodeid)
    if server is None:
        return None
    name = server.group(0).lower()
    if name == "mongo" and _STAND_IN.search(nodeid):
        return None
    if name == "redis" and "cluster" in nodeid.lower():
        return "redis_cluster"
    return name


#: Names in a test id that tie it to an embedded backend.
_EMBEDDED_NAMES = re.compile(r"sqlite|duckdb|memory", re.I)


#: Tests of seconds each that the README's command leaves out (``-m "not long"``)
#: and ``nox -s servers`` runs: the concurrency histories, the conformance
#: command run whole, the MongoDB stand-in suites, the random-history seeds
#: past the first three, the listing of many conversations, the TTL runs that
#: wait for expiry, the waits for an unreachable server, the round trips of
#: many generated histories, and DuckDB's threaded and many-conversation
#: cases (each statement costs DuckDB ~0.6 ms of planning: 4-10 s a case).
#: Every embedded backend still runs the rest of the conformance suite in the
#: README's command.
_LONG_TESTS = re.compile(
    r"tests/reliability/test_(concurrency|async_processes)\.py"
    r"|TestConformanceCommand|test_conformance_counts_tests"
    r"|tests/mongodb/test_(async_)?standin_suite\.py"
    r"|test_window_matches_the_pure_policy\[\w+-([3-9]|\d\d+)\]"
    r"|test_conversation_listing_is_complete"
    r"|test_ttl_slides_on_every_write|test_conversation_expires_whole"
    r"|test_an_unreachable_mongodb_is_given_seconds"
    r"|test_chatledger_round_trip"
    r"|tests/upgrade/"
    r"|TestDuckDBConformance::test_(concurrent_appends|pages_list|paging_while)"
)


#: Folders whose tests need no server, whatever their ids name.
_OFFLINE_FOLDERS = ("tests/unit/", "tests/docs/")


def _embedded_only(item: pytest.Item) -> bool:
    """Whether the test needs no server: an embedded backend's test, or an offline one.

    A long test is kept wherever it is (the README's command left it out),
    and so is a test that names a server anywhere in its id, so a mixed test
    (copying from SQLite to PostgreSQL) still runs with the servers. The
    other unit tests and the documentation's examples run offline, whatever
    their ids name.
    """
    if item.get_closest_marker("long"):
        return False
    if item.nodeid.startswith(_OFFLINE_FOLDERS):
        return True
    if _SERVER_NAMES.search(item.nodeid):
        return False
    return bool(_EMBEDDED_NAMES.search(item.nodeid))


def pytest_itemcollected(item: pytest.Item) -> None:
    """Mark the long tests, and group each server's tests for ``--dist loadgroup``.

    Here, as each test is collected, so the markers are on before any
    ``pytest_collection_modifyitems`` (``-m``, xdist's grouping) reads them.
    """
    if _LONG_TESTS.search(item.nodeid):
        item.add_marker(pytest.mark.long)
    server = _server_group(item.nodeid)
    if server:
        # Under ``-n N --dist loadgroup`` one worker runs all of a server's
        # tests, one at a time as before; different servers run side by side.
        item.add_marker(pytest.mark.xdist_group(server))


def pytest_collection_modifyitems(
    config: pytest.Config, items: list[pytest.Item]
) -> None:
    if config.getoption("--servers-only"):
        left_out = [item for item in items if _embedded_only(item)]
        if left_out:
            config.hook.pytest_deselected(items=left_out)
            items[:] = [item for item in items if not _embedded_only(item)]
    run_slow = config.getoption("--run-slow")
    run_install = config.getoption("--run-install") or (
        os.environ.get("CHATLEDGER_RUN_INSTALL") == "1"
    )
    skip_slow = pytest.mark.skip(reason="slow stress test: run with --run-slow")
    skip_install = pytest.mark.skip(
        reason="installs from PyPI into fresh virtualenvs: run with --run-install"
    )
    for item in items:
        if "slow" in item.keywords and not run_slow:
            item.add_marker(skip_slow)
        # A marker, not a keyword: the folder tests/install is a keyword too.
        if item.get_closest_marker("install") and not run_install:
            item.add_marker(skip_install)


@pytest.fixture(scope="session")
def required(pytestconfig: pytest.Config) -> set[str]:
    """Backends that must not be skipped in this run."""
    return required_backends(pytestconfig.getoption("--require-backend"))


#: Seconds spent per server group and per test file in this run (setup, call
#: and teardown), summed from the reports, which under xdist reach the
#: controller too.
_group_seconds: defaultdict[str, float] = defaultdict(float)
_file_seconds: defaultdict[str, float] = defaultdict(float)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _group_seconds[_server_group(report.nodeid) or "no server"] += report.duration
    _file_seconds[report.nodeid.split("::", 1)[0]] += report.duration


def _time_lines(terminalreporter: Any) -> None:
    """Where a long run's time went: one worker runs a server's tests, so the
    largest group bounds the run's length (see ``pytest_itemcollected``)."""
    if sum(_group_seconds.values()) < 300:
        return
    terminalreporter.section("seconds per server group, and the slowest files")
    for table, count in ((_group_seconds, None), (_file_seconds, 15)):
        largest = sorted(table.items(), key=lambda item: -item[1])[:count]
        for name, seconds in largest:
            terminalreporter.write_line(f"{seconds:8.0f}  {name}")


def pytest_terminal_summary(
    terminalreporter: Any, exitstatus: int, config: pytest.Config
) -> None:
    """Say where a long run's time went; sum the skips up in ten lines at
    most, each saying how to run them."""
    _time_lines(terminalreporter)
    skips = []
    for report in terminalreporter.stats.get("skipped", []):
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        skips.append((report.nodeid, reason.removeprefix("Skipped: ")))
    if not skips:
        return
    terminalreporter.section("skipped, and how to run them")
    for line in skip_lines(skips):
        terminalreporter.write_line(line)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    stop_containers()
