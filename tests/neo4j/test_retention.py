"""A bounded log on a real Neo4j: what only this backend has to get right.

The conformance suite's ``RetentionTests`` check what a bounded log shows;
these check the trim's own transaction: it adds nothing to an append that
does not trim, it reads the conversation only after its lock, it never
reaches a conversation ``save_all`` renumbered since the append, it keeps the
counters a window append decides on, and a trim that fails leaves the append
stored. The retention option itself is checked without a server.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest
from neo4j import GraphDatabase

from chatledger import (
    InvalidRetentionError,
    Message,
    MessageWindow,
    Retention,
    TokenWindow,
)
from chatledger.tokens import estimate_tokens
from chatledger.window import apply_window
from chatledger_neo4j import AsyncNeo4jChatMemoryRepository, Neo4jChatMemoryRepository
from chatledger_neo4j.log_steps import trim_start_parameters
from chatledger_neo4j.url import parse_url
from tests.backends import backend_url
from tests.neo4j.test_log import _execution_order, _SocketWrites


@pytest.fixture(scope="module")
def neo4j_url(required: set[str]) -> str:
    return backend_url("neo4j", required)


@pytest.fixture
def labels() -> tuple[str, str]:
    """The conversation and message labels of one test's repositories."""
    tag = uuid.uuid4().hex[:12]
    return f"ConversationB{tag}", f"MessageB{tag}"


def _open(
    url: str, labels: tuple[str, str], retention: Retention | None = None
) -> Neo4jChatMemoryRepository:
    conversation, message = labels
    return Neo4jChatMemoryRepository.from_url(
        url,
        conversation_label=conversation,
        message_label=message,
        retention=retention,
    )


@pytest.fixture
def bounded(
    neo4j_url: str, labels: tuple[str, str]
) -> Iterator[Neo4jChatMemoryRepository]:
    repository = _open(neo4j_url, labels, Retention.last(4, slack=2))
    try:
        yield repository
    finally:
        repository.fault_points.clear()
        repository.drop_schema()
        repository.close()


def test_neo4j_retention_comes_from_the_url_query_not_the_routing_context() -> None:
    settings = parse_url("neo4j://h:7687/chat?region=eu&retention=100&zone=a")
    assert settings.uri == "neo4j://h:7687?region=eu&zone=a"
    assert settings.retention == "100"
    assert parse_url("bolt://h").retention is None
    with pytest.raises(ValueError, match="twice"):
        parse_url("neo4j://h?retention=1&retention=2")
    # Made without I/O: no server needed.
    repository = AsyncNeo4jChatMemoryRepository.from_url("neo4j://h?retention=100")
    assert repository.retention == Retention.last(100)
    assert "retention=Retention.last(100, slack=25)" in repr(repository)
    given = AsyncNeo4jChatMemoryRepository.from_url(
        "neo4j://h?retention=100", retention=Retention.everything()
    )
    assert given.retention == Retention.everything()
    assert "retention" not in repr(given)


@pytest.mark.parametrize("retention", [0, -3, "many", 1.5, True])
def test_neo4j_bad_retention_fails_before_any_io(retention: object) -> None:
    # Nothing listens on port 1: a repository that tried to connect would fail
    # with the driver's error instead.
    driver = GraphDatabase.driver("bolt://127.0.0.1:1")
    try:
        with pytest.raises(InvalidRetentionError):
            Neo4jChatMemoryRepository(driver, retention=retention)  # type: ignore[arg-type]
    finally:
        driver.close()
    with pytest.raises(InvalidRetentionError):
        Neo4jChatMemoryRepository.from_url(f"bolt://127.0.0.1:1?retention={retention}")


def _turn(n: int) -> list[Message]:
    return [Message.user(f"q{n}", id=f"q{n}"), Message.assistant(f"a{n}", id=f"a{n}")]


def _conversation(repository: Neo4jChatMemoryRepository, cid: str) -> dict[str, Any]:
    with repository._session() as session:
        record = session.run(
            "MATCH (c:`" + repository.statements.conversation_label + "` {id: $cid}) "
            "RETURN properties(c) AS p",
            cid=cid,
        ).single(strict=True)
    return dict(record["p"])


def test_neo4j_only_an_append_that_trims_pays_for_the_trim(
    bounded: Neo4jChatMemoryRepository, monkeypatch: pytest.MonkeyPatch
) -> None:
    bounded.append_to_log("c", [Message.system("Be brief."), *_turn(0)])
    writes = _SocketWrites(monkeypatch)
    counts: dict[bool, set[int]] = {True: set(), False: set()}
    last = 2
    for n in range(1, 12):
        count = writes.during(partial(bounded.append_to_log, "c", _turn(n)))
        last += 2
        counts[bounded.retention.trim_due(last - 1, last)].add(count)
    # One statement, one request, as unbounded; a trim is a transaction of
    # its own: its BEGIN and first statement, its trim, its COMMIT.
    assert counts[False] == {1}
    assert counts[True]
    assert min(counts[True]) > 1
    stored = bounded.find_by_conversation_id("c")
    assert [m.role.value for m in stored[:2]] == ["system", "user"]
    assert len(stored) <= 1 + 4 + 2


