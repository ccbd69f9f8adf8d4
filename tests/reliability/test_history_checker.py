"""The history checker accepts a correct history and catches each kind of fault.

A checker that cannot fail proves nothing, so every anomaly it looks for is
planted here in an otherwise correct history.
"""

from __future__ import annotations

import dataclasses

import pytest

from tests.reliability.history import Append, Observation, Read, Verdict, check


def _append(writer: str, counter: int, start: int, size: int = 1) -> Append:
    ids = tuple(f"{writer}/{counter}/{i}" for i in range(size))
    roles = ("user",) + ("assistant",) * (size - 1)
    return Append("c", writer, counter, ids, roles, start, start + 5, "ok")


def _history() -> tuple[list[Append], list[Read], dict[str, Observation]]:
    """Two writers, strictly one after the other, with reads in between."""
    appends = [
        _append("a", 0, 0, 2),
        _append("b", 0, 10),
        _append("a", 1, 20, 2),
        _append("b", 1, 30),
    ]
    order = tuple(i for a in appends for i in a.ids)
    roles = tuple(r for a in appends for r in a.roles)
    reads = [
        Read("c", 6, 8, order[:2], roles[:2]),
        Read("c", 16, 18, order[:3], roles[:3]),
        Read("c", 40, 41, order, roles),
    ]
    return appends, reads, {"c": Observation(order, roles)}


def _final(ids: tuple[str, ...]) -> dict[str, Observation]:
    roles = tuple("user" if i.endswith("/0") else "assistant" for i in ids)
    return {"c": Observation(ids, roles)}


def _read(start: int, end: int, ids: tuple[str, ...]) -> Read:
    roles = tuple("user" if i.endswith("/0") else "assistant" for i in ids)
    return Read("c", start, end, ids, roles)


def _anomalies(verdict: Verdict) -> str:
    return "\n".join(verdict.anomalies)


def test_a_correct_history_passes() -> None:
    appends, reads, final = _history()
    verdict = check(appends, reads, final)
    assert verdict.valid, verdict.explain()
    assert (verdict.appends, verdict.acknowledged, verdict.messages) == (4, 4, 6)


def test_a_lost_acknowledged_message_is_caught() -> None:
    appends, _, final = _history()
    ids = final["c"].ids
    verdict = check(appends, [], _final(ids[:-1]))
    assert verdict.lost == ["[c] b/1/0"]


def test_a_duplicate_is_caught() -> None:
    appends, _, final = _history()
    ids = final["c"].ids
    verdict = check(appends, [], _final((*ids, ids[-1])))
    assert verdict.duplicated == ["[c] b/1/0 x2"]


def test_a_duplicate_inside_a_read_is_caught() -> None:
    appends, _, final = _history()
    ids = final["c"].ids
    verdict = check(appends, [_read(40, 41, (*ids[:2], ids[1]))], final)
    assert verdict.duplicated


def test_a_message_nobody_sent_is_caught() -> None:
    appends, _, final = _history()
    verdict = check(appends, [], _final((*final["c"].ids, "ghost/0/0")))
    assert "never sent" in _anomalies(verdict)


def test_a_failed_append_that_was_applied_is_caught() -> None:
    appends, _, final = _history()
    appends[-1] = dataclasses.replace(appends[-1], outcome="fail")
    verdict = check(appends, [], final)
    assert "failed append" in _anomalies(verdict)


def test_a_failed_append_that_left_nothing_passes() -> None:
    appends, _, final = _history()
    appends[-1] = dataclasses.replace(appends[-1], outcome="fail")
    verdict = check(appends, [], _final(final["c"].ids[:-1]))
    assert verdict.valid, verdict.explain()


def test_a_half_stored_batch_is_caught() -> None:
    appends, _, final = _history()
    ids = final["c"].ids
    verdict = check(appends, [], _final(ids[:4] + ids[5:]))
    assert verdict.lost == ["[c] a/1/1"]
    assert "partly stored" in _anomalies(verdict)


