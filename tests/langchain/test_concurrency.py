"""Appenders racing clears on one conversation lose nothing and repeat nothing.

The appenders are histories (``add_messages``) and agent runs through
``ChatLedgerMiddleware``, each an object of its own over one repository (as
separate requests would have); a clearer calls ``clear``. Each operation
notes, on one counter, when it began and when it was acknowledged, which
orders them as they happened. Then, on SQLite, PostgreSQL and Redis:

- no message is stored twice, and a batch (a question and its answer) is
  stored whole or not at all, its two messages side by side;
- a message whose append was acknowledged is stored unless a clear was
  acknowledged after that append began;
- a message whose append was acknowledged before a clear began is gone.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from dataclasses import dataclass, field
from typing import Any

import pytest

pytest.importorskip("langchain.agents")

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage

from chatledger import AsyncMessageWindowChatMemory, Message, MessageWindowChatMemory
from chatledger_langchain import ChatLedgerMessageHistory, ChatLedgerMiddleware
from tests.langchain.conftest import open_async, open_sync
from tests.langchain.models import EchoModel

HISTORIES = 4
AGENTS = 2
BATCHES = 8
CLEARS = 3
#: The appends before each clear; each appender's last batch waits for the
#: last clear, so that some appends are sure to come after it.
BETWEEN_CLEARS = 6
BEFORE_LAST = (HISTORIES + AGENTS) * (BATCHES - 1)
CONVERSATION: Any = {"configurable": {"conversation_id": "shared"}}


@dataclass
class Timeline:
    """What each operation did, between which ticks of one counter."""

    ticks: itertools.count[int] = field(default_factory=itertools.count)
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: question -> (began, acknowledged)
    appended: dict[str, tuple[int, int]] = field(default_factory=dict)
    cleared: list[tuple[int, int]] = field(default_factory=list)
    #: Set once every clear is acknowledged.
    clears_done: threading.Event = field(default_factory=threading.Event)

    def tick(self) -> int:
        with self.lock:
            return next(self.ticks)


def _batch(name: str) -> list[Any]:
    return [HumanMessage(name), AIMessage(f"re: {name}")]


def check(timeline: Timeline, stored: list[Message]) -> None:
    """The rules of the module's docstring, on what the conversation holds."""
    texts = [m.content for m in stored]
    assert len(texts) == len(set(texts)), "a message is stored twice"
    assert len({m.id for m in stored}) == len(stored)
    questions = texts[::2]
    assert texts[1::2] == [f"re: {q}" for q in questions], "a batch was split"
    for question, (began, done) in timeline.appended.items():
        removable = any(end > began for _, end in timeline.cleared)
        if not removable:
            assert question in questions, f"{question} was acknowledged, then lost"
        if any(start > done for start, _ in timeline.cleared):
            assert question not in questions, f"{question} outlived a later clear"
    assert set(questions) <= set(timeline.appended)
    # The race ran: a clear removed acknowledged appends, and some are left.
    assert questions
    assert len(questions) < len(timeline.appended)


async def _history_writer(repository: Any, timeline: Timeline, writer: int) -> None:
    history = ChatLedgerMessageHistory(repository, "shared")
    for number in range(BATCHES):
        name = f"h{writer}-{number}"
        if number == BATCHES - 1:
            await _clears_done(timeline)
        began = timeline.tick()
        await history.aadd_messages(_batch(name))
        timeline.appended[name] = (began, timeline.tick())
        await asyncio.sleep(0)


async def _agent_runner(repository: Any, timeline: Timeline, runner: int) -> None:
    memory = AsyncMessageWindowChatMemory(repository, max_messages=10)
    agent: Any = create_agent(EchoModel(), middleware=[ChatLedgerMiddleware(memory)])
    for number in range(BATCHES):
        name = f"a{runner}-{number}"
        if number == BATCHES - 1:
            await _clears_done(timeline)
        began = timeline.tick()
        await agent.ainvoke({"messages": [HumanMessage(name)]}, CONVERSATION)
        timeline.appended[name] = (began, timeline.tick())


