"""The record of evicted ids (chatledger.evicted_ids) in its SQL table.

What the conformance cases cannot see from outside: the rows themselves, their
sequence numbers and bound, a store created before the table existed, expiry,
and a retry that waited for the lock of the write that evicted its messages.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, func, inspect, select, text

from chatledger import (
    Message,
    MessageWindow,
    StoreNotFoundError,
    TokenWindow,
    ToolResponse,
)
from chatledger.evicted_ids import EVICTED_IDS_KEPT, EVICTED_IDS_TRIM_STEP
from chatledger_sql import (
    AsyncSqlChatMemoryRepository,
    MariaDBDialect,
    PostgresDialect,
    SqlChatMemoryRepository,
)
from chatledger_sql.dialects.append_routine import ROUTINE_SUFFIX
from tests.backends import backend_url
from tests.conformance.test_async_sql import with_driver
from tests.sql.conftest import make_url, unique_table
from tests.sql.test_ttl import expire
from tests.sql.test_writes import Counter
from tests.sql.wire import PgWire
from tests.window_append_memory import WindowAppendMemory


@pytest.fixture
def made(any_engine: Engine) -> Iterator[list[SqlChatMemoryRepository]]:
    """Repositories made in a test; their tables are dropped afterwards."""
    repositories: list[SqlChatMemoryRepository] = []
    yield repositories
    for repository in repositories:
        repository.drop_schema()


def make(
    engine: Engine, made: list[SqlChatMemoryRepository], **options: Any
) -> SqlChatMemoryRepository:
    options.setdefault("table_name", unique_table())
    repository = SqlChatMemoryRepository(engine, **options)
    made.append(repository)
    return repository


def _seq_by_id(
    table: Any, repository: SqlChatMemoryRepository, cid: str
) -> dict[str, int]:
    """A table's rows of one conversation: message id to sequence number."""
    c = table.c
    with repository.engine.connect() as connection:
        rows = connection.execute(
            select(c.message_id, c.seq).where(c.conversation_id == cid)
        )
        return {message_id: int(seq) for message_id, seq in rows}


def records(repository: SqlChatMemoryRepository, cid: str) -> dict[str, int]:
    """The conversation's rows of the record: message id to sequence number."""
    return _seq_by_id(repository.tables.evicted, repository, cid)


def seqs(repository: SqlChatMemoryRepository, cid: str) -> dict[str, int]:
    """The conversation's stored messages: message id to sequence number."""
    return _seq_by_id(repository.tables.messages, repository, cid)


def next_seq(repository: SqlChatMemoryRepository, cid: str) -> int:
    c = repository.tables.conversations.c
    with repository.engine.connect() as connection:
        query = select(c.next_seq).where(c.conversation_id == cid)
        return int(connection.execute(query).scalar_one())


def record_rows(repository: SqlChatMemoryRepository) -> int:
    with repository.engine.connect() as connection:
        query = select(func.count()).select_from(repository.tables.evicted)
        return int(connection.execute(query).scalar_one())


def length(message: Message) -> int:
    return len(message.content or "")


def tool_response(call: str) -> Message:
    """A tool response whose call is not stored."""
    return Message.tool(ToolResponse(id=call, name="f", data="{}"))


def test_each_id_that_left_the_window_is_recorded_with_its_number(
    any_engine: Engine, made: list[SqlChatMemoryRepository]
) -> None:
    """Evicted, replaced system and dropped-at-once ids, numbered as the rule says."""
    repository = make(any_engine, made)
    repository.create_schema()  # the tables are read directly before any call
    window = MessageWindow(3)
    batches = [
        [Message.system("S1"), Message.user("U1"), Message.assistant("A1")],
        [Message.user("U2"), Message.assistant("A2")],
        [Message.system("S2")],
        # Three turns at once, with S2 in a window of three: B0 leaves at once.
        [Message.user(f"B{i}") for i in range(3)],
    ]
    left: list[str] = []
    for batch in batches:
        before = seqs(repository, "c")
        first_free = next_seq(repository, "c") if before or left else 0
        result = repository.append_to_window("c", batch, window)
        left += result.evicted_ids
        recorded = records(repository, "c")
        for message_id in result.evicted_ids:
            if message_id in before:  # a stored message keeps its number
                assert recorded[message_id] == before[message_id]
            else:  # a new one takes a number after the rows just written
                assert recorded[message_id] >= first_free
        # Every number given out is used up: the next rows come after them.
        assert next_seq(repository, "c") > max(
            [*recorded.values(), *seqs(repository, "c").values()]
        )
    assert sorted(records(repository, "c")) == sorted(left)
    assert {"S1", "U1", "A1", "B0"} <= {
        m.content for batch in batches for m in batch if m.id in left
    }
    # Each of them is a no-op now, alone or among new messages.
    stored = repository.find_by_conversation_id("c")
    for batch in batches:
        assert repository.append_to_window("c", batch, window).appended == []
    assert repository.find_by_conversation_id("c") == stored


