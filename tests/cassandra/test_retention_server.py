"""A bounded log on a real Cassandra: what a trim costs, keeps and removes.

The conformance suite's ``RetentionTests`` check what a bounded log shows;
these check what only Cassandra has: the round trips a trim adds (none to an
append that does not trim), the record of evicted ids and the id index
across the record's own trims (slots that share a probe path too), and trims
that meet writers of other repositories between their reads and their
batch. The server comes from ``CHATLEDGER_TEST_CASSANDRA_URL`` (see
``tests/conformance/test_cassandra.py``); without one these tests are
skipped, or fail when the backend is required.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from cassandra.cluster import Session

from chatledger import Message, MessageWindow, Retention
from chatledger.adapters import EVICTED_IDS_KEPT, EVICTED_IDS_TRIM_STEP
from chatledger_cassandra import (
    CassandraChatMemoryRepository,
    id_index,
    log_trims,
    parse_url,
)
from chatledger_cassandra import repository as cassandra_repository
from chatledger_cassandra import steps as cassandra_steps
from chatledger_cassandra.statements import (
    LANE_EVICTED,
    LANE_IDS,
    LANE_OTHER,
    LANE_SYSTEM,
)
from tests.backends import backend_url
from tests.cassandra.counting import CountingSession


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
    keyspace = parse_url(backend_url("cassandra", required)).keyspace
    table = f"keep_{uuid.uuid4().hex[:12]}"

    def make_one(**options: Any) -> CassandraChatMemoryRepository:
        options.setdefault("session", session)
        return CassandraChatMemoryRepository(
            options.pop("session"),
            keyspace=keyspace or "chatledger",
            table=table,
            **options,
        )

    yield make_one
    session.execute(f'DROP TABLE IF EXISTS "{keyspace or "chatledger"}"."{table}"')


def _lane(
    repository: CassandraChatMemoryRepository, cid: str, lane: int
) -> dict[int, str]:
    """Every row of one lane of a conversation: number (or slot) to id."""
    rows = repository.session.execute(
        f'SELECT seq, msg_id FROM "{repository.keyspace}"."{repository.table}" '
        "WHERE conversation_id = %s AND lane = %s",
        (cid, lane),
    )
    return {row.seq: row.msg_id for row in rows}


def _next_number(repository: CassandraChatMemoryRepository, cid: str) -> int:
    """The conversation's ``next_seq``."""
    rows = repository.session.execute(
        f'SELECT next_seq FROM "{repository.keyspace}"."{repository.table}" '
        "WHERE conversation_id = %s LIMIT 1",
        (cid,),
    )
    return int(next(iter(rows)).next_seq)


def _turn(n: int) -> list[Message]:
    return [Message.user(f"q{n}", id=f"q{n}"), Message.assistant(f"a{n}", id=f"a{n}")]


def _check_index(repository: CassandraChatMemoryRepository, cid: str) -> None:
    """The id index holds every stored and recorded id, each on an unbroken
    probe path from its home slot (so an append finds it)."""
    index = _lane(repository, cid, LANE_IDS)
    held = set(index.values())
    for lane in (LANE_SYSTEM, LANE_OTHER, LANE_EVICTED):
        assert set(_lane(repository, cid, lane).values()) <= held
    for slot, message_id in index.items():
        path = id_index.home_slot(message_id)
        while path != slot:
            assert path in index, f"{message_id} cut off from its home slot"
            path = id_index.next_slot(path)


#: Where the test conversation's numbers start, relative to a multiple of
#: EVICTED_IDS_TRIM_STEP: 100 on, no trim of the test crosses the next
#: multiple, so the record of evicted ids never trims; 220 on, exactly one
#: trim's removals cross it and that trim also reads the record's oldest rows.
_RECORD_QUIET = 100
_RECORD_TRIMS = 220


