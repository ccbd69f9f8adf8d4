"""LoopLocal: a value per event loop, made on its first use, closed on that loop."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from chatledger.adapters import LoopClosedFirstWarning, LoopLocal

THREADS = 4


class Client:
    """Stands for a client whose I/O belongs to one loop: it records where it closed."""

    made = 0

    def __init__(self) -> None:
        type(self).made += 1
        self.loop = asyncio.get_running_loop()
        self.closed_on: list[asyncio.AbstractEventLoop] = []

    async def aclose(self) -> None:
        self.closed_on.append(asyncio.get_running_loop())


def _clients() -> LoopLocal[Client]:
    return LoopLocal(Client, close=Client.aclose)


def test_a_loop_keeps_its_value_and_the_next_loop_gets_another() -> None:
    clients = _clients()

    async def twice() -> Client:
        first = clients.get()
        assert clients.get() is first
        assert first.loop is asyncio.get_running_loop()
        return first

    one, two = asyncio.run(twice()), asyncio.run(twice())
    assert one is not two


def test_outside_a_running_loop_there_is_no_value() -> None:
    with pytest.raises(RuntimeError):
        _clients().get()


def test_each_value_is_closed_on_its_loop_when_asyncio_run_shuts_it_down() -> None:
    clients = _clients()

    async def use() -> Client:
        return clients.get()

    client = asyncio.run(use())
    assert client.closed_on == [client.loop]
    with asyncio.Runner() as runner:
        kept = runner.run(use())
        assert kept.closed_on == []  # the loop is still open
    assert kept.closed_on == [kept.loop]


def test_the_first_loop_takes_the_value_made_beforehand() -> None:
    made: list[str] = []

    def make() -> str:
        made.append("made")
        return "made"

    values = LoopLocal(make, first="ready")

    async def get() -> str:
        return values.get()

    assert asyncio.run(get()) == "ready"
    assert made == []
    assert asyncio.run(get()) == "made"
    assert made == ["made"]


def test_threads_each_running_a_loop_get_one_value_each_from_their_first_call() -> None:
    clients = _clients()
    Client.made = 0
    start = threading.Barrier(THREADS)
    seen: list[tuple[Client, asyncio.AbstractEventLoop]] = []
    failures: list[BaseException] = []

    def worker() -> None:
        async def calls() -> None:
            got = {id(clients.get()) for _ in range(100)}
            assert len(got) == 1
            seen.append((clients.get(), asyncio.get_running_loop()))

        try:
            start.wait()
            asyncio.run(calls())
        except BaseException as error:  # reported below
            failures.append(error)

    threads = [threading.Thread(target=worker) for _ in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert Client.made == THREADS
    assert all(client.loop is loop for client, loop in seen)
    assert all(client.closed_on == [client.loop] for client, _ in seen)


def test_a_lock_per_loop_is_waited_on_from_several_loops() -> None:
    """One asyncio.Lock waited on from two loops raises; one per loop does not."""
    locks: LoopLocal[asyncio.Lock] = LoopLocal(asyncio.Lock)

    async def contend() -> None:
        async def hold() -> None:
            async with locks.get():
                await asyncio.sleep(0)

        await asyncio.gather(hold(), hold())

    asyncio.run(contend())
    asyncio.run(contend())


def test_aclose_closes_this_loop_s_value_now_and_another_loop_s_there() -> None:
    clients = _clients()
    other = asyncio.new_event_loop()
    thread = threading.Thread(target=other.run_forever)
    thread.start()
    try:

        async def use() -> Client:
            return clients.get()

        theirs = asyncio.run_coroutine_threadsafe(use(), other).result()

        async def close_here() -> Client:
            mine = clients.get()
            await clients.aclose()
            assert mine.closed_on == [asyncio.get_running_loop()]
            return mine

        with asyncio.Runner() as runner:
            mine = runner.run(close_here())
            # A later call makes a new value.
            assert runner.run(use()) is not mine

        async def settle() -> None:
            # The closing aclose handed over runs as a task of this loop.
            await asyncio.gather(*(asyncio.all_tasks() - {asyncio.current_task()}))

        asyncio.run_coroutine_threadsafe(settle(), other).result()
        assert theirs.closed_on == [other]
        assert mine.closed_on == [mine.loop]  # not again at its loop's shutdown
    finally:
        other.call_soon_threadsafe(other.stop)
        thread.join()
        other.run_until_complete(other.shutdown_asyncgens())
        other.close()
    assert theirs.closed_on == [other]  # its loop's shutdown did not close it twice


def test_aclose_closes_a_first_value_no_loop_took() -> None:
    closed: list[str] = []

    async def close(value: str) -> None:
        closed.append(value)

    values = LoopLocal(str, close=close, first="unused")
    asyncio.run(values.aclose())
    assert closed == ["unused"]


def test_a_loop_closed_without_its_shutdown_leaves_its_value_with_a_warning() -> None:
    clients = _clients()
    loop = asyncio.new_event_loop()

    async def use() -> Client:
        return clients.get()

    try:
        left = loop.run_until_complete(use())
    finally:
        loop.close()  # without shutdown_asyncgens: nothing closes the value
    with pytest.warns(LoopClosedFirstWarning, match="shutdown_asyncgens"):
        asyncio.run(use())
    assert left.closed_on == []
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(use())
    finally:
        loop.close()
    with pytest.warns(LoopClosedFirstWarning):
        asyncio.run(clients.aclose())


def test_a_value_that_fails_to_close_at_shutdown_is_reported_by_its_loop() -> None:
    async def fail(value: object) -> None:
        raise OSError("cannot close")

    values = LoopLocal(object, close=fail)
    reported: list[dict[str, Any]] = []

    async def use() -> None:
        asyncio.get_running_loop().set_exception_handler(
            lambda loop, context: reported.append(context)
        )
        values.get()

    asyncio.run(use())
    assert [type(c.get("exception")) for c in reported] == [OSError]