def test_the_record_keeps_the_newest_ids_within_its_bound(
    any_engine: Engine, made: list[SqlChatMemoryRepository]
) -> None:
    """Trimmed as it grows: the newest KEPT ids stay, at most KEPT + STEP rows."""
    repository = make(any_engine, made)
    window = MessageWindow(1)
    sent: list[Message] = []
    left: list[str] = []
    for turn in range(17):  # 100 ids leave the window per append
        batch = [Message.user(f"{turn}.{i}") for i in range(100)]
        sent += batch
        left += repository.append_to_window("c", batch, window).evicted_ids
        assert record_rows(repository) <= EVICTED_IDS_KEPT + EVICTED_IDS_TRIM_STEP
    recorded = records(repository, "c")
    # The newest KEPT sequence numbers stay; the message still in the window
    # holds one of them.
    newest = left[-(EVICTED_IDS_KEPT - 1) :]
    assert set(newest) <= set(recorded)
    assert set(recorded) <= set(left)
    assert len(recorded) < len(left)
    # The oldest kept id is still a no-op; one trimmed away is new again.
    kept = next(m for m in sent if m.id == newest[0])
    assert repository.append_to_window("c", [kept], window).appended == []
    forgotten = next(m for m in sent if m.id not in recorded)
    result = repository.append_to_window("c", [forgotten], window)
    assert [m.id for m in result.appended] == [forgotten.id]


def test_a_window_that_empties_the_conversation_keeps_the_record(
    any_engine: Engine, made: list[SqlChatMemoryRepository]
) -> None:
    """Empty, the conversation is not listed, and its evicted ids still count."""
    repository = make(any_engine, made)
    window = MessageWindow(1)
    # Only tool responses can all go: a history with no user message is kept
    # whole but for its leading tool responses (rules 3 and 4), and none of
    # these has its call.
    repository.save_all("c", [tool_response("c1")])
    late = tool_response("c2")
    result = repository.append_to_window("c", [late], window)
    assert len(result.evicted_ids) == 2
    assert result.evicted_ids[-1] == late.id
    assert repository.find_by_conversation_id("c") == []
    assert repository.find_conversation_ids() == []
    assert repository.find_conversation_ids_page().ids == []
    assert repository.count_messages("c") == 0
    assert repository.append_to_window("c", [late], window).appended == []
    assert set(records(repository, "c")) == set(result.evicted_ids)


def test_a_window_without_user_messages_keeps_them_all(
    any_engine: Engine, made: list[SqlChatMemoryRepository]
) -> None:
    """Larger than the window and no user message: one turn in progress, kept whole."""
    repository = make(any_engine, made)
    window = TokenWindow(5, token_counter=length)
    first = Message.assistant("ab")
    repository.append_to_window("c", [first], window)
    big = Message.assistant("x" * 10)
    result = repository.append_to_window("c", [big], window)
    assert result.evicted_ids == []
    assert [m.id for m in repository.find_by_conversation_id("c")] == [
        first.id,
        big.id,
    ]
    assert records(repository, "c") == {}


