"""Conversation records on Redis: the listing index and the record keys.

The conformance suite (``ConversationInfoTests``) checks what the records
are; these tests check what is particular to Redis, on plain Redis and on
Redis Cluster: an owner's listing reads that owner's index entries only,
however many others the index holds; delete, ``save_all(id, [])``,
``drop_schema`` and expiry leave no entry behind (expiry lazily, at the
listing that meets it); an index update lost between a write and its
follow-up (Cluster) neither hides the record nor shows it twice, and the
listing repairs it (``repair_conversation_index`` the first update of a new
conversation); a write is still one round trip on plain Redis.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from redis import Redis
from redis.cluster import RedisCluster

from chatledger import Message
from chatledger.testing.samples import ODD_CONVERSATION_IDS
from chatledger_redis import RedisChatMemoryRepository
from chatledger_redis.keys import ConversationKeys, IndexKeys
from chatledger_redis.scripts import INDEX, SET_INFO
from tests.backends import backend_url

#: How many other owners' records the listing test seeds.
OTHERS = 10_000


@pytest.fixture(scope="module")
def plain_client() -> Iterator[Redis]:
    client = Redis.from_url(backend_url("redis"))
    yield client
    client.close()


@pytest.fixture(scope="module")
def cluster_client() -> Iterator[RedisCluster]:
    client = RedisCluster.from_url(backend_url("redis_cluster"))
    yield client
    client.close()


@pytest.fixture(params=["redis", "redis_cluster"])
def client(request: pytest.FixtureRequest) -> Any:
    name = "plain_client" if request.param == "redis" else "cluster_client"
    return request.getfixturevalue(name)


@pytest.fixture
def prefix(client: Any) -> Iterator[str]:
    prefix = f"chatledger-test:{uuid.uuid4().hex[:12]}:"
    yield prefix
    for key in list(client.scan_iter(match=f"{prefix}*", count=1000)):
        client.unlink(key)


@pytest.fixture
def repository(client: Any, prefix: str) -> RedisChatMemoryRepository:
    return RedisChatMemoryRepository(client, key_prefix=prefix)


def _entries(repository: RedisChatMemoryRepository) -> dict[str, str]:
    """What the index's entries hash says of each id."""
    client: Any = repository.client
    held = client.hgetall(IndexKeys.of(repository.key_prefix).entries)
    return {k.decode(): v.decode() for k, v in held.items()}


def _index_sizes(repository: RedisChatMemoryRepository) -> tuple[int, int, int]:
    index = IndexKeys.of(repository.key_prefix)
    client = repository.client
    return (
        client.zcard(index.updated),
        client.zcard(index.owners),
        client.hlen(index.entries),
    )


class _Reads:
    """Counts the index entries and the records a repository's listings read."""

    def __init__(self, repository: RedisChatMemoryRepository, monkeypatch: Any) -> None:
        self.entries = 0
        self.records = 0
        client = repository.client
        read_index = client.zrevrangebylex
        read_records = repository._read_records

        def zrevrangebylex(*args: Any, **kwargs: Any) -> Any:
            members = read_index(*args, **kwargs)
            self.entries += len(members)
            return members

        def records(client: Any, ids: list[str]) -> list[Any]:
            self.records += len(ids)
            return read_records(client, ids)

        monkeypatch.setattr(client, "zrevrangebylex", zrevrangebylex)
        monkeypatch.setattr(repository, "_read_records", records)


def _seed_others(repository: RedisChatMemoryRepository, count: int) -> None:
    """``count`` records of as many owners, written as set_conversation_info
    writes them (the same script and follow-up), a pipeline at a time."""
    client = repository.client
    index = IndexKeys.of(repository.key_prefix).all()
    # EVALSHA in a pipeline takes no NOSCRIPT fallback: load them (on every
    # primary of a cluster) first.
    client.script_load(SET_INFO)
    client.script_load(INDEX)
    for start in range(0, count, 500):
        ids = [f"other-{n:05d}" for n in range(start, min(count, start + 500))]
        pipe = client.pipeline(transaction=False)
        for cid in ids:
            keys = ConversationKeys.of(repository.key_prefix, cid)
            names = [*keys.all(), *repository._record_keys(client, keys)]
            args = [0, "s", f"owner-{cid}", "k", ""]
            pipe.execute_command(
                "EVALSHA", repository._set_info.sha, len(names), *names, *args
            )
        replies = pipe.execute()
        updates = [(cid, reply[5]) for cid, reply in zip(ids, replies, strict=True)]
        follow = client.pipeline(transaction=False)
        for cid, op in updates:
            if op:
                follow.execute_command(
                    "EVALSHA", repository._index_script.sha, 3, *index, cid, "w", op
                )
        follow.execute()


