"""Random histories of appends and removals, replayed on a backend and in memory.

A backend's ``test_removal`` drives its repository and core's in-memory one
with the same appends (random turns, some batches holding a second system
message, each given a random window) and the same removals (the newest few,
or ids stored, current system messages, unknown or evicted ones), and checks
after each step that both hold the same log, show the same views and pages,
and record the same evicted ids.
"""

from __future__ import annotations

import random
import threading
from typing import Any

from chatledger import InMemoryChatMemoryRepository, Message, Role
from chatledger.in_memory_conversation import InMemoryConversation
from chatledger.retention import Retention
from chatledger.testing import random_turns
from chatledger.tokens import estimate_tokens
from chatledger.window import MessageWindow, TokenWindow, Window

__all__ = [
    "VIEWS",
    "appends",
    "first_number",
    "ids",
    "page_ids",
    "race_removals",
    "random_removal",
    "record",
    "same_log",
    "take_number",
    "windows_of",
]

#: The windows each step's views are compared under.
VIEWS: list[Window] = [
    MessageWindow(3),
    MessageWindow(8),
    TokenWindow(120, estimate_tokens),
    TokenWindow(90, estimate_tokens, "other"),
]


def ids(messages: list[Message]) -> list[str]:
    """The ids of ``messages``, in order."""
    return [m.id for m in messages]


def page_ids(repository: Any, cid: str) -> list[str]:
    """The ids of the whole log read in pages of three, oldest first."""
    found: list[str] = []
    cursor = None
    while True:
        page = repository.find_messages_page(cid, cursor, limit=3, newest_first=False)
        found += ids(page.messages)
        if page.next_cursor is None:
            return found
        cursor = page.next_cursor


def appends(rng: random.Random, turns: int) -> list[list[Message]]:
    """Random turns, some batches holding a second system message."""
    batches = random_turns(rng, turns)
    for batch in batches:
        if rng.random() < 0.15:
            extra = Message.system(f"also {rng.randint(0, 3)}")
            batch.insert(rng.randint(0, len(batch)), extra)
    return batches


def first_number(memory: InMemoryChatMemoryRepository, cid: str, first: int) -> None:
    """Number the new conversation ``cid`` in memory from ``first``, as the
    backend numbers it: a bounded log trims when its numbers say so, so the
    two trim alike only when they number alike (core numbers from 1)."""
    assert cid not in memory._conversations
    memory._conversations[cid] = InMemoryConversation(
        [], set(), 0, last_sequence=first - 1
    )


def take_number(memory: InMemoryChatMemoryRepository, cid: str) -> None:
    """Skip one sequence number of ``cid`` in memory, as a backend whose
    removal takes one as its version does (Cassandra's)."""
    if cid in memory._conversations:
        memory._conversations[cid].last_sequence += 1


def windows_of(rng: random.Random, retention: Retention) -> list[Window | None]:
    """The windows the appends of one history are given, one picked per append."""
    return [
        None,
        MessageWindow(rng.randint(1, retention.keep or 8)),
        TokenWindow(rng.randint(10, 80), estimate_tokens),
        TokenWindow(rng.randint(10, 80), estimate_tokens, "other"),
    ]


def record(memory: InMemoryChatMemoryRepository, cid: str) -> list[str]:
    """The evicted ids the in-memory repository records for ``cid``, oldest first."""
    return list(memory._evicted.get(cid, []))


def random_removal(
    rng: random.Random, memory: InMemoryChatMemoryRepository, cid: str
) -> tuple[str, Any]:
    """A random removal: the newest few, or ids stored, unknown or evicted."""
    stored = memory.find_by_conversation_id(cid)
    if rng.random() < 0.4:
        return "remove_newest", rng.randint(1, 3)
    system = [m.id for m in stored if m.role is Role.SYSTEM]
    named: list[str] = []
    if system and rng.random() < 0.4:
        # The current set is the newest system messages: take it, or part.
        named += system[-rng.randint(1, min(2, len(system))) :]
    if stored:
        named += ids(rng.sample(stored, min(len(stored), rng.randint(0, 2))))
    if rng.random() < 0.2:
        named.append("never-stored")
    evicted = record(memory, cid)
    if evicted and rng.random() < 0.3:
        named.append(rng.choice(evicted))
    rng.shuffle(named)
    return "remove_messages", named


def same_log(repository: Any, memory: InMemoryChatMemoryRepository, cid: str) -> None:
    """Both repositories hold the same log of ``cid``: its messages, the
    views of :data:`VIEWS`, its pages, and whether it is listed."""
    stored = ids(repository.find_by_conversation_id(cid))
    assert stored == ids(memory.find_by_conversation_id(cid))
    for window in VIEWS:
        assert ids(repository.find_window(cid, window)) == ids(
            memory.find_window(cid, window)
        ), window
    assert page_ids(repository, cid) == stored
    assert (cid in repository.find_conversation_ids()) == bool(stored)


def race_removals(
    appender: Any,
    remover: Any,
    *,
    writers: int,
    appends: int,
    poppers: int,
    removers: int,
    removals: int,
) -> tuple[list[str], list[str]]:
    """Race appends to ``"race"`` through ``appender`` with removals through
    ``remover``: ``writers`` threads append ``appends`` turns each,
    ``poppers`` threads take the newest two ``removals`` times each and
    ``removers`` threads remove three ids sent so far ``removals`` times
    each. Returns the ids sent and the ids removals returned; a removal by id
    returns only ids it was given, and no thread fails."""
    sent: list[str] = []
    taken: list[str] = []
    failures: list[BaseException] = []
    lock = threading.Lock()

    def append(writer: int) -> None:
        try:
            for n in range(appends):
                batch = [
                    Message.user(f"u{writer}-{n}", id=f"u{writer}-{n}"),
                    Message.assistant("a", id=f"a{writer}-{n}"),
                ]
                appender.append_to_log("race", batch, MessageWindow(6))
                with lock:
                    sent.extend(m.id for m in batch)
        except BaseException as error:  # reported below
            failures.append(error)

    def pop() -> None:
        try:
            for _ in range(removals):
                got = ids(remover.remove_newest("race", 2))
                with lock:
                    taken.extend(got)
        except BaseException as error:  # reported below
            failures.append(error)

    def remove(seed: int) -> None:
        rng = random.Random(seed)
        try:
            for _ in range(removals):
                with lock:
                    named = rng.sample(sent, min(3, len(sent)))
                got = ids(remover.remove_messages("race", named))
                assert set(got) <= set(named)
                with lock:
                    taken.extend(got)
        except BaseException as error:  # reported below
            failures.append(error)

    threads = [threading.Thread(target=append, args=(w,)) for w in range(writers)]
    threads += [threading.Thread(target=pop) for _ in range(poppers)]
    threads += [threading.Thread(target=remove, args=(s,)) for s in range(removers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    return sent, taken
