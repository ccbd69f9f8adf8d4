"""chatledger.benchmark: percentiles, the p50 ratio, the loop, the workload."""

from __future__ import annotations

import pytest

from chatledger import InMemoryChatMemoryRepository, Role
from chatledger.benchmark import (
    Stats,
    Variant,
    count_steps,
    history,
    measure_window_memory,
    ratio,
    run_interleaved,
    stream,
)


def test_stats_take_nearest_rank_percentiles_in_microseconds() -> None:
    stats = Stats.of([(i + 1) * 1000 for i in reversed(range(100))], cpu_ns=50_000)
    assert (stats.p50, stats.p95, stats.n) == (51.0, 96.0, 100)
    assert stats.cpu == 0.5


def test_stats_of_nothing_is_an_error() -> None:
    with pytest.raises(ValueError, match="no samples"):
        Stats.of([])


def test_ratio_is_on_p50_and_none_when_a_side_is_missing() -> None:
    assert ratio(Stats(30.0, 90.0, 1), Stats(10.0, 11.0, 1)) == 3.0
    assert ratio(None, Stats(10.0, 11.0, 1)) is None
    assert ratio(Stats(30.0, 90.0, 1), None) is None
    assert ratio(Stats(30.0, 90.0, 1), Stats(0.0, 0.0, 1)) is None


def test_loop_gives_each_variant_its_samples_and_drops_a_failing_one() -> None:
    calls: list[str] = []
    batches = 0

    def broken() -> None:
        if len([c for c in calls if c == "b"]) >= 4:
            raise RuntimeError("gone")
        calls.append("b")

    def count() -> None:
        nonlocal batches
        batches += 1

    good = Variant(("good", 1), lambda: calls.append("g"), 10)
    bad = Variant(("bad", 1), broken, 10)
    stats, errors = run_interleaved([good, bad], rounds=5, warmup=2, on_batch=count)
    assert calls.count("g") == 12  # warm-up, then the samples
    assert stats[("good", 1)].n == 10
    assert stats[("bad", 1)].n == 2  # its first batch, then it failed
    assert errors == ["('bad', 1) round 1: RuntimeError: gone"]
    assert batches == 5 + 2


def test_workload_is_a_window_with_tool_turns_then_alternating_stream() -> None:
    window = history(20)
    assert len(window) == 20
    assert window[0].role is Role.SYSTEM
    assert any(m.role is Role.TOOL for m in window)
    roles = [m.role for m in stream(4)]
    assert roles == [Role.USER, Role.ASSISTANT, Role.USER, Role.ASSISTANT]
    assert len({m.id for m in [*history(5), *history(5)]}) == 10


def test_measurement_without_floor_times_ours_and_deletes_its_conversations() -> None:
    repository = InMemoryChatMemoryRepository()
    steps: list[tuple[int, int]] = []
    found = measure_window_memory(
        repository, None, (4, 20), 3, on_step=lambda d, t: steps.append((d, t))
    )
    assert found.errors == []
    assert sorted(found.stats) == [
        ("ours_append", 4),
        ("ours_append", 20),
        ("ours_read", 4),
        ("ours_read", 20),
    ]
    assert all(s.n == 3 for s in found.stats.values())
    total = count_steps((4, 20), 3, with_floor=False)
    assert steps == [(n, total) for n in range(1, total + 1)]
    assert repository.find_conversation_ids() == []