def test_an_owner_listing_reads_that_owners_entries_only(
    repository: RedisChatMemoryRepository, monkeypatch: pytest.MonkeyPatch
) -> None:
    """10,000 other owners in the index: alice's pages read alice's entries."""
    repository.set_conversation_info("warm-up", owner="zed")
    _seed_others(repository, OTHERS)
    mine: list[str] = []
    for n in range(3):
        time.sleep(0.002)
        repository.append_to_log(f"alice-{n}", [Message.user("hi")])
        repository.set_conversation_info(f"alice-{n}", owner="alice")
        mine.insert(0, f"alice-{n}")
    assert _index_sizes(repository) == (OTHERS + 4, OTHERS + 4, OTHERS + 4)
    reads = _Reads(repository, monkeypatch)
    first = repository.find_conversations(owner="alice", limit=2)
    assert [i.id for i in first.items] == mine[:2]
    # limit + 1 entries, to know that another page follows
    assert (reads.entries, reads.records) == (3, 3)
    rest = repository.find_conversations(owner="alice", cursor=first.next_cursor)
    assert [i.id for i in rest.items] == mine[2:]
    assert rest.next_cursor is None
    assert (reads.entries, reads.records) == (4, 4)
    # Every record: a page reads its own size, not the index's.
    newest = repository.find_conversations(limit=5)
    assert [i.id for i in newest.items][:3] == mine
    assert (reads.entries, reads.records) == (4 + 6, 4 + 6)


def test_delete_save_all_and_drop_schema_leave_no_entry(
    repository: RedisChatMemoryRepository,
) -> None:
    for cid in ("deleted", "emptied", "kept", "bare"):
        if cid != "bare":
            repository.append_to_log(cid, [Message.user("hi")])
        repository.set_conversation_info(cid, owner="ann")
    assert _index_sizes(repository) == (4, 4, 4)
    repository.delete_by_conversation_id("deleted")
    repository.save_all("emptied", [])
    assert set(_entries(repository)) == {"kept", "bare"}
    assert _index_sizes(repository) == (2, 2, 2)
    # A record emptied by removals stays, and so does its entry.
    repository.remove_newest("kept", 5)
    assert set(_entries(repository)) == {"kept", "bare"}
    repository.set_conversation_info("bare", owner=None)
    assert _index_sizes(repository) == (2, 1, 2)
    repository.drop_schema()
    assert list(repository.client.scan_iter(match=f"{repository.key_prefix}*")) == []


def test_expiry_hides_the_record_and_the_listing_drops_its_entry(
    client: Any, prefix: str
) -> None:
    repository = RedisChatMemoryRepository(
        client, key_prefix=prefix, ttl=timedelta(seconds=1)
    )
    repository.set_conversation_info("titled", owner="lee")
    repository.append_to_log("talked", [Message.user("hi")])
    keys = ConversationKeys.of(prefix, "titled")
    assert 0 < client.pttl(keys.info) <= 1000
    deadline = time.monotonic() + 10
    while client.exists(keys.info, ConversationKeys.of(prefix, "talked").info):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    # The index still holds both entries: expiry tells it nothing.
    assert _index_sizes(repository) == (2, 1, 2)
    assert repository.find_conversations(owner="lee").items == []
    assert repository.find_conversations().items == []
    assert repository.get_conversation_info("titled") is None
    # The listings dropped what they found without a record.
    assert _index_sizes(repository) == (0, 0, 0)


