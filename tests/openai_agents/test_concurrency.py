"""Appenders racing pops and clears on one session lose nothing and repeat nothing.

Every appender, popper and clearer is a session object of its own (as
separate requests or processes would have) over one repository, in one event
loop: each operation notes when it began and when it was acknowledged on one
counter, which orders them as they happened. The history then obeys:

- no item is stored twice, and no two pops return the same item;
- a popped item is one that was appended, and is not stored any more;
- an item whose append was acknowledged is stored, unless a pop returned it
  or a clear was acknowledged after its append began;
- an item whose append was acknowledged before a clear began is gone.
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass, field
from typing import Any

import pytest

pytest.importorskip("agents")

from chatledger import AsyncSupportsLogRemoval
from chatledger_openai_agents import ChatLedgerSession
from tests.openai_agents.conftest import Run

APPENDERS = 6
BATCHES = 10
POPPERS = 3
POPS = 8


@dataclass
class History:
    """What each operation did, between which ticks of one counter."""

    ticks: itertools.count[int] = field(default_factory=itertools.count)
    #: item content -> (began, acknowledged)
    appended: dict[str, tuple[int, int]] = field(default_factory=dict)
    popped: list[tuple[str, int, int]] = field(default_factory=list)
    cleared: list[tuple[int, int]] = field(default_factory=list)


async def append(repository: Any, history: History, writer: int) -> None:
    chat: Any = ChatLedgerSession("s1", repository)
    for batch in range(BATCHES):
        names = [f"w{writer}-b{batch}-{part}" for part in ("q", "a")]
        began = next(history.ticks)
        await chat.add_items([{"role": "user", "content": name} for name in names])
        done = next(history.ticks)
        for name in names:
            history.appended[name] = (began, done)
        await asyncio.sleep(0)


async def pop(repository: Any, history: History) -> None:
    chat: Any = ChatLedgerSession("s1", repository)
    for _ in range(POPS):
        began = next(history.ticks)
        item = await chat.pop_item()
        done = next(history.ticks)
        if item is not None:
            history.popped.append((dict(item)["content"], began, done))
        await asyncio.sleep(0)


async def clear(repository: Any, history: History, clears: int) -> None:
    chat: Any = ChatLedgerSession("s1", repository)
    for _ in range(clears):
        # Let some appends land between clears.
        for _ in range(APPENDERS * 3):
            await asyncio.sleep(0)
        began = next(history.ticks)
        await chat.clear_session()
        history.cleared.append((began, next(history.ticks)))


def violations(history: History, stored: list[str]) -> list[str]:
    """Every way ``stored`` and the history break the rules of the module."""
    found: list[str] = []
    popped = [name for name, _, _ in history.popped]
    if len(set(stored)) != len(stored):
        found.append(
            f"stored twice: {sorted(n for n in stored if stored.count(n) > 1)}"
        )
    if len(set(popped)) != len(popped):
        found.append(
            f"popped twice: {sorted(n for n in popped if popped.count(n) > 1)}"
        )
    for name, _, done in history.popped:
        if name not in history.appended:
            found.append(f"popped {name}, never appended")
        elif history.appended[name][0] > done:
            found.append(f"popped {name} before its append began")
        if name in stored:
            found.append(f"popped {name}, still stored")
    for name, (began, done) in history.appended.items():
        cleared_after = any(end > began for _, end in history.cleared)
        if name not in stored and name not in popped and not cleared_after:
            found.append(f"lost {name}")
        if name in stored and any(start > done for start, _ in history.cleared):
            found.append(f"{name} outlived a clear that began after its append")
    return found


def removes(repository: Any) -> bool:
    """True when ``repository`` has the atomic removal ``pop_item`` needs."""
    return isinstance(repository, AsyncSupportsLogRemoval)


@pytest.mark.parametrize("clears", [0, 3], ids=["pops", "pops-and-clears"])
def test_appends_racing_pops_and_clears(run_on_servers: Run[Any], clears: int) -> None:
    async def scenario(repository: Any) -> tuple[History, list[str]]:
        if not removes(repository):
            pytest.skip(
                f"{type(repository).__name__} has no AsyncSupportsLogRemoval "
                "(remove_newest) yet, which pop_item needs"
            )
        if hasattr(repository, "create_schema"):
            await repository.create_schema()
        history = History()
        await asyncio.gather(
            *(append(repository, history, w) for w in range(APPENDERS)),
            *(pop(repository, history) for _ in range(POPPERS)),
            clear(repository, history, clears),
        )
        chat: Any = ChatLedgerSession("s1", repository)
        items = await chat.get_items()
        return history, [item["content"] for item in items]

    history, stored = run_on_servers(scenario)
    assert violations(history, stored) == []
    assert len(history.appended) == APPENDERS * BATCHES * 2
    assert len(history.cleared) == clears
    # The race ran: some pops found items, and what is left is the rest.
    assert history.popped
    if clears == 0:
        assert len(stored) + len(history.popped) == len(history.appended)


def test_the_rules_catch_a_lost_a_repeated_and_a_resurrected_item() -> None:
    history = History()
    history.appended = {"a": (0, 1), "b": (2, 3), "c": (4, 5), "d": (6, 7)}
    history.popped = [("b", 8, 9), ("b", 8, 10), ("x", 8, 9)]
    history.cleared = [(11, 12)]
    # a: appended before the clear began, still there; b: popped twice and
    # stored twice; c is fine (the clear may have removed it); x never existed.
    stored = ["a", "b", "b"]
    assert violations(history, stored) == [
        "stored twice: ['b', 'b']",
        "popped twice: ['b', 'b']",
        "popped b, still stored",
        "popped b, still stored",
        "popped x, never appended",
        "a outlived a clear that began after its append",
        "b outlived a clear that began after its append",
    ]
    history.cleared = []
    assert "lost c" in violations(history, stored)
