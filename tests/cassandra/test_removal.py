"""Removals from a log on a real Cassandra: what the conditional batch leaves.

The conformance suite checks what a removal does; these check what is
particular to Cassandra: on random histories (bounded or not, with a TTL or
not, sizes of several counters, system sets of one or two messages) the
batches keep exactly what core's in-memory repository keeps, and another
repository that remembered the conversation shows the same; the id index
forgets the ids taken (its probe paths whole, crowded slots left vacant); a
trim that comes between a removal's reads and its batch fails the batch;
``system_batch`` follows rule 1; a conversation left empty is not listed but
keeps its record; removals racing appends and their trims lose nothing; what
a removal reads does not grow with the log; with a TTL every cell left takes
it. The server comes from ``CHATLEDGER_TEST_CASSANDRA_URL`` (see
``tests/conformance/test_cassandra.py``); without one these tests are
skipped, or fail when the backend is required.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from cassandra import WriteTimeout, WriteType
from cassandra.cluster import Session

from chatledger import InMemoryChatMemoryRepository, Message, MessageWindow, Role
from chatledger.retention import Retention
from chatledger.tokens import estimate_tokens
from chatledger.window import TokenWindow, apply_window
from chatledger_cassandra import CassandraChatMemoryRepository, id_index, parse_url
from chatledger_cassandra import repository as cassandra_repository
from chatledger_cassandra.log_removals import VACANT
from chatledger_cassandra.statements import (
    LANE_EVICTED,
    LANE_IDS,
    LANE_OTHER,
    LANE_SYSTEM,
)
from tests.backends import backend_url
from tests.cassandra.counting import CountingSession
from tests.removal_histories import (
    appends,
    ids,
    race_removals,
    random_removal,
    record,
    same_log,
    take_number,
    windows_of,
)


@pytest.fixture(scope="module")
def session(required: set[str]) -> Iterator[Session]:
    """One session on the test keyspace for every test of the module."""
    root = CassandraChatMemoryRepository.from_url(
        backend_url("cassandra", required), create_keyspace=True, create_schema=False
    )
    yield root.session
    root.close()


@pytest.fixture
def make(
    session: Session, required: set[str]
) -> Iterator[Callable[..., CassandraChatMemoryRepository]]:
    """Make repositories on one fresh table of the test keyspace."""
    keyspace = parse_url(backend_url("cassandra", required)).keyspace or "chatledger"
    table = f"pop_{uuid.uuid4().hex[:12]}"

    def make_one(**options: Any) -> CassandraChatMemoryRepository:
        options.setdefault("session", session)
        return CassandraChatMemoryRepository(
            options.pop("session"), keyspace=keyspace, table=table, **options
        )

    yield make_one
    session.execute(f'DROP TABLE IF EXISTS "{keyspace}"."{table}"')


def _cql(repository: CassandraChatMemoryRepository, text: str, *values: Any) -> Any:
    """Run ``text``, where ``T`` stands for the repository's table."""
    table = f'"{repository.keyspace}"."{repository.table}"'
    return list(repository.session.execute(text.replace(" T ", f" {table} "), values))


def _lane(
    repository: CassandraChatMemoryRepository, cid: str, lane: int
) -> dict[int, str]:
    """Every row of one lane of a conversation: number (or slot) to id."""
    rows = _cql(
        repository,
        "SELECT seq, msg_id FROM T WHERE conversation_id = %s AND lane = %s",
        cid,
        lane,
    )
    return {row.seq: row.msg_id for row in rows}


def _statics(repository: CassandraChatMemoryRepository, cid: str) -> Any:
    rows = _cql(
        repository,
        "SELECT next_seq, system_batch, indexed, emptied FROM T "
        "WHERE conversation_id = %s LIMIT 1",
        cid,
    )
    return rows[0] if rows else None