def test_an_interleaved_batch_is_caught() -> None:
    appends, _, final = _history()
    a10, a11, b10 = "a/1/0", "a/1/1", "b/1/0"
    ids = (*final["c"].ids[:3], a10, b10, a11)
    verdict = check(appends, [], _final(ids))
    assert "not contiguous" in _anomalies(verdict)


def test_a_reordered_writer_is_caught() -> None:
    # Overlapping times, so only the per-writer rule can see the swap.
    appends = [_append("a", 0, 0), _append("a", 1, 2)]
    verdict = check(appends, [], _final(("a/1/0", "a/0/0")))
    assert "out of order" in _anomalies(verdict)
    assert "real-time" not in _anomalies(verdict)


def test_a_real_time_violation_is_caught() -> None:
    appends, _, final = _history()
    ids = final["c"].ids
    # b/0 was acknowledged (t=15) before a/1 began (t=20) but is stored after it.
    swapped = ids[:2] + ids[3:5] + ids[2:3] + ids[5:]
    verdict = check(appends, [], _final(swapped))
    assert "real-time order" in _anomalies(verdict)


def test_overlapping_appends_may_commit_in_either_order() -> None:
    appends = [_append("a", 0, 0), _append("b", 0, 2)]  # both run 0..7
    for order in (("a/0/0", "b/0/0"), ("b/0/0", "a/0/0")):
        verdict = check(appends, [], _final(order))
        assert verdict.valid, verdict.explain()


def test_a_read_with_a_hole_is_caught() -> None:
    appends, _reads, final = _history()
    ids = final["c"].ids
    holed = _read(40, 41, ids[:2] + ids[3:])
    verdict = check(appends, [holed], final)
    assert "order disagrees" in _anomalies(verdict)
    assert "not a prefix" in _anomalies(verdict)


def test_a_stale_read_is_caught() -> None:
    appends, _, final = _history()
    ids = final["c"].ids
    verdict = check(appends, [_read(40, 41, ids[:3])], final)
    assert "acknowledged before it began" in _anomalies(verdict)


def test_a_read_of_half_a_batch_is_caught() -> None:
    appends, _, final = _history()
    ids = final["c"].ids
    verdict = check(appends, [_read(12, 13, ids[:1])], final)
    assert "without its end" in _anomalies(verdict)


def test_a_read_that_goes_back_in_time_is_caught() -> None:
    appends, _, final = _history()
    ids = final["c"].ids
    reads = [_read(32, 36, ids), _read(37, 38, ids[:3])]
    verdict = check(appends, reads, final)
    assert "vanished" in _anomalies(verdict)


# --- windows and eviction -------------------------------------------------


def _evicting_history() -> tuple[list[Append], dict[str, Observation]]:
    """Window 3: a/0 (2 msgs), b/0 (1), a/1 (2) -> a/0 evicted by a/1."""
    appends = [
        _append("a", 0, 0, 2),
        _append("b", 0, 10),
        dataclasses.replace(_append("a", 1, 20, 2), evicted=("a/0/0", "a/0/1")),
    ]
    return appends, _final(("b/0/0", "a/1/0", "a/1/1"))


def test_a_correct_eviction_passes() -> None:
    appends, final = _evicting_history()
    reads = [
        _read(6, 8, ("a/0/0", "a/0/1")),
        _read(16, 18, ("a/0/0", "a/0/1", "b/0/0")),
        _read(30, 31, final["c"].ids),
    ]
    verdict = check(appends, reads, final, window_limit=3)
    assert verdict.valid, verdict.explain()
    assert verdict.evicted == 2


def test_eviction_without_a_window_is_caught() -> None:
    appends, final = _evicting_history()
    verdict = check(appends, [], final)
    assert "large enough" in _anomalies(verdict)


def test_an_unreported_eviction_is_a_loss() -> None:
    appends, final = _evicting_history()
    appends[2] = dataclasses.replace(appends[2], evicted=("a/0/0",))
    verdict = check(appends, [], final, window_limit=3)
    assert verdict.lost == ["[c] a/0/1"]


