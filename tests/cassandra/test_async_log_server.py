"""The async repository's log on a real Cassandra: round trips, races, cancels.

The server comes from ``CHATLEDGER_TEST_CASSANDRA_URL`` (see
``tests/conformance/test_cassandra.py``); without one these tests are skipped,
or fail when the backend is required. The async repository sends every read
with the driver's ``execute_async`` and awaits it through ``add_callbacks``,
which :mod:`tests.cassandra.counting` notes.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from chatledger import Message, MessageWindow
from chatledger_cassandra import AsyncCassandraChatMemoryRepository, parse_url
from chatledger_cassandra.statements import LANE_EVICTED
from tests.backends import backend_url
from tests.cassandra.counting import CountingSession

Scenario = Callable[
    [AsyncCassandraChatMemoryRepository, CountingSession], Awaitable[None]
]


@pytest.fixture
def url(required: set[str]) -> str:
    return backend_url("cassandra", required)


def _run(url: str, scenario: Scenario) -> None:
    """Run ``scenario`` on a fresh table and a counting session, dropped afterwards."""

    async def main() -> None:
        table = f"alog_{uuid.uuid4().hex[:12]}"
        async with AsyncCassandraChatMemoryRepository.from_url(
            url, table=table, create_keyspace=True
        ) as owner:
            await owner.create_schema()
            counting = CountingSession(owner.session)
            repository = AsyncCassandraChatMemoryRepository(
                counting,
                keyspace=parse_url(url).keyspace or "chatledger",
                table=table,
                create_schema=False,
            )
            try:
                await scenario(repository, counting)
            finally:
                await owner.drop_schema()

    asyncio.run(main())


def _seqs(repository: AsyncCassandraChatMemoryRepository, cid: str) -> list[int]:
    table = f'"{repository.keyspace}"."{repository.table}"'
    rows = repository.session.execute(
        f"SELECT seq FROM {table} WHERE conversation_id = %s AND lane < %s",
        (cid, LANE_EVICTED),
    )
    return sorted(row.seq for row in rows)


def test_cassandra_async_log_reads_are_sent_together(url: str) -> None:
    async def scenario(
        repository: AsyncCassandraChatMemoryRepository, counting: CountingSession
    ) -> None:
        await repository.append_to_log(
            "c", [Message.system("S"), Message.user("u"), Message.assistant("a")]
        )
        other = AsyncCassandraChatMemoryRepository(
            counting,
            keyspace=repository.keyspace,
            table=repository.table,
            create_schema=False,
        )
        with counting.counting() as calls:
            view = await other.find_window("c", MessageWindow(10))
        assert [m.content for m in view] == ["S", "u", "a"]
        assert calls.events == ["send", "send", "wait", "wait"]
        with counting.counting() as calls:
            await other.append_to_log("c", [Message.user("next")])
        # The batch, and the record's listing row sent just before it.
        assert (calls.requests, calls.statements[1]) == (2, "BATCH")
        assert "_records" in calls.statements[0]
        cold = AsyncCassandraChatMemoryRepository(
            counting,
            keyspace=repository.keyspace,
            table=repository.table,
            create_schema=False,
        )
        with counting.counting() as calls:
            await cold.append_to_log("c", [Message.assistant("more")])
        assert (calls.requests, calls.round_trips) == (5, 2)
        with counting.counting() as calls:
            page = await cold.find_messages_page("c", limit=2, newest_first=False)
        assert (calls.requests, calls.round_trips) == (2, 1)
        assert [m.content for m in page.messages] == ["S", "u"]

    _run(url, scenario)


def test_cassandra_async_log_appends_of_many_tasks_are_gap_free(url: str) -> None:
    async def scenario(
        repository: AsyncCassandraChatMemoryRepository, counting: CountingSession
    ) -> None:
        others = [
            AsyncCassandraChatMemoryRepository(
                counting,
                keyspace=repository.keyspace,
                table=repository.table,
                create_schema=False,
            )
            for _ in range(2)
        ]

        async def writer(target: AsyncCassandraChatMemoryRepository, name: str) -> None:
            for n in range(10):
                await target.append_to_log("race", [Message.user(f"{name}-{n}")])

        await asyncio.gather(
            *(writer(target, f"w{k}") for k, target in enumerate([repository] * 2)),
            *(writer(target, f"o{k}") for k, target in enumerate(others)),
        )
        log = await repository.find_by_conversation_id("race")
        assert len(log) == 40
        assert len({m.content for m in log}) == 40
        seqs = _seqs(repository, "race")
        assert seqs == list(range(seqs[0], seqs[0] + 40))

    _run(url, scenario)


def test_cassandra_async_cancelled_log_appends_store_whole_batches(url: str) -> None:
    async def scenario(
        repository: AsyncCassandraChatMemoryRepository, counting: CountingSession
    ) -> None:
        rng = random.Random(7)
        batches = [
            [Message.user(f"u{n}"), Message.assistant(f"a{n}"), Message.user(f"v{n}")]
            for n in range(12)
        ]

        async def cancelled(batch: list[Message]) -> Any:
            task = asyncio.ensure_future(repository.append_to_log("c", batch))
            for _ in range(rng.randint(0, 12)):
                await asyncio.sleep(0)
            task.cancel()
            return await asyncio.gather(task, return_exceptions=True)

        for batch in batches:
            await cancelled(batch)
        stored = {m.id for m in await repository.find_by_conversation_id("c")}
        for batch in batches:
            ids = {m.id for m in batch}
            assert ids <= stored or not ids & stored, "a batch is whole or absent"
        # The log goes on after the cancellations, numbered without gaps.
        for batch in batches:
            await repository.append_to_log("c", batch)
        seqs = _seqs(repository, "c")
        assert len(seqs) == 36
        assert seqs == list(range(seqs[0], seqs[0] + 36))

    _run(url, scenario)