def _index_right(repository: CassandraChatMemoryRepository, cid: str) -> None:
    """Lane 3 holds the id of every stored and recorded row, nothing else but
    vacant slots, each id on an unbroken probe path from its home slot."""
    statics = _statics(repository, cid)
    if statics is None or not statics.indexed:
        return
    index = _lane(repository, cid, LANE_IDS)
    held = {i for i in index.values() if i != VACANT}
    kept = set()
    for lane in (LANE_SYSTEM, LANE_OTHER, LANE_EVICTED):
        kept |= set(_lane(repository, cid, lane).values())
    assert held == kept
    for slot, message_id in index.items():
        if message_id == VACANT:
            continue
        path = id_index.home_slot(message_id)
        while path != slot:
            assert path in index, f"{message_id} cut off from its home slot"
            path = id_index.next_slot(path)


def _system_set_right(repository: CassandraChatMemoryRepository, cid: str) -> None:
    """``system_batch`` is set only while a current system message is stored."""
    statics = _statics(repository, cid)
    if statics is None or statics.system_batch is None:
        return
    system = _lane(repository, cid, LANE_SYSTEM)
    assert any(seq >= statics.system_batch for seq in system)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("ttl", [None, 3600])
@pytest.mark.parametrize("bounded", [False, True])
def test_removals_keep_what_core_keeps(
    make: Callable[..., CassandraChatMemoryRepository],
    monkeypatch: pytest.MonkeyPatch,
    seed: int,
    ttl: int | None,
    bounded: bool,
) -> None:
    """Random appends and removals: the same log, views and record as in memory.

    Each log append takes a random window (a token window of either counter,
    a message window, or none); bounded, trims run between the removals.
    After each step both repositories hold the same messages, show the same
    views and pages, list the conversation alike and record the same
    evicted ids; so does a second repository that read the conversation
    before the removal (it remembers its system messages); the id index
    holds exactly the ids kept.
    """
    # Numbered from 1 as in memory, and a number skipped in memory where a
    # removal takes one: a bounded log trims when its numbers say.
    monkeypatch.setattr(cassandra_repository, "first_sequence_number", lambda: 1)
    rng = random.Random(seed)
    retention = (
        Retention.last(rng.randint(4, 9), slack=rng.randint(1, 4))
        if bounded
        else Retention.everything()
    )
    cassandra = make(retention=retention, ttl=ttl)
    watcher = make(retention=retention, ttl=ttl)
    memory = InMemoryChatMemoryRepository(retention=retention)
    windows = windows_of(rng, retention)
    removed_some = False
    # Emptied, a conversation numbers its next messages on from next_seq here
    # and from 1 in memory (the bounded logs would then trim apart): the
    # steps go on in a new one (test_a_removal_that_empties... covers the old).
    conversations = (f"r{n}" for n in range(1000))
    cid = next(conversations)
    for batch in appends(rng, 30):
        window = rng.choice(windows)
        result = cassandra.append_to_log(cid, batch, window)
        assert ids(result.appended) == ids(
            memory.append_to_log(cid, batch, window).appended
        )
        while rng.random() < 0.35:
            watcher.find_window(cid, MessageWindow(2))  # remembers the system set
            name, argument = random_removal(rng, memory, cid)
            removed = getattr(cassandra, name)(cid, argument)
            assert removed == getattr(memory, name)(cid, argument)
            if removed:
                take_number(memory, cid)  # the removal's version
            removed_some = removed_some or bool(removed)
            same_log(cassandra, memory, cid)
            same_log(watcher, memory, cid)
            assert sorted(_lane(cassandra, cid, LANE_EVICTED).values()) == sorted(
                record(memory, cid)
            )
            _index_right(cassandra, cid)
            _system_set_right(cassandra, cid)
            if not memory.find_by_conversation_id(cid):
                cid = next(conversations)
                break
    assert removed_some


