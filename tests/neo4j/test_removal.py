"""Removals from a log on a real Neo4j: what the removal statements leave.

The conformance suite checks what a removal does; these check what is
particular to Neo4j: on random histories (bounded or not, sizes of several
counters, system sets of one or two messages) the statements keep exactly
what core's in-memory repository keeps, with the counters a window append
decides on right and the record of evicted ids untouched; each reads the
conversation only after its lock and reads as many rows at 20 messages as at
2,000; a conversation left empty is not listed but keeps its record; a trim
whose append lost its last message to a removal removes nothing; removals
racing appends and their trims lose nothing.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import pytest

from chatledger import InMemoryChatMemoryRepository, Message, MessageWindow, Role
from chatledger.retention import Retention
from chatledger.tokens import estimate_tokens
from chatledger.window import TokenWindow, apply_window
from chatledger_neo4j import Neo4jChatMemoryRepository
from chatledger_neo4j.log_steps import removal_parameters
from tests.backends import backend_url
from tests.neo4j.label_pool import LabelPool
from tests.neo4j.test_log import _execution_order, _SocketWrites
from tests.removal_histories import (
    appends,
    first_number,
    ids,
    race_removals,
    random_removal,
    record,
    same_log,
    windows_of,
)


@pytest.fixture(scope="module")
def neo4j_url(required: set[str]) -> str:
    return backend_url("neo4j", required)


@pytest.fixture(scope="module")
def labels(neo4j_url: str) -> Iterator[LabelPool]:
    """Label pairs this module's tests take and give back emptied."""
    pool = LabelPool(neo4j_url, "X")
    yield pool
    pool.close()


def _opener(
    neo4j_url: str, labels: LabelPool | None
) -> Iterator[Callable[..., Neo4jChatMemoryRepository]]:
    """Opens repositories on label pairs of the pool's, or on new labels of
    their own without a pool; each is given back, or dropped, afterwards."""
    opened: list[Neo4jChatMemoryRepository] = []

    def make(retention: Retention | None = None) -> Neo4jChatMemoryRepository:
        if labels is None:
            tag = uuid.uuid4().hex[:12]
            conversation_label, message_label = f"ConversationX{tag}", f"MessageX{tag}"
        else:
            conversation_label, message_label = labels.take()
        repository = Neo4jChatMemoryRepository.from_url(
            neo4j_url,
            conversation_label=conversation_label,
            message_label=message_label,
            retention=retention,
        )
        opened.append(repository)
        # The first call makes the schema: what a test counts is its own.
        repository.find_conversation_ids()
        return repository

    yield make
    for repository in opened:
        try:
            if labels is None:
                repository.drop_schema()
            else:
                labels.give_back(repository)
        finally:
            repository.close()


@pytest.fixture
def made(
    neo4j_url: str, labels: LabelPool
) -> Iterator[Callable[..., Neo4jChatMemoryRepository]]:
    """Opens repositories on label pairs of the pool's that hold nothing."""
    yield from _opener(neo4j_url, labels)


@pytest.fixture
def made_fresh(neo4j_url: str) -> Iterator[Callable[..., Neo4jChatMemoryRepository]]:
    """Opens repositories on new labels (for the plans: none cached yet)."""
    yield from _opener(neo4j_url, None)


def _conversation(repository: Neo4jChatMemoryRepository, cid: str) -> dict[str, Any]:
    with repository._session() as session:
        found = session.run(
            "MATCH (c:`" + repository.statements.conversation_label + "` {id: $cid}) "
            "RETURN properties(c) AS p",
            cid=cid,
        ).single()
    return {} if found is None else dict(found["p"])


