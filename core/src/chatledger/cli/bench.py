"""``chatledger bench``: append and read latency beside the driver's floor."""

from __future__ import annotations

import argparse
import json
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

from chatledger.benchmark import (
    OPERATIONS,
    Measurement,
    Stats,
    SupportsBenchmarkFloor,
    count_steps,
    measure_window_memory,
    ratio,
)
from chatledger.cli.errors import UsageError
from chatledger.cli.output import err, out, progress
from chatledger.cli.plot import plot, require_matplotlib
from chatledger.cli.stores import (
    close,
    database_files,
    drop_namespace,
    local_database_file,
    open_store,
)
from chatledger.connect import adapter_parameters, redact_url
from chatledger.errors import StoreNotFoundError
from chatledger.repository import ChatMemoryRepository

__all__ = ["bench"]


def bench(args: argparse.Namespace) -> int:
    """Measure ``args.url`` and print the table (or JSON); 1 if a step failed."""
    if args.plot is not None:
        require_matplotlib()
    options = dict(args.options)
    if args.namespace_option:
        if args.namespace_option not in adapter_parameters(args.url):
            raise UsageError(
                f"the adapter of {redact_url(args.url)} takes no option "
                f"{args.namespace_option!r}; --namespace-option names its table, "
                "key prefix or collection option"
            )
        # Short and plain, so it passes every adapter's name allowlist.
        options[args.namespace_option] = f"clbench_{uuid.uuid4().hex[:12]}"
    # A database file the run creates goes with it, not only its tables: the
    # floor's and the window's rows leave megabytes of free pages behind.
    path = local_database_file(args.url)
    files = [] if path is None else database_files(path)
    there = {file for file in files if file.exists()}
    # Without a namespace of its own, the run leaves the store as it found
    # it: its conversations are deleted, and a schema it created is dropped.
    created = not args.namespace_option and _refuses_or_creates(args.url, options)
    repository = open_store(args.url, options)
    try:
        measurement, floor_name = _measure(args, repository)
    finally:
        try:
            if args.namespace_option or created:
                drop_namespace(repository)
        finally:
            close(repository)
            if path is not None and path not in there:
                for file in set(files) - there:
                    file.unlink(missing_ok=True)
    results = _results(measurement, args.windows)
    if args.json:
        out(
            json.dumps(
                {
                    "url": redact_url(args.url),
                    "floor": floor_name,
                    "samples": args.samples,
                    "windows": list(args.windows),
                    "results": results,
                    "errors": measurement.errors,
                },
                indent=2,
            )
        )
    else:
        for line in _table(args, floor_name, results, measurement.errors):
            out(line)
    if args.plot is not None:
        plot(args.plot, redact_url(args.url), floor_name, results)
        err(f"plot written to {args.plot}")
    return 1 if measurement.errors else 0


def _refuses_or_creates(url: str, options: dict[str, Any]) -> bool:
    """Refuse a store holding conversations; ``True`` when there is none yet."""
    try:
        probe = open_store(url, options, create=False)
    except StoreNotFoundError:
        return True
    try:
        present = len(probe.find_conversation_ids())
    except StoreNotFoundError:
        return True
    finally:
        close(probe)
    if present:
        raise UsageError(
            f"{redact_url(url)} holds {present} conversations; bench writes and "
            "deletes conversations of its own, so without --namespace-option NAME "
            "(the adapter's table, key prefix or collection option, given a "
            "fresh value for the run) it needs an empty store"
        )
    return False


def _measure(
    args: argparse.Namespace, repository: ChatMemoryRepository
) -> tuple[Measurement, str | None]:
    """Measure ours beside the floor (when the adapter has one), then drop it."""
    floor = (
        repository.benchmark_floor()
        if isinstance(repository, SupportsBenchmarkFloor)
        else None
    )
    if floor is None:
        err("no floor for this backend: measuring chatledger only")
    total = count_steps(args.windows, args.samples, with_floor=floor is not None)
    shown = progress(args, "benchmarking", total, "steps")
    try:
        measurement = measure_window_memory(
            repository,
            floor,
            args.windows,
            args.samples,
            on_step=lambda done, _: shown.update(done),
        )
    finally:
        try:
            shown.close()
        finally:
            if floor is not None:
                floor.close()
    return measurement, None if floor is None else floor.name


def _results(measurement: Measurement, windows: Sequence[int]) -> list[dict[str, Any]]:
    """One entry per window and operation: ours, the floor's, their ratio."""
    results: list[dict[str, Any]] = []
    for window in windows:
        for operation in OPERATIONS:
            ours = measurement.stats.get((f"ours_{operation}", window))
            floor = measurement.stats.get((f"floor_{operation}", window))
            results.append(
                {
                    "window": window,
                    "operation": operation,
                    "chatledger": _stats_json(ours),
                    "floor": _stats_json(floor),
                    "ratio": ratio(ours, floor),
                }
            )
    return results


def _stats_json(stats: Stats | None) -> dict[str, Any] | None:
    if stats is None:
        return None
    return {"p50_us": stats.p50, "p95_us": stats.p95, "samples": stats.n}


def _table(
    args: argparse.Namespace,
    floor_name: str | None,
    results: list[dict[str, Any]],
    errors: list[str],
) -> Iterator[str]:
    floor = f"floor: {floor_name}" if floor_name else "no floor for this backend"
    yield f"{redact_url(args.url)} ({floor}), {args.samples} samples per figure"
    yield "Latency in microseconds, p50 / p95; x floor = chatledger p50 / floor p50."
    head = (
        f"{'W':>6} | {'operation':<9} | {'chatledger':>19} | {'floor':>19} | "
        f"{'x floor':>7}"
    )
    yield head
    yield "-" * len(head)
    for row in results:
        factor = "-" if row["ratio"] is None else f"{row['ratio']:.2f}"
        yield (
            f"{row['window']:>6} | {row['operation']:<9} | "
            f"{_cell(row['chatledger'])} | {_cell(row['floor'])} | "
            f"{factor:>7}"
        )
    for error in errors:
        yield f"ERROR {error}"


def _cell(stats: dict[str, Any] | None) -> str:
    if stats is None:
        return f"{'-':>19}"
    return f"{_us(stats['p50_us']):>9} /{_us(stats['p95_us']):>9}"


def _us(value: float) -> str:
    return f"{value:.1f}" if value < 100 else f"{value:.0f}"