@pytest.mark.parametrize("offset", [_RECORD_QUIET, _RECORD_TRIMS])
def test_cassandra_only_an_append_that_trims_pays_for_the_trim(
    make: Callable[..., CassandraChatMemoryRepository],
    session: Session,
    monkeypatch: pytest.MonkeyPatch,
    offset: int,
) -> None:
    # A new conversation's numbers start at random; pinned here, so which
    # trim also trims the record of evicted ids is known, not left to chance.
    start = 10**6 * EVICTED_IDS_TRIM_STEP + offset
    monkeypatch.setattr(cassandra_repository, "first_sequence_number", lambda: start)
    counting = CountingSession(session)
    retention = Retention.last(6, slack=4)
    repository = make(session=counting, retention=retention)
    window = MessageWindow(4)
    repository.append_to_log("c", [Message.system("Be brief."), *_turn(0)], window)
    assert list(_lane(repository, "c", LANE_SYSTEM)) == [start]
    for n in range(1, 6):
        repository.append_to_log("c", _turn(n), window)
    costs: dict[bool, list[tuple[int, int]]] = {True: [], False: []}
    for n in range(6, 30):
        with counting.counting() as calls:
            repository.append_to_log("c", _turn(n), window)
        last = _next_number(repository, "c") - 1
        cost = (calls.round_trips, calls.statements.count("BATCH"))
        costs[retention.trim_due(last - 1, last)].append(cost)
        # No read asks for more than the view's first read does (the
        # window's 4 and a turn's 8) but the one a record's trim adds, of
        # the record's oldest rows, which holds a few dozen ids here.
        if cost != (4, 2):
            assert max(calls.rows, default=0) <= 4 + 8
    # An append that does not trim: its batch alone, as unbounded. One that
    # does: its batch, the trim's reads (the view of its window among them)
    # together, and the trim's batch; the one trim whose removals trim the
    # record of evicted ids too, one more round trip to read its oldest rows.
    assert set(costs[False]) == {(1, 1)}
    record_trims = 1 if offset == _RECORD_TRIMS else 0
    assert costs[True].count((4, 2)) == record_trims
    assert costs[True].count((3, 2)) == len(costs[True]) - record_trims > 0
    stored = repository.find_by_conversation_id("c")
    assert stored[0].role.value == "system"
    assert len(stored) <= 1 + 6 + 4


def test_cassandra_a_trim_records_what_it_removes_and_keeps_the_index_bounded(
    make: Callable[..., CassandraChatMemoryRepository],
) -> None:
    """Past EVICTED_IDS_KEPT trimmed ids the record trims too, and the index
    rows of the ids it drops go with them: the partition stays bounded."""
    repository = make(retention=Retention.last(10, slack=10))
    sent: list[Message] = []
    n = 0
    while len(sent) < EVICTED_IDS_KEPT + 2 * EVICTED_IDS_TRIM_STEP:
        batch = [m for k in range(10) for m in _turn(n + k)]
        n += 10
        repository.append_to_log("c", batch)
        sent += batch
    stored = _lane(repository, "c", LANE_OTHER)
    record = _lane(repository, "c", LANE_EVICTED)
    index = _lane(repository, "c", LANE_IDS)
    assert 10 <= len(stored) <= 20
    assert EVICTED_IDS_KEPT <= len(record) <= EVICTED_IDS_KEPT + EVICTED_IDS_TRIM_STEP
    # The record is the newest ids trimmed, each at its message's number.
    trimmed = sent[: len(sent) - len(stored)]
    assert sorted(record.values()) == sorted(m.id for m in trimmed[-len(record) :])
    # 64-bit slots of a few thousand ids never meet: every dropped id went.
    assert set(index.values()) == set(stored.values()) | set(record.values())
    _check_index(repository, "c")
    # A retry of trimmed messages still in the record stores nothing.
    assert repository.append_to_log("c", trimmed[-20:]).appended == []
    assert _lane(repository, "c", LANE_OTHER) == stored


