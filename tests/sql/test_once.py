"""The first-use gate of the async SQL repository, across event loops and threads."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

import pytest

from chatledger_sql.once import Once

THREADS = 4


def _in_threads(call: Callable[[int], None]) -> list[BaseException]:
    """Run ``call(n)`` in THREADS threads started together; return their errors."""
    start = threading.Barrier(THREADS)
    failures: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            start.wait()
            call(n)
        except BaseException as error:  # reported by the caller
            failures.append(error)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "a waiter was never woken"
    return failures


def test_loops_in_threads_calling_at_once_run_the_step_once() -> None:
    runs: list[int] = []

    async def step() -> None:
        runs.append(1)
        await asyncio.sleep(0.2)  # the other threads' calls arrive meanwhile

    gate = Once(step)
    failures = _in_threads(lambda n: asyncio.run(gate()))
    assert not failures, failures
    assert runs == [1]
    assert gate.done
    asyncio.run(gate())  # done: returns without running it
    assert runs == [1]


def test_a_failed_step_fails_its_caller_and_the_next_caller_runs_it_again() -> None:
    attempts: list[int] = []

    async def step() -> None:
        attempts.append(1)
        await asyncio.sleep(0.05)
        if len(attempts) == 1:
            raise ConnectionError("the server went away")

    gate = Once(step)
    failures = _in_threads(lambda n: asyncio.run(gate()))
    assert [type(f) for f in failures] == [ConnectionError]
    assert len(attempts) == 2
    assert gate.done


def test_a_cancelled_waiter_leaves_the_gate_working() -> None:
    release = asyncio.Event()
    runs: list[int] = []

    async def step() -> None:
        runs.append(1)
        await release.wait()

    async def scenario() -> None:
        gate = Once(step)
        running = asyncio.create_task(gate())
        await asyncio.sleep(0)  # the step has begun
        waiting = asyncio.create_task(gate())
        await asyncio.sleep(0)  # the second call waits
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        release.set()
        await running
        await asyncio.wait_for(gate(), 10)
        assert runs == [1]

    asyncio.run(scenario())


def test_a_cancelled_runner_hands_the_step_to_a_waiter() -> None:
    runs: list[int] = []

    async def step() -> None:
        runs.append(1)
        if len(runs) == 1:
            await asyncio.sleep(3600)  # cancelled below

    async def scenario() -> None:
        gate = Once(step)
        running = asyncio.create_task(gate())
        await asyncio.sleep(0)
        waiting = asyncio.create_task(gate())
        await asyncio.sleep(0)
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
        await asyncio.wait_for(waiting, 10)
        assert runs == [1, 1]
        assert gate.done

    asyncio.run(scenario())
