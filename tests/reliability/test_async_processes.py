"""Concurrent async adds from several processes on one conversation.

Each of four fresh processes runs its own event loop and adds 50 messages to
one conversation at once (``asyncio.gather``); the stored conversation must
hold every one of the 200 exactly once. The one-loop case is
``test_two_hundred_concurrent_adds_lose_and_duplicate_nothing``.
"""

from __future__ import annotations

import asyncio
import multiprocessing
from pathlib import Path
from typing import Any

import pytest

from chatledger import AsyncMessageWindowChatMemory, Message, connect_async
from tests.reliability.test_async_cancellation import BACKENDS, ids, repository_spec

PROCESSES = 4
ADDS_PER_PROCESS = 50


def _add_concurrently(
    url: str, options: dict[str, Any], writer: str, barrier: Any, results: Any
) -> None:
    """In a fresh process: add ADDS_PER_PROCESS messages at once; report their ids."""

    async def main() -> list[str]:
        repository: Any = connect_async(url, **options)
        try:
            memory = AsyncMessageWindowChatMemory(repository, max_messages=1000)
            sent = [Message.user(f"{writer}:{n}") for n in range(ADDS_PER_PROCESS)]
            # Bounded: a sibling that died before the barrier must not hang us.
            barrier.wait(timeout=300)
            await asyncio.gather(*(memory.add("race", m) for m in sent))
            return ids(sent)
        finally:
            await repository.aclose()

    try:
        results.put((asyncio.run(main()), None))
    except BaseException as exc:
        barrier.abort()
        results.put(([], f"{writer}: {exc!r}"))


@pytest.mark.parametrize(
    ("backend", "driver"),
    [*BACKENDS, pytest.param("sqlite", None, id="sqlite-aiosqlite")],
)
def test_four_processes_of_concurrent_adds_lose_and_duplicate_nothing(
    backend: str, driver: str | None, tmp_path: Path
) -> None:
    url: str
    options: dict[str, Any] = {}
    if backend == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp_path / 'c.db'}"
    else:
        url, options = repository_spec(backend, driver)
    repository: Any = connect_async(url, **options)
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(PROCESSES)
    results = context.Queue()
    workers = [
        context.Process(
            target=_add_concurrently,
            args=(url, options, f"p{n}", barrier, results),
        )
        for n in range(PROCESSES)
    ]

    def race() -> list[str]:
        """Start the writers, wait for their reports; the ids they sent."""
        for worker in workers:
            worker.start()
        reports = [results.get(timeout=600) for _ in workers]
        for worker in workers:
            worker.join(timeout=60)
        assert [error for _, error in reports if error] == []
        return [i for sent_ids, _ in reports for i in sent_ids]

    async def main() -> None:
        try:
            # The schema exists before the writers race to their first write.
            await repository.create_schema()
            sent = await asyncio.to_thread(race)
            stored = ids(await repository.find_by_conversation_id("race"))
            assert len(stored) == PROCESSES * ADDS_PER_PROCESS
            assert sorted(stored) == sorted(sent)
        finally:
            try:
                await repository.drop_schema()
            finally:
                await repository.aclose()

    try:
        asyncio.run(main())
    finally:
        for worker in workers:
            if worker.is_alive():
                worker.terminate()
                worker.join(timeout=10)