def _counters_right(repository: Neo4jChatMemoryRepository, cid: str) -> None:
    """``message_count`` counts the non-system messages; ``size_total`` is
    their sizes under ``size_counter``, or unknown (null: measured again)."""
    node = _conversation(repository, cid)
    if not node:
        return
    others = [
        m for m in repository.find_by_conversation_id(cid) if m.role is not Role.SYSTEM
    ]
    assert node.get("message_count", 0) == len(others)
    counter, total = node.get("size_counter"), node.get("size_total")
    # Every token counter of these tests counts with estimate_tokens.
    if total is not None and str(counter).startswith("tokens:"):
        assert total == sum(estimate_tokens(m) for m in others)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("bounded", [False, True])
def test_removals_keep_what_core_keeps(made: Any, seed: int, bounded: bool) -> None:
    """Random appends and removals: the same log, views and record as in memory.

    Each log append takes a random window (a token window of either counter,
    a message window, or none); bounded, trims run between the removals.
    After each step both repositories hold the same messages, show the same
    views and pages, list the conversation alike and record the same evicted
    ids, and the counters stay right.
    """
    rng = random.Random(seed)
    retention = (
        Retention.last(rng.randint(4, 9), slack=rng.randint(1, 4))
        if bounded
        else Retention.everything()
    )
    neo4j = made(retention)
    memory = InMemoryChatMemoryRepository(retention=retention)
    windows = windows_of(rng, retention)
    removed_some = False
    # Emptied, a conversation numbers its next messages on from next_seq here
    # and from the start in memory (the bounded logs would then trim apart):
    # the steps go on in a new one (test_a_removal_that_empties... covers the
    # old).
    conversations = (f"r{n}" for n in range(1000))
    cid = next(conversations)
    first_number(memory, cid, 0)  # as Neo4j numbers a conversation
    for batch in appends(rng, 30):
        window = rng.choice(windows)
        result = neo4j.append_to_log(cid, batch, window)
        assert ids(result.appended) == ids(
            memory.append_to_log(cid, batch, window).appended
        )
        while rng.random() < 0.35:
            name, argument = random_removal(rng, memory, cid)
            removed = getattr(neo4j, name)(cid, argument)
            assert removed == getattr(memory, name)(cid, argument)
            removed_some = removed_some or bool(removed)
            same_log(neo4j, memory, cid)
            assert _conversation(neo4j, cid).get("evicted_ids", []) == record(
                memory, cid
            )
            _counters_right(neo4j, cid)
            if not memory.find_by_conversation_id(cid):
                cid = next(conversations)
                first_number(memory, cid, 0)
                break
    assert removed_some


def test_a_window_append_after_removals_evicts_as_the_window_says(made: Any) -> None:
    """The counters the removals left are what a window append decides on."""
    repository = made()
    tokens = TokenWindow(1000, estimate_tokens, "tokens")
    system = Message.system("Be brief.")
    turns = [[Message.user(f"q{n}"), Message.assistant(f"a{n}")] for n in range(5)]
    repository.append_to_window("c", [system, *turns[0]], tokens)
    for turn in turns[1:]:
        repository.append_to_log("c", turn, tokens)
    repository.remove_newest("c")
    repository.remove_messages("c", [turns[1][0].id, system.id])
    _counters_right(repository, "c")
    assert _conversation(repository, "c")["size_total"] is not None
    stored = repository.find_by_conversation_id("c")
    window = MessageWindow(3)
    extra = [Message.user("q5"), Message.assistant("a5")]
    result = repository.append_to_window("c", extra, window)
    expected = apply_window(stored, extra, window)
    assert result.evicted_ids == ids(expected.evicted)
    assert ids(repository.find_by_conversation_id("c")) == ids(expected.messages)
    assert _conversation(repository, "c")["message_count"] == 3


