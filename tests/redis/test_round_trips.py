"""Round trips and server-side work, counted with MONITOR on the real server.

MONITOR shows every command the server runs: one line per command a client
sends, and one ``lua`` line per command a script runs. Other clients of a
shared server show up too, so lines are kept only when they name this test's
unique key prefix.
"""

from __future__ import annotations

import functools
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from redis import Redis

from chatledger import Message, ToolCall, ToolResponse
from chatledger.evicted_ids import EVICTED_IDS_KEPT, EVICTED_IDS_TRIM_STEP
from chatledger.tokens import estimate_tokens
from chatledger.window import MessageWindow, TokenWindow, Window
from chatledger_redis import RedisChatMemoryRepository
from chatledger_redis.keys import ConversationKeys

#: How long to wait for the MONITOR thread: a bound for a stuck server, not a
#: timing the test relies on.
WAIT_SECONDS = 60


@contextmanager
def monitored(
    redis_url: str, client: Redis, prefix: str
) -> Iterator[list[dict[str, Any]]]:
    """Collect the MONITOR lines that mention ``prefix`` while the block runs."""
    lines: list[dict[str, Any]] = []
    stop = f"STOP-{uuid.uuid4().hex}"
    watcher = Redis.from_url(redis_url)
    ready = threading.Event()

    def listen() -> None:
        with watcher.monitor() as monitor:  # type: ignore[no-untyped-call]
            ready.set()
            for line in monitor.listen():
                if stop in line["command"]:
                    return
                if prefix in line["command"]:
                    lines.append(line)

    thread = threading.Thread(target=listen, daemon=True)
    thread.start()
    # Set once the server answered MONITOR: every later command is seen.
    assert ready.wait(WAIT_SECONDS), "MONITOR did not start"
    try:
        yield lines
    finally:
        client.echo(stop)
        # Every line before the marker is in ``lines`` once the thread is done.
        thread.join(WAIT_SECONDS)
        watcher.close()
    assert not thread.is_alive(), "MONITOR never showed the end marker"


#: What a write to the messages runs after them on plain Redis: the record
#: (read, then written) and the listing index (the id's entry read, its old
#: member out, the new one in, the entry written); ``TIME`` names no key.
RECORD = ("HMGET", "HSET", "HGET", "ZREM", "ZADD", "HSET")


def _sent(lines: list[dict[str, Any]]) -> list[str]:
    return [
        line["command"].split()[0] for line in lines if line["client_type"] != "lua"
    ]


def _scripted(lines: list[dict[str, Any]]) -> list[str]:
    return [line["command"] for line in lines if line["client_type"] == "lua"]


def _history(repository: RedisChatMemoryRepository, cid: str, turns: int) -> None:
    repository.save_all(
        cid,
        [
            m
            for t in range(turns)
            for m in (Message.user(f"u{t}"), Message.assistant(f"a{t}"))
        ],
    )


def test_each_operation_is_one_round_trip(
    redis_url: str, client: Redis, repository: RedisChatMemoryRepository, prefix: str
) -> None:
    """Once the scripts are cached: append, save, read and delete send one command."""
    window = MessageWindow(6)
    repository.append_to_window("warm", [Message.user("load the script")], window)
    repository.save_all("warm", [Message.user("load the script")])
    with monitored(redis_url, client, prefix) as lines:
        for turn in range(20):
            repository.append_to_window(
                "rt", [Message.user(f"u{turn}"), Message.assistant(f"a{turn}")], window
            )
    assert _sent(lines) == ["EVALSHA"] * 20
    operations: list[tuple[str, Callable[[], object]]] = [
        ("save_all", lambda: repository.save_all("rt", [Message.user("x")])),
        ("find", lambda: repository.find_by_conversation_id("rt")),
        ("delete", lambda: repository.delete_by_conversation_id("rt")),
    ]
    for name, operation in operations:
        with monitored(redis_url, client, prefix) as lines:
            operation()
        assert len(_sent(lines)) == 1, name


