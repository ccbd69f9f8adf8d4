"""Appends go through while the server kills the repository's connections.

Redis, sync and async: writers append to one conversation at once, round
after round, and in every round the server ends every connection of the
repository's client (``CLIENT KILL ID``, from a second client). Every append
must still return normally, and the conversation must hold every message
exactly once: the client sends a command again on a new connection, and the
message ids make a script the server had already run a no-op.

Async: the second writer of a round kills, from its fault hook, when the
first one's script is on the wire, so the kill lands on a command in flight
and on the connections idle in the pool. Sync: the kill comes when every
writer of the round has reached the same hook (a barrier), so it lands on
idle connections only; a thread's kill could otherwise also land inside
another thread's pool checkout, between the new connection replacing a dead
one and its first use, which redis-py raises without its retry.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from chatledger import Message, MessageWindow
from chatledger_redis import AsyncRedisChatMemoryRepository
from tests.reliability.killers import killer_for
from tests.reliability.targets import open_target
from tests.reliability.workload import Target

ROUNDS = 30
WRITERS = 4
WINDOW = MessageWindow(10_000)


@pytest.fixture
def redis_target(required: set[str]) -> Iterator[Target]:
    with open_target("redis", required) as target:
        yield target


def _kill_at_second_writer(killer: Any, repository: Any) -> Any:
    """A fault hook that kills the client's connections at each round's second call."""
    reached = itertools.count()

    def hook(point: str) -> None:
        if next(reached) % WRITERS == 1:
            killer.kill(repository)

    return hook


def _kill_when_all_writers_wait(killer: Any, repository: Any) -> Any:
    """A fault hook that kills the client's connections once all writers reached it."""
    barrier = threading.Barrier(WRITERS, action=lambda: killer.kill(repository))

    def hook(point: str) -> None:
        barrier.wait(timeout=60)

    return hook


def _check(repository_messages: list[Message], sent: list[Message]) -> None:
    stored = [m.id for m in repository_messages]
    assert len(stored) == len(set(stored)), "a message was stored twice"
    assert set(stored) == {m.id for m in sent}
    for writer in range(WRITERS):  # each writer's messages keep its order
        own = [m.id for m in sent if str(m.content).startswith(f"w{writer}:")]
        assert [i for i in stored if i in set(own)] == own


def _batches() -> list[list[Message]]:
    return [
        [Message.user(f"w{writer}:{n}") for writer in range(WRITERS)]
        for n in range(ROUNDS)
    ]


def test_sync_appends_survive_killed_connections(redis_target: Target) -> None:
    killer = killer_for(redis_target)
    repository = redis_target.build()
    try:
        repository.fault_points.on(
            "before_commit", _kill_when_all_writers_wait(killer, repository)
        )
        sent: list[Message] = []
        errors: list[BaseException] = []
        with ThreadPoolExecutor(WRITERS) as pool:
            for batch in _batches():
                futures = [
                    pool.submit(repository.append_to_window, "c", [m], WINDOW)
                    for m in batch
                ]
                sent.extend(batch)
                errors.extend(e for f in futures if (e := f.exception()) is not None)
        repository.fault_points.clear()
        assert killer.killed >= ROUNDS
        assert not errors, f"{len(errors)} of {len(sent)} appends failed: {errors[0]!r}"
        _check(repository.find_by_conversation_id("c"), sent)
    finally:
        repository.close()


def test_async_appends_survive_killed_connections(redis_target: Target) -> None:
    killer = killer_for(redis_target)

    async def scenario() -> None:
        async with AsyncRedisChatMemoryRepository.from_url(
            *redis_target.args, **redis_target.kwargs
        ) as repository:
            repository.fault_points.on(
                "before_commit", _kill_at_second_writer(killer, repository)
            )
            sent: list[Message] = []
            errors: list[BaseException] = []
            for batch in _batches():
                outcomes = await asyncio.gather(
                    *(repository.append_to_window("c", [m], WINDOW) for m in batch),
                    return_exceptions=True,
                )
                sent.extend(batch)
                errors.extend(o for o in outcomes if isinstance(o, BaseException))
            repository.fault_points.clear()
            assert killer.killed >= ROUNDS
            assert not errors, (
                f"{len(errors)} of {len(sent)} appends failed: {errors[0]!r}"
            )
            _check(await repository.find_by_conversation_id("c"), sent)

    asyncio.run(scenario())
