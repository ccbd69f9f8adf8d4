"""How much of our append or read is the driver's work, and how much is ours.

Example:
    python -m bench.driver_share             # sqlite, postgresql, mariadb, redis
    python -m bench.driver_share sqlite redis -n 300
    python -m bench.driver_share --read -w 200   # window reads of 200

In one round-robin loop per backend (W = 20, rounds of ``-n`` operations in a
shuffled order), three figures, p50 of the rounds, microseconds an append:

- ``floor``: the floor append of ``python -m bench`` (one bare INSERT that
  commits, or ``RPUSH``);
- ``ours``: ``MessageWindowChatMemory.add`` of one message, on the log;
- ``write``: the part of that append spent in the write it sends: on SQL the
  statements and the commit on the driver's connection, with their
  parameters already made (the work :meth:`SqlChatMemoryRepository._write`
  runs on the connection), on Redis the ``EVALSHA`` of the append script
  (``_run``). The rest of ``ours`` is the library: validation, ids and times,
  encoding, parameters, the pool, the result.

``write / floor`` is what the statements cost against the floor's one INSERT,
whatever the code around them: an append can come no closer to the floor
than that without storing less or differently.

With ``--read``, the same for ``memory.get`` of a window of ``-w`` messages:
``floor`` is the floor read plus ``json.loads`` of every row (the reference of
the read targets), ``read`` the part of ours spent in the view's queries on
the driver, rows fetched and undecoded (``_view_rows`` on SQL, the view
scripts on Redis); the rest of ours is decoding the messages and building the
view. The timing wrappers are the benchmark's own, set on the repository
instance for the run.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bench.backends import BACKENDS
from bench.workload import history, stream
from chatledger import MessageWindowChatMemory, codec
from chatledger.validation import stamp_messages

__all__ = ["main"]

_DEFAULT_BACKENDS = ("sqlite", "postgresql", "mariadb", "redis")
_ROUNDS = 12


class _WriteClock:
    """Adds up the time an instrumented repository spends in its writes."""

    def __init__(self) -> None:
        self.spent = 0.0

    def timed(self, work: Callable[..., Any]) -> Callable[..., Any]:
        """``work``, adding its duration to :attr:`spent`."""

        def run(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return work(*args, **kwargs)
            finally:
                self.spent += time.perf_counter() - start

        return run


def _instrument(repository: Any, clock: _WriteClock, *, reads: bool) -> None:
    """Time the driver's part of every write (or read) of ``repository``."""
    if hasattr(repository, "_run"):  # Redis: the script call
        repository._run = clock.timed(repository._run)
        return
    if reads:
        repository._view_rows = clock.timed(repository._view_rows)
        return
    write = repository._write

    def timed_write(conversation_id: str, work: Any, **options: Any) -> Any:
        return write(conversation_id, clock.timed(work), **options)

    repository._write = timed_write


def _measure(
    backend: str, appends: int, window: int, *, reads: bool
) -> dict[str, float] | None:
    """The p50 figures of one backend, ``None`` when it cannot be opened."""
    with (
        tempfile.TemporaryDirectory(prefix="chatledger-share-") as tmp,
        BACKENDS[backend].open(Path(tmp)) as setup,
    ):
        if setup.repository is None:
            print(f"{backend}: {setup.missing}", file=sys.stderr)
            return None
        clock = _WriteClock()
        _instrument(setup.repository, clock, reads=reads)
        memory = MessageWindowChatMemory(setup.repository, max_messages=window)
        memory.add("s", history(window))
        setup.floor.replace("f", [codec.to_json(m) for m in history(window)])
        payload, loads = setup.floor.payload, json.loads
        messages: Iterator[Any] = iter(stream(appends * (_ROUNDS + 1)))
        payloads = (codec.to_json(m) for m in stamp_messages(stream(appends * 14)))
        seq = iter(range(100, 10**9))

        def ours() -> tuple[float, float]:
            clock.spent = 0.0
            start = time.perf_counter()
            for _ in range(appends):
                if reads:
                    memory.get("s")
                else:
                    memory.add("s", next(messages))
            return time.perf_counter() - start, clock.spent

        def floor() -> tuple[float, float]:
            start = time.perf_counter()
            for _ in range(appends):
                if reads:
                    [loads(payload(row)) for row in setup.floor.select("f")]
                else:
                    setup.floor.insert("f", next(seq), next(payloads))
            return time.perf_counter() - start, 0.0

        ours()  # warm-up: statements prepared, caches filled
        figures: dict[str, list[float]] = {"floor": [], "ours": [], "driver": []}
        for _ in range(_ROUNDS):
            variants = [("ours", ours), ("floor", floor)]
            random.shuffle(variants)
            for name, run in variants:
                total, spent = run()
                figures[name].append(total / appends * 1e6)
                if name == "ours":
                    figures["driver"].append(spent / appends * 1e6)
        return {name: statistics.median(values) for name, values in figures.items()}


def main(argv: list[str] | None = None) -> int:
    """Print, per backend, the floor, ours and the driver's part, and their ratios."""
    parser = argparse.ArgumentParser(prog="python -m bench.driver_share")
    parser.add_argument("backends", nargs="*", default=list(_DEFAULT_BACKENDS))
    parser.add_argument("-n", "--operations", type=int, default=200)
    parser.add_argument("-w", "--window", type=int, default=20)
    parser.add_argument("--read", action="store_true", help="window reads instead")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.backends) - set(BACKENDS))
    if unknown:
        parser.error(f"unknown backends: {', '.join(unknown)}")
    driver = "read" if args.read else "write"
    print(
        f"W = {args.window}, {'reads' if args.read else 'appends'}, p50 us\n"
        f"{'backend':<12} {'floor':>8} {'ours':>8} {driver:>8} "
        f"{'ours/floor':>11} {driver + '/floor':>12} {'library us':>11}"
    )
    for backend in args.backends:
        found = _measure(backend, args.operations, args.window, reads=args.read)
        if found is None:
            continue
        floor, ours, write = found["floor"], found["ours"], found["driver"]
        print(
            f"{backend:<12} {floor:8.1f} {ours:8.1f} {write:8.1f} "
            f"{ours / floor:11.2f} {write / floor:12.2f} {ours - write:11.1f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
