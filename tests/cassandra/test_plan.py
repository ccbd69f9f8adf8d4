"""The write plans, checked without a server against a model of one partition.

The model applies a plan the way Cassandra applies a conditional
single-partition batch: the condition decides, then every statement lands with
one timestamp, so a delete and an insert of the same row in one batch would
leave the row deleted. The model refuses such a batch, which checks that plans
never shadow their own rows. The record of evicted ids (lane 2) is modelled
too, and the plans are compared with the in-memory repository, which keeps the
record by core's own rules. This tests the decisions this package makes in
Python; it says nothing about a server, which the conformance run covers.
"""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any, cast

import pytest
from cassandra.query import UNSET_VALUE

from chatledger import (
    InMemoryChatMemoryRepository,
    Message,
    MessageWindow,
    TokenWindow,
    ToolResponse,
)
from chatledger.adapters import EVICTED_IDS_KEPT, EVICTED_IDS_TRIM_STEP
from chatledger.testing import random_turns
from chatledger.tokens import estimate_tokens
from chatledger.validation import stamp_messages
from chatledger.window import Window
from chatledger_cassandra.statements import (
    LANE_EVICTED,
    LANE_IDS,
    LANE_OTHER,
    LANE_SYSTEM,
    Statements,
)
from chatledger_cassandra.steps import (
    Plan,
    Snapshot,
    StoredRow,
    Write,
    payloads_needed,
    plan_append_batch,
    plan_replace,
)

CQL = Statements("ks", "t").prepared()


