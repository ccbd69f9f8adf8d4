"""A turn whose task is cancelled stores nothing, or its prompt alone, never a part.

Each turn runs as a task on a real async backend and is cancelled for real
with ``task.cancel()``: while its block awaits the model call, and at each
named fault point of the write on exit (the handler cancels the task, so the
write's next await raises). After each, the conversation holds exactly what
the rules say, every connection is back in its pool outside any
transaction, and the next turn on the conversation goes through.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from chatledger import (
    AsyncMessageWindowChatMemory,
    Message,
    ToolCall,
    ToolResponse,
    connect_async,
)
from chatledger.adapters import FAULT_POINTS
from chatledger.turn import OnError
from tests.reliability.test_async_cancellation import (
    BACKENDS,
    assert_pool_clean,
    cancelled,
    ids,
    open_repository,
    run_on,
)

ASYNC_BACKENDS = [pytest.param("sqlite", None, id="sqlite-aiosqlite"), *BACKENDS]


def open_backend(backend: str, driver: str | None, directory: Path) -> Any:
    """A fresh async repository of ``backend`` (unique table or key prefix)."""
    if backend == "sqlite":
        return connect_async(f"sqlite+aiosqlite:///{directory / 'chat.db'}")
    return open_repository(backend, driver)


def check_outcomes(
    outcomes: set[str], stored: str, backend: str, driver: str | None
) -> None:
    """Cancellations at the fault points landed after the write took effect
    (``stored``) and, where they can, before it (``nothing``).

    A Redis write is one script, and a Neo4j log append one statement, sent
    before the write first waits (for the reply): once the write has begun, a
    cancellation no longer stops it.
    psycopg's pipelined write waits twice, for its lock and then for the
    write and ``COMMIT`` sent together: a cancellation after the lock lands
    before the ``COMMIT`` only when sending the write had to wait, so either
    is right there. Any other SQL write awaits each statement, so it can.
    """
    assert stored in outcomes
    assert outcomes <= {stored, "nothing"}
    if backend in ("redis", "neo4j"):
        assert outcomes == {stored}
    elif (backend, driver) != ("postgresql", "psycopg"):
        assert outcomes == {stored, "nothing"}


def tool_round(call_id: str) -> tuple[Message, Message]:
    call = ToolCall(call_id, "weather", '{"city": "Rome"}')
    return (
        Message.assistant(None, tool_calls=[call]),
        Message.tool(ToolResponse(call_id, "weather", '{"c": 24}')),
    )


async def reached(event: asyncio.Event, task: asyncio.Task[None]) -> None:
    """Wait until ``event`` is set; if ``task`` ends first, raise why."""
    waiter = asyncio.create_task(event.wait())
    await asyncio.wait({waiter, task}, return_when=asyncio.FIRST_COMPLETED)
    if not waiter.done():
        waiter.cancel()
        task.result()
        raise AssertionError("the turn ended before its model call")


@pytest.mark.parametrize("on_error", ["discard", "keep_prompt"])
@pytest.mark.parametrize(("backend", "driver"), ASYNC_BACKENDS)
def test_a_turn_cancelled_while_the_model_call_awaits(
    backend: str, driver: str | None, on_error: OnError, tmp_path: Path
) -> None:
    repository = open_backend(backend, driver, tmp_path)
    memory = AsyncMessageWindowChatMemory(repository, max_messages=100)
    history = [Message.user("u0"), Message.assistant("a0")]
    prompt = [Message.system("Be brief."), Message.user("u1")]
    seen: list[Message] = []

    async def take_turn(model_called: asyncio.Event) -> None:
        async with memory.turn("c", *prompt, on_error=on_error) as turn:
            seen.extend(turn.messages)
            turn.reply(*tool_round("t1"))  # the first round, collected
            model_called.set()
            await asyncio.sleep(3600)  # the second round's model call
            turn.reply(Message.assistant("never"))

    async def scenario() -> None:
        await memory.add("c", history)
        model_called = asyncio.Event()
        task = asyncio.create_task(take_turn(model_called))
        await reached(model_called, task)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert task.cancelled()
        assert ids(seen) == ids([prompt[0], *history, prompt[1]])
        kept = prompt if on_error == "keep_prompt" else []
        assert ids(await memory.get("c")) == ids([*history, *kept])
        await assert_pool_clean(repository)
        # Nothing is left locked or half-open: the next turn is stored whole.
        retry = [Message.user("u2"), Message.assistant("a2")]
        async with memory.turn("c", retry[0]) as turn:
            turn.reply(retry[1])
        assert ids(await memory.get("c")) == ids([*history, *kept, *retry])

    run_on(repository, scenario)


@pytest.mark.parametrize("on_error", ["discard", "keep_prompt"])
@pytest.mark.parametrize(("backend", "driver"), ASYNC_BACKENDS)
def test_a_turn_cancelled_in_its_write_is_stored_whole_or_not_at_all(
    backend: str, driver: str | None, on_error: OnError, tmp_path: Path
) -> None:
    repository = open_backend(backend, driver, tmp_path)
    memory = AsyncMessageWindowChatMemory(repository, max_messages=1000)

    async def scenario() -> None:
        await memory.add("c", [Message.user("u0"), Message.assistant("a0")])
        outcomes: set[str] = set()
        for point in FAULT_POINTS:
            before = ids(await memory.get("c"))
            prompt = [Message.user(f"u-{point}")]
            replies = [*tool_round(point), Message.assistant("done")]

            async def take_turn(
                prompt: list[Message] = prompt, replies: list[Message] = replies
            ) -> None:
                async with memory.turn("c", *prompt, on_error=on_error) as turn:
                    turn.reply(*replies[:2])
                    await asyncio.sleep(0)  # the model answers at once
                    turn.reply(replies[2])

            await cancelled(take_turn, point=point, repository=repository)
            found = ids(await memory.get("c"))
            whole = before + ids([*prompt, *replies])
            # The block ended normally: its one write is all or nothing, and
            # keep_prompt does not turn a cancelled write into a prompt alone.
            assert found in (before, whole), f"a part of the turn ({point})"
            outcomes.add("whole" if found == whole else "nothing")
            await assert_pool_clean(repository)
        check_outcomes(outcomes, "whole", backend, driver)

    run_on(repository, scenario)


@pytest.mark.parametrize(("backend", "driver"), ASYNC_BACKENDS)
def test_a_kept_prompt_cancelled_again_in_its_write_is_whole_or_absent(
    backend: str, driver: str | None, tmp_path: Path
) -> None:
    repository = open_backend(backend, driver, tmp_path)
    memory = AsyncMessageWindowChatMemory(repository, max_messages=1000)

    async def scenario() -> None:
        await memory.add("c", [Message.user("u0"), Message.assistant("a0")])
        outcomes: set[str] = set()
        for point in FAULT_POINTS:
            before = ids(await memory.get("c"))
            prompt = [Message.user(f"u-{point}"), Message.user(f"v-{point}")]
            model_called = asyncio.Event()

            async def take_turn(
                prompt: list[Message] = prompt,
                model_called: asyncio.Event = model_called,
            ) -> None:
                async with memory.turn("c", *prompt, on_error="keep_prompt"):
                    model_called.set()
                    await asyncio.sleep(3600)

            task = asyncio.create_task(take_turn())
            await reached(model_called, task)
            # The first cancellation ends the block; the second lands in the
            # write of the prompt.
            repository.fault_points.on(point, lambda _, task=task: task.cancel())
            task.cancel()
            try:
                with pytest.raises(asyncio.CancelledError):
                    await task
            finally:
                repository.fault_points.clear()
            found = ids(await memory.get("c"))
            kept = before + ids(prompt)
            assert found in (before, kept), f"a part of the prompt ({point})"
            outcomes.add("prompt" if found == kept else "nothing")
            await assert_pool_clean(repository)
        check_outcomes(outcomes, "prompt", backend, driver)

    run_on(repository, scenario)
