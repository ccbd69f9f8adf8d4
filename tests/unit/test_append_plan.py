"""The append planner against the pure window policy, on random histories.

A tiny store below keeps what the planner is told and applies its plans; after
every append it must hold exactly what ``apply_window`` gives, with the
counts and size totals the planner reports, whatever the first read's size.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest

from chatledger import Message, Role
from chatledger.append_plan import (
    StoredEntry,
    StoredWindow,
    needs_stored_system,
    plan_append,
)
from chatledger.testing import random_turns
from chatledger.tokens import estimate_tokens
from chatledger.validation import stamp_messages
from chatledger.window import MessageWindow, TokenWindow, Window, apply_window


class PlannedStore:
    """One conversation kept as plans say, reading lazily like an adapter."""

    def __init__(self, window: Window) -> None:
        self.window = window
        self.messages: list[Message] = []
        self.reads = 0

    def state(self, batch: list[Message]) -> StoredWindow:
        system = [m for m in self.messages if m.role is Role.SYSTEM]
        others = [m for m in self.messages if m.role is not Role.SYSTEM]
        measure = self.window.measure

        def read_oldest(expected: int) -> Iterator[StoredEntry]:
            assert expected >= 1
            for position, message in enumerate(others):
                self.reads += 1
                yield StoredEntry(message.id, message.role, measure(message), position)

        return StoredWindow(
            system_count=len(system),
            system_size=sum(measure(m) for m in system),
            count=len(others),
            total=sum(measure(m) for m in others),
            read_oldest=read_oldest,
            system=system if needs_stored_system(batch) else None,
        )

    def append(self, batch: list[Message]) -> tuple[list[str], list[str]]:
        known = {m.id for m in self.messages}
        fresh = stamp_messages(m for m in batch if m.id not in known)
        if not fresh:
            return [], []
        plan = plan_append(self.state(fresh), fresh, self.window)
        others = [m for m in self.messages if m.role is not Role.SYSTEM]
        assert [e.position for e in plan.evicted] == list(range(len(plan.evicted)))
        gone = set(plan.delete_ids)
        self.messages = [m for m in self.messages if m.id not in gone] + plan.insert
        assert plan.insert_sizes == [self.window.measure(m) for m in plan.insert]
        system = [m for m in self.messages if m.role is Role.SYSTEM]
        others = [m for m in self.messages if m.role is not Role.SYSTEM]
        assert plan.system_count == len(system)
        assert plan.system_size == sum(self.window.measure(m) for m in system)
        assert plan.message_count == len(others)
        assert plan.size_total == sum(self.window.measure(m) for m in others)
        assert plan.empty == (not self.messages)
        return [m.id for m in plan.appended], plan.evicted_ids


WINDOWS = [
    lambda rng: MessageWindow(rng.randint(1, 12)),
    lambda rng: TokenWindow(rng.randint(10, 120), estimate_tokens),
]


@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize("make_window", WINDOWS, ids=["messages", "tokens"])
def test_plans_keep_the_pure_window(seed: int, make_window: object) -> None:
    rng = random.Random(seed)
    window = make_window(rng)  # type: ignore[operator]
    store = PlannedStore(window)
    expected: list[Message] = []
    for batch in random_turns(rng, 30):
        if expected and rng.random() < 0.2:
            batch = [rng.choice(expected), *batch]  # a retried id is not new
        appended, evicted = store.append(batch)
        known = {m.id for m in expected}
        fresh = [m for m in batch if m.id not in known]
        if fresh:
            update = apply_window(expected, fresh, window)
            expected = update.messages
            assert appended == [m.id for m in update.appended]
            assert evicted == [m.id for m in update.evicted]
        assert [m.id for m in store.messages] == [m.id for m in expected]


def test_a_message_window_reads_about_what_it_evicts() -> None:
    store = PlannedStore(MessageWindow(20))
    for turn in range(200):
        store.append([Message.user(f"u{turn}")])
        store.append([Message.assistant(f"a{turn}")])
    # Each append evicts at most one message and looks one row further.
    assert store.reads <= 2 * 400


def test_a_system_message_needs_the_stored_system_messages() -> None:
    state = StoredWindow(0, 0, 0, 0, lambda expected: iter(()))
    with pytest.raises(ValueError, match="system"):
        plan_append(state, [Message.system("S")], MessageWindow(5))


def test_an_equal_system_message_is_not_stored_twice() -> None:
    stored = Message.system("S", metadata={"x": 1})
    state = StoredWindow(1, 1, 0, 0, lambda expected: iter(()), system=[stored])
    again = Message.system("S", metadata={"x": True})
    plan = plan_append(state, [again, Message.user("u")], MessageWindow(5))
    assert not plan.replace_system
    assert [m.content for m in plan.insert] == ["u"]
    assert plan.system_count == 1
