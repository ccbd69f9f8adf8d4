"""A longer stress run (marked slow; run with ``--run-slow``).

    python -m pytest tests/reliability/test_stress.py --run-slow -q -rA

Per backend: 32 threads x 500 appends on one conversation, 8 processes x 250
appends on one conversation, and 300 conversations x 8 writers x 20 appends
with a 40-message window, all verified by the history checker (scaled down
on DuckDB and Cassandra: 32 x 150 and 60 conversations, see ``SCALED_DOWN``).
"""

from __future__ import annotations

import pytest

from chatledger.window import MessageWindow
from tests.reliability.test_concurrency import _close, _verify
from tests.reliability.workload import Target, run_processes, run_threads

pytestmark = pytest.mark.slow


#: Backends that run fewer appends, and why: DuckDB serialises writers in the
#: process at 20-40 ms per append; Cassandra makes every append a lightweight
#: transaction (four Paxos round trips) over a snapshot of the whole
#: conversation, so one conversation of 16,000 messages costs it an hour.
SCALED_DOWN = {"duckdb", "cassandra"}


def test_stress_many_threads_one_conversation(target: Target) -> None:
    appends = 150 if target.name in SCALED_DOWN else 500
    repository = target.pooled(34).build()
    try:
        run = run_threads(
            repository,
            ["stress"],
            writers_per_conversation=32,
            appends_per_writer=appends,
            window=MessageWindow(1_000_000),
        )
    finally:
        _close(repository)
    verdict = _verify(target, f"stress 32 threads x {appends}", run, None)
    assert verdict.acknowledged == 32 * appends


def test_stress_many_processes_one_conversation(
    target: Target, request: pytest.FixtureRequest
) -> None:
    if target.no_processes:
        pytest.skip(f"{target.name}: {target.no_processes}")
    if target.name == "cassandra":
        request.applymarker(
            pytest.mark.xfail(
                reason="8 processes racing lightweight transactions on one "
                "conversation: one writer can lose 100 compare-and-sets in a row "
                "and give up with ContentionError (seen in CI); Paxos has no "
                "queue, so fairness needs a change in the adapter",
                raises=AssertionError,
                strict=False,
            )
        )
    repository = target.build()
    try:
        run = run_processes(
            target,
            repository,
            "stress",
            processes=8,
            appends_per_writer=250,
            window_limit=1_000_000,
        )
    finally:
        _close(repository)
    assert _verify(target, "stress 8 processes x 250", run, None).acknowledged == 2000


def test_stress_many_conversations_small_window(target: Target) -> None:
    conversations = 60 if target.name in SCALED_DOWN else 300
    repository = target.pooled(26).build()
    try:
        run = run_threads(
            repository,
            [f"c{n}" for n in range(conversations)],
            writers_per_conversation=8,
            appends_per_writer=20,
            window=MessageWindow(40),
            threads=24,
            read_pause=0.001,
            window_append=True,  # evictions under load: a window store
        )
    finally:
        _close(repository)
    verdict = _verify(target, f"stress {conversations} convs x 8 x 20 w40", run, 40)
    assert verdict.acknowledged == conversations * 160
