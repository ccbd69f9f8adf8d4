"""A bounded log on Redis: what a trim leaves in the keys, and what it costs.

The conformance suite checks what a bounded log keeps; these tests check
what is particular to Redis: the ``TRIM`` script keeps exactly what core's
in-memory repository keeps, and the markers, ids, totals, record and expiry
right; only a due append pays a further round trip; a trim whose append was
overtaken by ``save_all`` removes nothing; a trim's error reaches the caller.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from redis import Redis
from redis.exceptions import ResponseError

from chatledger import (
    InMemoryChatMemoryRepository,
    Message,
    Role,
    ToolCall,
    ToolResponse,
)
from chatledger.errors import InvalidOptionError, InvalidRetentionError
from chatledger.evicted_ids import EVICTED_IDS_KEPT
from chatledger.retention import Retention
from chatledger.testing import random_turns
from chatledger.tokens import estimate_tokens
from chatledger.window import MessageWindow, TokenWindow, Window
from chatledger_redis import RedisChatMemoryRepository
from chatledger_redis.keys import ConversationKeys
from tests.redis.test_log import _layout
from tests.redis.test_round_trips import _scripted, _sent, monitored


def _ids(messages: list[Message]) -> list[str]:
    return [m.id for m in messages]


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _turn(n: int) -> list[Message]:
    return [Message.user(f"q{n}"), Message.assistant(f"a{n}")]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("kind", ["mixed", "tokens"])
def test_a_trim_keeps_what_core_keeps(
    client: Redis, prefix: str, seed: int, kind: str
) -> None:
    """Random histories, windows and counters: the same log as in memory.

    Mixed, each append takes a window, a token window of either counter or
    none; with tokens, every append takes one token window, so the stored
    totals are sizes the trim must subtract.

    Each append goes to a bounded Redis log and to core's in-memory one with
    the same window (or none); after each, both hold the same messages and
    the same evicted-id record (every message appended and no longer
    stored, in the order the trims removed them), the keys stay consistent
    (markers, ids, totals), and pages walk the log.
    """
    rng = random.Random(seed)
    retention = Retention.last(rng.randint(3, 9), slack=rng.randint(1, 4))
    redis = RedisChatMemoryRepository(client, key_prefix=prefix, retention=retention)
    memory = InMemoryChatMemoryRepository(retention=retention)
    keys = ConversationKeys.of(prefix, "r")
    windows: list[Window | None] = [
        None,
        MessageWindow(rng.randint(1, retention.keep or 1)),
        TokenWindow(rng.randint(10, 80), estimate_tokens),
        TokenWindow(rng.randint(10, 80), estimate_tokens, "other"),
    ]
    if kind == "tokens":
        windows = windows[2:3]
    appended: list[str] = []
    for batch in random_turns(rng, 60, agent=seed == 5):
        window = rng.choice(windows)
        result = redis.append_to_log("r", batch, window)
        assert _ids(result.appended) == _ids(
            memory.append_to_log("r", batch, window).appended
        )
        appended += _ids(result.appended)
        stored = _ids(redis.find_by_conversation_id("r"))
        assert stored == _ids(memory.find_by_conversation_id("r"))
        _layout(client, keys)
        record = [_text(i) for i in client.lrange(keys.evicted, 0, -1)]
        # In the order of removal, as core's record of the same trims.
        assert record == list(memory._evicted.get("r", []))
        assert sorted(record) == sorted(set(appended) - set(stored))
        if record:
            assert set(client.hmget(keys.ids, record)) == {b""}
    assert len(stored) < len(appended) or seed == 5
    pages: list[str] = []
    cursor = None
    while True:
        page = redis.find_messages_page("r", cursor, limit=3, newest_first=False)
        pages += _ids(page.messages)
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert pages == stored


def test_a_trim_takes_counts_off_totals_that_are_counts(
    client: Redis, prefix: str
) -> None:
    """Markers sized by a counter, totals counted since: a trim subtracts counts."""
    repository = RedisChatMemoryRepository(
        client, key_prefix=prefix, retention=Retention.last(4, slack=2)
    )
    keys = ConversationKeys.of(prefix, "c")
    long = Message.user("x " * 40)
    repository.append_to_log("c", [long], TokenWindow(500, estimate_tokens))
    for n in range(4):
        repository.append_to_log("c", _turn(n))
        layout = _layout(client, keys)  # tsize checked against the markers
        assert "sized" not in layout["meta"]
    assert layout["meta"]["ctr"] == ""
    assert long.id not in _ids(repository.find_by_conversation_id("c"))


def test_only_a_due_append_pays_a_further_round_trip(
    redis_url: str, client: Redis, prefix: str
) -> None:
    """One EVALSHA per append; a due one adds the trim, and the view it keeps.

    Without a window the trim is one more script; with one, the view is read
    first (one script for a view its first read settles).
    """
    retention = Retention.last(10, slack=5)
    repository = RedisChatMemoryRepository(
        client, key_prefix=prefix, retention=retention
    )
    window = MessageWindow(4)
    for n in range(6):  # numbers 1..12: one trim, at 10, the scripts cached
        repository.append_to_log("warm", _turn(n), window)
    for with_window in (None, window):
        cid = f"rt-{with_window is None}"
        sent: list[list[str]] = []
        for n in range(10):  # numbers 1..20: due at 15 and 20
            with monitored(redis_url, client, prefix) as lines:
                repository.append_to_log(cid, _turn(n), with_window)
            sent.append(_sent(lines))
        due = [n for n in range(10) if retention.trim_due(2 * n + 1, 2 * n + 2)]
        assert due == [7, 9]
        trim = ["EVALSHA"] * (2 if with_window is None else 3)
        assert sent == [trim if n in due else ["EVALSHA"] for n in range(10)]
        # Numbers 11..20 stay: the newest ten start on a user message.
        assert len(repository.find_by_conversation_id(cid)) == 10


def test_a_trim_reads_what_it_removes_and_one_marker_more(
    redis_url: str, client: Redis, prefix: str
) -> None:
    """The TRIM script's commands: its work grows with what it removes."""
    repository = RedisChatMemoryRepository(
        client, key_prefix=prefix, retention=Retention.last(10, slack=5)
    )
    for n in range(7):  # numbers 1..14: the script cached, no trim yet
        repository.append_to_log("warm", _turn(n))
        repository.append_to_log("w", _turn(n))
    with monitored(redis_url, client, prefix) as lines:
        repository.append_to_log("w", _turn(7))  # 15, 16: cut at 7, a user one
    scripted = [line.split() for line in _scripted(lines)]
    commands = [words[0].strip('"') for words in scripted]
    # The trim starts with its look at the ids hash (the append's record
    # write reads the listing index's entries with an HGET too).
    start = next(
        n
        for n, words in enumerate(scripted)
        if words[0].strip('"') == "HGET" and words[1].strip('"').endswith(":ids")
    )
    trim = commands[start:]
    # The ids check, meta, 8 markers (3 removed, the 4th the user message
    # kept), the system list (no superseded set: not read), then the writes.
    assert trim == [
        "HGET",
        "HMGET",
        "LRANGE",
        "HDEL",
        "LTRIM",
        "HSET",
        "RPUSH",
        "PEXPIRETIME" if "PEXPIRETIME" in commands else "PTTL",
        "HSET",
    ]


