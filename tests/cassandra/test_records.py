"""Conversation records on a real Cassandra: the listing table, its rows, races.

The conformance suite (``ConversationInfoTests``) checks what the records
say; these check how the listing finds them: an owner's listing reads that
owner's partition only, whatever else the table holds; rows a record moved
away from are skipped and removed; racing writers from repositories that do
not share a process's state leave each record listed once, where it is. The
server comes from ``CHATLEDGER_TEST_CASSANDRA_URL``; without one these tests
are skipped, or fail when the backend is required.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from cassandra.concurrent import execute_concurrent_with_args

from chatledger import Message
from chatledger_cassandra import (
    AsyncCassandraChatMemoryRepository,
    CassandraChatMemoryRepository,
)
from chatledger_cassandra.records import bucket_scope, owner_scope
from tests.backends import backend_url
from tests.cassandra.counting import CountingSession

WAIT_SECONDS = 300


@pytest.fixture(scope="module")
def root(required: set[str]) -> Iterator[CassandraChatMemoryRepository]:
    """A repository that owns the cluster; its session and keyspace serve all."""
    url = backend_url("cassandra", required)
    made = CassandraChatMemoryRepository.from_url(
        url, create_keyspace=True, create_schema=False
    )
    yield made
    made.close()


@pytest.fixture
def repository(
    root: CassandraChatMemoryRepository,
) -> Iterator[CassandraChatMemoryRepository]:
    made = CassandraChatMemoryRepository(
        CountingSession(root.session),
        keyspace=root.keyspace,
        table=f"r_{uuid.uuid4().hex[:20]}",
    )
    yield made
    made.drop_schema()


def _twin(repository: CassandraChatMemoryRepository) -> CassandraChatMemoryRepository:
    """Another repository on the same table: no lock or memory shared."""
    return CassandraChatMemoryRepository(
        repository.session,
        keyspace=repository.keyspace,
        table=repository.table,
        create_schema=False,
    )


def _listing(repository: CassandraChatMemoryRepository) -> str:
    return f'"{repository.keyspace}"."{repository.table}_records"'


def _rows(repository: Any, scope: str) -> list[tuple[datetime, str]]:
    found = repository.session.execute(
        f"SELECT updated_at, conversation_id FROM {_listing(repository)} "
        "WHERE scope = %s",
        (scope,),
    )
    return [(row[0].replace(tzinfo=UTC), row[1]) for row in found]


def test_an_owners_listing_reads_that_owners_partition_only(
    repository: CassandraChatMemoryRepository,
) -> None:
    for n in range(5):
        repository.append_to_log(f"mine-{n}", [Message.user(f"hi {n}")])
        repository.set_conversation_info(f"mine-{n}", owner="alice")
    # Three thousand conversations of other owners, and without one, stored
    # as the repository stores them (record in the partition, listed in the
    # owner's partition and in a bucket), written directly to be quick.
    # An hour back, so alice's five stay the newest records: at the second
    # now falls in, the first of them may be older than "now" truncated.
    now = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1)
    others = [(f"other-{n}", f"owner-{n % 1000}", now) for n in range(3000)]
    table = f'"{repository.keyspace}"."{repository.table}"'
    counting = repository.session
    assert isinstance(counting, CountingSession)
    session = counting._session
    record = session.prepare(
        f"INSERT INTO {table} (conversation_id, next_seq, emptied, owner, "
        "created_at, updated_at) VALUES (?, 7, true, ?, ?, ?)"
    )
    listed = session.prepare(
        f"INSERT INTO {_listing(repository)} (scope, updated_at, conversation_id) "
        "VALUES (?, ?, ?)"
    )
    execute_concurrent_with_args(
        session, record, [(c, o, t, t) for c, o, t in others], concurrency=64
    )
    rows = [(owner_scope(o), t, c) for c, o, t in others]
    rows += [(bucket_scope(c), t, c) for c, _, t in others]
    execute_concurrent_with_args(session, listed, rows, concurrency=64)
    with counting.counting() as calls:
        page = repository.find_conversations(owner="alice", limit=3)
    assert [i.id for i in page.items] == ["mine-4", "mine-3", "mine-2"]
    listing_reads = [n for n, text in enumerate(calls.statements) if "_records" in text]
    # One read of alice's partition, which held her five rows only, at most
    # limit + 1 of them, then the record and the count of each row read.
    assert len(listing_reads) == 1
    assert calls.rows[listing_reads[0]] == 4
    assert calls.requests == 1 + 2 * 4
    assert calls.round_trips == 2
    everyone = repository.find_conversations(limit=500).items
    assert len(everyone) == 500
    assert {i.id for i in everyone} >= {f"mine-{n}" for n in range(5)}


def test_rows_a_record_left_are_skipped_and_removed(
    repository: CassandraChatMemoryRepository,
) -> None:
    repository.set_conversation_info("c", owner="bob")
    repository.append_to_log("c", [Message.user("one")])
    info = repository.get_conversation_info("c")
    assert info is not None
    listing = _listing(repository)
    plant = (
        f"INSERT INTO {listing} (scope, updated_at, conversation_id) "
        "VALUES (%s, %s, %s)"
    )
    earlier = info.updated_at - timedelta(seconds=5)
    later = info.updated_at + timedelta(seconds=5)
    long_gone = datetime.now(UTC) - timedelta(hours=1)
    for scope, moment, cid in [
        (owner_scope("bob"), earlier, "c"),  # the record moved past it
        (owner_scope("bob"), later, "c"),  # a batch that lost its condition
        (owner_scope("bob"), long_gone, "deleted"),  # no record for an hour
        (owner_scope("bob"), datetime.now(UTC), "being-made"),  # may commit yet
        (owner_scope("bob"), info.updated_at, "c"),  # the current row, again
    ]:
        repository.session.execute(plant, (scope, moment, cid))
    assert repository.find_conversations(owner="bob").items == [info]
    left = _rows(repository, owner_scope("bob"))
    assert sorted(cid for _, cid in left) == ["being-made", "c", "c"]
    assert (info.updated_at, "c") in left
    # The owner's row of an owner set away is skipped; the new owner lists it.
    moved = repository.set_conversation_info("c", owner="carol")
    assert repository.find_conversations(owner="bob").items == []
    assert repository.find_conversations(owner="carol").items == [moved]


def test_racing_writers_leave_each_record_listed_once_where_it_is(
    repository: CassandraChatMemoryRepository,
) -> None:
    ids = [f"race-{n}" for n in range(4)]
    writers = [_twin(repository) for _ in range(3)]
    failures: list[BaseException] = []

    def append(worker: int) -> None:
        try:
            for n in range(12):
                writers[worker].append_to_log(
                    ids[(n + worker) % len(ids)], [Message.user(f"{worker}-{n}")]
                )
        except BaseException as error:  # reported below
            failures.append(error)

    def set_owners() -> None:
        try:
            for n in range(12):
                writers[0].set_conversation_info(
                    ids[n % len(ids)], owner=("dee", "eve")[n % 2]
                )
        except BaseException as error:  # reported below
            failures.append(error)

    threads = [threading.Thread(target=append, args=(w,)) for w in (1, 2)]
    threads.append(threading.Thread(target=set_owners))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT_SECONDS)
    assert failures == []
    truth = {cid: repository.get_conversation_info(cid) for cid in ids}
    everyone = repository.find_conversations().items
    assert sorted(i.id for i in everyone) == ids
    assert {i.id: i for i in everyone} == truth
    for owner in ("dee", "eve"):
        expected = sorted(c for c, i in truth.items() if i and i.owner == owner)
        listed = repository.find_conversations(owner=owner).items
        assert sorted(i.id for i in listed) == expected
    assert sum(i.message_count for i in everyone) == 24


def test_async_racing_appends_list_each_record_once(
    root: CassandraChatMemoryRepository,
) -> None:
    table = f"r_{uuid.uuid4().hex[:20]}"

    async def race() -> None:
        made = [
            AsyncCassandraChatMemoryRepository(
                root.session, keyspace=root.keyspace, table=table
            )
            for _ in range(2)
        ]
        await made[0].create_schema()
        try:
            await made[0].set_conversation_info("a", owner="fay")
            await asyncio.gather(
                *(
                    repo.append_to_log("a", [Message.user(f"{k}-{n}")])
                    for n in range(8)
                    for k, repo in enumerate(made)
                )
            )
            info = await made[1].get_conversation_info("a")
            assert info is not None
            assert (info.owner, info.message_count) == ("fay", 16)
            for owner in ("fay", None):
                page = await made[0].find_conversations(owner=owner)
                assert page.items == [info]
        finally:
            await made[0].drop_schema()

    asyncio.run(race())