def test_save_all_save_many_and_delete_clear_the_record(
    any_engine: Engine, made: list[SqlChatMemoryRepository]
) -> None:
    repository = make(any_engine, made)
    window = MessageWindow(2)
    for cid in ("a", "b", "c", "d"):
        repository.append_to_window(cid, [Message.user("1"), Message.user("2")], window)
        repository.append_to_window(cid, [Message.user("3"), Message.user("4")], window)
        assert len(records(repository, cid)) == 2
    repository.save_all("a", [Message.user("new")])
    repository.save_many({"b": [Message.user("new")], "c": []})
    repository.delete_by_conversation_id("d")
    for cid in ("a", "b", "c", "d"):
        assert records(repository, cid) == {}
    assert record_rows(repository) == 0


def test_expiry_forgets_the_record_with_the_messages(
    any_engine: Engine, made: list[SqlChatMemoryRepository]
) -> None:
    """After expiry an evicted id is new again; purge removes the record too."""
    repository = make(any_engine, made, ttl=3600)
    window = MessageWindow(2)
    first = [Message.user("U1"), Message.assistant("A1")]
    for cid in ("c", "purged", "live"):
        repository.append_to_window(cid, first, window)
        repository.append_to_window(cid, [Message.user("U2")], window)
    expire(repository, "c")
    result = repository.append_to_window("c", first, window)
    assert [m.id for m in result.appended] == [m.id for m in first]
    assert records(repository, "c") == {}
    expire(repository, "purged")
    assert repository.purge_expired() == 1
    assert records(repository, "purged") == {}
    assert set(records(repository, "live")) == {m.id for m in first}


def test_a_schema_from_before_the_record_gets_it_on_first_use(
    any_engine: Engine, made: list[SqlChatMemoryRepository]
) -> None:
    """CREATE ... IF NOT EXISTS adds the table; a read-only opening adds nothing."""
    repository = make(any_engine, made)
    window = MessageWindow(2)
    first = [Message.user("U1"), Message.assistant("A1")]
    repository.append_to_window("c", first, window)
    evicted = repository.tables.evicted
    evicted.drop(any_engine)  # the store as the previous version made it
    name, schema = evicted.name, evicted.schema
    table = repository.tables.messages.name

    reader = SqlChatMemoryRepository(any_engine, table_name=table, create_schema=False)
    assert reader.find_conversation_ids() == ["c"]
    assert reader.find_by_conversation_id("c") == first
    assert reader.count_messages("c") == 2
    assert not inspect(any_engine).has_table(name, schema=schema)

    # Writes need the table: a clear error, and nothing written.
    for write in (
        lambda: reader.append_to_window("c", [Message.user("U2")], window),
        lambda: reader.save_all("c", [Message.user("other")]),
        lambda: reader.delete_by_conversation_id("c"),
    ):
        with pytest.raises(StoreNotFoundError, match="create_schema") as raised:
            write()
        assert f"table {name!r} does not exist" in str(raised.value)
    assert reader.find_by_conversation_id("c") == first
    assert not inspect(any_engine).has_table(name, schema=schema)

    upgraded = SqlChatMemoryRepository(any_engine, table_name=table)
    assert not inspect(any_engine).has_table(name, schema=schema)  # no I/O yet
    assert upgraded.find_by_conversation_id("c") == first
    assert inspect(any_engine).has_table(name, schema=schema)
    upgraded.append_to_window("c", [Message.user("U2"), Message.user("U3")], window)
    assert upgraded.append_to_window("c", first, window).appended == []
    assert set(records(upgraded, "c")) == {m.id for m in first}