def test_a_trim_after_save_all_replaced_the_log_removes_nothing(
    client: Redis, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The trim checks that the append's last message still has its number."""
    repository = RedisChatMemoryRepository(
        client, key_prefix=prefix, retention=Retention.last(4, slack=2)
    )
    window = MessageWindow(4)
    saved = [m for n in range(10) for m in _turn(100 + n)]
    read_view = repository._tail_view

    def save_first(*args: Any) -> Any:
        # Another writer replaces the conversation between append and trim.
        repository.save_all("raced", saved)
        return read_view(*args)

    repository.append_to_log("raced", _turn(0), window)
    repository.append_to_log("raced", _turn(1), window)
    monkeypatch.setattr(repository, "_tail_view", save_first)
    repository.append_to_log("raced", _turn(2), window)  # numbers 5, 6: due
    assert _ids(repository.find_by_conversation_id("raced")) == _ids(saved)


def test_a_trim_cuts_by_its_own_append_not_by_a_later_one(
    client: Redis, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A user message appended after the trim's append is not where it cuts.

    Another writer's turn lands between an agent's append and its trim: the
    view (read after it) starts at that turn, but the trim looks for a user
    message only among its own append's numbers, finds none, and cuts at
    the first of the newest n: the append's own messages stay.
    """
    repository = RedisChatMemoryRepository(
        client, key_prefix=prefix, retention=Retention.last(4, slack=2)
    )
    # The other writer keeps everything: its own appends trim nothing.
    other = RedisChatMemoryRepository(client, key_prefix=prefix)
    window = MessageWindow(4)
    late = [Message.user("late"), Message.assistant("sure")]
    read_view = repository._tail_view

    def append_first(*args: Any) -> Any:
        other.append_to_log("race", late)
        return read_view(*args)

    repository.append_to_log("race", [Message.user("go")], window)
    steps = [_step(n) for n in range(2)]
    repository.append_to_log("race", steps[0], window)
    monkeypatch.setattr(repository, "_tail_view", append_first)
    repository.append_to_log("race", steps[1], window)  # numbers 4, 5: due
    # The first kept is number 2: only the user message before it goes.
    stored = repository.find_by_conversation_id("race")
    assert _ids(stored) == _ids([*steps[0], *steps[1], *late])


def _step(n: int) -> list[Message]:
    call = ToolCall(id=f"c{n}", name="f", arguments="{}")
    return [
        Message.assistant(None, tool_calls=[call]),
        Message.tool(ToolResponse(id=call.id, name="f", data="ok")),
    ]


def test_a_failed_trim_raises_and_leaves_the_append_stored(
    client: Redis, prefix: str
) -> None:
    """No write error is swallowed: the append stays, the next trim catches up."""
    repository = RedisChatMemoryRepository(
        client, key_prefix=prefix, retention=Retention.last(4, slack=2)
    )
    trim = repository._trim
    repository._trim = client.register_script("return redis.error_reply('no trim')")
    sent: list[Message] = []
    for n in range(2):
        sent += repository.append_to_log("f", _turn(n)).appended
    last = _turn(2)
    with pytest.raises(ResponseError, match="no trim"):
        repository.append_to_log("f", last)
    sent += last
    assert _ids(repository.find_by_conversation_id("f")) == _ids(sent)
    assert repository.append_to_log("f", last).appended == []  # a retry: no-op
    repository._trim = trim
    for n in range(3, 5):  # numbers 7..10: due at 8 and 10
        sent += repository.append_to_log("f", _turn(n)).appended
    assert _ids(repository.find_by_conversation_id("f")) == _ids(sent[-4:])


def test_a_trim_gives_a_new_record_the_conversation_deadline(
    client: Redis, prefix: str
) -> None:
    """The first trim of a log with a TTL creates the record under the same TTL."""
    repository = RedisChatMemoryRepository(
        client, key_prefix=prefix, ttl=60, retention=Retention.last(4, slack=2)
    )
    keys = ConversationKeys.of(prefix, "t")
    for n in range(3):
        repository.append_to_log("t", _turn(n))
    assert client.llen(keys.evicted) == 2
    every = [key for key in keys.all() if client.exists(key)]
    assert len(every) == 5  # no system message: no system list
    if int(str(client.info("server")["redis_version"]).split(".")[0]) >= 7:
        deadlines = {client.pexpiretime(key) for key in every}
        assert len(deadlines) == 1
        assert deadlines.pop() > 0
    else:  # no PEXPIRETIME before 7.0: the script copied the remaining time
        remaining = [client.pttl(key) for key in every]
        assert min(remaining) > 0
        assert max(remaining) - min(remaining) < 100


def test_a_window_append_after_a_trim_looks_at_the_head_again(
    client: Redis, prefix: str
) -> None:
    """A trim may leave a tool response at the head; the window append drops it.

    An agent's turn holds no user message, so the cut falls at the n-th
    newest, on a tool response here; the trim changes ``ver``, so the next
    window append reads the head (rule 4) instead of trusting ``hn``.
    """
    repository = RedisChatMemoryRepository(
        client, key_prefix=prefix, retention=Retention.last(3, slack=2)
    )
    keys = ConversationKeys.of(prefix, "agent")
    for n in range(3):
        call = ToolCall(id=f"c{n}", name="f", arguments="{}")
        repository.append_to_log(
            "agent",
            [
                Message.assistant(None, tool_calls=[call]),
                Message.tool(ToolResponse(id=call.id, name="f", data="ok")),
            ],
        )
    stored = repository.find_by_conversation_id("agent")
    assert stored[0].role is Role.TOOL  # numbers 4..6 of 6: the cut at 4
    repository.append_to_window("agent", [Message.assistant("done")], MessageWindow(9))
    assert _text(client.lindex(keys.turns, 0) or b"").split(":")[0] != "t"
    assert repository.find_by_conversation_id("agent")[0].role is not Role.TOOL


def test_from_url_takes_retention_as_an_option_or_in_the_query(
    redis_url: str, prefix: str
) -> None:
    """``retention=`` or ``?retention=``; the client never sees it."""
    separator = "&" if "?" in redis_url else "?"
    for url, options in (
        (redis_url, {"retention": 4}),
        (f"{redis_url}{separator}retention=4", {}),
    ):
        with RedisChatMemoryRepository.from_url(
            url, key_prefix=prefix, **options
        ) as repository:
            assert repository.retention == Retention.last(4)
            assert "retention=Retention.last(4, slack=10)" in repr(repository)
            for n in range(8):
                repository.append_to_log("u", _turn(n))
            assert len(repository.find_by_conversation_id("u")) < 16


@pytest.mark.parametrize(
    ("url", "options", "error"),
    [
        ("redis://127.0.0.1:1/0", {"retention": 0}, InvalidRetentionError),
        ("redis://127.0.0.1:1/0", {"retention": "some"}, InvalidRetentionError),
        ("redis://127.0.0.1:1/0?retention=-3", {}, InvalidRetentionError),
        ("redis://127.0.0.1:1/0?retention=4", {"retention": 4}, InvalidOptionError),
        ("redis://127.0.0.1:1/0?retention=4&retention=5", {}, InvalidOptionError),
        ("redis+cluster://127.0.0.1:1/0", {"retention": True}, InvalidRetentionError),
    ],
)
def test_a_bad_retention_is_refused_before_any_connection(
    url: str, options: dict[str, Any], error: type[Exception]
) -> None:
    """Nothing listens on port 1: the error comes before a connection would."""
    with pytest.raises(error):
        RedisChatMemoryRepository.from_url(url, **options)


def test_an_unbounded_repository_never_trims(client: Redis, prefix: str) -> None:
    """The default keeps every message, and says nothing of retention."""
    repository = RedisChatMemoryRepository(client, key_prefix=prefix)
    assert "retention" not in repr(repository)
    sent: list[Message] = []
    for n in range(EVICTED_IDS_KEPT // 100):
        sent += repository.append_to_log("all", _turn(n)).appended
    assert _ids(repository.find_by_conversation_id("all")) == _ids(sent)
