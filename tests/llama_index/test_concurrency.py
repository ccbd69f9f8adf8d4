"""Appenders racing deletes, clears and archives, on SQLite, PostgreSQL and Redis.

Every message a writer was told it stored is there exactly once at the end,
unless a delete that returned it removed it; no two deletes return the same
message, and no two archives archive the same one. Each store runs on a
repository of its own (a table, a key prefix), through the sync methods in
threads and the async ones in tasks.
"""

from __future__ import annotations

import asyncio
import functools
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from chatledger import SupportsLogRemoval, connect, connect_async
from tests.backends import backend_url

pytest.importorskip("llama_index.core")
pytest.importorskip("chatledger_sql")

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.storage.chat_store.base_db import MessageStatus

from chatledger_llama_index import ChatLedgerChatStore, ChatLedgerMemoryStore

WRITERS, APPENDS = 4, 40
#: Each deleter and archiver goes on until the appenders are done.
DELETERS = 3


@dataclass
class Place:
    """A backend URL and the options that give a test a repository of its own."""

    url: str
    options: dict[str, Any]
    opened: list[Any] = field(default_factory=list)

    def sync(self) -> Any:
        repository = connect(self.url, **self.options)
        self.opened.append(repository)
        return repository


@pytest.fixture(params=["sqlite", "postgresql", "redis"])
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Place]:
    """An empty table (or key prefix) on each backend, dropped afterwards."""
    name = f"cl_{uuid.uuid4().hex[:16]}"
    if request.param == "sqlite":
        found = Place(f"sqlite:///{tmp_path / 'chat.db'}", {"table_name": name})
    elif request.param == "postgresql":
        found = Place(backend_url("postgresql"), {"table_name": name})
    else:
        pytest.importorskip("chatledger_redis")
        found = Place(backend_url("redis"), {"key_prefix": f"{name}:"})
    repository: Any = found.sync()
    if not isinstance(repository, SupportsLogRemoval):
        pytest.skip(
            f"{type(repository).__name__} has no SupportsLogRemoval (remove_newest, "
            "remove_messages): the stores' deletes remove through it"
        )
    yield found
    opened: Any = repository
    opened.drop_schema()
    for opened in found.opened:
        opened.close()


def text(writer: int, number: int) -> str:
    return f"w{writer}-{number}"


def message(writer: int, number: int) -> ChatMessage:
    role = "user" if number % 2 == 0 else "assistant"
    return ChatMessage(role=role, content=text(writer, number))


def assert_accounted(removed: list[str | None], final: list[str | None]) -> None:
    """Each append is in ``final`` once, or was returned by one delete; no other."""
    appended = {text(w, n) for w in range(WRITERS) for n in range(APPENDS)}
    twice = {t: c for t, c in Counter([*removed, *final]).items() if c > 1}
    assert twice == {}
    assert set(removed) | set(final) == appended
    # The deletes raced the appends and found something to remove.
    assert removed


# --- ChatLedgerChatStore ----------------------------------------------------------


def _chat_store_deletes(store: ChatLedgerChatStore, number: int) -> list[Any]:
    if number % 10 == 9:
        return store.delete_messages("shared") or []
    if number % 3 == 0:
        return [store.delete_message("shared", 0)]
    if number % 3 == 1:
        return [store.delete_message("shared", -2)]
    return [store.delete_last_message("shared")]