def test_cassandra_a_trim_keeps_every_probe_path_of_the_index_whole(
    make: Callable[..., CassandraChatMemoryRepository],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ids crowded onto 48 slots, a record trimmed every few ids, the index
    rows going one batch each: rows whose next slot is taken stay, and every
    id kept is still found."""
    home = id_index.home_slot
    monkeypatch.setattr(id_index, "home_slot", lambda i: home(i) % 48)
    monkeypatch.setattr(log_trims, "INDEX_ROWS_PER_BATCH", 1)
    monkeypatch.setattr(cassandra_steps, "trim_below", lambda last: last - 12)
    monkeypatch.setattr(
        cassandra_steps,
        "trim_due",
        lambda first, last: (
            first <= last and (first // 4 != last // 4 or first % 4 == 0)
        ),
    )
    repository = make(retention=Retention.last(4, slack=2))
    sent: list[Message] = []
    for n in range(40):
        batch = _turn(n)
        repository.append_to_log("c", batch)
        sent += batch
        _check_index(repository, "c")
        assert len(_lane(repository, "c", LANE_EVICTED)) <= 12 + 4
    assert len(_lane(repository, "c", LANE_IDS)) < len(sent), "no index row went"
    recorded = sorted(_lane(repository, "c", LANE_EVICTED).items())
    retried = [m for m in sent if m.id in {i for _, i in recorded}]
    assert repository.append_to_log("c", retried).appended == []


def test_cassandra_a_trim_that_meets_another_writer_reads_again(
    make: Callable[..., CassandraChatMemoryRepository],
) -> None:
    repository, other = make(retention=Retention.last(4, slack=2)), make()
    reached = 0

    def interleave(point: str) -> None:
        nonlocal reached
        reached += 1
        if reached == 2:  # the trim's reads are done, its batch not yet sent
            other.append_to_log("c", [Message.user("other", id="other")])

    for n in range(3):
        repository.append_to_log("c", _turn(n))
    repository.fault_points.on("after_lock", interleave)
    repository.append_to_log("c", _turn(3))  # numbers 7 and 8: a trim is due
    # The trim lost its condition to the other writer, read again and
    # trimmed on what that writer left.
    assert [m.id for m in repository.find_by_conversation_id("c")] == [
        "q2",
        "a2",
        "q3",
        "a3",
        "other",
    ]


def test_cassandra_a_trim_never_reaches_a_conversation_replaced_since(
    make: Callable[..., CassandraChatMemoryRepository],
) -> None:
    repository, other = make(retention=Retention.last(4, slack=2)), make()
    replacement = [Message.user("new", id="new"), Message.assistant("conv")]
    reached = 0

    def replace(point: str) -> None:
        nonlocal reached
        reached += 1
        if reached == 2:
            other.save_all("c", replacement)

    for n in range(3):
        repository.append_to_log("c", _turn(n))
    repository.fault_points.on("after_lock", replace)
    repository.append_to_log("c", _turn(3))
    assert [m.id for m in repository.find_by_conversation_id("c")] == [
        m.id for m in replacement
    ]


def test_cassandra_a_trim_that_fails_leaves_the_append_stored(
    make: Callable[..., CassandraChatMemoryRepository],
) -> None:
    repository = make(retention=Retention.last(4, slack=2))
    for n in range(3):
        repository.append_to_log("c", _turn(n))
    reached = 0

    def fail(point: str) -> None:
        nonlocal reached
        reached += 1
        if reached == 2:  # the trim's batch, after the append's
            raise ConnectionError("lost before the trim's batch was sent")

    repository.fault_points.on("before_commit", fail)
    with pytest.raises(ConnectionError):
        repository.append_to_log("c", _turn(3))
    # The append before it trimmed the first turn; this one stays stored.
    ids = [m.id for m in repository.find_by_conversation_id("c")]
    assert ids == [m.id for n in (1, 2, 3) for m in _turn(n)]
    repository.fault_points.clear()
    repository.append_to_log("c", _turn(4))  # numbers 9 and 10: due again
    ids = [m.id for m in repository.find_by_conversation_id("c")]
    assert ids == [m.id for n in (3, 4) for m in _turn(n)]
    assert set(_lane(repository, "c", LANE_EVICTED).values()) == {
        m.id for n in range(3) for m in _turn(n)
    }