@pytest.mark.parametrize(
    "window",
    [MessageWindow(10_000), TokenWindow(10**9, estimate_tokens)],
    ids=["messages", "tokens"],
)
def test_script_work_does_not_grow_with_the_history(
    redis_url: str,
    client: Redis,
    repository: RedisChatMemoryRepository,
    prefix: str,
    window: Window,
) -> None:
    """Without eviction an append runs the same commands on 20 and 2000 messages.

    The first append after ``save_all`` reads one marker, the head of the
    window; later ones read no marker and no message.
    """
    counts = []
    for turns in (10, 1000):
        cid = f"h{turns}"
        _history(repository, cid, turns)
        with monitored(redis_url, client, prefix) as lines:
            repository.append_to_window(cid, [Message.user("first")], window)
        reads = [c for c in _scripted(lines) if c.startswith(("HGETALL", "LRANGE"))]
        # Only the head marker, to see whether it is an orphaned tool response.
        assert [r.split()[0] for r in reads] == ["LRANGE"]
        assert reads[0].endswith(" 0 0")
        with monitored(redis_url, client, prefix) as lines:
            repository.append_to_window(
                cid, [Message.user("next"), Message.assistant("reply")], window
            )
        scripted = _scripted(lines)
        # meta's hn field says the last append left a head that stays.
        assert not [c for c in scripted if c.startswith(("HGETALL", "LRANGE"))]
        counts.append(len(scripted))
    assert counts[0] == counts[1]


def test_eviction_reads_only_the_oldest_markers(
    redis_url: str, client: Redis, repository: RedisChatMemoryRepository, prefix: str
) -> None:
    """Evicting one turn reads one small slice of markers and never a message."""
    _history(repository, "ev", 1000)
    window = MessageWindow(2000)
    with monitored(redis_url, client, prefix) as lines:
        result = repository.append_to_window(
            "ev", [Message.user("new"), Message.assistant("reply")], window
        )
    assert len(result.evicted_ids) == 2
    reads = [
        c
        for c in _scripted(lines)
        if c.startswith(("LRANGE", "HGET ", "HMGET", "HGETALL"))
    ]
    # The batch's ids (one HMGET), meta, then the oldest eight markers; then
    # the record and the index's entry.
    assert [r.split()[0] for r in reads] == [
        *("HMGET", "HMGET", "LRANGE"),
        *("HMGET", "HGET"),
    ]
    assert reads[2].endswith(" 0 7")


def test_an_append_without_ttl_persists_nothing_and_counts_nothing(
    redis_url: str, client: Redis, repository: RedisChatMemoryRepository, prefix: str
) -> None:
    """A message-window append keeps its counts in meta and skips PERSIST."""
    _history(repository, "np", 3)
    window = MessageWindow(100)
    repository.append_to_window("np", [Message.user("first")], window)
    with monitored(redis_url, client, prefix) as lines:
        repository.append_to_window("np", [Message.user("next")], window)
    commands = [c.split()[0] for c in _scripted(lines)]
    # The batch's ids, meta, the message, its marker, its id, meta: no read of
    # the head marker (the previous append left a user message there); then
    # the record and the index.
    assert commands == ["HMGET", "HMGET", "HSET", "RPUSH", "HSET", "HSET", *RECORD]


def test_a_write_without_ttl_persists_what_a_ttl_write_left(
    client: Redis, repository: RedisChatMemoryRepository, prefix: str
) -> None:
    """Skipping PERSIST is only safe while no write set an expiry: track it."""
    with_ttl = RedisChatMemoryRepository(client, key_prefix=prefix, ttl=60)
    window = MessageWindow(2)
    with_ttl.save_all("x", [Message.user("u0"), Message.assistant("a0")])
    repository.append_to_window("x", [Message.user("u1")], window)  # evicts
    keys = list(client.scan_iter(match=f"{prefix}*"))
    assert keys
    assert {client.pttl(k) for k in keys} == {-1}
    with_ttl.append_to_window("x", [Message.assistant("a1")], window)
    assert {client.pttl(k) for k in client.scan_iter(match=f"{prefix}*")} != {-1}
    # A conversation stored before ``exp`` existed may hold an expiry too.
    meta = next(k for k in client.scan_iter(match=f"{prefix}*:meta"))
    client.hdel(meta, "exp")
    repository.append_to_window("x", [Message.user("u2")], window)
    assert {client.pttl(k) for k in client.scan_iter(match=f"{prefix}*")} == {-1}


