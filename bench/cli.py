"""Command line of the benchmarks: ``python -m bench [--backends a,b] [--quick]``.

Example:
    python -m bench --backends sqlite,postgresql --json results.json
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.async_runner import ASYNC_BACKENDS, measure_async
from bench.backends import BACKENDS
from bench.log_size import SHORT_LOG
from bench.report import (
    AsyncReport,
    BackendReport,
    async_targets,
    ratios,
    render,
    render_async,
    targets,
)
from bench.runner import Plan, Stats, measure_backend, measure_codec

__all__ = ["main"]


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description=(
            "Window append and read latency of chatledger against raw-driver floors."
        ),
    )
    parser.add_argument(
        "--backends",
        default=",".join(BACKENDS),
        help=f"comma-separated subset of: {', '.join(BACKENDS)} (default: all)",
    )
    parser.add_argument(
        "--quick", action="store_true", help="few samples: a smoke run, not figures"
    )
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument(
        "--no-async",
        action="store_true",
        help=f"skip the async twin's rows (measured on: {', '.join(ASYNC_BACKENDS)})",
    )
    long_log = parser.add_mutually_exclusive_group()
    long_log.add_argument(
        "--log-size",
        type=_log_size,
        metavar="N",
        help=(
            "messages of the long log whose window read is compared with a log of "
            f"{SHORT_LOG} (default: {Plan.default().log_size}, "
            f"{Plan.quick().log_size} with --quick)"
        ),
    )
    long_log.add_argument(
        "--no-long-log",
        action="store_true",
        help="skip the long log's read (and its load)",
    )
    return parser.parse_args(argv)


def _plan(args: argparse.Namespace) -> Plan:
    """The plan the options ask for."""
    plan = Plan.quick() if args.quick else Plan.default()
    if args.no_long_log:
        return dataclasses.replace(plan, log_size=None)
    if args.log_size is not None:
        return dataclasses.replace(plan, log_size=args.log_size)
    return plan


def _log_size(text: str) -> int:
    """``--log-size``: a whole number of messages above the short log's."""
    try:
        size = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if size <= SHORT_LOG:
        raise argparse.ArgumentTypeError(
            f"must be more than the short log's {SHORT_LOG} messages, not {size}"
        )
    return size


def main(argv: list[str] | None = None) -> int:
    """Run the selected backends one after the other and print the report."""
    args = _parse(argv)
    names = [n.strip() for n in args.backends.split(",") if n.strip()]
    unknown = [n for n in names if n not in BACKENDS]
    if unknown:
        print(
            f"unknown backend(s): {', '.join(unknown)}; known: {', '.join(BACKENDS)}",
            file=sys.stderr,
        )
        return 2
    plan = _plan(args)
    began = time.perf_counter()
    codec_stats = measure_codec(plan)
    reports: list[BackendReport] = []
    with tempfile.TemporaryDirectory(prefix="chatledger-bench-") as tmp:
        for name in names:
            backend = BACKENDS[name]
            workdir = Path(tmp) / name
            workdir.mkdir()
            step = time.perf_counter()
            print(f"... {backend.label}", file=sys.stderr, flush=True)
            try:
                with backend.open(workdir) as setup:
                    results = measure_backend(setup, plan)
                    reports.append(BackendReport(backend, setup, results))
            except Exception as exc:  # an unreachable server skips its backend only
                reports.append(
                    BackendReport(backend, None, None, f"{type(exc).__name__}: {exc}")
                )
            print(
                f"    {time.perf_counter() - step:.1f} s", file=sys.stderr, flush=True
            )
        async_reports = [] if args.no_async else _measure_async(names, plan, Path(tmp))
    print(render(reports, codec_stats))
    if async_reports:
        print()
        print(render_async(async_reports))
        print("\nAsync targets:")
        print("\n".join(t.line() for t in async_targets(async_reports)))
    print(
        f"\n{platform.python_implementation()} {platform.python_version()}, "
        f"{'quick' if args.quick else 'full'} run, {time.perf_counter() - began:.0f} s"
    )
    if args.json:
        out = _as_json(reports, codec_stats)
        out["async"] = _async_json(async_reports)
        args.json.write_text(json.dumps(out, indent=2))
    return 0


def _measure_async(names: list[str], plan: Plan, tmp: Path) -> list[AsyncReport]:
    """Measure the async twin on every selected backend that has one."""
    reports: list[AsyncReport] = []
    for name in names:
        backend = ASYNC_BACKENDS.get(name)
        if backend is None:
            continue
        workdir = tmp / f"{name}-async"
        workdir.mkdir()
        step = time.perf_counter()
        print(f"... {backend.label} async", file=sys.stderr, flush=True)
        try:
            results, notes = asyncio.run(measure_async(backend, workdir, plan))
            reports.append(AsyncReport(backend, results, notes))
        except Exception as exc:  # an unreachable server skips its backend only
            reports.append(
                AsyncReport(backend, None, [], f"{type(exc).__name__}: {exc}")
            )
        print(f"    {time.perf_counter() - step:.1f} s", file=sys.stderr, flush=True)
    return reports


def _async_json(reports: list[AsyncReport]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for report in reports:
        entry: dict[str, Any] = {"skipped": report.skipped}
        if report.results is not None:
            entry["latency_us"] = {
                f"{k}-{w}": vars(s) for (k, w), s in report.results.latency.items()
            }
            entry["throughput_per_s"] = report.results.throughput
            entry["errors"] = report.results.errors
        out[report.backend.name] = entry
    out["targets"] = [
        {"backend": t.backend, "what": t.what, "value": t.value, "met": t.met}
        for t in async_targets(reports)
    ]
    return out


def _as_json(
    reports: list[BackendReport], codec_stats: dict[tuple[str, int], Stats]
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "codec": {f"{k}-{n}": vars(s) for (k, n), s in codec_stats.items()},
        "backends": {},
    }
    for report in reports:
        entry: dict[str, Any] = {"skipped": report.skipped}
        if report.results is not None:
            entry["latency_us"] = {
                f"{k}-{w}": vars(s) for (k, w), s in report.results.latency.items()
            }
            entry["throughput_per_s"] = report.results.throughput
            entry["ratios"] = ratios(report.results)
            found = report.results.log_size
            if found is not None:
                entry["log_size"] = {
                    "messages": found.size,
                    "load_seconds": found.load_seconds,
                    "seconds": found.seconds,
                    "batch": found.batch,
                    "ratio": found.ratio,
                    "long_us": None if found.long is None else vars(found.long),
                    "short_us": None if found.short is None else vars(found.short),
                }
            entry["errors"] = report.results.errors
        out["backends"][report.backend.name] = entry
    out["targets"] = [
        {
            "backend": t.backend,
            "what": t.what,
            "value": t.value,
            "limit": t.limit,
            "met": t.met,
        }
        for t in targets(reports)
    ]
    return out
