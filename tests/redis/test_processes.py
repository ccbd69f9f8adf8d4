"""Processes appending to one conversation at once lose and duplicate nothing."""

from __future__ import annotations

import multiprocessing
from multiprocessing.synchronize import Barrier

from redis import Redis

from chatledger import Message, MessageWindowChatMemory
from chatledger_redis import RedisChatMemoryRepository
from chatledger_redis.keys import ConversationKeys

PROCESSES = 4
APPENDS = 25
#: Bounds for a hung worker, not timings: spawning four interpreters on a
#: loaded machine can take tens of seconds.
WAIT_SECONDS = 300


def _write(url: str, prefix: str, writer: int, start: Barrier) -> None:
    repository = RedisChatMemoryRepository.from_url(url, key_prefix=prefix)
    memory = MessageWindowChatMemory(repository, max_messages=10_000)
    start.wait(WAIT_SECONDS)
    for counter in range(APPENDS):
        message = Message.user(f"{writer}:{counter}")
        memory.add("race", message)
        memory.add("race", message)  # a retry of the same append: a no-op
    repository.close()


def test_processes_lose_and_duplicate_nothing(
    redis_url: str, client: Redis, prefix: str
) -> None:
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(PROCESSES)
    workers = [
        context.Process(target=_write, args=(redis_url, prefix, writer, start))
        for writer in range(PROCESSES)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(WAIT_SECONDS)
    assert [worker.exitcode for worker in workers] == [0] * PROCESSES

    repository = RedisChatMemoryRepository(client, key_prefix=prefix)
    stored = [m.content or "" for m in repository.find_by_conversation_id("race")]
    assert len(stored) == PROCESSES * APPENDS
    assert len(set(stored)) == len(stored)
    for writer in range(PROCESSES):
        mine = [c for c in stored if c.startswith(f"{writer}:")]
        assert mine == [f"{writer}:{i}" for i in range(APPENDS)]
    seqs = sorted(
        int(s) for s in client.hkeys(ConversationKeys.of(prefix, "race").msgs)
    )
    assert seqs == list(range(PROCESSES * APPENDS))
