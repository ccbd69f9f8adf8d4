"""A bounded log without a server: the retention option, checked before any
I/O, and the trim's statements and the rows of the id index it may remove."""

from __future__ import annotations

from typing import Any

import pytest

from chatledger import InvalidRetentionError, Retention
from chatledger_cassandra import (
    AsyncCassandraChatMemoryRepository,
    CassandraChatMemoryRepository,
    id_index,
)
from chatledger_cassandra.connecting import url_settings
from chatledger_cassandra.id_index import SlotMap
from chatledger_cassandra.log_rows import Read, Statics
from chatledger_cassandra.log_trims import (
    INDEX_ROWS_PER_BATCH,
    LaneScan,
    first_user,
    index_batches,
    plan_index_release,
    plan_log_trim,
)
from chatledger_cassandra.statements import (
    LANE_EVICTED,
    LANE_IDS,
    LANE_OTHER,
    LANE_SYSTEM,
)
from chatledger_cassandra.steps import StoredRow

HOMES = {"a": 10, "b": 10, "c": 12, "d": 20, "e": 30, "f": 31}


@pytest.fixture
def homes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Home slots chosen by hand: a and b share slot 10, e and f are neighbours."""
    monkeypatch.setattr(id_index, "home_slot", HOMES.__getitem__)


class Untouchable:
    """A stand-in session that fails the test if the repository uses it."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the session was used ({name}) before validation")


def test_cassandra_retention_is_an_option_and_a_url_query() -> None:
    repository = AsyncCassandraChatMemoryRepository.from_url(
        "cassandra://127.0.0.1:1/ks?retention=100"
    )
    assert repository.retention == Retention.last(100)
    assert "retention=Retention.last(100, slack=25)" in repr(repository)
    unbounded = AsyncCassandraChatMemoryRepository.from_url("cassandra://h/ks")
    assert unbounded.retention == Retention.everything()
    assert "retention" not in repr(unbounded)
    _, settings = url_settings("cassandra://h/ks?retention=all", {"retention": 5})
    assert settings["retention"] == 5, "an option overrides the URL's query"


@pytest.mark.parametrize("retention", [0, -1, "some", 2.5, True])
def test_cassandra_bad_retention_fails_before_any_io(retention: object) -> None:
    with pytest.raises(InvalidRetentionError):
        CassandraChatMemoryRepository(Untouchable(), retention=retention)  # type: ignore[arg-type]
    with pytest.raises(InvalidRetentionError):
        # The sync from_url connects: the URL's query is checked first.
        CassandraChatMemoryRepository.from_url(
            f"cassandra://127.0.0.1:1/ks?retention={retention}"
        )


def _row(lane: int, seq: int, role: str = "user") -> StoredRow:
    return StoredRow(lane, seq, f"m{seq}", role)


def test_cassandra_trim_reads_an_id_and_the_slot_after_it_at_once(homes: None) -> None:
    slots = SlotMap()
    assert slots.freed(["d"]) == ([20, 21], [])
    slots.learn([20, 21], {20: "d"})
    assert slots.freed(["d"]) == ([], [20])


def test_cassandra_trim_keeps_a_row_another_id_probes_past(homes: None) -> None:
    # a at its home 10, b pushed to 11 by it: a's row stays, or b is lost.
    slots = SlotMap()
    slots.learn([10, 11, 12], {10: "a", 11: "b"})
    assert slots.freed(["a"]) == ([], [])
    # Both go, so nothing probes past them: both rows go.
    assert slots.freed(["a", "b"]) == ([], [10, 11])
    # b alone: the slot after it is free.
    assert slots.freed(["b"]) == ([], [11])


def test_cassandra_trim_follows_a_probe_path_to_the_id(homes: None) -> None:
    slots = SlotMap()
    assert slots.freed(["b"]) == ([10, 11], [])
    slots.learn([10, 11], {10: "a", 11: "b"})
    assert slots.freed(["b"]) == ([12], [])
    slots.learn([12], {12: "c"})
    # The slot after b's is taken: the row stays, whoever's path it is on.
    assert slots.freed(["b"]) == ([], [])
    # An id the index does not hold has no row to remove.
    slots.learn([30, 31], {})
    assert slots.freed(["e"]) == ([], [])


def test_cassandra_trim_batch_deletes_ranges_records_and_frees_slots() -> None:
    rows = [
        _row(LANE_SYSTEM, 1, "system"),
        _row(LANE_OTHER, 2),
        _row(LANE_OTHER, 3, "assistant"),
        _row(LANE_SYSTEM, 4, "system"),
        _row(LANE_OTHER, 5),
        _row(LANE_OTHER, 6, "assistant"),
    ]
    plan = plan_log_trim("c", 7, 3600, 5, 4, rows, {"old": 0}, [99])
    assert plan.condition is not None
    assert plan.condition.statement == "confirm"
    assert plan.condition.params == (3600, False, "c", 7)
    writes = [(w.statement, w.params) for w in plan.writes]
    assert writes == [
        ("delete_before", ("c", LANE_OTHER, 5)),
        # The current system message (4, from system_batch on) stays.
        ("delete_before", ("c", LANE_SYSTEM, 4)),
        ("insert_evicted", ("c", LANE_EVICTED, 1, "m1", 3600)),
        ("insert_evicted", ("c", LANE_EVICTED, 2, "m2", 3600)),
        ("insert_evicted", ("c", LANE_EVICTED, 3, "m3", 3600)),
        ("delete_row", ("c", LANE_IDS, 99)),
    ]
    assert plan.result.evicted_ids == ["m1", "m2", "m3"]


def test_cassandra_trim_sends_nothing_when_nothing_goes() -> None:
    rows = [_row(LANE_SYSTEM, 1, "system"), _row(LANE_OTHER, 2)]
    # Every system message is current without a system_batch.
    assert plan_log_trim("c", 3, 0, 2, None, rows, {}, []).condition is None


def test_cassandra_trim_scans_a_lane_page_by_page() -> None:
    scan = LaneScan(LANE_OTHER, first=2)
    assert scan.params("c") == ("c", LANE_OTHER, -(2**63), 2)
    page = [_row(LANE_OTHER, 4, "assistant"), _row(LANE_OTHER, 5, "tool")]
    scan.add(Read(Statics(9, None, True), page, 2))
    assert not scan.exhausted
    assert scan.reaches(6)
    assert not scan.reaches(7)
    assert first_user(scan.rows, 4) is None
    assert scan.params("c") == ("c", LANE_OTHER, 5, 4)
    scan.add(Read(Statics(9, None, True), [_row(LANE_OTHER, 6)], 1))
    assert scan.exhausted
    assert scan.reaches(100)
    assert first_user(scan.rows, 4) == 6


def test_cassandra_trim_deletes_index_rows_a_bounded_batch_at_a_time() -> None:
    slots = list(range(2 * INDEX_ROWS_PER_BATCH + 1))
    batches = index_batches(slots)
    assert [len(b) for b in batches] == [INDEX_ROWS_PER_BATCH] * 2 + [1]
    assert [s for b in batches for s in b] == slots
    assert index_batches([]) == [[]]
    more = plan_index_release("c", 7, 0, [5, 6])
    assert more.condition is not None
    assert more.condition.params == (0, False, "c", 7)
    assert [w.params for w in more.writes] == [("c", LANE_IDS, 5), ("c", LANE_IDS, 6)]
