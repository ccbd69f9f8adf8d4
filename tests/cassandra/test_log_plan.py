"""The log append's plans, checked without a server against the partition model.

The model (:class:`tests.cassandra.test_plan.Partition`) applies a batch as
Cassandra applies a conditional single-partition batch, refuses one that
would shadow its own rows, fails one whose ``IF NOT EXISTS`` meets a taken
slot, and checks the invariants of the static columns after every commit.
Here log appends, sent on what a reader of the partition would know (or on
what the last commit left, as a repository remembers it), are compared with
the in-memory repository, core's reference log, and mixed with window appends
and ``save_all``.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import cast

import pytest

from chatledger import (
    InMemoryChatMemoryRepository,
    Message,
    MessageWindow,
    Role,
    TokenWindow,
)
from chatledger.testing import random_turns
from chatledger.tokens import estimate_tokens
from chatledger.validation import stamp_messages
from chatledger.window import Window
from chatledger_cassandra import id_index
from chatledger_cassandra.id_index import SlotMap, home_slot, next_slot
from chatledger_cassandra.log_plans import (
    LogKnowledge,
    LogPlan,
    plan_log_append,
    whole_partition,
)
from chatledger_cassandra.log_rows import Read, Statics, current_system
from chatledger_cassandra.log_states import LogState
from chatledger_cassandra.log_views import tail_start
from chatledger_cassandra.statements import (
    LANE_EVICTED,
    LANE_IDS,
    LANE_OTHER,
    LANE_SYSTEM,
)
from chatledger_cassandra.steps import StoredRow, plan_append_batch
from tests.cassandra.test_plan import Partition

START = 1_000


def _system_rows(part: Partition) -> list[StoredRow]:
    newest_first = sorted(
        (r for r in part.rows.values() if r.lane == LANE_SYSTEM), key=lambda r: -r.seq
    )
    rows = current_system(newest_first, part.system_batch, whole=True)
    assert rows is not None
    return rows


def read_knowledge(part: Partition, batch: list[Message]) -> LogKnowledge:
    """What the repository's reads of the partition tell a log append (no TTL)."""
    # Not indexed, lane 3 is empty: nothing to read there.
    slots = SlotMap(whole=not part.indexed)
    ids = [m.id for m in batch]
    while wanted := slots.unread(ids):
        slots.learn(wanted, {s: part.index[s] for s in wanted if s in part.index})
    stored: tuple[str, ...] = ()
    if part.version is not None and not part.indexed:
        stored = tuple(r.msg_id for r in part.rows.values())
        stored += tuple(part.record.values())
    with_system = any(m.role is Role.SYSTEM for m in batch)
    return LogKnowledge(
        part.version,
        part.system_batch,
        part.indexed,
        tuple(_system_rows(part)) if with_system else None,
        slots,
        stored,
    )


def read_whole(part: Partition) -> LogKnowledge:
    """What a read of every row of the partition tells (with a TTL)."""
    if part.version is None:
        return whole_partition(Read(None, [], 0))
    rows = list(part.rows.values())
    rows += [StoredRow(LANE_EVICTED, s, i, "") for s, i in part.record.items()]
    rows += [StoredRow(LANE_IDS, s, i, "") for s, i in part.index.items()]
    rows.sort(key=lambda r: (r.lane, r.seq))
    statics = Statics(part.version, part.system_batch, part.indexed)
    return whole_partition(Read(statics, rows, len(rows)))


def log_append(
    part: Partition,
    batch: list[Message],
    window: Window | None,
    ttl: int = 0,
    remembered: LogState | None = None,
) -> LogPlan:
    """Append as the repository does: on a remembered state first, else read."""
    if remembered is not None and not ttl and remembered.suffices(batch):
        planned = plan_log_append(
            "c", LogKnowledge.of_state(remembered), batch, window, ttl, START
        )
        if planned.plan.condition is not None and part.apply(planned.plan):
            return planned
    knowledge = read_whole(part) if ttl else read_knowledge(part, batch)
    planned = plan_log_append("c", knowledge, batch, window, ttl, START)
    if planned.plan.condition is not None:
        assert part.apply(planned.plan)
    return planned


