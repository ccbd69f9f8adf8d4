"""Measure one backend: interleaved latency batches, then thread throughput.

Example:
    results = measure_backend(setup, Plan.default())
    results.latency[("ours_append", 20)].p50

Every measured variant (our append, the floor's insert, the full rewrite, our
read, the floor's read, at every window size) runs in the same round-robin
loop, a batch each per round in a shuffled order, so a noisy neighbour on the
shared machine slows them all alike instead of one of them. The loop, the
workload and :class:`Stats` are core's (:mod:`chatledger.benchmark`), shared
with ``chatledger bench URL``.
"""

from __future__ import annotations

import functools
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from bench.backends import Setup
from bench.floors import Floor, FullRewrite
from bench.log_size import LogSizeResults, measure_log_size
from bench.workload import history, stream
from chatledger import MessageWindowChatMemory, codec
from chatledger.benchmark import WINDOWS, Stats, Variant, run_interleaved
from chatledger.validation import stamp_messages

__all__ = [
    "REWRITE_WINDOWS",
    "WINDOWS",
    "Plan",
    "Results",
    "Stats",
    "measure_backend",
    "measure_codec",
]

REWRITE_WINDOWS = (20, 200)


@dataclass(frozen=True)
class Plan:
    """How many samples each variant gets, and how long throughput runs.

    Attributes:
        rounds: Round-robin rounds; a variant runs ``samples / rounds`` ops in each.
        append: Samples per append variant and window.
        rewrite: Samples of the full rewrite, per window.
        read: Samples per read variant, per window.
        warmup: Untimed ops per variant before the first round.
        throughput_seconds: Length of one throughput slice (two per thread count).
        log_size: Messages of the long log whose window read is compared with
            a log of 100 (:mod:`bench.log_size`); ``None`` skips it.
        log_reads: Samples of each of the two log reads.
        log_rounds: Round-robin rounds of the two log reads.
    """

    rounds: int
    append: int
    rewrite: dict[int, int]
    read: dict[int, int]
    warmup: int
    throughput_seconds: float
    log_size: int | None = 100_000
    log_reads: int = 1000
    log_rounds: int = 40

    @classmethod
    def default(cls) -> Plan:
        """About 20-40 seconds per server backend, plus loading the long log."""
        return cls(10, 400, {20: 200, 200: 60}, {20: 400, 200: 200, 2000: 40}, 20, 1.5)

    @classmethod
    def quick(cls) -> Plan:
        """A smoke run: a few seconds per backend, noisy figures."""
        return cls(
            4,
            80,
            {20: 40, 200: 12},
            {20: 80, 200: 40, 2000: 8},
            5,
            0.5,
            log_size=10_000,
            log_reads=100,
            log_rounds=10,
        )


@dataclass
class Results:
    """What one backend measured.

    Attributes:
        latency: ``(variant, window) -> Stats``; variants are ``ours_append``,
            ``ours_append_bounded`` (a log with ``Retention.last(window)``),
            ``floor_append``, ``rewrite_append``, ``ours_read``, ``floor_read``
            and ``floor_read_json`` (the floor's read plus ``json.loads`` of
            every row: the read target's reference).
        throughput: ``threads -> appends per second`` (ours, W=20).
        log_size: The window read of a long log against a log of 100, when
            measured.
        errors: Variants that failed, with the error.
    """

    latency: dict[tuple[str, int], Stats] = field(default_factory=dict)
    throughput: dict[int, float] = field(default_factory=dict)
    log_size: LogSizeResults | None = None
    errors: list[str] = field(default_factory=list)


def _ours_append(
    memory: MessageWindowChatMemory, conversation: str, count: int
) -> Callable[[], object]:
    messages = iter(list(stream(count)))
    return lambda: memory.add(conversation, next(messages))


def _floor_append(
    setup: Setup, conversation: str, start: int, count: int
) -> Callable[[], object]:
    payloads = iter([codec.to_json(m) for m in stamp_messages(stream(count))])
    seqs = iter(range(start, start + count))
    insert = setup.floor.insert
    return lambda: insert(conversation, next(seqs), next(payloads))


def _rewrite_append(
    rewrite: FullRewrite, conversation: str, count: int
) -> Callable[[], object]:
    messages = iter(list(stream(count)))
    return lambda: rewrite.append(conversation, next(messages))


def _read_json(floor: Floor, conversation: str) -> list[Any]:
    """The floor's read plus ``json.loads`` of every row: plain dicts, unchecked."""
    payload, loads = floor.payload, json.loads
    return [loads(payload(row)) for row in floor.select(conversation)]


def _bounded_memory(setup: Setup, window: int) -> MessageWindowChatMemory | None:
    """A memory of ``window`` over our repository bounded at ``window`` messages."""
    if setup.bounded is None:
        return None
    return MessageWindowChatMemory(setup.bounded(window), max_messages=window)