def test_neo4j_a_trim_reads_the_conversation_only_after_its_lock(
    bounded: Neo4jChatMemoryRepository,
) -> None:
    for n in range(6):
        bounded.append_to_log("c", _turn(n))
    parameters = trim_start_parameters("c", "a5", 11, 8)
    with bounded._session() as session:
        summary = session.run(
            "EXPLAIN " + bounded.statements.trim_start, parameters
        ).consume()
    assert summary.plan is not None
    order = list(_execution_order(summary.plan))
    lock = next(
        i for i, (op, d) in enumerate(order) if op == "SetProperty" and "version" in d
    )
    message = bounded.statements.message_label
    reads = [i for i, (_, d) in enumerate(order) if f":{message}(" in d]
    assert reads, order
    assert lock < min(reads), order


def test_neo4j_a_trim_never_reaches_a_conversation_replaced_since(
    bounded: Neo4jChatMemoryRepository, neo4j_url: str, labels: tuple[str, str]
) -> None:
    """save_all numbers a conversation from 0 again: a trim taking its cutoff
    from the append before would remove the whole new conversation."""
    other = _open(neo4j_url, labels)
    replacement = [Message.user("new", id="new"), Message.assistant("conv")]
    for n in range(5):
        bounded.append_to_log("c", _turn(n))

    def replace(point: str) -> None:
        bounded.fault_points.clear()
        other.save_all("c", replacement)

    try:
        bounded.fault_points.on("after_commit", replace)
        bounded.append_to_log("c", _turn(5))  # numbers 10 and 11: a trim is due
        stored = bounded.find_by_conversation_id("c")
        assert [m.id for m in stored] == [m.id for m in replacement]
    finally:
        other.close()


def test_neo4j_a_trim_keeps_the_counters_a_window_append_decides_on(
    bounded: Neo4jChatMemoryRepository,
) -> None:
    system = Message.system("Be brief.")
    # Room for the system message and two turns: the view never holds back
    # the trim of the turns before.
    room = estimate_tokens(system) + 2 * sum(estimate_tokens(m) for m in _turn(0))
    tokens = TokenWindow(room, estimate_tokens, "estimate_tokens")
    # A window append keeps the counters; the log appends and trims after it
    # must keep them right for the next one.
    bounded.append_to_window("c", [system, *_turn(0)], tokens)
    for n in range(1, 8):
        bounded.append_to_log("c", _turn(n), tokens)
    stored = bounded.find_by_conversation_id("c")
    others = [m for m in stored if m.role.value != "system"]
    node = _conversation(bounded, "c")
    assert len(others) < 16, "nothing was trimmed"
    assert node["message_count"] == len(others)
    assert node["size_total"] == sum(estimate_tokens(m) for m in others)
    assert node["evicted_ids"] == [m.id for n in range(6) for m in _turn(n)]
    window = MessageWindow(3)
    result = bounded.append_to_window("c", _turn(8), window)
    expected = apply_window(stored, _turn(8), window)
    assert result.evicted_ids == [m.id for m in expected.evicted]
    assert [m.id for m in bounded.find_by_conversation_id("c")] == [
        m.id for m in expected.messages
    ]
    assert _conversation(bounded, "c")["message_count"] == 2


def test_neo4j_a_trim_that_fails_leaves_the_append_stored(
    bounded: Neo4jChatMemoryRepository,
) -> None:
    for n in range(3):
        bounded.append_to_log("c", _turn(n))

    def fail(point: str) -> None:
        raise ConnectionError("lost while the trim held the lock")

    bounded.fault_points.on("after_lock", fail)
    with pytest.raises(ConnectionError):
        bounded.append_to_log("c", _turn(3))
    # The trim before it removed the first turn; this append stays stored.
    ids = [m.id for m in bounded.find_by_conversation_id("c")]
    assert ids == [m.id for n in (1, 2, 3) for m in _turn(n)]
    bounded.fault_points.clear()
    bounded.append_to_log("c", _turn(4))
    ids = [m.id for m in bounded.find_by_conversation_id("c")]
    assert ids == [m.id for n in (3, 4) for m in _turn(n)]
    assert _conversation(bounded, "c")["evicted_ids"] == [
        m.id for n in range(3) for m in _turn(n)
    ]
