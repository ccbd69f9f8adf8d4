"""The async repository on a real Cassandra, beyond what the conformance suite sees.

The server comes from ``CHATLEDGER_TEST_CASSANDRA_URL`` (see
``tests/conformance/test_cassandra.py``); without one these tests are skipped,
or fail when the backend is required.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
from cassandra.cluster import Cluster

from chatledger import (
    AsyncMessageWindowChatMemory,
    Message,
    MessageWindow,
    StoreNotFoundError,
)
from chatledger_cassandra import (
    AsyncCassandraChatMemoryRepository,
    CassandraChatMemoryRepository,
)
from tests.backends import backend_url


def _table() -> str:
    return f"asrv_{uuid.uuid4().hex[:12]}"


def _run(
    url: str, scenario: Callable[[AsyncCassandraChatMemoryRepository], Awaitable[None]]
) -> None:
    """Run ``scenario`` on a fresh table, dropped afterwards."""

    async def main() -> None:
        async with AsyncCassandraChatMemoryRepository.from_url(
            url, table=_table(), create_keyspace=True
        ) as repository:
            try:
                await scenario(repository)
            finally:
                await repository.drop_schema()

    asyncio.run(main())


@pytest.fixture
def url(required: set[str]) -> str:
    return backend_url("cassandra", required)


def test_cassandra_concurrent_first_calls_connect_and_make_the_schema_once(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    clusters: list[Any] = []
    ddl: list[str] = []

    class CountedCluster(Cluster):  # type: ignore[misc]
        """The driver's own cluster, counting what the repository asks of it."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            clusters.append(self)

        def connect(self, *args: Any, **kwargs: Any) -> Any:
            session = super().connect(*args, **kwargs)
            execute_async = session.execute_async

            def counted(statement: Any, *rest: Any, **options: Any) -> Any:
                if isinstance(statement, str) and statement.startswith("CREATE"):
                    ddl.append(statement)
                return execute_async(statement, *rest, **options)

            session.execute_async = counted
            return session

    monkeypatch.setattr("cassandra.cluster.Cluster", CountedCluster)

    async def scenario(repository: AsyncCassandraChatMemoryRepository) -> None:
        assert clusters == []  # from_url opened nothing
        listed = await asyncio.gather(
            *(repository.find_conversation_ids() for _ in range(20))
        )
        assert listed == [[]] * 20
        assert len(clusters) == 1
        keyspace, table = repository.keyspace, repository.table
        assert [d.split(" (")[0].split(" WITH")[0] for d in ddl] == [
            f'CREATE KEYSPACE IF NOT EXISTS "{keyspace}"',
            f'CREATE TABLE IF NOT EXISTS "{keyspace}"."{table}"',
            f'CREATE TABLE "{keyspace}"."{table}_records"',
        ]

    _run(url, scenario)


@pytest.mark.parametrize(
    "options", [{}, {"create_schema": False}], ids=["writer", "reader"]
)
def test_cassandra_async_missing_keyspace_names_create_keyspace(
    url: str, options: dict[str, Any]
) -> None:
    keyspace = f"absent_{uuid.uuid4().hex[:12]}"
    missing = urlunsplit(urlsplit(url)._replace(path=f"/{keyspace}"))

    async def main() -> None:
        async with AsyncCassandraChatMemoryRepository.from_url(
            missing, **options
        ) as repository:
            await repository.find_conversation_ids()

    with pytest.raises(StoreNotFoundError) as raised:
        asyncio.run(main())
    assert f"keyspace {keyspace!r} does not exist" in str(raised.value)
    assert "create_keyspace=True" in str(raised.value)


def test_cassandra_async_and_sync_share_one_table(url: str) -> None:
    table = _table()
    sync = CassandraChatMemoryRepository.from_url(
        url, table=table, create_keyspace=True
    )
    window = MessageWindow(2)
    first = [Message.user("U1"), Message.assistant("A1")]
    second = [Message.user("U2"), Message.assistant("A2")]

    async def main() -> None:
        async with AsyncCassandraChatMemoryRepository(
            sync.session, keyspace=sync.keyspace, table=table
        ) as repository:
            await repository.append_to_window("c", first, window)
            sync.append_to_window("c", second, window)
            # The record the sync repository wrote is the async one's too.
            assert (
                await repository.append_to_window("c", first, window)
            ).appended == []
            assert await repository.find_by_conversation_id("c") == second
        assert sync.session.is_shutdown is False  # a given session stays open

    try:
        asyncio.run(main())
        assert sync.find_by_conversation_id("c") == second
    finally:
        sync.drop_schema()
        sync.close()


