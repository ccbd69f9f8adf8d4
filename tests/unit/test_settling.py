"""``settled``: a cancelled caller waits for a sent write before it returns."""

from __future__ import annotations

import asyncio
import gc

import pytest

from chatledger.adapters import settled


def test_a_cancellation_waits_for_the_call_then_is_raised() -> None:
    async def main() -> None:
        sent = asyncio.Event()
        answer = asyncio.Event()
        landed: list[str] = []

        async def write() -> str:
            sent.set()
            await answer.wait()
            landed.append("written")
            return "done"

        caller = asyncio.create_task(settled(write()))
        await sent.wait()
        caller.cancel()
        await asyncio.sleep(0.01)
        assert not caller.done(), "the cancellation returned before the answer"
        answer.set()
        with pytest.raises(asyncio.CancelledError):
            await caller
        assert landed == ["written"]

    asyncio.run(main())


def test_without_a_cancellation_the_answer_and_errors_pass_through() -> None:
    async def fails() -> None:
        raise ValueError("refused")

    async def answers() -> int:
        return 7

    async def main() -> None:
        assert await settled(answers()) == 7
        with pytest.raises(ValueError, match="refused"):
            await settled(fails())

    asyncio.run(main())


def test_after_a_cancellation_the_calls_error_gives_way_to_it() -> None:
    reported: list[dict[str, object]] = []

    async def main() -> None:
        asyncio.get_running_loop().set_exception_handler(
            lambda _loop, context: reported.append(context)
        )
        answer = asyncio.Event()

        async def write() -> None:
            await answer.wait()
            raise ValueError("the write failed")

        caller = asyncio.create_task(settled(write()))
        await asyncio.sleep(0)
        caller.cancel()
        await asyncio.sleep(0)
        answer.set()
        with pytest.raises(asyncio.CancelledError):
            await caller
        del caller
        gc.collect()

    asyncio.run(main())
    gc.collect()
    assert reported == []  # the error that gave way is not "never retrieved"


def test_a_second_cancellation_stops_waiting_and_cancels_the_call() -> None:
    async def main() -> None:
        answer = asyncio.Event()
        write = asyncio.ensure_future(answer.wait())
        caller = asyncio.create_task(settled(write))
        await asyncio.sleep(0)
        caller.cancel()
        await asyncio.sleep(0)
        assert not caller.done()
        caller.cancel()
        with pytest.raises(asyncio.CancelledError):
            await caller
        assert write.cancelled()

    asyncio.run(main())


@pytest.mark.parametrize(
    ("cancelled_in", "steps"),
    [("statements", ["statements"]), ("commit", ["statements", "committed"])],
)
def test_a_transaction_is_waited_for_only_once_its_commit_is_under_way(
    cancelled_in: str, steps: list[str]
) -> None:
    async def main() -> None:
        committing = False
        started = asyncio.Event()
        commit = asyncio.Event()
        done: list[str] = []

        async def transaction() -> None:
            nonlocal committing
            done.append("statements")
            started.set()
            await commit.wait()
            committing = True
            await asyncio.sleep(0.01)
            done.append("committed")

        caller = asyncio.create_task(
            settled(transaction(), committing=lambda: committing)
        )
        await started.wait()
        if cancelled_in == "commit":
            commit.set()
            await asyncio.sleep(0)
        caller.cancel()
        with pytest.raises(asyncio.CancelledError):
            await caller
        commit.set()
        await asyncio.sleep(0.02)
        assert done == steps

    asyncio.run(main())


def test_a_timeout_waits_for_the_call_then_is_raised_as_a_timeout() -> None:
    async def main() -> None:
        landed: list[str] = []

        async def write() -> None:
            await asyncio.sleep(0.05)
            landed.append("written")

        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.01):
                await settled(write())
        assert landed == ["written"]
        current = asyncio.current_task()
        assert current is not None
        assert current.cancelling() == 0

    asyncio.run(main())