@pytest.mark.parametrize("statement", ["remove_newest", "remove_named"])
def test_a_removal_reads_the_conversation_only_after_its_lock(
    made_fresh: Any, statement: str
) -> None:
    """In the plan, the SET that locks comes before every read of a message."""
    repository = made_fresh()
    for c in range(5):
        repository.append_to_log(
            f"seed-{c}",
            [Message.system("s"), *[Message.user(f"u{n}") for n in range(20)]],
        )
    parameters = removal_parameters("seed-1", count=3, message_ids=["a", "b"])
    with repository._session() as session:
        summary = session.run(
            "EXPLAIN " + getattr(repository.statements, statement), parameters
        ).consume()
    assert summary.plan is not None
    order = list(_execution_order(summary.plan))
    lock = next(
        i for i, (op, d) in enumerate(order) if op == "SetProperty" and "version" in d
    )
    message = repository.statements.message_label
    reads = [i for i, (_, d) in enumerate(order) if f":{message}(" in d]
    assert reads, order
    assert lock < min(reads), order


def test_a_removal_reads_the_same_rows_at_20_and_2000(made_fresh: Any) -> None:
    """PROFILE: what a removal reads does not grow with the log.

    Profiled in a transaction rolled back, so each run finds the same log.
    """
    repository = made_fresh()
    statements = repository.statements
    profiles: dict[int, list[list[tuple[str, int, int]]]] = {}
    for n in (20, 2000):
        cid = f"long-{n}"
        history = [Message.user(f"u{i}", id=f"{cid}-{i}") for i in range(n)]
        repository.append_to_log(cid, [Message.system("one"), *history])
        named = [history[-5].id, history[-2].id, "unknown"]
        profiles[n] = [
            _profiled(repository, statements.remove_newest, cid, count=3),
            _profiled(repository, statements.remove_named, cid, message_ids=named),
        ]
        assert len(repository.find_by_conversation_id(cid)) == n + 1
    assert profiles[2000] == profiles[20]
    for plan in profiles[2000]:
        operators = {operator for operator, _, _ in plan}
        assert not operators & {"Top", "PartialSort", "PartialTop"}, plan
        assert not operators & {"NodeByLabelScan", "AllNodesScan", "NodeIndexScan"}


