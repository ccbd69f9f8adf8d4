"""What a repository remembers after its own commits (no server)."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from chatledger import Message, MessageWindow, TokenWindow
from chatledger.testing import random_turns
from chatledger.tokens import estimate_tokens
from chatledger.validation import stamp_messages
from chatledger.window import Window
from chatledger_cassandra.snapshots import (
    SnapshotCache,
    after_commit,
    first_sequence_number,
)
from chatledger_cassandra.statements import LANE_SYSTEM
from chatledger_cassandra.steps import (
    Snapshot,
    StoredRow,
    plan_append_batch,
    plan_replace,
)
from tests.cassandra.test_plan import Partition, orphan_response


def _indexed(rows: list[StoredRow]) -> list[StoredRow]:
    kept = [r if r.lane == LANE_SYSTEM else replace(r, payload=None) for r in rows]
    return sorted(kept, key=lambda r: (r.lane, r.seq))


@pytest.mark.parametrize("seed", range(12))
def test_cassandra_after_commit_is_what_the_partition_holds(seed: int) -> None:
    rng = random.Random(seed)
    window: Window = (
        MessageWindow(rng.randint(1, 10))
        if seed % 2
        else TokenWindow(rng.randint(10, 80), estimate_tokens, "estimate_tokens")
    )
    part = Partition()
    sent: list[Message] = []
    for batch in random_turns(rng, 25):
        batch = stamp_messages(batch)
        if rng.random() < 0.2 and sent:
            batch = [rng.choice(sent), *batch]  # a retry, maybe of an evicted id
        sent += batch
        before = part.snapshot(window, 0)
        if rng.random() < 0.1:
            plan = part.replacing(batch, 0, 50)
        else:
            plan = plan_append_batch("c", before, batch, window, 0, 50)
        if plan.condition is not None:
            assert part.apply(plan)
        expected = after_commit(before, plan)
        assert expected.version == part.version
        assert _indexed(expected.rows) == _indexed(list(part.rows.values()))
        assert expected.evicted == {i: seq for seq, i in part.record.items()}


def test_cassandra_after_commit_of_a_delete_is_an_empty_conversation() -> None:
    part = Partition()
    window = MessageWindow(1)
    first = plan_append_batch(
        "c", part.snapshot(window, 0), [Message.assistant("A")], window, 0
    )
    assert part.apply(first)
    gone = plan_replace("c", part.version, [], 0)
    assert gone.condition is not None
    assert gone.condition.statement == "delete_version"
    assert after_commit(part.snapshot(window, 0), gone) == Snapshot(None, [])


def test_cassandra_after_commit_of_an_emptying_append_keeps_the_record() -> None:
    # Only tool responses without their calls all go: a history with no user
    # message is otherwise kept whole (rules 3 and 4).
    part = Partition()
    window = MessageWindow(1)
    first = stamp_messages([orphan_response("c1")])
    assert part.apply(plan_replace("c", None, first, 0))
    before = part.snapshot(window, 0)
    emptying = plan_append_batch(
        "c", before, stamp_messages([orphan_response("c2")]), window, 0
    )
    assert part.apply(emptying)
    after = after_commit(before, emptying)
    assert after.version == part.version
    assert after.rows == []
    assert first[0].id in after.evicted


def test_cassandra_cache_recalls_only_the_version_it_kept() -> None:
    cache = SnapshotCache(capacity=2)
    kept = Snapshot(7, [StoredRow(1, 6, "m", "user")])
    cache.remember("c", kept)
    assert cache.recall("c", 7) == kept
    assert cache.recall("c", 8) is None  # someone else wrote
    assert not cache.knows("c")
    cache.remember("c", kept)
    assert cache.recall("c", None) is None  # deleted or expired
    cache.remember("c", Snapshot(None, []))
    assert not cache.knows("c")


def test_cassandra_cache_keeps_the_most_recent_conversations() -> None:
    cache = SnapshotCache(capacity=2)
    for name in ("a", "b", "c"):
        cache.remember(name, Snapshot(1, []))
    assert [cache.knows(n) for n in ("a", "b", "c")] == [False, True, True]
    assert cache.recall("b", 1) is not None  # b is now the most recent
    cache.remember("d", Snapshot(1, []))
    assert [cache.knows(n) for n in ("b", "c", "d")] == [True, False, True]
    assert not SnapshotCache(capacity=0).knows("x")


def test_cassandra_new_conversations_start_at_a_random_offset() -> None:
    starts = {first_sequence_number() for _ in range(100)}
    assert len(starts) == 100
    assert all(0 <= s < 2**62 for s in starts)