@pytest.mark.parametrize(
    ("backend", "driver"),
    [
        ("sqlite", "aiosqlite"),
        ("postgresql", "asyncpg"),
        ("postgresql", "psycopg"),
        ("mariadb", "aiomysql"),
        ("mariadb", "asyncmy"),
    ],
)
def test_an_async_repository_adds_the_table_and_keeps_the_record(
    backend: str, driver: str, tmp_path: Path
) -> None:
    """The async twin: the table on first use, the record written and trimmed."""
    sync_url = make_url(backend, tmp_path)
    table = unique_table()
    engine = create_engine(sync_url)
    old = SqlChatMemoryRepository(engine, table_name=table)
    kept = Message.user("kept")
    old.save_all("c", [kept])
    old.tables.evicted.drop(engine)
    url = with_driver(sync_url, driver)
    left: list[str] = []

    async def use() -> None:
        repository = AsyncSqlChatMemoryRepository.from_url(url, table_name=table)
        try:
            window = MessageWindow(1)
            sent: dict[str, Message] = {}
            for turn in range(12):  # past EVICTED_IDS_KEPT: one trim
                batch = [Message.user(f"{turn}.{i}") for i in range(100)]
                sent.update((m.id, m) for m in batch)
                result = await repository.append_to_window("c", batch, window)
                left.extend(result.evicted_ids)
            late = sent[left[-(EVICTED_IDS_KEPT - 1)]]
            retried = await repository.append_to_window("c", [late], window)
            assert retried.appended == []
        finally:
            await repository.aclose()

    try:
        asyncio.run(use())
        assert inspect(engine).has_table(old.tables.evicted.name)
        recorded = records(old, "c")
        assert len(recorded) <= EVICTED_IDS_KEPT + EVICTED_IDS_TRIM_STEP
        assert set(left[-(EVICTED_IDS_KEPT - 1) :]) <= set(recorded)
        assert kept.id not in recorded  # trimmed: the oldest number of all
        assert set(recorded) <= set(left)
    finally:
        old.drop_schema()
        engine.dispose()


@pytest.mark.parametrize("server_append", [True, False])
def test_postgres_retry_after_eviction_is_one_probe_and_no_write(
    server_append: bool,
) -> None:
    """The lock's probe counts recorded ids: a late retry reads them, writes nothing.

    The server-side append records and probes inside its one call.
    """
    engine = create_engine(backend_url("postgresql"))
    wire = PgWire(engine)
    repository = SqlChatMemoryRepository(
        engine,
        table_name=unique_table(),
        dialect=PostgresDialect(server_append=server_append),
    )
    try:
        memory = WindowAppendMemory(repository, max_messages=2)
        first = [Message.user("U1"), Message.assistant("A1")]
        memory.add("c", first)
        wire.reset()
        evicting = memory.add("c", [Message.user("U2"), Message.assistant("A2")])
        assert evicting.evicted_ids == [m.id for m in first]
        # Recording what left rides on the write statement: no extra trip.
        if server_append:
            assert wire.round_trips() == [["SELECT"]]
        else:
            assert wire.round_trips() == [["BEGIN", "INSERT"], ["WITH", "COMMIT"]]
        wire.reset()
        assert memory.add("c", first).appended == []
        if server_append:
            assert wire.round_trips() == [["SELECT"]]
        else:
            assert wire.round_trips() == [["BEGIN", "INSERT"], ["SELECT"], ["COMMIT"]]
    finally:
        repository.drop_schema()
        engine.dispose()
        wire.close()


def _wait_for_lock_waiter(engine: Engine, table: str, timeout: float = 20.0) -> None:
    """Return once a session of the server waits for a row lock of ``table``."""
    if engine.dialect.name == "postgresql":
        query = text("SELECT count(*) FROM pg_locks WHERE NOT granted")
    else:
        # A lock wait inside a compound statement may not show in
        # innodb_trx: the upsert that has run for a while is waiting.
        query = text(
            "SELECT count(*) FROM information_schema.processlist "
            "WHERE info LIKE :upsert AND time_ms > 200"
        ).bindparams(upsert=f"INSERT INTO {table}_conversation %")
    deadline = time.monotonic() + timeout
    with engine.connect() as connection:
        while time.monotonic() < deadline:
            if connection.execute(query).scalar():
                return
            connection.rollback()
            time.sleep(0.01)
    raise AssertionError("no session waited for the conversation's lock")