def _sequence_is_gap_free(part: Partition) -> None:
    seqs = sorted(seq for lane, seq in part.rows if lane in (LANE_SYSTEM, LANE_OTHER))
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs))) if seqs else True
    assert part.version is None or not seqs or part.version == seqs[-1] + 1


@pytest.mark.parametrize("ttl", [0, 60])
@pytest.mark.parametrize("seed", range(12))
def test_cassandra_log_plans_match_the_reference_log(seed: int, ttl: int) -> None:
    rng = random.Random(seed)
    window: Window | None = rng.choice(
        [None, MessageWindow(5), TokenWindow(80, estimate_tokens, "estimate_tokens")]
    )
    part = Partition()
    reference = InMemoryChatMemoryRepository()
    sent: list[Message] = []
    remembered: LogState | None = None
    for batch in random_turns(rng, 30):
        batch = stamp_messages(batch)
        if rng.random() < 0.25 and sent:
            pool = list({m.id: m for m in sent}.values())
            batch = [*rng.sample(pool, min(len(pool), 2)), *batch]  # retries
        sent += batch
        expected = reference.append_to_log("c", batch, window)
        planned = log_append(part, batch, window, ttl, remembered)
        remembered = planned.state if rng.random() < 0.7 else None
        assert [m.id for m in planned.plan.result.appended] == [
            m.id for m in expected.appended
        ]
        assert planned.plan.result.evicted_ids == []
        assert part.messages() == reference.find_by_conversation_id("c")
        _sequence_is_gap_free(part)
        assert part.indexed
        assert part.record == {}
        if ttl and planned.plan.condition is not None:
            # Every cell was rewritten under the new TTL.
            cells = [*part.rows, *[(LANE_IDS, slot) for slot in part.index]]
            written = {part.written_by[k] for k in cells}
            assert written == {part.batches}
        counter = None if window is None else window.counter_id
        for row in part.rows.values():
            assert row.size_counter == counter
            if counter is not None:
                assert window is not None
                assert row.size == window.measure(row.message())


def test_cassandra_log_append_on_a_window_written_conversation() -> None:
    """A conversation a window append wrote: its ids and record count as held."""
    window = MessageWindow(2)
    part = Partition()
    reference = InMemoryChatMemoryRepository()
    first = stamp_messages([Message.system("S"), Message.user("U1")])
    second = stamp_messages([Message.assistant("A1"), Message.user("U2")])
    for batch in (first, second):
        plan = plan_append_batch("c", part.snapshot(window, 0), batch, window, 0, START)
        assert part.apply(plan)
        reference.append_to_window("c", batch, window)
    assert part.record
    assert not part.indexed
    assert part.index == {}
    evicted = next(iter(part.record.values()))
    retry = [*first, *second, Message.system("S")]
    planned = log_append(part, stamp_messages(retry), window)
    assert planned.plan.condition is None, "every id held, the system one equal"
    third = stamp_messages([Message.assistant("A2")])
    before = part.version
    planned = log_append(part, [*stamp_messages(retry), *third], window)
    assert planned.plan.result.appended == third
    assert part.indexed
    assert evicted in part.index.values()
    assert part.messages() == [*first[:1], second[1], *third]
    reference.append_to_log("c", third, window)
    assert part.messages() == reference.find_by_conversation_id("c")
    assert part.rows[(LANE_OTHER, before)].msg_id == third[0].id
    assert part.version == before + 1  # type: ignore[operator]