class Partition:
    """What one conversation's partition holds, and which batch last wrote each cell."""

    def __init__(self) -> None:
        self.version: int | None = None
        self.emptied = False
        self.system_batch: int | None = None
        self.indexed = False
        self.rows: dict[tuple[int, int], StoredRow] = {}
        #: The record of evicted ids: row number -> id.
        self.record: dict[int, str] = {}
        #: The id index: slot -> id.
        self.index: dict[int, str] = {}
        self.written_by: dict[tuple[int, int] | str, int] = {}
        self.batches = 0

    def snapshot(self, window: Window, ttl: int) -> Snapshot:
        """Read like the repository: index columns, then the payloads it asks for."""
        record = {msg_id: seq for seq, msg_id in self.record.items()}
        index = Snapshot(
            self.version,
            [replace(r, payload=None) for r in self.rows.values()],
            record,
            self.system_batch,
            self.indexed,
        )
        need = "all" if ttl else payloads_needed(index, window, ttl)
        if need == "none":
            return index
        return replace(
            index,
            rows=[
                r
                if need == "all" or r.lane == LANE_SYSTEM
                else replace(r, payload=None)
                for r in self.rows.values()
            ],
        )

    @property
    def listed(self) -> bool:
        """Whether listing shows the partition as a conversation."""
        return self.version is not None and not self.emptied

    def messages(self) -> list[Message]:
        return [self.rows[k].message() for k in sorted(self.rows, key=lambda k: k[1])]

    def apply(self, plan: Plan) -> bool:
        condition = plan.condition
        assert condition is not None
        for write in [condition, *plan.writes]:
            assert CQL[write.statement].count("?") == len(write.params), write
        if condition.statement == "start":
            ok = self.version is None
        elif condition.statement == "advance":
            ok = self.version == condition.params[4]
        else:
            assert condition.statement == "delete_version"
            assert [w.statement for w in plan.writes] == ["delete_partition"], (
                "a partition delete goes beside its condition alone"
            )
            ok = self.version == condition.params[1]
        slots = [w.params for w in plan.writes if w.statement == "insert_id"]
        if not ok or any(params[2] in self.index for params in slots):
            return False
        self.batches += 1
        if condition.statement == "delete_version":
            self.__init__()  # type: ignore[misc]
            return True
        ranges: list[tuple[Any, ...]] = [
            w.params[1:] for w in plan.writes if w.statement == "delete_before"
        ]
        lanes = {w.params[1] for w in plan.writes if w.statement == "delete_lane"}
        inserts: list[tuple[Any, ...]] = [
            w.params for w in plan.writes if w.statement == "insert"
        ]
        recorded: list[tuple[Any, ...]] = [
            w.params for w in plan.writes if w.statement == "insert_evicted"
        ]
        marks = [w.params for w in plan.writes if w.statement == "mark"]
        assert {w.statement for w in plan.writes} <= {
            "delete_before",
            "delete_lane",
            "insert",
            "insert_evicted",
            "insert_id",
            "mark",
        }
        assert lanes <= {LANE_IDS}, "only the id index is deleted whole"
        assert len(marks) <= 1
        assert all(params[1] in (LANE_EVICTED, LANE_IDS) for params in recorded)
        assert all(params[1] in (LANE_SYSTEM, LANE_OTHER) for params in inserts)
        assert all(params[1] == LANE_IDS for params in slots)
        for params in inserts + recorded + slots:
            lane, seq = params[1], params[2]
            assert not any(lane == dl and seq < bound for dl, bound in ranges), (
                f"the batch would delete its own row {(lane, seq)}"
            )
            assert lane not in lanes, f"the batch would delete its own row {lane}"
            assert lane != LANE_EVICTED or seq not in self.record, (
                f"the batch would overwrite record row {seq}"
            )
            assert lane != LANE_IDS or params in recorded or seq not in self.index
        for lane, bound in ranges:
            assert lane != LANE_IDS
            for key in [k for k in self.rows if k[0] == lane and k[1] < bound]:
                del self.rows[key]
            if lane == LANE_EVICTED:
                self.record = {s: i for s, i in self.record.items() if s >= bound}
        if LANE_IDS in lanes:
            self.index = {}
        for _, lane, seq, msg_id, role, counter, size, payload, _ttl in inserts:
            key = (lane, seq)
            self.rows[key] = StoredRow(lane, seq, msg_id, role, counter, size, payload)
            self.written_by[key] = self.batches
        for _, lane, seq, msg_id, _ttl in recorded + slots:
            if lane == LANE_EVICTED:
                self.record[seq] = msg_id
            else:
                assert params in slots or self.index.get(seq) == msg_id
                self.index[seq] = msg_id
                self.written_by[(lane, seq)] = self.batches
        for _, batch, flag, _ in marks:
            if batch is not UNSET_VALUE:
                self.system_batch = cast(int | None, batch)
            if flag is not UNSET_VALUE:
                self.indexed = bool(flag)
        self.version = cast(int, condition.params[1])
        self.emptied = cast(bool, condition.params[2])
        assert self.emptied == (not self.rows), "emptied says whether messages are left"
        self.written_by["next_seq"] = self.batches
        self._check_statics()
        return True

    def replacing(self, batch: list[Message], ttl: int = 0, start: int = 0) -> Plan:
        """The ``save_all`` plan on what the partition's static columns say."""
        return plan_replace(
            "c",
            self.version,
            batch,
            ttl,
            start,
            system_batch=self.system_batch,
            indexed=self.indexed,
        )

    def _check_statics(self) -> None:
        """The invariants the static columns of the log keep."""
        system = [k[1] for k in self.rows if k[0] == LANE_SYSTEM]
        if self.system_batch is not None:
            assert any(s >= self.system_batch for s in system), "a current set exists"
        if self.indexed:
            ids = {r.msg_id for r in self.rows.values()} | set(self.record.values())
            assert ids <= set(self.index.values()), "every stored id is indexed"
        else:
            assert self.index == {}, "an index not marked is empty"


def _append(part: Partition, batch: list[Message], window: Window, ttl: int) -> Plan:
    plan = plan_append_batch("c", part.snapshot(window, ttl), batch, window, ttl)
    if plan.condition is not None:
        assert part.apply(plan)
    return plan


@pytest.mark.parametrize("ttl", [0, 60])
@pytest.mark.parametrize("seed", range(15))
@pytest.mark.parametrize("kind", ["messages", "tokens"])
def test_cassandra_plans_match_the_pure_policy(seed: int, kind: str, ttl: int) -> None:
    rng = random.Random(seed)
    window: Window = (
        MessageWindow(rng.randint(1, 12))
        if kind == "messages"
        else TokenWindow(rng.randint(10, 120), estimate_tokens, "estimate_tokens")
    )
    part = Partition()
    reference = InMemoryChatMemoryRepository()
    sent: list[Message] = []
    for batch in random_turns(rng, 30):
        batch = stamp_messages(batch)
        if rng.random() < 0.2 and sent:
            # A retried message: still stored, or evicted since.
            batch = [rng.choice(sent), *batch]
        sent += batch
        expected = reference.append_to_window("c", batch, window)
        plan = _append(part, batch, window, ttl)
        assert [m.id for m in plan.result.appended] == [m.id for m in expected.appended]
        assert plan.result.evicted_ids == expected.evicted_ids
        if not expected.appended:
            assert plan.condition is None
        stored = reference.find_by_conversation_id("c")
        assert part.messages() == stored
        assert [m.id for m in part.messages()] == [m.id for m in stored]
        assert part.listed == ("c" in reference.find_conversation_ids())
        if ttl and plan.condition is not None and part.rows:
            # The whole conversation was rewritten under the new TTL.
            assert {part.written_by[k] for k in part.rows} == {part.batches}
            assert part.written_by["next_seq"] == part.batches
        seqs = sorted(k[1] for k in part.rows)
        assert part.version is None or all(s < part.version for s in seqs)