def test_cassandra_async_reads_page_through_the_driver(url: str) -> None:
    async def main() -> None:
        async with AsyncCassandraChatMemoryRepository.from_url(
            url, table=_table(), create_keyspace=True, page_size=3
        ) as repository:
            try:
                stored = [Message.user(f"u{n}") for n in range(10)]
                await repository.save_all("c", stored)
                for n in range(7):
                    await repository.save_all(f"other{n}", [Message.user("x")])
                assert await repository.find_by_conversation_id("c") == stored
                assert len(await repository.find_conversation_ids()) == 8
            finally:
                await repository.drop_schema()

    asyncio.run(main())


async def _cancel_while_committing(
    repository: AsyncCassandraChatMemoryRepository, write: Awaitable[object]
) -> bool:
    """Cancel ``write`` once its batch is on the wire; return whether it finished."""
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(write)

    def cancel_next_turn() -> None:
        loop.call_soon(task.cancel)

    def on_commit(_: str) -> None:
        # Two loop turns: the first lets the write send its batch, the second
        # cancels it while it waits for the answer.
        loop.call_soon(cancel_next_turn)

    repository.fault_points.on("before_commit", on_commit)
    try:
        await task
    except asyncio.CancelledError:
        return False
    finally:
        repository.fault_points.clear()
    return True


def test_cassandra_cancelled_commit_leaves_old_or_new_and_a_retry_adds_once(
    url: str,
) -> None:
    async def scenario(repository: AsyncCassandraChatMemoryRepository) -> None:
        memory = AsyncMessageWindowChatMemory(repository, max_messages=1000)
        expected: list[str] = []
        outcomes = {"old": 0, "new": 0}
        cancelled = 0
        for n in range(20):
            batch = [Message.user(f"u{n}"), Message.assistant(f"a{n}")]
            finished = await _cancel_while_committing(
                repository, memory.add("c", batch)
            )
            found = [m.id for m in await repository.find_by_conversation_id("c")]
            assert found in (expected, expected + [m.id for m in batch])
            assert not finished or found != expected
            cancelled += not finished
            outcomes["new" if found != expected else "old"] += 1
            # The caller retries: the batch is stored once, whatever happened.
            await memory.add("c", batch)
            expected += [m.id for m in batch]
            assert [m.id for m in await repository.find_by_conversation_id("c")] == (
                expected
            )
        # The cancellations landed while the batches were on their way: the
        # server applied them whole, and the retries did not add them again.
        assert cancelled > 0
        assert outcomes["new"] > 0

    _run(url, scenario)


def test_cassandra_repository_closed_while_connecting_shuts_the_cluster(
    url: str,
) -> None:
    async def main() -> None:
        repository = AsyncCassandraChatMemoryRepository.from_url(url, table=_table())
        first = asyncio.create_task(repository.find_conversation_ids())
        await asyncio.sleep(0)
        first.cancel()  # the connect goes on without it
        with pytest.raises(asyncio.CancelledError):
            await first
        await repository.aclose()
        assert repository.session is not None
        assert repository.session.is_shutdown

    asyncio.run(main())


def test_cassandra_async_schema_made_when_asked_for(url: str) -> None:
    from cassandra import InvalidRequest

    async def main() -> None:
        async with AsyncCassandraChatMemoryRepository.from_url(
            url, table=_table(), create_keyspace=True, create_schema=False
        ) as repository:
            with pytest.raises(InvalidRequest):
                await repository.find_conversation_ids()  # no table yet
            await repository.create_schema()
            try:
                await repository.save_all("c", [Message.user("hi")])
                assert await repository.find_conversation_ids() == ["c"]
            finally:
                await repository.drop_schema()

    asyncio.run(main())
