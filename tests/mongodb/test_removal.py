"""Removals from a log on MongoDB's one-document layout, on the STAND-IN.

The conformance suite checks what a removal does; these tests check what is
particular to this adapter: on random histories (bounded or not, sizes of
several counters, system sets of one or two messages) the removal's update
pipeline keeps exactly what core's in-memory repository keeps, with each
element's batch and the document's ``sb`` as core's batches say; a removal
changes ``version`` and slides ``expires_at`` and leaves ``next_seq`` and the
record alone, and one that finds nothing changes nothing; a document it
empties keeps its record; a trim whose append lost its last message to a
removal changes nothing.

They run on :class:`tests.mongodb.standin.StandInClient` (mongomock storage
plus a test-only evaluator of the pipelines' operators), which is NOT a
MongoDB server: it checks the adapter's code and the logic its pipelines
encode.
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

import pytest

from chatledger import InMemoryChatMemoryRepository, Message, Role
from chatledger.retention import Retention
from chatledger.tokens import estimate_tokens
from chatledger.window import MessageWindow, TokenWindow, Window

pytest.importorskip("mongomock")

from chatledger_mongodb import (
    AsyncMongoDBChatMemoryRepository,
    MongoDBChatMemoryRepository,
)
from tests.mongodb.standin import AsyncStandInClient, StandInClient
from tests.mongodb.test_log import _layout, _raw, _recorded, _repository
from tests.removal_histories import VIEWS
from tests.removal_histories import appends as _batches
from tests.removal_histories import ids as _ids
from tests.removal_histories import page_ids as _pages


def _removal(
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
        named += [m.id for m in rng.sample(stored, min(len(stored), rng.randint(0, 2)))]
    if rng.random() < 0.2:
        named.append("never-stored")
    evicted = list(memory._evicted.get(cid, []))
    if evicted and rng.random() < 0.3:
        named.append(rng.choice(evicted))
    rng.shuffle(named)
    return "remove_messages", named


def _check_same(
    mongo: MongoDBChatMemoryRepository,
    memory: InMemoryChatMemoryRepository,
    cid: str,
) -> None:
    stored = _ids(mongo.find_by_conversation_id(cid))
    assert stored == _ids(memory.find_by_conversation_id(cid))
    for window in VIEWS:
        assert _ids(mongo.find_window(cid, window)) == _ids(
            memory.find_window(cid, window)
        )
    assert _pages(mongo, cid) == stored
    assert (cid in mongo.find_conversation_ids()) == bool(stored)
    layout = _layout(mongo, cid)
    document = _raw(mongo, cid) or {}
    assert document.get("evicted_ids", []) == list(memory._evicted.get(cid, []))
    # Each system element records the batch core gives it (core numbers
    # from 1, the document from 0), and sb is that of the current set.
    conversation = memory._conversations.get(cid)
    if conversation is None:
        assert layout["elements"] == []
        return
    system = [
        (message.id, batch - 1)
        for message, batch in zip(
            conversation.messages, conversation.batches, strict=True
        )
        if message.role is Role.SYSTEM
    ]
    elements = layout["elements"]
    assert [
        (e["id"], e.get("b", 0)) for e in elements if e["role"] == Role.SYSTEM.value
    ] == system
    if system:
        assert document.get("sb", 0) == system[-1][1]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("bounded", [False, True])
def test_removals_keep_what_core_keeps(seed: int, bounded: bool) -> None:
    """Random appends and removals: the same log, views and record as in memory.

    Each log append takes a random window (a token window of either counter,
    a message window, or none); bounded, trims run between the removals.
    After each step both repositories hold the same messages, show the same
    views and pages and record the same evicted ids; the document stays
    consistent, its batches those of core, ``next_seq`` untouched by a
    removal.
    """
    rng = random.Random(seed)
    retention = (
        Retention.last(rng.randint(4, 9), slack=rng.randint(1, 4))
        if bounded
        else Retention.everything()
    )
    mongo = _repository(retention=retention)
    memory = InMemoryChatMemoryRepository(retention=retention)
    windows: list[Window | None] = [
        None,
        MessageWindow(rng.randint(1, retention.keep or 8)),
        TokenWindow(rng.randint(10, 80), estimate_tokens),
        TokenWindow(rng.randint(10, 80), estimate_tokens, "other"),
    ]
    removed_some = False
    # Emptied, a conversation numbers its next messages on from next_seq here
    # and from 1 in memory (the bounded logs would then trim apart): the
    # steps go on in a new one (test_emptied_the_document... covers the old).
    conversations = (f"r{n}" for n in range(1000))
    cid = next(conversations)
    for batch in _batches(rng, 30):
        window = rng.choice(windows)
        result = mongo.append_to_log(cid, batch, window)
        assert _ids(result.appended) == _ids(
            memory.append_to_log(cid, batch, window).appended
        )
        _check_same(mongo, memory, cid)
        while rng.random() < 0.3:
            name, argument = _removal(rng, memory, cid)
            before = _raw(mongo, cid)
            removed = getattr(mongo, name)(cid, argument)
            assert removed == getattr(memory, name)(cid, argument)
            removed_some = removed_some or bool(removed)
            after = _raw(mongo, cid)
            assert after["next_seq"] == before["next_seq"]
            assert (after["version"] != before["version"]) == bool(removed)
            _check_same(mongo, memory, cid)
            if not after["messages"]:
                cid = next(conversations)
                break
    assert removed_some


def test_a_removal_slides_the_expiry_and_keeps_the_rest() -> None:
    """``version`` and ``expires_at`` change; ``next_seq`` and the record stay.

    A removal that finds nothing matches no document and changes nothing.
    """
    repository = _repository(ttl=3600, retention=Retention.last(2, slack=1))
    sent = [Message.user(f"q{n}") for n in range(4)]
    for message in sent:
        repository.append_to_log("x", [message])
    before = _raw(repository, "x")
    assert before["evicted_ids"] == _ids(sent[:2])
    # MongoDB keeps milliseconds: let the clock pass one, or the slid expiry
    # can equal the last append's.
    time.sleep(0.002)
    assert _ids(repository.remove_messages("x", [sent[0].id, sent[3].id])) == [
        sent[3].id
    ]
    after = _raw(repository, "x")
    assert after["expires_at"] > before["expires_at"]
    assert after["version"] != before["version"]
    for field in ("next_seq", "evicted_ids"):
        assert after[field] == before[field]
    assert repository.remove_messages("x", [sent[0].id, "unknown"]) == []
    assert repository.remove_newest("none") == []
    assert _raw(repository, "x") == after


def test_emptied_the_document_keeps_its_record_and_is_not_listed() -> None:
    """A late retry of a trimmed message stays a no-op; a removed one is stored."""
    repository = _repository(retention=Retention.last(2, slack=1))
    sent = [Message.user(f"q{n}") for n in range(4)]
    for message in sent:
        repository.append_to_log("e", [message])
    assert _ids(repository.remove_newest("e", 10)) == _ids(sent[2:])
    document = _raw(repository, "e")
    assert document["messages"] == []
    assert document["evicted_ids"] == _ids(sent[:2])
    assert "e" not in repository.find_conversation_ids()
    assert repository.count_messages("e") == 0
    assert repository.append_to_log("e", sent[:1]).appended == []
    assert _ids(repository.append_to_log("e", sent[3:]).appended) == [sent[3].id]
    # Numbers are not reused: the stored one goes after the removed ones.
    assert _raw(repository, "e")["messages"][0]["seq"] == 4


def test_taking_the_current_set_moves_the_batch_back() -> None:
    """Part of the set taken: it stays current; all of it: the one before is.

    With no system message left, ``sb`` is 0.
    """
    repository = _repository()
    first = [Message.system("first"), Message.user("q"), Message.system("also")]
    second = [Message.system("second"), Message.system("and more")]
    repository.append_to_log("s", first)
    repository.append_to_log("s", [Message.assistant("a")])
    repository.append_to_log("s", second)
    assert _raw(repository, "s")["sb"] == 4
    repository.remove_messages("s", [second[0].id])
    assert _layout(repository, "s")["current"] == [second[1].id]
    assert _raw(repository, "s")["sb"] == 4
    repository.remove_newest("s")
    assert _layout(repository, "s")["current"] == [first[0].id, first[2].id]
    assert _raw(repository, "s")["sb"] == 0
    shown = repository.find_window("s", MessageWindow(10))
    assert [m.content for m in shown if m.role is Role.SYSTEM] == ["first", "also"]
    repository.remove_messages("s", [first[0].id, first[2].id])
    assert _raw(repository, "s")["sb"] == 0
    assert _layout(repository, "s")["current"] == []


def test_a_trim_whose_last_message_was_removed_changes_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A pop between an append and its trim: the trim's filter matches nothing."""
    repository = _repository(retention=Retention.last(4, slack=2))
    window = MessageWindow(2)
    turns = [[Message.user(f"q{n}"), Message.assistant(f"a{n}")] for n in range(3)]
    read_view = repository._tail_view
    popped: list[Message] = []

    def pop_first(*args: Any) -> Any:
        popped.extend(repository.remove_newest("p"))
        return read_view(*args)

    repository.append_to_log("p", turns[0], window)
    repository.append_to_log("p", turns[1], window)
    monkeypatch.setattr(repository, "_tail_view", pop_first)
    recorded = _recorded(repository)
    repository.append_to_log("p", turns[2], window)  # numbers 5, 6: due
    assert _ids(popped) == [turns[2][1].id]
    assert [call[0] for call in recorded.calls].count("update_one") == 1
    stored = [*turns[0], *turns[1], turns[2][0]]
    assert _ids(repository.find_by_conversation_id("p")) == _ids(stored)
    assert not _raw(repository, "p").get("evicted_ids")