@pytest.mark.parametrize("seed", range(10))
def test_cassandra_log_window_and_replace_mix_keeps_the_invariants(seed: int) -> None:
    """Window appends drop the index, log appends rebuild it; no id is stored twice."""
    rng = random.Random(seed)
    window = MessageWindow(rng.randint(2, 8))
    ttl = rng.choice([0, 30])
    part = Partition()
    held: set[str] = set()
    remembered: LogState | None = None
    for batch in random_turns(rng, 40):
        batch = stamp_messages(batch)
        if rng.random() < 0.3 and held:
            again = rng.sample(sorted(held), 1)
            batch = [m for m in batch if m.id not in again]
            retried = [r.message() for r in part.rows.values() if r.msg_id in again]
            batch = [*retried, *batch]
        choice = rng.random()
        if choice < 0.5:
            planned = log_append(part, batch, window, ttl, remembered)
            remembered = planned.state
            appended = planned.plan.result.appended
            assert not {m.id for m in appended} & held, "a held id is stored again"
            assert part.indexed or not appended
        elif choice < 0.9:
            plan = plan_append_batch(
                "c", part.snapshot(window, ttl), batch, window, ttl, START
            )
            if plan.condition is not None:
                assert part.apply(plan)
            assert not part.indexed or plan.condition is None
            appended = plan.result.appended
        else:
            assert part.apply(part.replacing(batch, ttl, START))
            held = set()
            appended = batch
        held |= {m.id for m in appended}
        stored = [r.msg_id for r in part.rows.values()]
        assert len(stored) == len(set(stored))
        if part.indexed:
            assert set(stored) <= set(part.index.values())


def test_cassandra_window_append_sees_only_the_current_system_set() -> None:
    window = MessageWindow(4)
    part = Partition()
    log_append(part, stamp_messages([Message.system("S1"), Message.user("U1")]), window)
    log_append(part, stamp_messages([Message.system("S2"), Message.user("U2")]), window)
    assert [m.content for m in part.messages()] == ["S1", "U1", "S2", "U2"]
    # The window holds S2 and three more: S1, superseded, does not count.
    batch = stamp_messages([Message.assistant("A2")])
    plan = plan_append_batch("c", part.snapshot(window, 0), batch, window, 0)
    assert part.apply(plan)
    assert plan.result.evicted_ids == []
    assert [m.content for m in part.messages()] == ["S1", "U1", "S2", "U2", "A2"]
    assert not part.indexed
    assert part.index == {}
    # A new system message replaces the current set, the superseded one too.
    batch = stamp_messages([Message.system("S3")])
    plan = plan_append_batch("c", part.snapshot(window, 0), batch, window, 0)
    assert part.apply(plan)
    assert [m.content for m in part.messages()] == ["U1", "U2", "A2", "S3"]
    assert plan.condition is not None
    assert part.system_batch == cast(int, plan.condition.params[1]) - 1


def test_cassandra_replace_clears_the_system_batch_and_the_index() -> None:
    part = Partition()
    log_append(part, stamp_messages([Message.system("S1"), Message.user("U1")]), None)
    assert part.system_batch is not None
    assert part.indexed
    users = stamp_messages([Message.user("U")])
    assert part.apply(part.replacing(users))
    assert part.system_batch is None
    assert not part.indexed
    assert part.index == {}
    planned = log_append(part, users, None)
    assert planned.plan.condition is None, "save_all's ids are held"
    system = stamp_messages([Message.system("S"), Message.user("V")])
    assert part.apply(part.replacing(system))
    assert part.system_batch == min(seq for _, seq in part.rows)