def test_the_steady_state_command_lists(
    redis_url: str, client: Redis, repository: RedisChatMemoryRepository, prefix: str
) -> None:
    """A full window and a full evicted-id record, one message per append.

    Every other append evicts a turn: 10 commands, 12 in the one that trims
    the record (once per EVICTED_IDS_TRIM_STEP evicted ids), else 6; and
    the conversation record's 6 (:data:`RECORD`) after each.
    """
    window = MessageWindow(4)
    repository.save_all("st", [Message.user("u0"), Message.assistant("a0")])
    bound = EVICTED_IDS_KEPT + EVICTED_IDS_TRIM_STEP
    for turn in range(1, bound // 2 + 1):  # two evicted ids a turn from turn 2
        repository.append_to_window("st", [Message.user(f"u{turn}")], window)
        repository.append_to_window("st", [Message.assistant(f"a{turn}")], window)
    evicting_commands = [
        *("HMGET", "HMGET", "HSET", "RPUSH"),  # ids, meta, message, marker
        *("LRANGE", "HDEL", "LTRIM"),  # the oldest markers, the turn out
        *("HSET", "RPUSH"),  # ids marks, the record
        "HSET",  # meta
    ]
    with monitored(redis_url, client, prefix) as lines:
        evicting = repository.append_to_window("st", [Message.user("u")], window)
    assert len(evicting.evicted_ids) == 2
    assert client.llen(ConversationKeys.of(prefix, "st").evicted) == bound
    assert [c.split()[0] for c in _scripted(lines)] == [*evicting_commands, *RECORD]
    with monitored(redis_url, client, prefix) as lines:
        repository.append_to_window("st", [Message.assistant("a")], window)
    assert [c.split()[0] for c in _scripted(lines)] == [
        *("HMGET", "HMGET", "HSET", "RPUSH", "HSET", "HSET"),
        *RECORD,
    ]
    with monitored(redis_url, client, prefix) as lines:
        repository.append_to_window("st", [Message.user("u'")], window)
    # the evicted-id record's bound
    trimming = [*evicting_commands[:-1], "LPOP", "HDEL", "HSET", *RECORD]
    assert [c.split()[0] for c in _scripted(lines)] == trimming
    assert client.llen(ConversationKeys.of(prefix, "st").evicted) == EVICTED_IDS_KEPT
    with monitored(redis_url, client, prefix) as lines:
        repository.append_to_window("st", [Message.assistant("a'")], window)
    assert [c.split()[0] for c in _scripted(lines)] == [
        *("HMGET", "HMGET", "HSET", "RPUSH", "HSET", "HSET"),
        *RECORD,
    ]


def test_each_log_operation_is_one_round_trip(
    redis_url: str, client: Redis, repository: RedisChatMemoryRepository, prefix: str
) -> None:
    """Once the scripts are cached: a log append, a view and a page send one command."""
    window = MessageWindow(6)
    repository.append_to_log("warm", [Message.user("load the script")], window)
    repository.find_window("warm", window)
    repository.find_messages_page("warm")
    with monitored(redis_url, client, prefix) as lines:
        for turn in range(20):
            repository.append_to_log(
                "rt", [Message.user(f"u{turn}"), Message.assistant(f"a{turn}")], window
            )
    assert _sent(lines) == ["EVALSHA"] * 20
    operations: list[tuple[str, Callable[[], object]]] = [
        ("view", lambda: repository.find_window("rt", window)),
        ("page", lambda: repository.find_messages_page("rt", limit=7)),
        ("oldest", lambda: repository.find_messages_page("rt", newest_first=False)),
    ]
    for name, operation in operations:
        with monitored(redis_url, client, prefix) as lines:
            operation()
        assert _sent(lines) == ["EVALSHA"], name


@pytest.mark.parametrize(
    "window",
    [MessageWindow(20), TokenWindow(60, estimate_tokens)],
    ids=["messages", "tokens"],
)
def test_log_work_does_not_grow_with_the_log(
    redis_url: str,
    client: Redis,
    repository: RedisChatMemoryRepository,
    prefix: str,
    window: Window,
) -> None:
    """A log append, a view and a page run the same commands on 20 and 2000 messages.

    The append (with the window of the one before) reads no marker and no
    message (a batch without a system message needs neither); the view reads
    the system set and the newest rows; the page its own rows.
    """
    commands: dict[str, list[list[str]]] = {"append": [], "view": [], "page": []}
    for turns in (10, 1000):
        cid = f"h{turns}"
        _history(repository, cid, turns)
        repository.append_to_log(cid, [Message.system("S")], window)
        operations: list[tuple[str, Callable[[], object]]] = [
            (
                "append",
                functools.partial(
                    repository.append_to_log, cid, [Message.user("q")], window
                ),
            ),
            ("view", functools.partial(repository.find_window, cid, window)),
            ("page", functools.partial(repository.find_messages_page, cid, limit=10)),
        ]
        for name, operation in operations:
            with monitored(redis_url, client, prefix) as lines:
                operation()
            commands[name].append([c.split()[0] for c in _scripted(lines)])
    for name, (small, large) in commands.items():
        assert small == large, name
    assert commands["append"][0] == [
        *("HMGET", "HMGET", "HSET", "RPUSH", "HSET", "HSET"),
        *RECORD,
    ]
    # meta, the current system set, the head's number, the messages; and
    # the newest markers when they hold sizes of the window's counter
    sizes = ["LRANGE"] if window.counter_id is not None else []
    assert commands["view"][0] == ["HMGET", "LRANGE", "LINDEX", "HMGET", *sizes]
    assert commands["page"][0] == ["HGET", "LINDEX", "HMGET"]


def test_a_page_of_an_evicted_conversation_reads_its_rows_only(
    redis_url: str, client: Redis, repository: RedisChatMemoryRepository, prefix: str
) -> None:
    """The sequence numbers a window evicted are skipped, not probed.

    Two thousand messages went through a five-message window, the system
    prompt (number 0) stayed: a page of two probes three numbers, and the
    page that reaches the prompt reads the head of the system list for it.
    """
    window = MessageWindow(5)
    repository.append_to_window("ev", [Message.system("S")], window)
    for turn in range(1000):
        repository.append_to_window(
            "ev", [Message.user(f"u{turn}"), Message.assistant(f"a{turn}")], window
        )
    stored = [m.id for m in repository.find_by_conversation_id("ev")]
    assert len(stored) == 5
    cursor = None
    pages = []
    while True:
        with monitored(redis_url, client, prefix) as lines:
            page = repository.find_messages_page("ev", cursor, limit=2)
        pages += [m.id for m in page.messages]
        probed = [len(c.split()) - 2 for c in _scripted(lines) if c.startswith("HMGET")]
        assert sum(probed) <= 3, probed
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert pages == stored[::-1]


def test_a_view_reads_back_a_page_per_round_trip_only_when_it_must(
    redis_url: str, client: Redis, repository: RedisChatMemoryRepository, prefix: str
) -> None:
    """A turn of 60 rows under a window of 2: the first read (10) and two more."""
    call_rounds = [
        m
        for n in range(30)
        for m in (
            Message.assistant(
                None, tool_calls=[ToolCall(id=f"t{n}", name="f", arguments="{}")]
            ),
            Message.tool(ToolResponse(id=f"t{n}", name="f", data="ok")),
        )
    ]
    repository.append_to_log("long", [Message.user("go"), *call_rounds])
    window = MessageWindow(2)
    repository.find_window("long", window)
    with monitored(redis_url, client, prefix) as lines:
        view = repository.find_window("long", window)
    assert len(view) == 61
    assert _sent(lines) == ["EVALSHA"] * 3
    probed = [
        len(c.split()) - 2
        for c in _scripted(lines)
        if c.startswith("HMGET") and ":msgs" in c
    ]
    # Numbers 60 down to 51, then 50 to 31, then 30 to the head (0).
    assert probed == [10, 20, 31]