async def _clearer(repository: Any, timeline: Timeline) -> None:
    history = ChatLedgerMessageHistory(repository, "shared")
    try:
        for _ in range(CLEARS):
            # Let some appends land between clears (by count, not time).
            wanted = min(len(timeline.appended) + BETWEEN_CLEARS, BEFORE_LAST)
            while len(timeline.appended) < wanted:
                await asyncio.sleep(0.001)
            began = timeline.tick()
            await history.aclear()
            timeline.cleared.append((began, timeline.tick()))
    finally:
        timeline.clears_done.set()


async def _clears_done(timeline: Timeline) -> None:
    while not timeline.clears_done.is_set():
        await asyncio.sleep(0.001)


def test_async_appenders_racing_clears(store_url: str) -> None:
    timeline = Timeline()

    async def main() -> list[Message]:
        repository = open_async(store_url)
        try:
            await asyncio.gather(
                *[_history_writer(repository, timeline, w) for w in range(HISTORIES)],
                *[_agent_runner(repository, timeline, r) for r in range(AGENTS)],
                _clearer(repository, timeline),
            )
            stored: list[Message] = await repository.find_by_conversation_id("shared")
            return stored
        finally:
            await repository.drop_schema()
            await repository.aclose()

    stored = asyncio.run(main())
    assert len(timeline.appended) == (HISTORIES + AGENTS) * BATCHES
    assert len(timeline.cleared) == CLEARS
    check(timeline, stored)


def test_threads_appending_racing_clears(store_url: str) -> None:
    repository = open_sync(store_url)
    timeline = Timeline()
    errors: list[BaseException] = []
    started = threading.Barrier(HISTORIES + AGENTS + 1)

    def history_writer(writer: int) -> None:
        history = ChatLedgerMessageHistory(repository, "shared")
        started.wait()
        for number in range(BATCHES):
            name = f"h{writer}-{number}"
            if number == BATCHES - 1:
                timeline.clears_done.wait()
            began = timeline.tick()
            history.add_messages(_batch(name))
            timeline.appended[name] = (began, timeline.tick())

    def agent_runner(runner: int) -> None:
        memory = MessageWindowChatMemory(repository, max_messages=10)
        middleware = [ChatLedgerMiddleware(memory)]
        agent: Any = create_agent(EchoModel(), middleware=middleware)
        started.wait()
        for number in range(BATCHES):
            name = f"a{runner}-{number}"
            if number == BATCHES - 1:
                timeline.clears_done.wait()
            began = timeline.tick()
            agent.invoke({"messages": [HumanMessage(name)]}, CONVERSATION)
            timeline.appended[name] = (began, timeline.tick())

    def clearer() -> None:
        history = ChatLedgerMessageHistory(repository, "shared")
        started.wait()
        try:
            for _ in range(CLEARS):
                # Let appends land between clears (by count, not time); an
                # appender that failed stops the wait.
                wanted = min(len(timeline.appended) + BETWEEN_CLEARS, BEFORE_LAST)
                while len(timeline.appended) < wanted and not errors:
                    threading.Event().wait(0.001)
                began = timeline.tick()
                history.clear()
                timeline.cleared.append((began, timeline.tick()))
        finally:
            timeline.clears_done.set()

    def guarded(target: Any, *args: Any) -> threading.Thread:
        def run() -> None:
            try:
                target(*args)
            except BaseException as exc:  # re-raised in the test's thread
                errors.append(exc)

        return threading.Thread(target=run)

    threads = [guarded(history_writer, w) for w in range(HISTORIES)]
    threads += [guarded(agent_runner, r) for r in range(AGENTS)]
    threads.append(guarded(clearer))
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        stored = repository.find_by_conversation_id("shared")
    finally:
        repository.drop_schema()
        repository.close()
    assert len(timeline.appended) == (HISTORIES + AGENTS) * BATCHES
    check(timeline, stored)
