"""Shared pytest options and fixtures for every package's tests."""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

import pytest

from tests.backends import (
    remember_required_option,
    required_backends,
    stop_containers,
)


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
        "--run-install",
        action="store_true",
        help="install the README's lines into fresh virtualenvs (marked install; "
        "also CHATLEDGER_RUN_INSTALL=1)",
    )


def pytest_configure(config: pytest.Config) -> None:
    remember_required_option(config.getoption("--require-backend"))


def pytest_collection_modifyitems(
    config: pytest.Config, items: list[pytest.Item]
) -> None:
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


def pytest_terminal_summary(
    terminalreporter: Any, exitstatus: int, config: pytest.Config
) -> None:
    """Sum the skips up: one line per reason, not one per test."""
    reasons: Counter[str] = Counter()
    for report in terminalreporter.stats.get("skipped", []):
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        reasons[reason.removeprefix("Skipped: ")] += 1
    if not reasons:
        return
    terminalreporter.section("skipped, by reason")
    for reason, count in sorted(reasons.items(), key=lambda item: item[0]):
        terminalreporter.write_line(f"{count:6d}  {reason}")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    stop_containers()
