"""The bounded record of evicted ids: what it keeps and when row stores trim it."""

from __future__ import annotations

import pytest

from chatledger import InMemoryChatMemoryRepository, Message, MessageWindow
from chatledger.evicted_ids import (
    EVICTED_IDS_KEPT,
    EvictedIds,
    kept_newest,
    list_trim_count,
    trim_below,
    trim_due,
)


def test_record_keeps_the_newest_ids_in_order() -> None:
    record = EvictedIds(keep=3)
    record.add(["a", "b"])
    record.add(["c", "d"])
    assert list(record) == ["b", "c", "d"]
    assert "a" not in record
    assert len(record) == 3


def test_record_moves_a_repeated_id_to_the_newest_end() -> None:
    record = EvictedIds(keep=2)
    record.add(["a", "b"])
    record.add(["a", "c"])
    assert list(record) == ["a", "c"]


def test_a_pushed_list_trimmed_by_list_trim_count_keeps_the_newest() -> None:
    """Batches of any size: at most keep + step ids, never a newest one lost."""
    keep, step = 10, 4
    every: list[str] = []
    pushed: list[str] = []
    trims = 0
    for size in [1, 3, 1, 7, 2, 1, 1, 15, 1, 2, 2, 1, 1, 1, 30, 1] * 3:
        batch = [f"m{len(every) + i}" for i in range(size)]
        every += batch
        pushed += batch
        dropped = list_trim_count(len(pushed), keep, step)
        trims += dropped > 0
        del pushed[:dropped]
        assert len(pushed) <= keep + step
        assert pushed == every[-len(pushed) :]
        assert len(pushed) >= keep or pushed == every
    assert list_trim_count(keep + step, keep, step) == 0
    assert list_trim_count(keep + step + 1, keep, step) == step + 1
    assert 0 < trims < 48


def test_kept_newest_matches_the_record() -> None:
    ids = [f"m{i}" for i in range(25)]
    record = EvictedIds(keep=10)
    kept: list[str] = []
    for start in range(0, 25, 4):
        record.add(ids[start : start + 4])
        kept = kept_newest(kept, ids[start : start + 4], keep=10)
        assert kept == list(record)


@pytest.mark.parametrize(
    ("first", "last", "due"),
    [
        (1, 249, False),
        (249, 250, True),
        (250, 250, True),
        (251, 499, False),
        (5, 4, False),
        (499, 751, True),
    ],
)
def test_trim_is_due_when_the_range_reaches_a_step(
    first: int, last: int, due: bool
) -> None:
    assert trim_due(first, last, step=250) is due


def test_a_row_store_trimming_when_due_stays_bounded() -> None:
    """Trimming only when due keeps at most KEPT + STEP rows, and at least KEPT."""
    rows: list[int] = []
    for upto in range(0, 20_000, 7):
        rows.extend(range(upto, upto + 7))
        if trim_due(upto, upto + 6):
            rows = [seq for seq in rows if seq > trim_below(upto + 6)]
        newest = upto + 6
        assert len(rows) <= EVICTED_IDS_KEPT + 250
        assert [seq for seq in rows if seq > newest - EVICTED_IDS_KEPT] == list(
            range(max(0, newest - EVICTED_IDS_KEPT + 1), newest + 1)
        )


def test_in_memory_forgets_ids_evicted_more_than_the_record_ago() -> None:
    """Past the bound a very late retry is stored again: the documented limit."""
    repository = InMemoryChatMemoryRepository()
    window = MessageWindow(2)
    first = [Message.user("first")]
    repository.append_to_window("c", first, window)
    # The window of two evicts "first" on the second append after it; then
    # KEPT - 1 more evictions still remember it, one more forgets it.
    for i in range(EVICTED_IDS_KEPT + 1):
        repository.append_to_window("c", [Message.user(f"u{i}")], window)
    assert repository.append_to_window("c", first, window).appended == []
    repository.append_to_window("c", [Message.user("one more")], window)
    assert repository.append_to_window("c", first, window).appended == first