@pytest.mark.parametrize("backend", ["postgresql", "mariadb"])
def test_a_retry_waiting_for_the_evicting_write_is_a_noop_at_once(
    backend: str,
) -> None:
    """A retry queued behind the write that evicted its message sees the record.

    The write stores nothing (its one message leaves the window at once) yet
    moves ``next_seq``, so a probe from before the write is known to be stale
    and the ids are looked up again: the retry is a no-op on its first
    attempt, not after a collision with the record's key.
    """
    engine = create_engine(backend_url(backend), pool_size=4)
    table = unique_table()
    writer = SqlChatMemoryRepository(engine, table_name=table)
    retrier = SqlChatMemoryRepository(engine, table_name=table)
    window = TokenWindow(5, token_counter=length)
    try:
        # A tool response without its call is the one message a window drops
        # at once: any other is kept, at least as the turn in progress.
        writer.save_all("c", [tool_response("c0")])
        orphan = tool_response("c1")
        committing = threading.Event()
        release = threading.Event()

        def hold(point: str) -> None:
            committing.set()
            assert release.wait(20)

        writer.fault_points.on("before_commit", hold)
        attempts: list[str] = []
        retrier.fault_points.on("after_lock", attempts.append)
        results: dict[str, Any] = {}

        def run(name: str, repository: SqlChatMemoryRepository) -> None:
            try:
                results[name] = repository.append_to_window("c", [orphan], window)
            except BaseException as error:  # reported below
                results[name] = error

        first = threading.Thread(target=run, args=("writer", writer))
        first.start()
        assert committing.wait(20)
        second = threading.Thread(target=run, args=("retrier", retrier))
        second.start()
        try:
            _wait_for_lock_waiter(engine, table)
        finally:
            release.set()
            first.join(30)
            second.join(30)
        assert [m.id for m in results["writer"].appended] == [orphan.id]
        assert orphan.id in results["writer"].evicted_ids
        assert results["retrier"].appended == []
        assert attempts == ["after_lock"]
        assert writer.find_by_conversation_id("c") == []
        assert orphan.id in records(writer, "c")
    finally:
        writer.drop_schema()
        engine.dispose()


@pytest.mark.parametrize("backend", ["postgresql", "mariadb"])
def test_clearing_the_record_rides_on_the_delete_of_the_messages(
    backend: str,
) -> None:
    """save_all, delete and an expired append clear both in one statement."""
    engine = create_engine(backend_url(backend))
    repository = SqlChatMemoryRepository(engine, table_name=unique_table(), ttl=60)
    repository.create_schema()  # its tables are named before any call
    counter = Counter(engine)
    window = MessageWindow(1)
    messages = repository.tables.messages.name
    evicted = repository.tables.evicted.name

    def fill() -> None:
        repository.append_to_window("c", [Message.user("1"), Message.user("2")], window)
        assert records(repository, "c")
        counter.reset()

    def expired_append() -> None:
        expire(repository, "c")
        repository.append_to_window("c", [Message.user("3")], window)

    writes: list[Callable[[], None]] = [
        lambda: repository.save_all("c", [Message.user("new")]),
        lambda: repository.delete_by_conversation_id("c"),
        expired_append,
    ]
    try:
        for write in writes:
            fill()
            write()
            if write is expired_append:
                # The server-side append clears both in its one call.
                called = [t for t in counter.texts if ROUTINE_SUFFIX in t]
                assert called, counter.texts
                assert not [t for t in counter.texts if "DELETE" in t]
            else:
                clearing = [t for t in counter.texts if f"DELETE FROM {evicted} " in t]
                assert len(clearing) == 1, counter.texts
                assert f"DELETE FROM {messages} " in clearing[0]
            assert records(repository, "c") == {}
    finally:
        repository.drop_schema()
        engine.dispose()


def test_mariadb_many_evicted_ids_are_sent_statement_by_statement() -> None:
    """Ids past the compound statement's size go in statements of their own."""
    engine = create_engine(backend_url("mariadb"))
    repository = SqlChatMemoryRepository(
        engine,
        table_name=unique_table(),
        dialect=MariaDBDialect(server_append=False),
    )
    try:
        counter = Counter(engine)
        window = MessageWindow(1)
        # 600 ids of 255 characters: past MAX_BLOCK_TEXT, with short texts.
        batch = [Message.user("x", id=f"{i:04d}".ljust(255, "i")) for i in range(600)]
        result = repository.append_to_window("c", batch, window)
        assert len(result.evicted_ids) == 599
        assert counter.statements[-3:] == ["INSERT", "INSERT", "UPDATE"]
        assert set(records(repository, "c")) == set(result.evicted_ids)
        assert repository.append_to_window("c", batch, window).appended == []
    finally:
        repository.drop_schema()
        engine.dispose()
