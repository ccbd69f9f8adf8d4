"""Writers in threads and processes share one conversation; DDL races itself."""

from __future__ import annotations

import multiprocessing
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect

from chatledger import Message, MessageWindowChatMemory
from chatledger_sql import SqlChatMemoryRepository
from tests.sql.conftest import make_url, unique_table

PROCESSES = 4
THREADS_PER_PROCESS = 2
APPENDS = 12


def _writer_process(url: str, table: str, process: int) -> list[str]:
    """Run two writer threads in a fresh process; return their errors."""
    repository = SqlChatMemoryRepository.from_url(url, table_name=table)
    memory = MessageWindowChatMemory(repository, max_messages=10_000)
    errors: list[str] = []

    def write(writer: str) -> None:
        try:
            for counter in range(APPENDS):
                memory.add("shared", Message.user(f"{writer}:{counter}"))
        except Exception as exc:  # reported to the parent
            errors.append(repr(exc))

    threads = [
        threading.Thread(target=write, args=(f"p{process}t{t}",))
        for t in range(THREADS_PER_PROCESS)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    repository.close()
    return errors


@pytest.mark.parametrize("backend", ["sqlite", "postgresql", "mariadb"])
def test_processes_and_threads_lose_and_duplicate_nothing(
    backend: str, tmp_path: Path
) -> None:
    """4 processes x 2 threads append at once: every message once, in writer order."""
    url = make_url(backend, tmp_path)
    table = unique_table()
    repository = SqlChatMemoryRepository.from_url(url, table_name=table)
    try:
        context = multiprocessing.get_context("spawn")
        with context.Pool(PROCESSES) as pool:
            results = pool.starmap(
                _writer_process, [(url, table, p) for p in range(PROCESSES)]
            )
        assert [e for errors in results for e in errors] == []
        stored = [m.content or "" for m in repository.find_by_conversation_id("shared")]
        writers = [
            f"p{p}t{t}" for p in range(PROCESSES) for t in range(THREADS_PER_PROCESS)
        ]
        assert len(stored) == len(writers) * APPENDS
        assert len(set(stored)) == len(stored)
        for writer in writers:
            mine = [c for c in stored if c.startswith(f"{writer}:")]
            assert mine == [f"{writer}:{i}" for i in range(APPENDS)]
    finally:
        repository.drop_schema()
        repository.close()


@pytest.mark.parametrize("backend", ["sqlite", "duckdb", "postgresql", "mariadb"])
def test_concurrent_schema_creation_is_safe(backend: str, tmp_path: Path) -> None:
    """Six repositories creating the same new tables at once all succeed."""
    url = make_url(backend, tmp_path)
    table = unique_table()
    engine = create_engine(url, pool_size=8)
    errors: list[BaseException] = []
    start = threading.Barrier(6)

    def create() -> None:
        try:
            start.wait()
            # The first call creates the tables.
            SqlChatMemoryRepository(engine, table_name=table).find_conversation_ids()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=create) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert errors == []
        assert inspect(engine).has_table(table)
        again = SqlChatMemoryRepository(engine, table_name=table)  # idempotent
        again.save_all("c", [Message.user("x")])
        assert len(again.find_by_conversation_id("c")) == 1
    finally:
        SqlChatMemoryRepository(engine, table_name=table).drop_schema()
        engine.dispose()


@pytest.mark.parametrize(
    "delete",
    [
        lambda repository: repository.delete_by_conversation_id("c"),
        lambda repository: repository.save_many({"c": [], "d": [Message.user("d")]}),
    ],
    ids=["delete_by_conversation_id", "save_many"],
)
def test_an_append_racing_a_delete_keeps_its_row_and_messages_together(
    delete: Callable[[SqlChatMemoryRepository], None],
) -> None:
    """An append to a conversation with no row yet, committed while a delete
    of it runs (or ``save_many`` saves it empty), is either deleted whole or
    kept whole.

    PostgreSQL (READ COMMITTED): the delete's message delete did not see the
    append's messages, and its row delete, a statement later, saw the row;
    the messages outlived their row, and every later append met them at
    sequence 0. The append runs in a thread between the delete's two
    statements; it waits on the row the delete holds, or commits at once.
    """
    url = make_url("postgresql", Path("."))
    repository = SqlChatMemoryRepository.from_url(url, table_name=unique_table())
    other = SqlChatMemoryRepository.from_url(
        url, table_name=repository.tables.messages.name, create_schema=False
    )
    memory = MessageWindowChatMemory(other, max_messages=10)
    repository.create_schema()
    appended = threading.Thread(
        target=memory.add, args=("c", [Message.user("u"), Message.assistant("a")])
    )

    def append_meanwhile(_: str) -> None:
        appended.start()
        appended.join(timeout=1.0)

    repository.fault_points.on("after_delete", append_meanwhile)
    try:
        delete(repository)
        repository.fault_points.clear()
        appended.join()
        kept = [m.content for m in repository.find_by_conversation_id("c")]
        assert kept in ([], ["u", "a"])
        memory.add("c", Message.user("next"))
        after = [m.content for m in repository.find_by_conversation_id("c")]
        assert after == [*kept, "next"]
    finally:
        repository.fault_points.clear()
        repository.drop_schema()
        repository.close()
        other.close()