def test_cassandra_append_batch_has_range_delete_and_ttl() -> None:
    window = MessageWindow(2)
    part = Partition()
    first = stamp_messages([Message.user("U1"), Message.assistant("A1")])
    _append(part, first, window, 30)
    second = stamp_messages([Message.user("U2"), Message.assistant("A2")])
    plan = _append(part, second, window, 30)
    assert plan.condition is not None
    assert plan.condition.statement == "advance"
    assert plan.condition.params == (30, 4, False, "c", 2)
    evictions = [w for w in plan.writes if w.statement == "delete_before"]
    assert [w.params for w in evictions] == [("c", LANE_OTHER, 2)]
    recorded = [w.params for w in plan.writes if w.statement == "insert_evicted"]
    assert recorded == [
        ("c", LANE_EVICTED, 0, first[0].id, 30),
        ("c", LANE_EVICTED, 1, first[1].id, 30),
    ]
    inserts = [w for w in plan.writes if w.statement == "insert"]
    assert [w.params[2] for w in inserts] == [2, 3]
    assert all(w.params[-1] == 30 for w in inserts)
    assert sorted(plan.result.evicted_ids) == sorted(m.id for m in first)


def test_cassandra_new_system_message_deletes_only_stored_system_lane() -> None:
    window = MessageWindow(10)
    part = Partition()
    _append(part, stamp_messages([Message.system("S1"), Message.user("U1")]), window, 0)
    plan = _append(part, stamp_messages([Message.system("S2")]), window, 0)
    deletes = [w.params for w in plan.writes if w.statement == "delete_before"]
    assert deletes == [("c", LANE_SYSTEM, 2)]
    assert [m.content for m in part.messages()] == ["U1", "S2"]


def orphan_response(call: str) -> Message:
    """A tool response whose call is not stored."""
    return Message.tool(ToolResponse(id=call, name="f", data="{}"))


def test_cassandra_window_evicting_everything_keeps_the_record() -> None:
    # Only tool responses without their calls all go: a history with no user
    # message is otherwise kept whole (rules 3 and 4).
    window = MessageWindow(1)
    part = Partition()
    first = stamp_messages([orphan_response("c1")])
    assert part.apply(plan_replace("c", None, first, 0))
    second = stamp_messages([orphan_response("c2")])
    plan = _append(part, second, window, 0)
    assert plan.condition is not None
    assert plan.condition.statement == "advance"
    assert plan.condition.params[2] is True  # emptied: not listed
    assert part.rows == {}
    assert not part.listed
    assert sorted(part.record.values()) == sorted(m.id for m in first + second)
    # A late retry of either stays a no-op; a new message lists it again.
    assert _append(part, first + second, window, 0).condition is None
    third = stamp_messages([Message.user("U3")])
    _append(part, third, window, 0)
    assert part.listed
    assert part.messages() == third


def test_cassandra_new_conversation_dropped_at_once_is_recorded_unlisted() -> None:
    window = MessageWindow(1)
    part = Partition()
    batch = stamp_messages([orphan_response("c1"), orphan_response("c2")])
    plan = _append(part, batch, window, 0)
    assert plan.condition is not None
    assert plan.condition.statement == "start"
    assert plan.result.appended == batch
    assert plan.result.evicted_ids == [m.id for m in batch]
    assert not part.listed
    assert set(part.record.values()) == {m.id for m in batch}
    assert _append(part, batch, window, 0).condition is None


