"""What the Redis adapter keeps on the server: markers, sequences, TTLs, listing."""

from __future__ import annotations

import random
import time
import uuid
from datetime import timedelta
from importlib.metadata import entry_points

import pytest
from redis import Redis

from chatledger import (
    ContentionError,
    InMemoryChatMemoryRepository,
    Message,
    MessageWindowChatMemory,
    Role,
    TokenWindowChatMemory,
    ToolResponse,
)
from chatledger.evicted_ids import EVICTED_IDS_KEPT, EVICTED_IDS_TRIM_STEP
from chatledger.testing import random_turns
from chatledger.tokens import estimate_tokens
from chatledger.window import MessageWindow, TokenWindow, apply_window
from chatledger_redis import RedisChatMemoryRepository
from chatledger_redis.keys import ConversationKeys
from chatledger_redis.markers import system_marker, turn_marker
from tests.window_append_memory import WindowAppendMemory


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _keys(repository: RedisChatMemoryRepository, conversation_id: str) -> list[str]:
    return ConversationKeys.of(repository.key_prefix, conversation_id).all()


def _seqs(client: Redis, repository: RedisChatMemoryRepository, cid: str) -> list[int]:
    msgs = ConversationKeys.of(repository.key_prefix, cid).msgs
    return sorted(int(seq) for seq in client.hkeys(msgs))


def test_markers_match_the_stored_messages(
    client: Redis, repository: RedisChatMemoryRepository
) -> None:
    """The script writes the same markers Python derives from the messages."""
    window = TokenWindow(80, estimate_tokens, "estimate_tokens")
    memory = WindowAppendMemory(
        repository, TokenWindowChatMemory(repository, 80).window
    )
    for batch in random_turns(random.Random(7), 15):
        memory.add("m", batch)
    keys = ConversationKeys.of(repository.key_prefix, "m")
    stored = {int(s): t for s, t in client.hgetall(keys.msgs).items()}
    # A window keeps the current system set alone: every marker is of its batch.
    current = int(client.hget(keys.meta, "sb") or 0)
    turns, system = [], []
    for seq, message in zip(
        sorted(stored), repository.find_by_conversation_id("m"), strict=True
    ):
        if message.role is Role.SYSTEM:
            size = window.measure(message)
            system.append(system_marker(message, size, seq, current))
        else:
            turns.append(turn_marker(message, window.measure(message), seq))
    assert [_text(m) for m in client.lrange(keys.turns, 0, -1)] == turns
    assert [_text(m) for m in client.lrange(keys.system, 0, -1)] == system
    meta = client.hgetall(keys.meta)
    assert meta[b"ctr"] == b"tokens:estimate_tokens"
    assert int(meta[b"tsize"]) == sum(int(t.split(":")[1]) for t in turns)
    assert int(meta[b"ssize"]) == sum(int(s.split(":")[0]) for s in system)


def test_sequence_numbers_are_gap_free(
    client: Redis, repository: RedisChatMemoryRepository
) -> None:
    """Every stored message got the next number; eviction only drops the oldest."""
    memory = MessageWindowChatMemory(repository, max_messages=5)
    for turn in range(15):
        memory.add("g", [Message.user(f"u{turn}"), Message.assistant(f"a{turn}")])
        memory.add("g", Message.user(f"u{turn}"))  # new ids: stored, not retries
    meta = ConversationKeys.of(repository.key_prefix, "g").meta
    assert int(client.hget(meta, "next") or 0) == 45
    kept = len(repository.find_by_conversation_id("g"))
    assert _seqs(client, repository, "g") == list(range(45 - kept, 45))
    repository.save_all("g", repository.find_by_conversation_id("g"))
    assert _seqs(client, repository, "g") == list(range(kept))


def test_a_counter_change_remeasures_the_history_once(
    client: Redis, repository: RedisChatMemoryRepository
) -> None:
    """save_all and message windows store no token sizes; a token window adds them."""
    rng = random.Random(3)
    token_window = TokenWindow(60, estimate_tokens, "estimate_tokens")
    message_window = MessageWindow(9)
    expected: list[Message] = []
    batches = random_turns(rng, 30)
    repository.save_all("r", [m for batch in batches[:4] for m in batch])
    expected = repository.find_by_conversation_id("r")
    for number, batch in enumerate(batches[4:]):
        window = token_window if number % 3 else message_window
        repository.append_to_window("r", batch, window)
        expected = apply_window(expected, batch, window).messages
        found = repository.find_by_conversation_id("r")
        assert [(m.role, m.content) for m in found] == [
            (m.role, m.content) for m in expected
        ]
    assert [m.id for m in repository.find_by_conversation_id("r")] == [
        m.id for m in expected
    ]