def test_taking_the_current_set_moves_system_batch(
    make: Callable[..., CassandraChatMemoryRepository],
) -> None:
    """Part of the set taken: the rest stays, under another ``system_batch``;
    all of it: the set of the newest append that stored any left; every
    system message: none, ``system_batch`` cleared. A repository that
    remembers the set (it read a view) shows each change."""
    repository, watcher = make(), make()
    window = TokenWindow(500, estimate_tokens)
    first = [Message.system("first"), Message.user("q"), Message.system("also")]
    answer = Message.assistant("a")
    second = [Message.user("q2"), Message.system("second"), Message.system("more")]
    repository.append_to_log("s", first)
    repository.append_to_log("s", [answer])
    repository.append_to_log("s", second)
    base = _statics(repository, "s").system_batch

    def shown() -> list[str]:
        view = watcher.find_window("s", window)
        return [m.content or "" for m in view if m.role is Role.SYSTEM]

    assert shown() == ["second", "more"]
    # The first of the set goes: system_batch moves up to the one left.
    repository.remove_messages("s", [second[1].id])
    assert _statics(repository, "s").system_batch == base + 2
    assert shown() == ["more"]
    repository.remove_newest("s")
    assert shown() == ["first", "also"]
    assert repository.append_to_log("s", [Message.system("also")]).appended == []
    # The last of the set goes: system_batch moves below the first one.
    start = _statics(repository, "s").system_batch
    repository.remove_messages("s", [first[2].id])
    assert _statics(repository, "s").system_batch == start - 1
    assert shown() == ["first"]
    repository.remove_messages("s", [first[0].id])
    assert _statics(repository, "s").system_batch is None
    assert shown() == []
    assert ids(watcher.find_window("s", window)) == ids([first[1], answer, second[0]])
    # The removed ones are forgotten: an equal message is stored again.
    assert ids(repository.append_to_log("s", [first[0]]).appended) == [first[0].id]
    assert shown() == ["first"]


def test_the_set_current_again_is_one_append_by_its_stamp(
    make: Callable[..., CassandraChatMemoryRepository],
) -> None:
    """Two appends of system messages one after the other: taking the second
    makes the first current, whole, and not the messages before it."""
    repository = make()
    repository.append_to_log("t", [Message.system("zero"), Message.user("q")])
    one = [Message.system("one"), Message.system("one too")]
    repository.append_to_log("t", one)
    repository.append_to_log("t", [Message.system("two")])
    repository.remove_newest("t")
    shown = repository.find_window("t", MessageWindow(10))
    assert [m.content for m in shown if m.role is Role.SYSTEM] == ["one", "one too"]


def test_a_window_without_system_batch_loses_a_system_message(
    make: Callable[..., CassandraChatMemoryRepository],
) -> None:
    """A window as release 0.2 left it, no ``system_batch`` recorded (all of
    lane 0 is current): taking one of two system messages records where the
    other starts, and the window append goes on from what is left."""
    repository = make()
    window = MessageWindow(10)
    first, second = Message.system("one"), Message.system("two")
    turn = [Message.user("q"), Message.assistant("a")]
    repository.append_to_window("w", [first, second, *turn], window)
    _cql(repository, "UPDATE T SET system_batch = null WHERE conversation_id = %s", "w")
    assert _statics(repository, "w").system_batch is None
    assert ids(repository.remove_messages("w", [second.id])) == [second.id]
    assert _statics(repository, "w").system_batch is not None
    _system_set_right(repository, "w")
    assert ids(repository.find_window("w", window)) == ids([first, *turn])
    stored = repository.find_by_conversation_id("w")
    more = [Message.user("q2"), Message.assistant("a2")]
    result = repository.append_to_window("w", more, MessageWindow(3))
    expected = apply_window(stored, more, MessageWindow(3))
    assert result.evicted_ids == ids(expected.evicted)
    assert ids(repository.find_by_conversation_id("w")) == ids(expected.messages)


def test_a_removal_that_empties_the_log_keeps_the_record(
    make: Callable[..., CassandraChatMemoryRepository],
) -> None:
    """Not listed, its record and id index kept, ``next_seq`` one on (the
    removal's number). A late retry of a trimmed message is still a no-op;
    a removed one is stored again."""
    repository = make(retention=Retention.last(2, slack=1))
    sent = [Message.user(f"q{n}") for n in range(4)]
    for message in sent:
        repository.append_to_log("e", [message])
    before = _statics(repository, "e")
    assert sorted(_lane(repository, "e", LANE_EVICTED).values()) == sorted(
        ids(sent[:2])
    )
    assert ids(repository.remove_newest("e", 10)) == ids(sent[2:])
    after = _statics(repository, "e")
    assert after.emptied is True
    assert after.next_seq == before.next_seq + 1
    assert "e" not in repository.find_conversation_ids()
    assert repository.count_messages("e") == 0
    assert repository.find_window("e", MessageWindow(5)) == []
    _index_right(repository, "e")
    assert repository.append_to_log("e", sent[:1]).appended == []
    assert ids(repository.append_to_log("e", sent[3:]).appended) == [sent[3].id]
    assert "e" in repository.find_conversation_ids()
    assert repository.remove_newest("missing") == []
    assert repository.remove_messages("missing", ["x"]) == []
    assert _statics(repository, "missing") is None


