"""Removals from a log on Redis: what the ``REMOVE`` script leaves in the keys.

The conformance suite checks what a removal does; these tests check what is
particular to Redis: on random histories (bounded or not, sizes of several
counters, system sets of one or two messages) the script keeps exactly what
core's in-memory repository keeps, with the markers, their batches, ids,
totals and ``sb`` right; removals racing appends and trims lose nothing; a
trim whose append lost its last message to a removal removes nothing; the
window append looks at the head of the turns list again after a removal;
re-measured markers keep their batches; every key shares the deadline; a
removal is one round trip.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from redis import Redis

from chatledger import (
    InMemoryChatMemoryRepository,
    Message,
    Role,
    ToolCall,
    ToolResponse,
)
from chatledger.errors import MessageTooLargeError
from chatledger.retention import Retention
from chatledger.tokens import estimate_tokens
from chatledger.window import MessageWindow, TokenWindow, Window
from chatledger_redis import RedisChatMemoryRepository
from chatledger_redis.bulk_limit import MIN_MAX_BULK_BYTES, check_arguments
from chatledger_redis.keys import ConversationKeys
from chatledger_redis.markers import system_batch
from tests.redis.test_log import _layout
from tests.redis.test_round_trips import _sent, monitored
from tests.removal_histories import VIEWS, race_removals
from tests.removal_histories import appends as _batches
from tests.removal_histories import ids as _ids
from tests.removal_histories import page_ids as _pages


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _assert_batches(
    client: Redis, keys: ConversationKeys, memory: InMemoryChatMemoryRepository
) -> None:
    """Each system marker records the batch core's log gives its message.

    Core numbers from 1 and Redis from 0.
    """
    stored = memory._conversations.get("r")
    expected = (
        []
        if stored is None
        else [
            batch - 1
            for batch, message in zip(stored.batches, stored.messages, strict=True)
            if message.role is Role.SYSTEM
        ]
    )
    markers = [_text(m) for m in client.lrange(keys.system, 0, -1)]
    assert [system_batch(m) for m in markers] == expected


def _check_same(
    client: Redis,
    keys: ConversationKeys,
    redis: RedisChatMemoryRepository,
    memory: InMemoryChatMemoryRepository,
) -> None:
    stored = _ids(redis.find_by_conversation_id("r"))
    assert stored == _ids(memory.find_by_conversation_id("r"))
    for window in VIEWS:
        assert _ids(redis.find_window("r", window)) == _ids(
            memory.find_window("r", window)
        )
    assert _pages(redis, "r") == stored
    assert bool(client.exists(keys.meta)) == bool(stored)  # what listing scans for
    _layout(client, keys)
    _assert_batches(client, keys, memory)
    record = [_text(i) for i in client.lrange(keys.evicted, 0, -1)]
    assert record == list(memory._evicted.get("r", []))


def _removal(
    rng: random.Random, memory: InMemoryChatMemoryRepository
) -> tuple[str, Any]:
    """A random removal: the newest few, or ids stored, unknown or evicted."""
    stored = memory.find_by_conversation_id("r")
    if rng.random() < 0.4:
        return "remove_newest", rng.randint(1, 3)
    system = [m.id for m in stored if m.role is Role.SYSTEM]
    named: list[str] = []
    if system and rng.random() < 0.4:
        # The current set is the newest system messages: take it, or part.
        named += system[-rng.randint(1, min(2, len(system))) :]
    if stored:
        named += [m.id for m in rng.sample(stored, min(len(stored), rng.randint(0, 2)))]
    if rng.random() < 0.2:
        named.append("never-stored")
    evicted = list(memory._evicted.get("r", []))
    if evicted and rng.random() < 0.3:
        named.append(rng.choice(evicted))
    rng.shuffle(named)
    return "remove_messages", named


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("bounded", [False, True])
def test_removals_keep_what_core_keeps(
    client: Redis, prefix: str, seed: int, bounded: bool
) -> None:
    """Random appends and removals: the same log, views and record as in memory.

    Each log append takes a random window (a token window of either counter,
    a message window, or none), so the stored totals are sizes or counts
    and ``sized`` comes and goes; bounded, trims run between the removals.
    After each step both repositories hold the same messages, show the same
    views and pages, and record the same evicted ids; the keys stay
    consistent (markers, ids, totals, the current set) and each system
    marker records its batch.
    """
    rng = random.Random(seed)
    retention = (
        Retention.last(rng.randint(4, 9), slack=rng.randint(1, 4))
        if bounded
        else Retention.everything()
    )
    redis = RedisChatMemoryRepository(client, key_prefix=prefix, retention=retention)
    memory = InMemoryChatMemoryRepository(retention=retention)
    keys = ConversationKeys.of(prefix, "r")
    windows: list[Window | None] = [
        None,
        MessageWindow(rng.randint(1, retention.keep or 8)),
        TokenWindow(rng.randint(10, 80), estimate_tokens),
        TokenWindow(rng.randint(10, 80), estimate_tokens, "other"),
    ]
    removed_some = False
    for batch in _batches(rng, 40):
        window = rng.choice(windows)
        result = redis.append_to_log("r", batch, window)
        assert _ids(result.appended) == _ids(
            memory.append_to_log("r", batch, window).appended
        )
        _check_same(client, keys, redis, memory)
        while rng.random() < 0.3:
            name, argument = _removal(rng, memory)
            removed = getattr(redis, name)("r", argument)
            assert removed == getattr(memory, name)("r", argument)
            removed_some = removed_some or bool(removed)
            _check_same(client, keys, redis, memory)
    assert removed_some


def test_taking_the_current_set_moves_the_batch_back_and_the_totals(
    client: Redis, repository: RedisChatMemoryRepository
) -> None:
    """``sb`` and ``ssize`` follow rule 1 over what is left, under a counter.

    A set of two, a part of it taken (the set stays), then the rest (the
    set before it is current again, with its size), then every system
    message (``sb`` goes).
    """
    window = TokenWindow(500, estimate_tokens)
    keys = ConversationKeys.of(repository.key_prefix, "s")
    first = [Message.system("first " * 5), Message.user("q"), Message.system("also")]
    answer = Message.assistant("a")
    second = [Message.system("second"), Message.system("and more " * 3)]
    repository.append_to_log("s", first, window)
    repository.append_to_log("s", [answer], window)
    repository.append_to_log("s", second, window)
    meta = _layout(client, keys)["meta"]
    assert meta["sb"] == "4"
    assert int(meta["ssize"]) == sum(estimate_tokens(m) for m in second)
    repository.remove_messages("s", [second[0].id])
    meta = _layout(client, keys)["meta"]
    assert meta["sb"] == "4"
    assert int(meta["ssize"]) == estimate_tokens(second[1])
    repository.remove_messages("s", [second[1].id])
    layout = _layout(client, keys)
    assert layout["meta"]["sb"] == "0"
    assert layout["current"] == [0, 2]
    assert int(layout["meta"]["ssize"]) == sum(
        estimate_tokens(m) for m in (first[0], first[2])
    )
    assert _ids(repository.find_window("s", window)) == _ids([*first, answer])
    repository.remove_messages("s", [first[0].id, first[2].id])
    layout = _layout(client, keys)
    assert "sb" not in layout["meta"]
    assert layout["meta"]["ssize"] == "0"
    assert not client.exists(keys.system)


def test_a_removal_that_empties_the_log_keeps_the_evicted_record(
    client: Redis, prefix: str
) -> None:
    """Only ``ids`` (the record's marks) and ``evicted`` are left, under the TTL.

    The conversation is listed no more; a late retry of a trimmed message is
    still a no-op, and a removed one is stored again.
    """
    repository = RedisChatMemoryRepository(
        client, key_prefix=prefix, ttl=60, retention=Retention.last(2, slack=1)
    )
    keys = ConversationKeys.of(prefix, "e")
    sent = [Message.user(f"q{n}") for n in range(4)]
    for message in sent:
        repository.append_to_log("e", [message])
    record = [_text(i) for i in client.lrange(keys.evicted, 0, -1)]
    assert record == _ids(sent[:2])
    assert _ids(repository.remove_newest("e", 10)) == _ids(sent[2:])
    assert [k for k in keys.all() if client.exists(k)] == [keys.ids, keys.evicted]
    assert set(client.hvals(keys.ids)) == {b""}
    assert all(client.pttl(k) > 0 for k in (keys.ids, keys.evicted))
    assert "e" not in repository.find_conversation_ids()
    assert repository.append_to_log("e", sent[:1]).appended == []
    assert _ids(repository.append_to_log("e", sent[3:]).appended) == [sent[3].id]


def test_every_key_takes_the_removal_deadline_or_none(
    client: Redis, prefix: str
) -> None:
    """A removal slides the TTL of every key; one without a TTL removes it."""
    expiring = RedisChatMemoryRepository(client, key_prefix=prefix, ttl=60)
    keys = ConversationKeys.of(prefix, "t")
    expiring.append_to_log("t", [Message.system("be brief")])
    for n in range(4):
        expiring.append_to_log("t", [Message.user(f"q{n}"), Message.assistant("a")])
    client.persist(keys.turns)  # as if an older deadline were left behind
    expiring.remove_newest("t")
    every = [key for key in keys.all() if client.exists(key)]
    assert len(every) == 5  # nothing evicted: no record
    if int(str(client.info("server")["redis_version"]).split(".")[0]) >= 7:
        deadlines = {client.pexpiretime(key) for key in every}
        assert len(deadlines) == 1
        assert deadlines.pop() > 0
    else:  # no PEXPIRETIME before 7.0
        assert min(client.pttl(key) for key in every) > 0
    RedisChatMemoryRepository(client, key_prefix=prefix).remove_newest("t")
    assert {client.pttl(key) for key in every} == {-1}


def test_a_window_append_after_a_removal_looks_at_the_head_again(
    client: Redis, repository: RedisChatMemoryRepository
) -> None:
    """A removal may leave a tool response at the head; the window drops it.

    Window appends leave ``hn`` equal to ``ver`` (the head needs no look);
    the removal changes ``ver``, so the next window append reads the head
    marker (rule 4) instead of trusting ``hn``.
    """
    keys = ConversationKeys.of(repository.key_prefix, "h")
    call = ToolCall(id="c1", name="f", arguments="{}")
    question = Message.user("q")
    asked = Message.assistant(None, tool_calls=[call])
    answered = Message.tool(ToolResponse(id="c1", name="f", data="ok"))
    window = MessageWindow(20)
    repository.append_to_window("h", [question, asked, answered], window)
    repository.append_to_window("h", [Message.assistant("done")], window)
    meta = _layout(client, keys)["meta"]
    assert meta["hn"] == meta["ver"]
    repository.remove_messages("h", [question.id, asked.id])
    assert _text(client.lindex(keys.turns, 0) or b"").split(":")[0] == "t"
    repository.append_to_window("h", [Message.user("next")], window)
    stored = repository.find_by_conversation_id("h")
    assert stored[0].role is not Role.TOOL
    assert answered.id not in _ids(stored)


def test_re_measured_markers_keep_their_batches(
    client: Redis, repository: RedisChatMemoryRepository
) -> None:
    """A new counter re-measures the history; the system markers keep their batch.

    So taking the current set still finds the one before it.
    """
    keys = ConversationKeys.of(repository.key_prefix, "m")
    old = [Message.system("old"), Message.user("q"), Message.system("old too")]
    repository.append_to_log("m", old)
    repository.append_to_log("m", [Message.system("new"), Message.user("q2")])
    before = [_text(m) for m in client.lrange(keys.system, 0, -1)]
    window = TokenWindow(1000, estimate_tokens, "fresh")
    repository.append_to_window("m", [Message.assistant("a")], window)
    after = [_text(m) for m in client.lrange(keys.system, 0, -1)]
    assert after != before  # sizes of the new counter
    assert [system_batch(m) for m in after] == [0, 0, 3]
    assert client.hget(keys.meta, "ctr") == b"tokens:fresh"
    current = repository.find_by_conversation_id("m")[3]
    repository.remove_messages("m", [current.id])
    layout = _layout(client, keys)
    assert layout["current"] == [0, 2]
    assert int(layout["meta"]["ssize"]) == sum(estimate_tokens(m) for m in old[::2])
    shown = repository.find_window("m", window)
    assert [m.content for m in shown if m.role is Role.SYSTEM] == ["old", "old too"]


def test_a_trim_whose_last_message_was_removed_removes_nothing(
    client: Redis, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pop between an append and its trim: the trim finds its message gone.

    The trim checks that the append's last message still has its number; the
    next due trim catches up. A pop of an older message instead lets the
    trim run, by the append's numbers.
    """
    repository = RedisChatMemoryRepository(
        client, key_prefix=prefix, retention=Retention.last(4, slack=2)
    )
    keys = ConversationKeys.of(prefix, "p")
    window = MessageWindow(2)
    turns = [[Message.user(f"q{n}"), Message.assistant(f"a{n}")] for n in range(4)]
    read_view = repository._tail_view
    popped: list[Message] = []

    def pop_first(*args: Any) -> Any:
        popped.extend(repository.remove_newest("p"))
        return read_view(*args)

    repository.append_to_log("p", turns[0], window)
    repository.append_to_log("p", turns[1], window)
    monkeypatch.setattr(repository, "_tail_view", pop_first)
    repository.append_to_log("p", turns[2], window)  # numbers 5, 6: due
    assert _ids(popped) == [turns[2][1].id]
    stored = [*turns[0], *turns[1], turns[2][0]]
    assert _ids(repository.find_by_conversation_id("p")) == _ids(stored)
    assert not client.exists(keys.evicted)
    _layout(client, keys)

    def pop_older(*args: Any) -> Any:
        popped.extend(repository.remove_messages("p", [turns[1][1].id]))
        return read_view(*args)

    monkeypatch.setattr(repository, "_tail_view", pop_older)
    repository.append_to_log("p", turns[3], window)  # numbers 7, 8: due
    # The newest four numbers are 5..8, 6 a hole: the cut is at 5, a user one.
    assert _ids(repository.find_by_conversation_id("p")) == _ids(
        [turns[2][0], *turns[3]]
    )
    record = [_text(i) for i in client.lrange(keys.evicted, 0, -1)]
    assert record == _ids([*turns[0], turns[1][0]])
    _layout(client, keys)


def test_removals_racing_bounded_appends_lose_nothing(
    client: Redis, prefix: str
) -> None:
    """Pops and removals by id race appends and their trims.

    Every message sent is, at the end, exactly one of: popped, removed by
    id, stored, or in the evicted-id record (a trim took it); the keys stay
    consistent.
    """
    retention = Retention.last(12, slack=3)
    repository = RedisChatMemoryRepository(
        client, key_prefix=prefix, retention=retention
    )
    keys = ConversationKeys.of(prefix, "race")
    sent, taken = race_removals(
        repository,
        repository,
        writers=3,
        appends=30,
        poppers=2,
        removers=2,
        removals=20,
    )
    stored = _ids(repository.find_by_conversation_id("race"))
    record = [_text(i) for i in client.lrange(keys.evicted, 0, -1)]
    everywhere = taken + stored + record
    assert len(everywhere) == len(set(everywhere)), "a message is in two places"
    assert sorted(everywhere) == sorted(sent), "a message was lost"
    _layout(client, keys)


def test_a_removal_is_one_round_trip(
    redis_url: str, client: Redis, repository: RedisChatMemoryRepository
) -> None:
    """Each removal is one EVALSHA, whatever it finds."""
    sent = [Message.user(f"q{n}") for n in range(6)]
    repository.append_to_log("warm", sent[:1])
    repository.remove_newest("warm")
    repository.append_to_log("one", sent)
    with monitored(redis_url, client, repository.key_prefix) as lines:
        repository.remove_newest("one", 2)
        repository.remove_messages("one", [sent[1].id, "unknown"])
        repository.remove_newest("none")
    assert _sent(lines) == ["EVALSHA"] * 3
    assert _ids(repository.find_by_conversation_id("one")) == _ids(
        [sent[0], *sent[2:4]]
    )


def test_an_id_too_long_to_send_is_named() -> None:
    """An id longer than an argument may be is refused before it is sent."""
    args = ["i:0:token", "fine", "x" * (MIN_MAX_BULK_BYTES + 1)]
    with pytest.raises(MessageTooLargeError, match=r"message_ids\[1\]"):
        check_arguments(
            args, MIN_MAX_BULK_BYTES, first=1, per_message=1, item="message_ids"
        )