def test_cassandra_colliding_ids_probe_to_the_next_slot(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Four slots for every id: most ids collide, and probing must still find
    # each one exactly, on reads and on conditions alike.
    real: Callable[[str], int] = home_slot
    monkeypatch.setattr(id_index, "home_slot", lambda i: real(i) % 4)
    part = Partition()
    reference = InMemoryChatMemoryRepository()
    rng = random.Random(5)
    sent: list[Message] = []
    remembered: LogState | None = None
    for n in range(12):
        batch = stamp_messages([Message.user(f"u{n}"), Message.assistant(f"a{n}")])
        if sent:
            batch = [rng.choice(sent), *batch]
        sent += batch[-2:]
        planned = log_append(part, batch, None, 0, remembered)
        remembered = planned.state
        expected = reference.append_to_log("c", batch)
        assert planned.plan.result.appended == expected.appended
    assert part.messages() == reference.find_by_conversation_id("c")
    assert sorted(part.index.values()) == sorted({m.id for m in sent})


def test_cassandra_a_remembered_state_never_stores_a_held_id_twice() -> None:
    part = Partition()
    batch = stamp_messages([Message.user("U1")])
    first = log_append(part, batch, None)
    # Another writer appends; the remembered state is stale.
    log_append(part, stamp_messages([Message.user("U2")]), None)
    stale = plan_log_append(
        "c", LogKnowledge.of_state(first.state), batch, None, 0, START
    )
    assert stale.plan.condition is not None, "it does not know U1 is stored"
    assert not part.apply(stale.plan), "the version and the slot refuse it"
    # Even on the right version, the id's slot refuses a retry it did not read.
    current = LogState(part.version, part.system_batch, True, None)
    retry = plan_log_append("c", LogKnowledge.of_state(current), batch, None, 0, 1)
    assert not part.apply(retry.plan)
    assert [m.content for m in part.messages()] == ["U1", "U2"]


def test_cassandra_slot_map_walks_probe_paths() -> None:
    slots = SlotMap()
    home = home_slot("a")
    assert slots.unread(["a"]) == [home]
    slots.learn([home], {home: "b"})
    assert slots.unread(["a"]) == [next_slot(home)]
    assert slots.place(["a"]) == {"a": next_slot(home)}
    slots.learn([next_slot(home)], {next_slot(home): "a"})
    assert slots.held(["a", "b"]) == {"a"}
    assert slots.place(["a"]) == {}
    assert next_slot(2**63 - 1) == -(2**63)
    whole = SlotMap(whole=True)
    assert whole.unread(["a"]) == []
    assert whole.place(["a"]) == {"a": home}


def test_cassandra_new_log_statics_and_rows() -> None:
    batch = stamp_messages([Message.system("S"), Message.user("U")])
    new = LogKnowledge(None, None, False, (), SlotMap(whole=True))
    planned = plan_log_append("c", new, batch, None, 0, 7)
    plan = planned.plan
    assert plan.condition is not None
    assert plan.condition.statement == "start"
    assert plan.condition.params == (0, 9, False, "c")
    inserts = [w.params for w in plan.writes if w.statement == "insert"]
    assert [(p[1], p[2]) for p in inserts] == [(LANE_SYSTEM, 7), (LANE_OTHER, 8)]
    indexed = [w.params for w in plan.writes if w.statement == "insert_id"]
    assert [p[3] for p in indexed] == [m.id for m in batch]
    (mark,) = [w.params for w in plan.writes if w.statement == "mark"]
    assert mark == (0, 7, True, "c")
    assert planned.state == LogState(9, 7, True, planned.state.system)
    assert [r.msg_id for r in planned.state.system or ()] == [batch[0].id]


def _read(version: int, batch: int | None, rows: list[StoredRow]) -> Read:
    return Read(Statics(version, batch, True), rows, len(rows))


def test_cassandra_view_reads_agree_on_the_system_messages_they_share() -> None:
    system = StoredRow(LANE_SYSTEM, 5, "s", "system", payload="{}")
    user = StoredRow(LANE_OTHER, 9, "u", "user", payload="{}")
    newest = _read(10, 5, [user])
    # An append without a system message between the two reads: same set.
    start = tail_start(newest, 1, _read(11, 5, [system]), None)
    assert start is not None
    assert start.system == [system]
    # A new set between them, or a set that vanished: read again.
    assert tail_start(newest, 1, _read(12, 11, [system]), None) is None
    assert tail_start(newest, 1, Read(None, [], 0), None) is None
    # Without a recorded batch (a store release 0.2 wrote), versions decide.
    older = _read(10, None, [user])
    assert tail_start(older, 1, _read(11, None, [system]), None) is None
    assert tail_start(older, 1, _read(10, None, [system]), None) is not None
    # Nothing stored at the first read, a message at the second: read again.
    assert tail_start(Read(None, [], 0), 1, _read(3, None, [system]), None) is None