def test_an_evicted_message_that_reappears_is_caught() -> None:
    appends, final = _evicting_history()
    appends[2] = dataclasses.replace(appends[2], evicted=("a/0/0", "a/0/1", "b/0/0"))
    verdict = check(appends, [], final, window_limit=3)
    assert "reappeared" in _anomalies(verdict)


def test_a_read_seeing_an_evicted_message_is_caught() -> None:
    appends, final = _evicting_history()
    late = _read(30, 31, ("a/0/1", "b/0/0", "a/1/0", "a/1/1"))
    verdict = check(appends, [late], final, window_limit=3)
    assert "after its eviction" in _anomalies(verdict)


def test_a_window_starting_on_an_assistant_is_caught() -> None:
    appends, _ = _evicting_history()
    appends[2] = dataclasses.replace(appends[2], evicted=("a/0/0",))
    verdict = check(appends, [], _final(("a/0/1", "b/0/0", "a/1/0", "a/1/1")), 3)
    assert "starts on a assistant" in _anomalies(verdict)
    assert "holds 4 messages" in _anomalies(verdict)


def test_evicting_a_newer_append_before_an_older_one_is_caught() -> None:
    appends = [
        _append("a", 0, 0),
        _append("b", 0, 10),
        dataclasses.replace(_append("c", 0, 20), evicted=("b/0/0",)),
    ]
    verdict = check(appends, [], _final(("a/0/0", "c/0/0")), window_limit=2)
    assert "was evicted while the older" in _anomalies(verdict)


@pytest.mark.parametrize("outcome", ["info"])
def test_an_unknown_outcome_may_or_may_not_be_applied(outcome: str) -> None:
    appends, _, final = _history()
    appends[-1] = dataclasses.replace(appends[-1], outcome=outcome)  # type: ignore[arg-type]
    for ids in (final["c"].ids, final["c"].ids[:-1]):
        verdict = check(appends, [], _final(ids))
        assert verdict.valid, verdict.explain()


def test_a_read_hiding_a_message_the_final_state_holds_is_caught() -> None:
    appends, final = _evicting_history()
    hiding = _read(30, 31, ("a/1/0", "a/1/1"))
    verdict = check(appends, [hiding], final, window_limit=3)
    assert "after messages the final state still holds" in _anomalies(verdict)


def test_a_trimmed_head_passes_on_a_bounded_log() -> None:
    appends, _, final = _history()
    ids = final["c"].ids
    reads = [_read(6, 8, ids[:2]), _read(40, 41, ids[3:])]
    verdict = check(appends, reads, _final(ids[3:]), retained=4)
    assert verdict.valid, verdict.explain()
    assert verdict.evicted == 3


def test_a_trim_is_a_loss_without_a_bound() -> None:
    appends, _, final = _history()
    verdict = check(appends, [], _final(final["c"].ids[3:]))
    assert verdict.lost == ["[c] a/0/0", "[c] a/0/1", "[c] b/0/0"]


def test_a_hole_after_a_stored_append_is_a_loss_on_a_bounded_log() -> None:
    appends, _, final = _history()
    ids = final["c"].ids
    # b/0 began after a/0 was acknowledged, and a/0 is still stored.
    verdict = check(appends, [], _final(ids[:2] + ids[3:]), retained=4)
    assert verdict.lost == ["[c] b/0/0"]


def test_a_bounded_log_holding_too_much_is_caught() -> None:
    appends, _, final = _history()
    verdict = check(appends, [], final, retained=5)
    assert "holds 6 messages, more than 5" in _anomalies(verdict)
    reads = [_read(40, 41, final["c"].ids)]
    verdict = check(appends, reads, _final(final["c"].ids[3:]), retained=5)
    assert "read 0 holds 6 messages of a log bounded at 5" in _anomalies(verdict)
