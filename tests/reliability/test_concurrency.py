"""Concurrent writers and readers on every backend, verified by the history checker.

Sizes (every backend, every CI run): 16 threads x 200 appends on one
conversation; 4 processes x 100 appends on one conversation; 100 conversations
x 4 writers x 10 appends; a small-window run that checks eviction; and 8
threads x 60 appends on a log bounded by ``Retention.last(20)``, whose trims
race the appends.

DuckDB and Cassandra run one fifth of the appends (16 x 40, 20 conversations)
unless ``--run-slow`` is given (``nox -s stress`` gives it): DuckDB serialises
writers and takes 20-40 ms an append, so the full sizes cost it four minutes;
Cassandra makes each append a lightweight transaction over the whole
conversation, so 16 x 200 on one conversation costs it five. The same
threads still race.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import pytest

from chatledger import InvalidOptionError, Retention
from chatledger.window import MessageWindow
from tests.reliability.conftest import record_summary
from tests.reliability.history import Verdict, check
from tests.reliability.workload import Run, Target, run_processes, run_threads


def _close(repository: Any) -> None:
    close = getattr(repository, "close", None)
    if callable(close):
        close()


def _verify(
    target: Target,
    what: str,
    run: Run,
    window_limit: int | None,
    retained: int | None = None,
) -> Verdict:
    started = time.perf_counter()
    verdict = check(run.appends, run.reads, run.final, window_limit, retained)
    checked = time.perf_counter() - started
    record_summary(
        f"{target.name:<10} {what:<28} {verdict.acknowledged:>5} appends ok "
        f"({verdict.messages} msgs), {verdict.reads:>4} reads, "
        f"{verdict.evicted:>5} evicted, lost {len(verdict.lost)}, "
        f"duplicated {len(verdict.duplicated)}, anomalies {len(verdict.anomalies)}; "
        f"run {run.seconds:.1f}s, check {checked:.1f}s"
    )
    assert run.errors == [], run.errors[:10]
    assert verdict.valid, verdict.explain()
    return verdict


#: Backends whose appends are slow enough to run a fifth of the sizes by default.
SLOW_APPENDS = {"duckdb", "cassandra"}


@pytest.fixture
def share(target: Target, pytestconfig: pytest.Config) -> int:
    """Divide the appends by this (1 at full size)."""
    if target.name in SLOW_APPENDS and not pytestconfig.getoption("--run-slow"):
        return 5
    return 1


class TestConcurrentHistory:
    """The history checker's invariants hold on every backend."""

    def test_sixteen_threads_on_one_conversation(
        self, target: Target, share: int
    ) -> None:
        """16 threads x 200 appends on one conversation lose and duplicate nothing."""
        appends = 200 // share
        # 16 writers and the reader: a connection each.
        repository = target.pooled(17).build()
        try:
            run = run_threads(
                repository,
                ["one"],
                writers_per_conversation=16,
                appends_per_writer=appends,
                window=MessageWindow(100_000),
            )
        finally:
            _close(repository)
        verdict = _verify(target, f"16 threads x {appends}", run, None)
        assert verdict.acknowledged == 16 * appends

    def test_four_processes_on_one_conversation(self, target: Target) -> None:
        """4 processes x 100 appends on one conversation lose and duplicate nothing."""
        if target.no_processes:
            pytest.skip(f"{target.name}: {target.no_processes}")
        repository = target.build()
        try:
            run = run_processes(
                target,
                repository,
                "shared",
                processes=4,
                appends_per_writer=100,
                window_limit=100_000,
            )
        finally:
            _close(repository)
        verdict = _verify(target, "4 processes x 100", run, None)
        assert verdict.acknowledged == 400

    def test_hundred_conversations_four_writers_each(
        self, target: Target, share: int
    ) -> None:
        """100 conversations x 4 writers: no cross-talk, nothing lost."""
        repository = target.build()
        conversations = [f"conv-{n}" for n in range(100 // share)]
        try:
            run = run_threads(
                repository,
                conversations,
                writers_per_conversation=4,
                appends_per_writer=10,
                window=MessageWindow(100_000),
                threads=16,
            )
        finally:
            _close(repository)
        verdict = _verify(
            target, f"{len(conversations)} convs x 4 writers x 10", run, None
        )
        assert verdict.acknowledged == len(conversations) * 40

    def test_small_window_evicts_consistently(self, target: Target) -> None:
        """With a 12-message window, 8 threads x 60 window appends evict whole
        turns only (a store that keeps the window alone).

        Every acknowledged turn is either in the final window or was reported
        evicted by exactly one append; evicted turns never reappear; every read
        and the final state start on a user message and fit the window.
        """
        repository = target.build()
        try:
            run = run_threads(
                repository,
                ["small"],
                writers_per_conversation=8,
                appends_per_writer=60,
                window=MessageWindow(12),
                read_pause=0.002,
                window_append=True,
            )
        finally:
            _close(repository)
        verdict = _verify(target, "small window 8 x 60", run, 12)
        assert verdict.evicted > 0
        assert len(run.final["small"].ids) <= 12

    def test_trimming_races_appends(self, target: Target, share: int) -> None:
        """8 threads x 60 appends on a log bounded at 20: trims race appends.

        Every acknowledged turn is in the final log unless a trim removed it,
        which it may only do to turns older than every one still stored;
        nothing is stored twice, and no read or final state holds more than
        ``keep + slack * (writers + 1)``: the bound of a log whose writers
        wait for their trims (see :mod:`chatledger.retention`, rule 2).
        """
        keep, slack, writers, turn = 20, 5, 8, 3
        bounded = replace(
            target,
            kwargs={**target.kwargs, "retention": Retention.last(keep, slack=slack)},
        )
        try:
            repository = bounded.build()
        except InvalidOptionError as exc:
            pytest.skip(f"{target.name} takes no retention: {exc}")
        appends = 60 // share
        try:
            run = run_threads(
                repository,
                ["trimmed"],
                writers_per_conversation=writers,
                appends_per_writer=appends,
                window=MessageWindow(keep),
                read_pause=0.002,
            )
        finally:
            _close(repository)
        verdict = _verify(
            target,
            f"bounded log {writers} x {appends}",
            run,
            None,
            retained=keep + slack * (writers + 1),
        )
        assert verdict.evicted > 0, "nothing was trimmed"
        assert verdict.acknowledged == writers * appends
        # The newest `keep` stay, less the head of a turn the cut fell inside.
        assert len(run.final["trimmed"].ids) > keep - turn