def test_cassandra_record_keeps_the_newest_ids_and_stays_bounded() -> None:
    window = MessageWindow(2)
    part = Partition()
    part.version = 1_000_003  # an offset that is no multiple of the trim step
    part.emptied = True
    evicted: list[str] = []
    trims = largest = 0
    for n in range(3 * (EVICTED_IDS_KEPT + EVICTED_IDS_TRIM_STEP)):
        plan = _append(part, stamp_messages([Message.user(f"u{n}")]), window, 0)
        evicted += plan.result.evicted_ids
        trims += any(
            w.statement == "delete_before" and w.params[1] == LANE_EVICTED
            for w in plan.writes
        )
        largest = max(largest, len(part.record))
        assert set(evicted[-EVICTED_IDS_KEPT:]) <= set(part.record.values())
    assert EVICTED_IDS_KEPT < largest <= EVICTED_IDS_KEPT + EVICTED_IDS_TRIM_STEP
    # About one trim per EVICTED_IDS_TRIM_STEP evictions, not one per append.
    assert trims <= len(evicted) // EVICTED_IDS_TRIM_STEP + 1


def test_cassandra_trim_of_a_huge_eviction_writes_only_the_kept_ids() -> None:
    window = MessageWindow(2)
    part = Partition()
    many = stamp_messages([Message.user(f"u{n}") for n in range(2 * EVICTED_IDS_KEPT)])
    assert part.apply(plan_replace("c", None, many, 0, 500))
    plan = _append(part, stamp_messages([Message.user("last")]), window, 0)
    recorded = [w for w in plan.writes if w.statement == "insert_evicted"]
    assert len(recorded) == EVICTED_IDS_KEPT
    newest = plan.result.evicted_ids[-EVICTED_IDS_KEPT:]
    assert newest == [m.id for m in many[-EVICTED_IDS_KEPT - 1 : -1]]
    assert set(part.record.values()) == set(newest)


def test_cassandra_replace_clears_the_record() -> None:
    window = MessageWindow(2)
    part = Partition()
    first = stamp_messages([Message.user("U1"), Message.assistant("A1")])
    _append(part, first, window, 0)
    _append(
        part, stamp_messages([Message.user("U2"), Message.assistant("A2")]), window, 0
    )
    assert part.record
    assert part.apply(part.replacing(first))
    assert part.record == {}
    assert part.messages() == first


def test_cassandra_replace_continues_the_sequence_without_self_shadowing() -> None:
    part = Partition()
    first = stamp_messages([Message.system("S"), Message.user("U1")])
    assert part.apply(plan_replace("c", None, first, 0))
    second = stamp_messages([Message.user("U2"), Message.assistant("A2")])
    plan = part.replacing(second, 5)
    assert [w.params for w in plan.writes if w.statement == "delete_before"] == [
        ("c", LANE_SYSTEM, 2),
        ("c", LANE_OTHER, 2),
        ("c", LANE_EVICTED, 2),
    ]
    assert part.apply(plan)
    assert part.messages() == second
    assert sorted(k[1] for k in part.rows) == [2, 3]
    assert all(w.params[-1] == 5 for w in plan.writes if w.statement == "insert")


def test_cassandra_replace_with_nothing_deletes_the_partition() -> None:
    assert plan_replace("c", None, [], 0).condition is None
    plan = plan_replace("c", 7, [], 0)
    assert plan.condition is not None
    assert plan.condition.statement == "delete_version"
    assert plan.condition.params == ("c", 7)
    assert plan.writes == [Write("delete_partition", ("c",), "delete")]


def test_cassandra_stale_plan_loses_its_condition() -> None:
    window = MessageWindow(10)
    part = Partition()
    _append(part, stamp_messages([Message.user("U1")]), window, 0)
    stale = part.snapshot(window, 0)
    _append(part, stamp_messages([Message.user("U2")]), window, 0)
    plan = plan_append_batch(
        "c", stale, stamp_messages([Message.user("U3")]), window, 0
    )
    assert not part.apply(plan)
    assert [m.content for m in part.messages()] == ["U1", "U2"]


def test_cassandra_token_sizes_are_stored_and_reused() -> None:
    window = TokenWindow(1000, estimate_tokens, "estimate_tokens")
    part = Partition()
    _append(part, stamp_messages([Message.user("hello there")]), window, 0)
    (row,) = part.rows.values()
    assert row.size_counter == "tokens:estimate_tokens"
    assert row.size == estimate_tokens(row.message())
    index = Snapshot(part.version, [replace(row, payload=None)])
    assert payloads_needed(index, window, 0) == "none"
    assert payloads_needed(index, MessageWindow(3), 0) == "none"
    other = TokenWindow(1000, estimate_tokens, "other")
    assert payloads_needed(index, other, 0) == "all"
    assert payloads_needed(index, window, 10) == "all"