def test_chat_store_threads_lose_nothing(place: Place) -> None:
    store = ChatLedgerChatStore(place.sync())
    start = threading.Barrier(WRITERS + DELETERS)
    appenders_left = [WRITERS]
    lock = threading.Lock()
    done = threading.Event()
    removed: list[ChatMessage] = []
    errors: list[BaseException] = []

    def in_thread(work: Callable[[], None]) -> threading.Thread:
        def run() -> None:
            try:
                start.wait()
                work()
            except BaseException as exc:  # re-raised in the test's thread
                errors.append(exc)
                done.set()

        return threading.Thread(target=run)

    def append(writer: int) -> None:
        for number in range(APPENDS):
            store.add_message("shared", message(writer, number))
        with lock:
            appenders_left[0] -= 1
            if not appenders_left[0]:
                done.set()

    def delete() -> None:
        number = 0
        while not done.is_set():
            removed.extend(m for m in _chat_store_deletes(store, number) if m)
            number += 1

    threads = [in_thread(functools.partial(append, w)) for w in range(WRITERS)]
    threads += [in_thread(delete) for _ in range(DELETERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    final = store.get_messages("shared")
    assert_accounted([m.content for m in removed], [m.content for m in final])


async def _chat_store_adeletes(store: ChatLedgerChatStore, number: int) -> list[Any]:
    if number % 10 == 9:
        return await store.adelete_messages("shared") or []
    if number % 3 == 0:
        return [await store.adelete_message("shared", 0)]
    if number % 3 == 1:
        return [await store.adelete_message("shared", -2)]
    return [await store.adelete_last_message("shared")]


def test_chat_store_tasks_lose_nothing(place: Place) -> None:
    async def scenario() -> tuple[list[ChatMessage], list[ChatMessage]]:
        repository: Any = connect_async(place.url, **place.options)
        store = ChatLedgerChatStore(repository)
        removed: list[ChatMessage] = []

        done = asyncio.Event()

        async def append() -> None:
            async def one(writer: int) -> None:
                for number in range(APPENDS):
                    await store.async_add_message("shared", message(writer, number))

            try:
                await asyncio.gather(*(one(w) for w in range(WRITERS)))
            finally:
                done.set()

        async def delete() -> None:
            number = 0
            while not done.is_set():
                gone = await _chat_store_adeletes(store, number)
                removed.extend(m for m in gone if m)
                number += 1

        try:
            await asyncio.gather(append(), *(delete() for _ in range(DELETERS)))
            return removed, await store.aget_messages("shared")
        finally:
            await repository.aclose()

    removed, final = asyncio.run(scenario())
    assert_accounted([m.content for m in removed], [m.content for m in final])


# --- ChatLedgerMemoryStore ----------------------------------------------------------


@pytest.mark.parametrize("kind", ["async", "sync"])
def test_memory_store_archives_once_and_loses_nothing(place: Place, kind: str) -> None:
    """Archives and deletes race appends; a sync repository runs in threads."""

    async def scenario() -> dict[str, Any]:
        repository: Any = (
            connect_async(place.url, **place.options)
            if kind == "async"
            else place.sync()
        )
        store = ChatLedgerMemoryStore(repository)
        removed: list[ChatMessage] = []
        archived: list[list[ChatMessage]] = []

        done = asyncio.Event()

        async def append() -> None:
            async def one(writer: int) -> None:
                for number in range(APPENDS):
                    await store.add_message("shared", message(writer, number))

            try:
                await asyncio.gather(*(one(w) for w in range(WRITERS)))
            finally:
                done.set()

        async def delete() -> None:
            number = 0
            while not done.is_set():
                if number % 2:
                    removed.extend(await store.delete_oldest_messages("shared", 2))
                else:
                    gone = await store.delete_message("shared", -1)
                    removed.extend([gone] if gone else [])
                number += 1

        async def archive() -> None:
            while not done.is_set():
                archived.append(await store.archive_oldest_messages("shared", 3))

        try:
            await asyncio.gather(
                append(),
                *(delete() for _ in range(DELETERS)),
                *(archive() for _ in range(DELETERS)),
            )
            return {
                "removed": removed,
                "archived": archived,
                "final": await store.get_messages("shared", status=None),
                "still archived": await store.get_messages(
                    "shared", status=MessageStatus.ARCHIVED
                ),
                "active": await store.get_messages("shared"),
            }
        finally:
            if kind == "async":
                await repository.aclose()

    seen = asyncio.run(scenario())
    final = [m.content for m in seen["final"]]
    assert_accounted([m.content for m in seen["removed"]], final)
    archived = [m.content for batch in seen["archived"] for m in batch]
    assert [t for t, c in Counter(archived).items() if c > 1] == []
    assert archived
    # What an archive returned and no delete removed is archived still, and
    # the archived and active messages make up the log.
    still = [m.content for m in seen["still archived"]]
    assert set(archived) & set(final) == set(still)
    assert still + [m.content for m in seen["active"]] == final