def test_a_removal_is_one_managed_transaction_at_any_length(
    made: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three requests, counted on the client's socket writes: the
    transaction's begin, its one statement, its commit; the same at 20
    messages as at 2,000, and when there is nothing to remove."""
    repository = made()
    for n in (20, 2000):
        repository.append_to_log(f"long-{n}", [Message.user(f"u{i}") for i in range(n)])
    writes = _SocketWrites(monkeypatch)
    counts = {
        n: [
            writes.during(partial(repository.remove_newest, f"long-{n}", 2)),
            writes.during(partial(repository.remove_messages, f"long-{n}", ["u"])),
        ]
        for n in (20, 2000)
    }
    assert counts == {20: [3, 3], 2000: [3, 3]}
    assert writes.during(partial(repository.remove_newest, "missing")) == 3


def _profiled(
    repository: Neo4jChatMemoryRepository, query: Any, cid: str, **removal: Any
) -> list[tuple[str, int, int]]:
    """The profile of one removal, run in a transaction that is rolled back."""
    parameters = removal_parameters(cid, **removal)
    with repository._session() as session, session.begin_transaction() as tx:
        summary = tx.run("PROFILE " + query, parameters).consume()
        tx.rollback()
    assert summary.profile is not None
    found: list[tuple[str, int, int]] = []

    def walk(plan: dict[str, Any]) -> None:
        arguments = plan.get("args", {})
        found.append(
            (
                str(plan["operatorType"]).split("@")[0],
                int(arguments.get("Rows", 0)),
                int(arguments.get("DbHits", 0)),
            )
        )
        for child in plan.get("children", []):
            walk(child)

    walk(summary.profile)
    return found


def test_a_removal_that_empties_the_log_keeps_the_record(made: Any) -> None:
    """The conversation is listed no more; its node keeps the record and
    ``next_seq``. A late retry of a trimmed message is still a no-op, and a
    removed one is stored again, numbered after everything before."""
    repository = made(Retention.last(2, slack=1))
    sent = [Message.user(f"q{n}") for n in range(4)]
    for message in sent:
        repository.append_to_log("e", [message])
    before = _conversation(repository, "e")
    assert before["evicted_ids"] == ids(sent[:2])
    assert ids(repository.remove_newest("e", 10)) == ids(sent[2:])
    after = _conversation(repository, "e")
    assert after["emptied"] is True
    assert after["evicted_ids"] == ids(sent[:2])
    assert after["next_seq"] == before["next_seq"]
    assert after["message_count"] == 0
    assert "e" not in repository.find_conversation_ids()
    assert repository.count_messages("e") == 0
    assert repository.append_to_log("e", sent[:1]).appended == []
    assert ids(repository.append_to_log("e", sent[3:]).appended) == [sent[3].id]
    assert "e" in repository.find_conversation_ids()
    assert "emptied" not in _conversation(repository, "e")
    assert repository.remove_newest("missing") == []
    assert repository.remove_messages("missing", ["x"]) == []
    assert _conversation(repository, "missing") == {}


def test_taking_the_current_set_shows_the_one_it_superseded(made: Any) -> None:
    """A part of the set taken, the set stays; all of it, the set before it
    shows again, whole; every system message taken, none shows."""
    repository = made()
    window = TokenWindow(500, estimate_tokens)
    first = [Message.system("first"), Message.user("q"), Message.system("also")]
    answer = Message.assistant("a")
    second = [Message.system("second"), Message.system("and more")]
    repository.append_to_log("s", first)
    repository.append_to_log("s", [answer])
    repository.append_to_log("s", second)

    def shown() -> list[str]:
        view = repository.find_window("s", window)
        return [m.content or "" for m in view if m.role is Role.SYSTEM]

    assert shown() == ["second", "and more"]
    repository.remove_messages("s", [second[0].id])
    assert shown() == ["and more"]
    repository.remove_newest("s")
    assert shown() == ["first", "also"]
    # The superseded set is current again: an equal message is a duplicate.
    assert repository.append_to_log("s", [Message.system("also")]).appended == []
    repository.remove_messages("s", [first[0].id, first[2].id])
    assert shown() == []
    assert ids(repository.find_window("s", window)) == [first[1].id, answer.id]


def test_a_trim_whose_last_message_was_removed_removes_nothing(made: Any) -> None:
    """A pop between an append and its trim: the trim finds its message gone."""
    repository = made(Retention.last(4, slack=2))
    turns = [[Message.user(f"q{n}"), Message.assistant(f"a{n}")] for n in range(3)]
    repository.append_to_log("p", turns[0])
    repository.append_to_log("p", turns[1])
    popped: list[Message] = []

    def pop(point: str) -> None:
        repository.fault_points.clear()
        popped.extend(repository.remove_newest("p"))

    repository.fault_points.on("after_commit", pop)
    repository.append_to_log("p", turns[2])  # numbers 4, 5: due
    assert ids(popped) == [turns[2][1].id]
    stored = [*turns[0], *turns[1], turns[2][0]]
    assert ids(repository.find_by_conversation_id("p")) == ids(stored)
    assert "evicted_ids" not in _conversation(repository, "p")


def test_removals_racing_bounded_appends_lose_nothing(made: Any) -> None:
    """Pops and removals by id, through two repositories, race appends and
    their trims. Every message sent is, at the end, exactly one of: popped,
    removed by id, stored, or in the record of evicted ids (a trim took it)."""
    retention = Retention.last(12, slack=3)
    repository = made(retention)
    other = Neo4jChatMemoryRepository(
        repository.driver,
        conversation_label=repository.statements.conversation_label,
        message_label=repository.statements.message_label,
        retention=retention,
    )
    sent, taken = race_removals(
        repository, other, writers=3, appends=20, poppers=2, removers=2, removals=15
    )
    stored = ids(repository.find_by_conversation_id("race"))
    evicted = _conversation(repository, "race").get("evicted_ids", [])
    everywhere = taken + stored + evicted
    assert len(everywhere) == len(set(everywhere)), "a message is in two places"
    assert sorted(everywhere) == sorted(sent), "a message was lost"
    _counters_right(repository, "race")
