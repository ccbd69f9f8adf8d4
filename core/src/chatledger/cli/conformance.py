"""``chatledger conformance``: the conformance suite against a live backend.

The suite runs through pytest on a module written for the run from
``conformance_suites/`` (one for the sync repository, one for the async
twin); the URL and options reach it through the environment.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import uuid
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

from chatledger.async_connect import connect_async
from chatledger.async_repository import AsyncSupportsWindowAppend
from chatledger.backends import ASYNC_ENTRY_POINT_GROUP, ENTRY_POINT_GROUP
from chatledger.cli.errors import UsageError
from chatledger.cli.output import out, progress
from chatledger.cli.stores import close, drop_namespace, open_store
from chatledger.connect import adapter_parameters, redact_url
from chatledger.progress import Progress
from chatledger.repository import SupportsWindowAppend

__all__ = ["conformance", "suite_module"]


def suite_module(use_async: bool) -> str:
    """The text of the test module the run writes, for the sync or async suite."""
    name = "async_suite.py" if use_async else "sync_suite.py"
    folder = resources.files("chatledger.cli") / "conformance_suites"
    return (folder / name).read_text(encoding="utf-8")


class _Tally:
    """A pytest plugin that counts outcomes, for the one-line summary and progress."""

    def __init__(self, make_progress: Callable[[int], Progress]) -> None:
        self.counts: dict[str, int] = {}
        self.failed: list[str] = []
        self.finished = 0
        self._make_progress = make_progress
        self.progress: Progress | None = None

    def pytest_collection_finish(self, session: Any) -> None:
        self.progress = self._make_progress(len(session.items))

    def pytest_runtest_logreport(self, report: Any) -> None:
        if report.when == "teardown" and self.progress is not None:
            self.finished += 1
            self.progress.update(self.finished)
        outcome: str | None = None
        if hasattr(report, "wasxfail"):
            outcome = "xfailed" if report.skipped else "xpassed"
        elif report.when == "call" or (report.when == "setup" and not report.passed):
            outcome = (
                "error" if report.failed and report.when != "call" else report.outcome
            )
        if outcome is not None:
            self.counts[outcome] = self.counts.get(outcome, 0) + 1
            if outcome in ("failed", "error"):
                self.failed.append(report.nodeid.rpartition("::")[2])


def conformance(args: argparse.Namespace) -> int:
    """Run the suite on ``args.url`` (or its async twin) and print one summary."""
    try:
        import pytest
    except ImportError:
        raise UsageError(
            "the conformance suite needs pytest: pip install 'chatledger[testing]'"
        ) from None
    options = dict(args.options)
    if args.namespace_option:
        # Short and plain, so it passes every adapter's name allowlist.
        options[args.namespace_option] = f"clconf_{uuid.uuid4().hex[:12]}"
    if args.use_async:
        present, atomic = asyncio.run(_async_probe(args.url, options))
    else:
        probe = open_store(args.url, options)
        present = len(probe.find_conversation_ids())
        atomic = isinstance(probe, SupportsWindowAppend)
    if present and not args.namespace_option:
        if not args.use_async:
            close(probe)
        raise UsageError(
            f"{redact_url(args.url)} holds {present} conversations; the "
            "suite writes and deletes conversations, so it needs an empty store: "
            "use an empty database, or --namespace-option NAME to give the run "
            "its own table, key prefix or collection"
        )
    # An adapter that takes a ttl option is run through the TTL cases with it.
    group = ASYNC_ENTRY_POINT_GROUP if args.use_async else ENTRY_POINT_GROUP
    ttl = "ttl" in adapter_parameters(args.url, group)
    try:
        code, tally = _run_suite(pytest.main, args, options, atomic, ttl)
    finally:
        if args.use_async:
            if args.namespace_option:
                asyncio.run(_async_drop_namespace(args.url, options))
        else:
            if args.namespace_option:
                drop_namespace(probe)
            close(probe)
    counts = ", ".join(f"{n} {k}" for k, n in sorted(tally.counts.items()))
    capability = "atomic window append" if atomic else "no atomic window append"
    twin = " async" if args.use_async else ""
    out(
        f"conformance of {redact_url(args.url)}{twin} ({capability}; "
        f"{'TTL' if ttl else 'no TTL'}): {counts or 'no test ran'}"
    )
    if tally.failed:
        out("failed: " + ", ".join(tally.failed))
    return 0 if code == 0 else 1


async def _async_probe(url: str, options: dict[str, Any]) -> tuple[int, bool]:
    """How many conversations the async repository of ``url`` holds; atomic?"""
    repository = connect_async(url, **options)
    try:
        present = len(await repository.find_conversation_ids())
        return present, isinstance(repository, AsyncSupportsWindowAppend)
    finally:
        await _aclose(repository)


async def _async_drop_namespace(url: str, options: dict[str, Any]) -> None:
    """Remove the run's table, label set or key space through the async twin."""
    repository = connect_async(url, **options)
    try:
        drop = getattr(repository, "drop_schema", None)
        if callable(drop):
            await drop()
    finally:
        await _aclose(repository)


async def _aclose(repository: object) -> None:
    aclose = getattr(repository, "aclose", None)
    if callable(aclose):
        await aclose()


def _run_suite(
    run: Callable[..., Any],
    args: argparse.Namespace,
    options: dict[str, Any],
    atomic: bool,
    ttl: bool,
) -> tuple[int, _Tally]:
    environment = {
        "CHATLEDGER_CONFORMANCE_URL": args.url,
        "CHATLEDGER_CONFORMANCE_OPTIONS": json.dumps(options),
        "CHATLEDGER_CONFORMANCE_ATOMIC": "1" if atomic else "0",
        "CHATLEDGER_CONFORMANCE_TTL": "1" if ttl else "0",
    }
    saved = {key: os.environ.get(key) for key in environment}
    tally = _Tally(lambda total: progress(args, "testing", total, "tests"))
    with tempfile.TemporaryDirectory(prefix="chatledger-conformance-") as folder:
        module = Path(folder) / "test_conformance.py"
        module.write_text(suite_module(args.use_async), encoding="utf-8")
        (Path(folder) / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
        os.environ.update(environment)
        try:
            code = run(
                [
                    str(module),
                    "-c",
                    str(Path(folder) / "pytest.ini"),
                    "--rootdir",
                    folder,
                    "-p",
                    "no:cacheprovider",
                    "-q" if not args.verbose else "-v",
                    "--tb=short" if args.verbose else "--tb=line",
                    # Why a case was skipped, with its failures (-r after --
                    # replaces this).
                    "-rfEs",
                    *args.pytest_args,
                ],
                plugins=[tally],
            )
        finally:
            if tally.progress is not None:
                tally.progress.close()
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
    return int(code), tally