def test_ids_on_a_crowded_probe_path_are_forgotten(
    make: Callable[..., CassandraChatMemoryRepository],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ids crowded onto one home slot, on slots 0 to 5: a removed id whose
    next slot is taken leaves its slot vacant, so every id further along is
    still found; the last one's row goes. Appended again, each removed one
    is stored again, once."""
    monkeypatch.setattr(id_index, "home_slot", lambda message_id: 0)
    repository = make()
    sent = [Message.user(f"q{n}", id=f"q{n}") for n in range(6)]
    repository.append_to_log("c", sent)
    gone = [sent[0], sent[2], sent[5]]
    repository.remove_messages("c", ids(gone))
    index = _lane(repository, "c", LANE_IDS)
    assert index == {0: VACANT, 1: "q1", 2: VACANT, 3: "q3", 4: "q4"}
    _index_right(repository, "c")
    assert repository.append_to_log("c", sent).appended == gone
    _index_right(repository, "c")
    assert repository.append_to_log("c", sent).appended == []


def test_a_trim_between_the_reads_and_the_batch_fails_the_batch(
    make: Callable[..., CassandraChatMemoryRepository],
) -> None:
    """A trim moves no version; the rows it deleted fail the removal's batch,
    which reads again: a message is taken by one or the other, never both,
    and a conversation the two empty is not listed."""
    bounded = make(retention=Retention.last(4, slack=2))
    plain = make()
    turns = [[Message.user(f"q{n}"), Message.assistant(f"a{n}")] for n in range(4)]
    for turn in turns:
        plain.append_to_log("c", turn)
    last = _statics(plain, "c").next_seq - 1
    reached = 0

    def trim(point: str) -> None:
        nonlocal reached
        reached += 1
        if reached == 1:  # the removal's reads are done, its batch not yet sent
            bounded._trim("c", turns[-1][-1], last, None)

    plain.fault_points.on("after_lock", trim)
    # The oldest message, which the trim takes first: the removal finds it
    # gone when it reads again.
    assert plain.remove_messages("c", [turns[0][0].id]) == []
    evicted = set(_lane(plain, "c", LANE_EVICTED).values())
    assert turns[0][0].id in evicted
    stored = ids(plain.find_by_conversation_id("c"))
    assert stored == ids([m for turn in turns[2:] for m in turn])
    _index_right(plain, "c")
    # What a trim leaves, taken whole: the conversation is listed no more.
    for turn in turns:
        plain.append_to_log("d", turn)
    last = _statics(plain, "d").next_seq - 1
    reached = 0

    def trim_d(point: str) -> None:
        nonlocal reached
        reached += 1
        if reached == 1:
            bounded._trim("d", turns[-1][-1], last, None)

    plain.fault_points.clear()
    plain.fault_points.on("after_lock", trim_d)
    assert ids(plain.remove_newest("d", 4)) == ids([m for t in turns[2:] for m in t])
    assert "d" not in plain.find_conversation_ids()
    assert _statics(plain, "d").emptied is True


def test_a_removal_whose_outcome_is_unknown_is_not_sent_again(
    make: Callable[..., CassandraChatMemoryRepository],
) -> None:
    """A CAS timeout leaves a batch's outcome unknown: an append is sent
    again (its ids make that a no-op), a removal raises, since a second one
    would take the messages after the ones the first may have taken."""
    repository = make()
    sent = [Message.user(f"q{n}") for n in range(3)]
    timeouts = 0

    def time_out(point: str) -> None:
        nonlocal timeouts
        timeouts += 1
        if timeouts == 1:
            raise WriteTimeout("lost in the Paxos round", write_type=WriteType.CAS)

    repository.fault_points.on("before_commit", time_out)
    assert ids(repository.append_to_log("c", sent).appended) == ids(sent)
    assert timeouts == 2
    timeouts = 0
    with pytest.raises(WriteTimeout):
        repository.remove_newest("c")
    assert timeouts == 1
    assert ids(repository.find_by_conversation_id("c")) == ids(sent)
    repository.fault_points.clear()
    assert ids(repository.remove_newest("c")) == [sent[-1].id]


def test_a_removal_reads_as_much_at_20_as_at_2000_messages(
    make: Callable[..., CassandraChatMemoryRepository], session: Session
) -> None:
    """``remove_newest``: its reads together, the slots of its ids, the
    batch; the rows read follow ``count``, not the log. ``remove_messages``
    of recent ids reads as far as they (a first page of ids, then their
    payloads). The next append is its batch alone: the removal left the
    repository knowing the conversation."""
    counting = CountingSession(session)
    writer = make()
    repository = make(session=counting)
    repository.count_messages("none")  # the first call connects: not counted
    costs = {}
    for size in (100, 2000):
        cid = f"long-{size}"
        history = [Message.user(f"u{n}") for n in range(size)]
        writer.append_to_log(cid, [Message.system("Be brief."), *history[:1000]])
        if size > 1000:
            writer.append_to_log(cid, history[1000:])
        with counting.counting() as newest:
            assert ids(repository.remove_newest(cid, 3)) == ids(history[-3:])
        with counting.counting() as named:
            taken = repository.remove_messages(cid, [history[-5].id, history[-7].id])
        assert ids(taken) == [history[-7].id, history[-5].id]
        with counting.counting() as append:
            repository.append_to_log(cid, [Message.user("next")])
        costs[size] = (
            (newest.round_trips, newest.statements.count("BATCH"), max(newest.rows)),
            (named.round_trips, named.statements.count("BATCH"), max(named.rows)),
            (append.round_trips, append.statements.count("BATCH")),
        )
    assert costs[2000] == costs[100]
    (newest_trips, _, newest_rows), (named_trips, _, _), append_cost = costs[100]
    assert (newest_trips, named_trips, append_cost) == (3, 4, (1, 1))
    assert newest_rows == 3 + 1


def test_with_a_ttl_every_cell_left_takes_it(
    make: Callable[..., CassandraChatMemoryRepository],
) -> None:
    """A removal slides the TTL: every message row, index row and static
    column left is written again under it."""
    short = make(ttl=600)
    sent = [Message.system("s"), *[Message.user(f"q{n}") for n in range(5)]]
    short.append_to_log("t", sent)
    longer = make(ttl=3600)
    longer.remove_messages("t", [sent[2].id])
    rows = _cql(
        longer,
        "SELECT lane, TTL(payload) AS p, TTL(msg_id) AS i FROM T "
        "WHERE conversation_id = %s",
        "t",
    )
    assert len(rows) == 2 * (len(sent) - 1)
    for row in rows:
        assert (row.i or 0) > 600
        if row.lane < LANE_EVICTED:
            assert (row.p or 0) > 600
    statics = _cql(
        longer,
        "SELECT TTL(next_seq) AS n, TTL(system_batch) AS b, TTL(indexed) AS x "
        "FROM T WHERE conversation_id = %s LIMIT 1",
        "t",
    )[0]
    assert min(statics.n, statics.b, statics.x) > 600


def test_removals_racing_bounded_appends_lose_nothing(
    make: Callable[..., CassandraChatMemoryRepository],
) -> None:
    """Pops and removals by id, through another repository (as another
    process would), race appends and their trims. Every message sent is, at
    the end, exactly one of: popped, removed by id, stored, or in the record
    of evicted ids (a trim took it); the id index holds exactly the rest."""
    retention = Retention.last(12, slack=3)
    repository = make(retention=retention)
    other = make(retention=retention)
    sent, taken = race_removals(
        repository, other, writers=2, appends=15, poppers=1, removers=1, removals=10
    )
    stored = ids(repository.find_by_conversation_id("race"))
    evicted = list(_lane(repository, "race", LANE_EVICTED).values())
    everywhere = taken + stored + evicted
    assert len(everywhere) == len(set(everywhere)), "a message is in two places"
    assert sorted(everywhere) == sorted(sent), "a message was lost"
    _index_right(repository, "race")