def test_a_removal_is_one_command() -> None:
    """One ``findAndModify`` each, whatever it finds."""
    repository = _repository()
    sent = [Message.user(f"q{n}") for n in range(4)]
    repository.append_to_log("one", sent)
    recorded = _recorded(repository)
    repository.remove_newest("one")
    repository.remove_messages("one", [sent[0].id, "unknown"])
    repository.remove_newest("none")
    assert [call[0] for call in recorded.calls] == ["find_one_and_update"] * 3
    assert _ids(repository.find_by_conversation_id("one")) == _ids(sent[1:3])


def test_the_async_repository_removes_alike() -> None:
    """The async twin sends the same update, and the sync one reads its outcome."""
    shared = StandInClient()
    sync = MongoDBChatMemoryRepository(shared, collection="twins")  # type: ignore[arg-type]
    twin = AsyncMongoDBChatMemoryRepository(
        AsyncStandInClient(shared),  # type: ignore[arg-type]
        collection="twins",
    )
    old, new = Message.system("old"), Message.system("new")
    sync.append_to_log("t", [old, Message.user("q")])
    sync.append_to_log("t", [new])

    async def remove() -> list[Message]:
        return await twin.remove_messages("t", [new.id])

    assert asyncio.run(remove()) == [new]
    shown = sync.find_window("t", MessageWindow(5))
    assert [m.content for m in shown if m.role is Role.SYSTEM] == ["old"]
