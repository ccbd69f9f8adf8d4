"""Backends of the reliability tests, and a summary of what the checker verified."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.reliability.targets import LOCAL_BACKENDS, OTHER_BACKENDS, open_target
from tests.reliability.workload import Target

_SUMMARY: list[str] = []


def record_summary(line: str) -> None:
    """Add one line to the report printed at the end of the session."""
    _SUMMARY.append(line)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _SUMMARY:
        terminalreporter.section("reliability: what the history checker verified")
        for line in _SUMMARY:
            terminalreporter.write_line(line)


@pytest.fixture(params=LOCAL_BACKENDS + OTHER_BACKENDS)
def target(request: pytest.FixtureRequest, required: set[str]) -> Iterator[Target]:
    """A fresh, empty store of each backend (unique table or key prefix)."""
    with open_target(request.param, required) as opened:
        yield opened