def _variants(setup: Setup, plan: Plan) -> Iterator[Variant]:
    """Prefill every conversation and yield one variant per measured operation."""
    floor = setup.floor
    total_append = plan.append + plan.warmup
    for window in WINDOWS:
        prefill = history(window)
        encoded = [codec.to_json(m) for m in stamp_messages(prefill)]
        if setup.repository is not None:
            memory = MessageWindowChatMemory(setup.repository, max_messages=window)
            setup.repository.save_all(f"ours-append-{window}", history(window))
            yield Variant(
                ("ours_append", window),
                _ours_append(memory, f"ours-append-{window}", total_append),
                plan.append,
            )
            bounded = _bounded_memory(setup, window)
            if bounded is not None:
                bounded.repository.save_all(f"ours-bounded-{window}", history(window))
                yield Variant(
                    ("ours_append_bounded", window),
                    _ours_append(bounded, f"ours-bounded-{window}", total_append),
                    plan.append,
                )
            setup.repository.save_all(f"ours-read-{window}", prefill)
            yield Variant(
                ("ours_read", window),
                functools.partial(memory.get, f"ours-read-{window}"),
                plan.read[window],
            )
        floor.replace(f"floor-append-{window}", encoded)
        yield Variant(
            ("floor_append", window),
            _floor_append(setup, f"floor-append-{window}", window, total_append),
            plan.append,
        )
        floor.replace(f"floor-read-{window}", encoded)
        yield Variant(
            ("floor_read", window),
            functools.partial(floor.select, f"floor-read-{window}"),
            plan.read[window],
        )
        yield Variant(
            ("floor_read_json", window),
            functools.partial(_read_json, floor, f"floor-read-{window}"),
            plan.read[window],
        )
        if window in REWRITE_WINDOWS:
            rewrite = FullRewrite(floor, window)
            rewrite.load(f"rewrite-{window}", history(window))
            count = plan.rewrite[window]
            yield Variant(
                ("rewrite_append", window),
                _rewrite_append(rewrite, f"rewrite-{window}", count + plan.warmup),
                count,
            )


def _run_interleaved(variants: list[Variant], plan: Plan, results: Results) -> None:
    stats, errors = run_interleaved(variants, plan.rounds, plan.warmup)
    results.latency.update(stats)
    results.errors.extend(errors)


def _throughput(setup: Setup, threads: int, seconds: float, salt: str) -> float:
    """Appends per second of ``threads`` threads, one conversation each (W=20)."""
    repository = setup.repository
    assert repository is not None
    memory = MessageWindowChatMemory(repository, max_messages=20)
    conversations = [f"tput-{salt}-{threads}-{i}" for i in range(threads)]
    for conversation in conversations:
        repository.save_all(conversation, history(20))
    counts = [0] * threads
    failures: list[BaseException] = []
    stop = threading.Event()
    go = threading.Barrier(threads + 1)

    def worker(index: int) -> None:
        conversation = conversations[index]
        n = 0
        go.wait()
        try:
            while not stop.is_set():
                memory.add(conversation, next(stream(1, n)))
                n += 1
        except BaseException as exc:
            failures.append(exc)
        counts[index] = n

    pool = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for thread in pool:
        thread.start()
    go.wait()
    start = time.perf_counter()
    time.sleep(seconds)
    stop.set()
    for thread in pool:
        thread.join()
    elapsed = time.perf_counter() - start
    for conversation in conversations:
        repository.delete_by_conversation_id(conversation)
    if failures:
        raise failures[0]
    return sum(counts) / elapsed


def measure_backend(setup: Setup, plan: Plan) -> Results:
    """Run every latency variant interleaved, then 1 versus 8 appending threads,
    then the window read of a long log against a short one."""
    results = Results()
    _run_interleaved(list(_variants(setup, plan)), plan, results)
    if setup.repository is not None:
        totals = {1: 0.0, 8: 0.0}
        try:
            # 1, 8, 8, 1: drift over the run weighs on both counts alike.
            for slice_index, threads in enumerate((1, 8, 8, 1)):
                totals[threads] += _throughput(
                    setup, threads, plan.throughput_seconds, str(slice_index)
                )
            results.throughput = {k: v / 2 for k, v in totals.items()}
        except Exception as exc:
            results.errors.append(f"throughput: {type(exc).__name__}: {exc}")
    if setup.repository is not None and plan.log_size is not None:
        # Last: the long log's rows (and PostgreSQL's ANALYZE after them)
        # must not change what the variants above measured.
        try:
            results.log_size, errors = measure_log_size(
                setup.repository,
                size=plan.log_size,
                reads=plan.log_reads,
                rounds=plan.log_rounds,
                batch=setup.log_batch,
                settle=setup.refresh_statistics,
            )
            results.errors.extend(errors)
        except Exception as exc:
            results.errors.append(f"log_read: {type(exc).__name__}: {exc}")
    return results


def measure_codec(plan: Plan) -> dict[tuple[str, int], Stats]:
    """Time the codec alone: encode one message, decode a window of W."""
    out: dict[tuple[str, int], Stats] = {}
    one = stamp_messages(stream(1))[0]
    samples = [0] * plan.read[20]
    for i in range(len(samples)):
        start = time.perf_counter_ns()
        codec.to_json(one)
        samples[i] = time.perf_counter_ns() - start
    out[("encode", 1)] = Stats.of(samples)
    for window in WINDOWS:
        encoded = [codec.to_json(m) for m in stamp_messages(history(window))]
        taken = []
        for _ in range(plan.read[window]):
            start = time.perf_counter_ns()
            for text in encoded:
                codec.from_json(text)
            taken.append(time.perf_counter_ns() - start)
        out[("decode", window)] = Stats.of(taken)
    return out