def test_a_history_that_keeps_changing_gives_up_with_contention_error(
    repository: RedisChatMemoryRepository, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When re-measuring never catches up, the append stops and writes nothing."""
    repository.save_all("moving", [Message.user("a")])
    # Another writer wins every race: the sizes are never stored.
    monkeypatch.setattr(repository, "_remeasure", lambda *args: None)
    window = TokenWindow(60, estimate_tokens, "other")
    with pytest.raises(ContentionError, match="'moving'") as caught:
        repository.append_to_window("moving", [Message.assistant("b")], window)
    assert caught.value.conversation_id == "moving"
    assert [m.content for m in repository.find_by_conversation_id("moving")] == ["a"]


def test_every_key_of_a_conversation_shares_one_expiry(
    client: Redis, prefix: str
) -> None:
    """One absolute deadline for all keys; a write without TTL persists them all."""
    with_ttl = RedisChatMemoryRepository(client, key_prefix=prefix, ttl=60)
    with_ttl.append_to_window(
        "t",
        [Message.system("S"), Message.user("U"), Message.assistant("A")],
        MessageWindow(10),
    )
    # Evicts U and A, so the evicted-id record exists too.
    with_ttl.append_to_window("t", [Message.user("U1")], MessageWindow(3))
    # Measured with another counter, so the markers are rewritten under the TTL.
    with_ttl.append_to_window(
        "t", [Message.user("U2")], TokenWindow(500, estimate_tokens)
    )
    keys = _keys(with_ttl, "t")
    assert client.exists(*keys) == len(keys) == 6
    version = str(client.info("server")["redis_version"])
    if int(version.split(".")[0]) >= 7:
        deadlines = {client.pexpiretime(key) for key in keys}
        assert len(deadlines) == 1
        assert deadlines.pop() > 0
    else:  # PEXPIRETIME came in 7.0: compare the remaining times instead
        remaining = [client.pttl(key) for key in keys]
        assert min(remaining) > 0
        assert max(remaining) - min(remaining) < 100
    without = RedisChatMemoryRepository(client, key_prefix=prefix)
    without.append_to_window("t", [Message.assistant("A2")], MessageWindow(10))
    assert {client.pttl(key) for key in keys} == {-1}


def test_an_evicted_conversation_leaves_only_its_record(
    client: Redis, prefix: str
) -> None:
    """A window that drops everything leaves the evicted-id record alone.

    The conversation is not listed and holds nothing; its record still makes a
    late retry a no-op, keeps the TTL, and goes with drop_schema. Only tool
    responses whose calls are not stored all go: a history with no user
    message is otherwise kept whole (rules 3 and 4).
    """
    repository = RedisChatMemoryRepository(client, key_prefix=prefix, ttl=60)
    batch = [_tool("c1"), _tool("c2")]
    result = repository.append_to_window("e", batch, MessageWindow(1))
    assert result.evicted_ids == [m.id for m in batch]
    keys = ConversationKeys.of(prefix, "e")
    assert sorted(_text(k) for k in client.scan_iter(match=f"{prefix}*")) == sorted(
        [keys.ids, keys.evicted]
    )
    assert [_text(i) for i in client.lrange(keys.evicted, 0, -1)] == [
        m.id for m in batch
    ]
    assert {_text(v) for v in client.hvals(keys.ids)} == {""}
    assert all(0 < client.pttl(key) <= 60_000 for key in (keys.ids, keys.evicted))
    assert repository.find_conversation_ids() == []
    assert repository.find_conversation_ids_page().ids == []
    assert repository.count_messages("e") == 0
    retried = repository.append_to_window("e", batch, MessageWindow(1))
    assert (retried.appended, retried.evicted_ids) == ([], [])
    assert repository.find_by_conversation_id("e") == []
    repository.drop_schema()
    assert list(client.scan_iter(match=f"{prefix}*")) == []


def test_the_record_keeps_the_newest_ids_only(
    client: Redis, repository: RedisChatMemoryRepository
) -> None:
    """The record holds the newest EVICTED_IDS_KEPT ids, list and hash marks alike.

    It is trimmed to that once it outgrows EVICTED_IDS_KEPT + EVICTED_IDS_TRIM_STEP.
    """
    extra = EVICTED_IDS_TRIM_STEP + 50
    batch = [Message.user(f"u{i}") for i in range(EVICTED_IDS_KEPT + extra + 1)]
    result = repository.append_to_window("b", batch, MessageWindow(1))
    assert len(result.evicted_ids) == EVICTED_IDS_KEPT + extra
    keys = ConversationKeys.of(repository.key_prefix, "b")
    kept = [m.id for m in batch[extra:-1]]
    assert [_text(i) for i in client.lrange(keys.evicted, 0, -1)] == kept
    marks = {_text(k): _text(v) for k, v in client.hgetall(keys.ids).items()}
    # The stored message keeps its sequence number; the record's ids are marks.
    assert marks.pop(batch[-1].id) == str(len(batch) - 1)
    assert marks == dict.fromkeys(kept, "")
    # An id still in the record is a retry; one that left it is stored again.
    window = MessageWindow(2)
    assert repository.append_to_window("b", [batch[extra]], window).appended == []
    again = repository.append_to_window("b", [batch[extra - 1]], window)
    assert [m.id for m in again.appended] == [batch[extra - 1].id]
    assert client.llen(keys.evicted) == EVICTED_IDS_KEPT
    # Below the trim line the record only grows: nothing evicted is forgotten.
    more = [Message.user(f"more{i}") for i in range(EVICTED_IDS_TRIM_STEP)]
    for message in more[:-1]:
        repository.append_to_window("b", [message], MessageWindow(1))
    assert client.llen(keys.evicted) == EVICTED_IDS_KEPT + EVICTED_IDS_TRIM_STEP
    repository.append_to_window("b", more[-1:], MessageWindow(1))
    recorded = [_text(i) for i in client.lrange(keys.evicted, 0, -1)]
    assert len(recorded) == EVICTED_IDS_KEPT
    assert recorded[-(EVICTED_IDS_TRIM_STEP - 1) :] == [m.id for m in more[:-1]]
    marks = {_text(k): _text(v) for k, v in client.hgetall(keys.ids).items()}
    assert {k for k, v in marks.items() if v == ""} == set(recorded)


def test_save_all_and_delete_remove_the_record_keys(
    client: Redis, repository: RedisChatMemoryRepository
) -> None:
    """Both clear the record on the server: list and hash marks."""
    keys = ConversationKeys.of(repository.key_prefix, "s")
    window = MessageWindow(1)
    for rewrite in (True, False):
        repository.append_to_window("s", [Message.user("x"), Message.user("y")], window)
        assert client.llen(keys.evicted) > 0
        if rewrite:
            repository.save_all("s", [Message.user("kept")])
        else:
            repository.delete_by_conversation_id("s")
        assert client.exists(keys.evicted) == 0
        assert "" not in {_text(v) for v in client.hvals(keys.ids)}


def test_a_retried_append_touches_nothing(
    client: Redis, repository: RedisChatMemoryRepository
) -> None:
    """Re-sending a stored batch changes no key, not even the write token."""
    batch = [Message.user("U"), Message.assistant("A")]
    repository.append_to_window("n", batch, MessageWindow(10))
    meta = ConversationKeys.of(repository.key_prefix, "n").meta
    before = client.hgetall(meta)
    result = repository.append_to_window("n", batch, MessageWindow(10))
    assert (result.appended, result.evicted_ids) == ([], [])
    assert client.hgetall(meta) == before


def test_listing_ignores_keys_it_did_not_write(
    client: Redis, repository: RedisChatMemoryRepository, prefix: str
) -> None:
    """Foreign or look-alike keys under the prefix never show up as conversations."""
    repository.save_all("real", [Message.user("x")])
    client.set(f"{prefix}{{!!}}:meta", "x")
    client.set(f"{prefix}{{YQ==}}:meta", "x")
    client.set(f"{prefix}{{YQ}}:meta:extra", "x")
    client.set(f"{prefix}x:{{YQ}}:meta", "x")
    assert repository.find_conversation_ids() == ["real"]
    other = RedisChatMemoryRepository(client, key_prefix=prefix + "x:")
    assert other.find_conversation_ids() == ["a"]


def test_decoded_responses_client_works(redis_url: str, prefix: str) -> None:
    """A client with decode_responses=True reads and appends alike."""
    with RedisChatMemoryRepository.from_url(
        redis_url, key_prefix=prefix, decode_responses=True
    ) as repository:
        first = Message.user("é 😀")
        repository.save_all("d", [first])
        result = repository.append_to_window(
            "d", [Message.user("next")], MessageWindow(1)
        )
        assert result.evicted_ids == [first.id]
        assert [m.content for m in repository.find_by_conversation_id("d")] == ["next"]
        assert repository.find_conversation_ids() == ["d"]


def _client_names(client: Redis) -> set[str]:
    return {c["name"] for c in client.client_list()}


def _gone_from_client_list(client: Redis, name: str) -> bool:
    # The server drops a closed connection from CLIENT LIST a moment after the
    # socket closes, so wait for it (generously: a loaded server is slow to
    # notice) rather than race it.
    deadline = time.monotonic() + 60
    while name in _client_names(client):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_close_closes_only_an_owned_client(client: Redis, redis_url: str) -> None:
    """from_url's client is closed by close(); a client passed in stays open."""
    name = f"chatledger-test-{uuid.uuid4().hex[:8]}"
    owned = RedisChatMemoryRepository.from_url(redis_url, client_name=name)
    owned.find_conversation_ids()
    assert name in _client_names(client)
    owned.close()
    assert _gone_from_client_list(client, name)

    given = Redis.from_url(redis_url, client_name=name)
    RedisChatMemoryRepository(given).close()
    given.ping()
    assert name in _client_names(client)
    given.close()


def test_entry_points_resolve_redis_urls(redis_url: str, prefix: str) -> None:
    """chatledger.connect finds the adapter for redis:// and rediss:// URLs."""
    found = {ep.name: ep for ep in entry_points(group="chatledger.repositories")}
    assert {"redis", "rediss"} <= set(found)
    repository = found["redis"].load()(redis_url, key_prefix=prefix, ttl=timedelta(1))
    assert isinstance(repository, RedisChatMemoryRepository)
    assert repository.ttl == timedelta(days=1)
    repository.close()


@pytest.mark.parametrize("url", ["redis+cluster://127.0.0.1:1/0"])
def test_cluster_urls_make_a_cluster_client(url: str) -> None:
    """The +cluster scheme asks for RedisCluster (which needs a reachable node).

    A sync RedisCluster connects as it is made: the first call makes it.
    """
    from redis.exceptions import RedisClusterException

    with (
        RedisChatMemoryRepository.from_url(url) as repository,
        pytest.raises(RedisClusterException),
    ):
        repository.find_conversation_ids()


class Crash(Exception):
    """Raised by a fault point."""


def _crash(point: str) -> None:
    raise Crash(point)


def test_a_fault_before_the_script_writes_nothing(
    repository: RedisChatMemoryRepository,
) -> None:
    """Every point before commit precedes the one script: nothing is half-written."""
    repository.save_all("f", [Message.user("kept")])
    before = repository.find_by_conversation_id("f")
    appends = ("after_lock", "after_insert", "after_evict", "before_commit")
    saves = ("after_lock", "after_delete", "after_insert", "before_commit")
    for point in appends:
        repository.fault_points.on(point, _crash)
        with pytest.raises(Crash):
            repository.append_to_window("f", [Message.user("new")], MessageWindow(1))
        repository.fault_points.clear()
    for point in saves:
        repository.fault_points.on(point, _crash)
        with pytest.raises(Crash):
            repository.save_all("f", [Message.user("replacement")])
        repository.fault_points.clear()
    assert repository.find_by_conversation_id("f") == before


def test_a_lost_acknowledgement_is_safe_to_retry(
    repository: RedisChatMemoryRepository,
) -> None:
    """A fault after commit left the append applied; the retry adds nothing."""
    batch = [Message.user("U1"), Message.assistant("A1")]
    repository.fault_points.on("after_commit", _crash)
    with pytest.raises(Crash):
        repository.append_to_window("ack", batch, MessageWindow(10))
    repository.fault_points.clear()
    assert repository.append_to_window("ack", batch, MessageWindow(10)).appended == []
    assert repository.find_by_conversation_id("ack") == batch


def test_an_append_loads_its_script_when_the_server_lost_it(
    client: Redis, repository: RedisChatMemoryRepository
) -> None:
    """An unknown script hash (a restarted server) is answered by loading it again."""
    repository._append.sha = "0" * 40  # what a server that lost the script sees
    result = repository.append_to_window("ns", [Message.user("hi")], MessageWindow(5))
    assert [m.content for m in result.appended] == ["hi"]
    assert repository._append.sha != "0" * 40
    assert [m.content for m in repository.find_by_conversation_id("ns")] == ["hi"]


def test_drop_schema_removes_only_this_prefix(client: Redis, prefix: str) -> None:
    """drop_schema deletes this repository's conversations, not a neighbour's."""
    ours = RedisChatMemoryRepository(client, key_prefix=prefix)
    neighbour = RedisChatMemoryRepository(client, key_prefix=prefix + "n:")
    try:
        ours.create_schema()
        for cid in ("a", "b"):
            ours.save_all(cid, [Message.user(cid)])
        neighbour.save_all("a", [Message.user("kept")])
        ours.drop_schema()
        assert ours.find_conversation_ids() == []
        assert not list(client.scan_iter(match=f"{prefix}{{*"))
        assert [m.content for m in neighbour.find_by_conversation_id("a")] == ["kept"]
    finally:
        neighbour.drop_schema()


def _same_as_in_memory(
    repository: RedisChatMemoryRepository,
    steps: list[tuple[str, list[Message], MessageWindow | None]],
) -> None:
    """Run ``steps`` (save_all when the window is None) on both, compare."""
    reference = InMemoryChatMemoryRepository()
    for cid, batch, window in steps:
        if window is None:
            repository.save_all(cid, batch)
            reference.save_all(cid, batch)
            continue
        ours = repository.append_to_window(cid, batch, window)
        theirs = reference.append_to_window(cid, batch, window)
        assert [m.id for m in ours.appended] == [m.id for m in theirs.appended]
        assert ours.evicted_ids == theirs.evicted_ids
        assert repository.find_by_conversation_id(
            cid
        ) == reference.find_by_conversation_id(cid)


def _tool(call: str) -> Message:
    return Message.tool([ToolResponse(id=call, name="lookup", data="{}")])


def test_an_emptied_turn_list_gets_its_head_checked_again(
    repository: RedisChatMemoryRepository,
) -> None:
    """After the turns are gone (the system prompt stays), a tool response
    appended first is still an orphan: the marker of a settled head is cleared."""
    system = Message.system("S")
    _same_as_in_memory(
        repository,
        [
            ("e", [system, Message.assistant("a0")], None),
            ("e", [Message.assistant("a1")], MessageWindow(10)),
            ("e", [system, _tool("c0")], None),
            # only tool responses without their calls: every turn goes, the
            # prompt stays (a history holding another message would keep it)
            ("e", [_tool("c1")], MessageWindow(1)),
            ("e", [_tool("c1")], MessageWindow(10)),
            ("e", [_tool("c2"), Message.user("u2")], MessageWindow(10)),
            ("e", [Message.assistant("a2")], MessageWindow(10)),
        ],
    )


def test_save_all_clears_the_settled_head(
    repository: RedisChatMemoryRepository,
) -> None:
    """A history saved with a leading tool response loses it on the next append."""
    _same_as_in_memory(
        repository,
        [
            ("h", [Message.user("u0")], MessageWindow(10)),
            ("h", [Message.assistant("a0")], MessageWindow(10)),
            ("h", [_tool("c0"), Message.user("u1")], None),
            ("h", [Message.assistant("a1")], MessageWindow(10)),
        ],
    )


def test_a_conversation_without_the_head_field_is_read_as_before(
    client: Redis, repository: RedisChatMemoryRepository
) -> None:
    """Data written before ``hn`` existed: the head marker is read instead."""
    window = MessageWindow(10)
    repository.append_to_window("o", [Message.user("u0")], window)
    meta = ConversationKeys.of(repository.key_prefix, "o").meta
    assert client.hget(meta, "hn") == client.hget(meta, "ver")
    client.hdel(meta, "hn")
    result = repository.append_to_window("o", [Message.assistant("a0")], window)
    assert result.evicted_ids == []
    assert client.hget(meta, "hn") == client.hget(meta, "ver")
    assert [m.content for m in repository.find_by_conversation_id("o")] == ["u0", "a0"]


def test_a_batch_longer_than_one_chunk_is_appended_and_retried_whole(
    client: Redis, repository: RedisChatMemoryRepository
) -> None:
    """600 messages: the id lookup and the writes run in chunks of 256 values."""
    batch = [
        m
        for t in range(300)
        for m in (Message.user(f"u{t}"), Message.assistant(f"a{t}"))
    ]
    window = MessageWindow(10_000)
    first = repository.append_to_window("b", batch, window)
    assert [m.id for m in first.appended] == [m.id for m in batch]
    stored = repository.find_by_conversation_id("b")
    assert [m.id for m in stored] == [m.id for m in batch]
    again = repository.append_to_window("b", batch, window)
    assert (again.appended, again.evicted_ids) == ([], [])
    assert _seqs(client, repository, "b") == list(range(600))
    # Then 402 of them evicted at once go to the record in chunks too.
    evicting = repository.append_to_window(
        "b", [Message.user("last")], MessageWindow(200)
    )
    assert evicting.evicted_ids == [m.id for m in batch[:402]]
    assert repository.append_to_window("b", batch[:3], window).appended == []