def test_a_lost_index_update_is_listed_once_and_repaired(
    cluster_client: RedisCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On Cluster the index's update follows the write; a client may die between."""
    prefix = f"chatledger-test:{uuid.uuid4().hex[:12]}:"
    repository = RedisChatMemoryRepository(cluster_client, key_prefix=prefix)
    try:
        for n in range(5):
            time.sleep(0.002)
            repository.append_to_log(f"c{n}", [Message.user("hi")])
            repository.set_conversation_info(f"c{n}", owner="ann")
        before = _entries(repository)["c1"]
        time.sleep(0.002)
        with monkeypatch.context() as lost:
            lost.setattr(repository, "_publish", lambda *args: None)
            repository.append_to_log("c1", [Message.user("again")])
        assert _entries(repository)["c1"] == before  # the index lags
        record = repository.get_conversation_info("c1")
        assert record is not None
        walked = []
        cursor = None
        while True:
            page = repository.find_conversations(owner="ann", limit=2, cursor=cursor)
            walked += page.items
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        # Listed once, at its entry's place, as its record says.
        assert [i.id for i in walked] == ["c4", "c3", "c2", "c1", "c0"]
        assert walked[3] == record
        # The listing repaired the entry: the next one has it in front.
        assert _entries(repository)["c1"].split(":")[1] == str(
            int(record.updated_at.timestamp() * 1000)
        )
        assert [i.id for i in repository.find_conversations(limit=1).items] == ["c1"]
        newest = repository.find_conversations(owner="ann", limit=1).items
        assert [i.id for i in newest] == ["c1"]
    finally:
        for key in list(cluster_client.scan_iter(match=f"{prefix}*", count=1000)):
            cluster_client.unlink(key)


def test_updates_arriving_out_of_order_leave_the_newest(
    repository: RedisChatMemoryRepository,
) -> None:
    """The INDEX script applies an update only when its version is newer."""
    client: Any = repository.client
    index = IndexKeys.of(repository.key_prefix).all()
    sha = client.script_load(INDEX)
    repository.set_conversation_info("c", owner="ann")
    held = _entries(repository)["c"]
    version, stamp = (int(part) for part in held.split(":")[:2])
    newer = f"{version + 2}:{stamp + 5}:bob"
    older = f"{version + 1}:{stamp + 3}:carl"
    for update in (newer, older):
        client.execute_command("EVALSHA", sha, 3, *index, "c", "w", update)
    assert _entries(repository)["c"] == newer
    assert _index_sizes(repository) == (1, 1, 1)
    assert client.zrange(index[1], 0, -1) == [
        b"bob\x00" + f"{stamp + 5:015d}".encode() + b"\x00c"
    ]
    # A drop for a time the index no longer holds leaves the newer entry.
    client.execute_command("EVALSHA", sha, 3, *index, "c", "x", str(stamp))
    assert _entries(repository)["c"] == newer
    client.execute_command("EVALSHA", sha, 3, *index, "c", "x", str(stamp + 5))
    assert _index_sizes(repository) == (0, 0, 0)


def test_the_listing_gives_back_every_id_exactly(
    repository: RedisChatMemoryRepository,
) -> None:
    """On plain Redis the scripts read a conversation's id back from its
    keys' tag (unpadded base64url, decoded in Lua) for the index, at the
    first write, and from its record at the next ones: odd ids, and ids of
    every length and padding up to the limit, are listed as written."""
    pick = random.Random(27)
    ids = {*ODD_CONVERSATION_IDS}
    for length in range(1, 64):
        ids.add("".join(pick.choice("aZ09_-{}é😀") for _ in range(length)))
    for conversation_id in ids:
        repository.append_to_log(conversation_id, [Message.user("x")])
        repository.set_conversation_info(conversation_id, owner="o")
        repository.append_to_log(conversation_id, [Message.user("y")])
    listed: list[str] = []
    cursor = None
    while True:
        page = repository.find_conversations(cursor=cursor, limit=50)
        listed += [info.id for info in page.items]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert sorted(listed) == sorted(ids)
    # The listing passes over an entry whose record is gone: read the index too.
    assert set(_entries(repository)) == ids


def test_a_write_stays_one_round_trip_on_plain_redis(
    plain_client: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scripts update the index themselves: no command follows them."""
    prefix = f"chatledger-test:{uuid.uuid4().hex[:12]}:"
    repository = RedisChatMemoryRepository(plain_client, key_prefix=prefix)
    try:
        repository.append_to_log("c", [Message.user("warm")])
        repository.set_conversation_info("c", owner="ann")
        sent: list[Any] = []
        execute: Any = plain_client.execute_command

        def counted(*args: Any, **kwargs: Any) -> Any:
            sent.append(args[0])
            return execute(*args, **kwargs)

        monkeypatch.setattr(plain_client, "execute_command", counted)
        repository.append_to_log("c", [Message.user("one")])
        repository.set_conversation_info("c", metadata={"t": 1})
        repository.remove_newest("c")
        repository.save_all("c", [Message.user("two")])
        repository.delete_by_conversation_id("c")
        assert sent == ["EVALSHA"] * 5
    finally:
        for key in list(plain_client.scan_iter(match=f"{prefix}*", count=1000)):
            plain_client.unlink(key)


def test_a_listing_loads_its_script_when_the_server_lost_it(
    plain_client: Redis,
) -> None:
    """The records are read by EVALSHA in a pipeline: after a SCRIPT FLUSH too."""
    prefix = f"chatledger-test:{uuid.uuid4().hex[:12]}:"
    repository = RedisChatMemoryRepository(plain_client, key_prefix=prefix)
    try:
        repository.set_conversation_info("c", owner="ann")
        plain_client.script_flush()
        assert [i.id for i in repository.find_conversations(owner="ann").items] == ["c"]
    finally:
        for key in list(plain_client.scan_iter(match=f"{prefix}*", count=1000)):
            plain_client.unlink(key)


def test_a_lost_first_update_is_listed_once_the_index_is_repaired(
    cluster_client: RedisCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new conversation whose index update was lost: repair_conversation_index."""
    prefix = f"chatledger-test:{uuid.uuid4().hex[:12]}:"
    repository = RedisChatMemoryRepository(cluster_client, key_prefix=prefix)
    try:
        repository.set_conversation_info("kept", owner="ann")
        with monkeypatch.context() as lost:
            lost.setattr(repository, "_publish", lambda *args: None)
            repository.append_to_log("lost", [Message.user("hi")])
            repository.set_conversation_info("lost", owner="ann")
        assert repository.get_conversation_info("lost") is not None
        assert [i.id for i in repository.find_conversations().items] == ["kept"]
        assert repository.repair_conversation_index() == 1
        assert repository.repair_conversation_index() == 0
        for owner in ("ann", None):
            listed = repository.find_conversations(owner=owner).items
            assert [i.id for i in listed] == ["lost", "kept"]
    finally:
        for key in list(cluster_client.scan_iter(match=f"{prefix}*", count=1000)):
            cluster_client.unlink(key)
