"""The log on Redis: what the keys hold after each write, and reads of any layout.

The conformance suite checks the log's behaviour; these tests check what is
particular to Redis: the log methods read conversations written by the
window append and by ``save_all`` (an older release's layout), the two
appends keep one layout between them, and the scripts' chunked commands and
expiries.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from redis import Redis

from chatledger import (
    Message,
    Role,
    ToolCall,
    ToolResponse,
)
from chatledger.codec import from_json
from chatledger.testing import random_turns
from chatledger.tokens import estimate_tokens
from chatledger.window import MessageWindow, TokenWindow, Window, apply_window
from chatledger_redis import RedisChatMemoryRepository
from chatledger_redis.keys import ConversationKeys
from chatledger_redis.scripts import TAIL


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _ids(messages: list[Message]) -> list[str]:
    return [m.id for m in messages]


def _pages(
    repository: RedisChatMemoryRepository, cid: str, limit: int, newest_first: bool
) -> list[str]:
    ids: list[str] = []
    cursor = None
    while True:
        page = repository.find_messages_page(cid, cursor, limit, newest_first)
        ids += _ids(page.messages)
        if page.next_cursor is None:
            return ids
        cursor = page.next_cursor


def _assert_pages_walk(repository: RedisChatMemoryRepository, cid: str) -> None:
    stored = _ids(repository.find_by_conversation_id(cid))
    for limit in (1, 3, 50):
        assert _pages(repository, cid, limit, newest_first=True) == stored[::-1]
        assert _pages(repository, cid, limit, newest_first=False) == stored


class _CountingCounter:
    """A token counter that counts the messages it measures."""

    counter_id = "log-test-counting"

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, message: Message) -> int:
        self.calls += 1
        return estimate_tokens(message)


def _layout(client: Redis, keys: ConversationKeys) -> dict[str, Any]:
    """Read every key of a conversation, and check what always holds.

    The system list and the turns list hold one marker per stored message,
    in sequence order; each stored id maps to its sequence number; ``meta``'s
    totals match the markers unless ``sized`` says they mean nothing.
    """
    meta = {_text(k): _text(v) for k, v in client.hgetall(keys.meta).items()}
    msgs = {int(k): v for k, v in client.hgetall(keys.msgs).items()}
    turns = [_text(m).split(":", 3) for m in client.lrange(keys.turns, 0, -1)]
    system = [_text(m).split(":", 3) for m in client.lrange(keys.system, 0, -1)]
    ids = {_text(k): _text(v) for k, v in client.hgetall(keys.ids).items()}
    turn_seqs = [int(seq) for _, _, seq, _ in turns]
    system_seqs = [int(seq) for _, seq, _, _ in system]
    assert turn_seqs == sorted(turn_seqs)
    assert system_seqs == sorted(system_seqs)
    assert sorted(turn_seqs + system_seqs) == sorted(msgs)
    for _, _, seq, message_id in turns:
        assert ids[message_id] == seq
    if not msgs:
        return {"meta": meta, "current": [], "msgs": msgs}
    assert int(meta["next"]) > max(msgs)
    batch = int(meta.get("sb", "0"))
    current = [int(seq) for seq in system_seqs if int(seq) >= batch]
    assert bool(current) == bool(system)
    if "sized" not in meta:
        weighed = meta["ctr"] != ""
        expected_tsize = sum(int(size) if weighed else 1 for _, size, _, _ in turns)
        expected_ssize = sum(
            int(size) if weighed else 1
            for size, seq, _, _ in system
            if int(seq) >= batch
        )
        assert int(meta["tsize"]) == expected_tsize
        assert int(meta["ssize"]) == expected_ssize
    return {"meta": meta, "current": current, "msgs": msgs}


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("kind", ["messages", "tokens"])
def test_a_window_written_conversation_reads_as_its_window(
    repository: RedisChatMemoryRepository, seed: int, kind: str
) -> None:
    """After window appends, the view is the stored window and pages walk it.

    Evictions leave the sequence without its head, and replaced system
    messages leave holes in it: pages still give each stored message once.
    """
    rng = random.Random(seed)
    window: Window
    if kind == "messages":
        limit = rng.randint(2, 10)
        window = MessageWindow(limit)
    else:
        limit = rng.randint(20, 120)
        window = TokenWindow(limit, estimate_tokens)
    for batch in random_turns(rng, 40):
        repository.append_to_window("w", batch, window)
        stored = repository.find_by_conversation_id("w")
        assert _ids(repository.find_window("w", window)) == _ids(stored)
    _assert_pages_walk(repository, "w")


def test_a_conversation_saved_whole_is_one_batch(
    client: Redis, repository: RedisChatMemoryRepository
) -> None:
    """``save_all`` (and 0.2) records no batch: every system message is shown."""
    saved = [
        Message.system("A"),
        Message.user("u1"),
        Message.assistant("a1"),
        Message.system("B"),
        Message.user("u2"),
    ]
    repository.save_all("s", saved)
    window = MessageWindow(10)
    assert _ids(repository.find_window("s", window)) == _ids(saved)
    keys = ConversationKeys.of(repository.key_prefix, "s")
    assert client.hget(keys.meta, "sb") is None
    # Equal to one of the batch-0 set: not stored again.
    assert repository.append_to_log("s", [Message.system("A")]).appended == []
    new = Message.system("C")
    assert repository.append_to_log("s", [new, Message.user("u3")]).appended
    view = repository.find_window("s", window)
    assert [m.content for m in view] == ["u1", "a1", "u2", "C", "u3"]
    assert [m.content for m in repository.find_by_conversation_id("s")] == [
        "A",
        "u1",
        "a1",
        "B",
        "u2",
        "C",
        "u3",
    ]
    _layout(client, keys)
    _assert_pages_walk(repository, "s")


def _stored_window(layout: dict[str, Any]) -> list[Message]:
    """What a window append works on: all but the superseded system messages."""
    first = min(layout["current"], default=0)
    return [
        from_json(body)
        for seq, body in sorted(layout["msgs"].items())
        if seq >= first or from_json(body).role is not Role.SYSTEM
    ]


@pytest.mark.parametrize("seed", range(6))
def test_log_and_window_appends_share_one_layout(
    client: Redis, repository: RedisChatMemoryRepository, seed: int
) -> None:
    """Mixed appends, windows and counters keep the keys consistent.

    A window append acts on the current system set and every non-system
    message (what :func:`apply_window` is given); a log append adds after
    them; after each, the markers, ids and totals match the messages.
    """
    rng = random.Random(seed)
    keys = ConversationKeys.of(repository.key_prefix, "mix")
    windows: list[Window | None] = [
        None,
        MessageWindow(rng.randint(3, 12)),
        TokenWindow(rng.randint(40, 200), estimate_tokens),
        TokenWindow(rng.randint(40, 200), estimate_tokens, "other"),
    ]
    for batch in random_turns(rng, 40):
        before = _layout(client, keys)
        held = {_text(k) for k in client.hkeys(keys.ids)}
        fresh = [m for m in batch if m.id not in held]
        window = rng.choice(windows)
        if window is not None and rng.random() < 0.5:
            result = repository.append_to_window("mix", batch, window)
            after = _layout(client, keys)
            if fresh:
                expected = apply_window(_stored_window(before), fresh, window)
                assert _ids(_stored_window(after)) == _ids(expected.messages)
                assert sorted(result.evicted_ids) == sorted(_ids(expected.evicted))
        else:
            stored = _ids(repository.find_by_conversation_id("mix"))
            result = repository.append_to_log("mix", batch, window)
            assert result.evicted_ids == []
            _layout(client, keys)
            logged = _ids(repository.find_by_conversation_id("mix"))
            assert logged == stored + _ids(result.appended)
        for view_window in windows[1:]:
            assert view_window is not None
            repository.find_window("mix", view_window)
    _assert_pages_walk(repository, "mix")


def test_a_new_counter_stores_sizes_from_its_first_append_on(
    client: Redis, repository: RedisChatMemoryRepository
) -> None:
    """Only the rows a counter measured carry its sizes; a view measures the rest.

    A log append is one round trip, so it cannot measure the history with a
    new counter: it stores the sizes of its own rows and marks where they
    start. The window append re-measures the history once, as it does for
    any new counter.
    """
    saved = [Message.user("u0"), Message.assistant("a0")]
    repository.save_all("c", saved)
    counter = _CountingCounter()
    window = TokenWindow(10_000, counter)
    repository.append_to_log("c", [Message.user("u1")], window)
    assert counter.calls == 1
    keys = ConversationKeys.of(repository.key_prefix, "c")
    assert client.hget(keys.meta, "sized") == b"2"
    counter.calls = 0
    assert len(repository.find_window("c", window)) == 3
    assert counter.calls == 2  # the two saved rows, not the appended one
    repository.append_to_log("c", [Message.assistant("a1")], window)
    assert client.hget(keys.meta, "sized") == b"2"  # still from row 2 on
    repository.append_to_window("c", [Message.user("u2")], window)
    layout = _layout(client, keys)
    assert "sized" not in layout["meta"]
    counter.calls = 0
    assert len(repository.find_window("c", window)) == 5
    assert counter.calls == 0


def test_a_log_append_without_a_counter_keeps_counts_a_window_can_use(
    client: Redis, repository: RedisChatMemoryRepository
) -> None:
    """After sizes of a counter, an append without one goes back to counting."""
    counted = TokenWindow(10_000, estimate_tokens)
    repository.append_to_log("n", [Message.system("S"), Message.user("u0")], counted)
    repository.append_to_log("n", [Message.assistant("a0"), Message.user("u1")])
    keys = ConversationKeys.of(repository.key_prefix, "n")
    layout = _layout(client, keys)
    assert (layout["meta"]["ctr"], layout["meta"]["tsize"]) == ("", "3")
    result = repository.append_to_window(
        "n", [Message.assistant("a1")], MessageWindow(3)
    )
    assert [m.content for m in repository.find_by_conversation_id("n")] == [
        "S",
        "u1",
        "a1",
    ]
    assert len(result.evicted_ids) == 2


def test_a_window_append_replaces_only_the_current_system_set(
    client: Redis, repository: RedisChatMemoryRepository
) -> None:
    """A prompt the log superseded is history: a window append leaves it there."""
    window = MessageWindow(10)
    repository.append_to_log("p", [Message.system("A"), Message.user("u1")])
    repository.append_to_log("p", [Message.system("B"), Message.user("u2")])
    # A is not in the current set (B): it replaces B, and is stored again.
    result = repository.append_to_window("p", [Message.system("A")], window)
    assert [m.content for m in result.appended] == ["A"]
    assert len(result.evicted_ids) == 1  # B
    assert [m.content for m in repository.find_by_conversation_id("p")] == [
        "A",
        "u1",
        "u2",
        "A",
    ]
    assert [m.content for m in repository.find_window("p", window)] == [
        "u1",
        "u2",
        "A",
    ]
    _layout(client, ConversationKeys.of(repository.key_prefix, "p"))


def test_a_turn_longer_than_the_first_read_is_read_back_in_pages(
    repository: RedisChatMemoryRepository,
) -> None:
    """Rule 3 reaches back past the first read: the view reads older pages."""
    call = ToolCall(id="t", name="f", arguments="{}")
    steps = [
        m
        for _ in range(40)
        for m in (
            Message.assistant(None, tool_calls=[call]),
            Message.tool(ToolResponse(id="t", name="f", data="ok")),
        )
    ]
    turn = [Message.user("go"), *steps, Message.assistant("done")]
    repository.append_to_log("long", [Message.user("earlier"), Message.assistant("x")])
    repository.append_to_log("long", turn)
    assert _ids(repository.find_window("long", MessageWindow(2))) == _ids(turn)


def test_a_batch_longer_than_one_chunk_is_logged_read_and_paged(
    repository: RedisChatMemoryRepository,
) -> None:
    """Batches, views and pages past 256 rows use several commands per key."""
    batch = [Message.user(f"m{n}") for n in range(700)]
    assert len(repository.append_to_log("big", batch).appended) == 700
    assert repository.append_to_log("big", batch).appended == []
    assert _ids(repository.find_window("big", MessageWindow(600))) == _ids(batch[-600:])
    page = repository.find_messages_page("big", limit=650)
    assert _ids(page.messages) == _ids(batch[::-1][:650])
    rest = repository.find_messages_page("big", page.next_cursor, limit=650)
    assert _ids(rest.messages) == _ids(batch[::-1][650:])
    assert rest.next_cursor is None


def test_every_key_shares_the_log_append_expiry(client: Redis, prefix: str) -> None:
    """A log append slides the TTL of every key; one without a TTL persists them."""
    with_ttl = RedisChatMemoryRepository(client, key_prefix=prefix, ttl=60)
    with_ttl.append_to_window(
        "t", [Message.user("u0"), Message.user("u1")], MessageWindow(1)
    )
    with_ttl.append_to_log("t", [Message.system("S"), Message.assistant("a")])
    keys = ConversationKeys.of(prefix, "t").all()
    assert client.exists(*keys) == len(keys) == 6
    remaining = [client.pttl(key) for key in keys]
    assert min(remaining) > 0
    without = RedisChatMemoryRepository(client, key_prefix=prefix)
    without.append_to_log("t", [Message.user("u2")])
    assert {client.pttl(key) for key in keys} == {-1}


def test_a_bad_window_is_refused_before_any_io(
    client: Redis, repository: RedisChatMemoryRepository, prefix: str
) -> None:
    """A window that is not a Window raises TypeError and writes nothing."""
    with pytest.raises(TypeError, match="Window"):
        repository.append_to_log("bad", [Message.user("x")], 20)  # type: ignore[arg-type]
    assert list(client.scan_iter(match=f"{prefix}*")) == []


def test_a_decoded_responses_client_reads_the_log(redis_url: str, prefix: str) -> None:
    """Views and pages read str replies as they read bytes."""
    with RedisChatMemoryRepository.from_url(
        redis_url, key_prefix=prefix, decode_responses=True
    ) as repository:
        window = TokenWindow(1000, estimate_tokens)
        sent = [Message.system("é"), Message.user("😀"), Message.assistant("b")]
        repository.append_to_log("d", sent, window)
        assert _ids(repository.find_window("d", window)) == _ids(sent)
        page = repository.find_messages_page("d", limit=2, newest_first=False)
        assert _ids(page.messages) == _ids(sent[:2])
        assert page.next_cursor is not None


def test_a_further_read_after_a_window_evicted_its_rows_reads_nothing(
    client: Redis, repository: RedisChatMemoryRepository
) -> None:
    """Rows a window append evicted between two reads of a view are not read.

    The further read starts from the head of the turns list as it is then.
    """
    batch = [Message.user("u0"), Message.user("u1"), Message.user("u2")]
    repository.append_to_log("gone", batch)
    keys = ConversationKeys.of(repository.key_prefix, "gone")
    repository.append_to_window("gone", [Message.user("u3")], MessageWindow(1))
    tail = client.register_script(TAIL)
    # Below number 1 (as if 1 and 2 were read), five numbers, no sizes.
    args: list[int | str] = [1, 5, "", "", ""]
    assert tail(keys=[keys.meta, keys.msgs, keys.turns], args=args) == [3, 3]


def test_a_further_read_takes_no_size_another_counter_measured(
    client: Redis, repository: RedisChatMemoryRepository
) -> None:
    """Sizes re-measured by another counter between two reads are not taken."""
    first = TokenWindow(10_000, estimate_tokens, "first")
    batch = [Message.user(f"u{n}") for n in range(4)]
    repository.append_to_log("moved", batch, first)
    keys = ConversationKeys.of(repository.key_prefix, "moved")
    newest = client.lindex(keys.turns, -1)
    assert isinstance(newest, bytes)
    assert first.counter_id is not None
    tail = client.register_script(TAIL)
    args: list[int | str | bytes] = [3, 5, newest, first.counter_id, ""]
    read = tail(keys=[keys.meta, keys.msgs, keys.turns], args=args)
    assert read[:2] == [0, 0]
    assert len(read[2:]) == 3 + 3  # three messages, then their markers
    other = TokenWindow(10_000, estimate_tokens, "other")
    repository.append_to_window("moved", [Message.assistant("a")], other)
    read = tail(keys=[keys.meta, keys.msgs, keys.turns], args=args)
    assert len(read[2:]) == 3  # the messages only
