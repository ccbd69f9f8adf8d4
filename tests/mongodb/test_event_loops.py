"""Which event loops one async MongoDB repository serves.

The repository's own state serves any loop: one after another (``asyncio.run``
twice) or several at once from threads, each with its own loop. pymongo's
``AsyncMongoClient`` does not: it serves the loop it was first used in and
refuses any other with a ``RuntimeError``, before any I/O. The stand-in, NOT a
MongoDB server, runs the first cases; the last one shows the driver's rule on
a client that never reaches a server.
"""

from __future__ import annotations

import asyncio
import threading

import pytest
from pymongo.errors import ServerSelectionTimeoutError

from chatledger import Message, MessageWindow
from chatledger_mongodb import AsyncMongoDBChatMemoryRepository

pytest.importorskip("mongomock")

from tests.mongodb.test_async_repository import _CountingIndexes, _unreachable

THREADS = 4
ROUNDS = 3


async def _append_at_once(
    repository: AsyncMongoDBChatMemoryRepository, prefix: str
) -> None:
    """Ten first appends at once: they meet at the lock before the TTL index."""
    window = MessageWindow(10)
    await asyncio.gather(
        *(
            repository.append_to_window(f"{prefix}{i}", [Message.user("u")], window)
            for i in range(10)
        )
    )


def test_async_mongodb_asyncio_run_twice_on_one_repository() -> None:
    client = _CountingIndexes()
    repository = AsyncMongoDBChatMemoryRepository(client, collection="c")  # type: ignore[arg-type]
    asyncio.run(_append_at_once(repository, "a"))
    asyncio.run(repository.drop_schema())
    asyncio.run(_append_at_once(repository, "b"))
    found = asyncio.run(repository.find_conversation_ids())
    assert sorted(found) == sorted(f"b{i}" for i in range(10))
    assert client.created == 2


def test_async_mongodb_threads_each_running_their_own_loop_share_one_repository() -> (
    None
):
    client = _CountingIndexes()
    repository = AsyncMongoDBChatMemoryRepository(client, collection="c")  # type: ignore[arg-type]
    start = threading.Barrier(THREADS)
    errors: list[BaseException] = []

    def work(thread: int) -> None:
        try:
            start.wait()
            for round_ in range(ROUNDS):
                asyncio.run(_append_at_once(repository, f"t{thread}r{round_}c"))
        except BaseException as error:  # the main thread reports it
            errors.append(error)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    found = asyncio.run(repository.find_conversation_ids())
    assert len(found) == THREADS * ROUNDS * 10


def test_async_mongodb_client_serves_only_the_loop_it_was_first_used_in() -> None:
    repository = _unreachable()
    with pytest.raises(ServerSelectionTimeoutError):
        asyncio.run(repository.find_by_conversation_id("c"))
    with pytest.raises(RuntimeError, match="different event loop"):
        asyncio.run(repository.find_by_conversation_id("c"))
