"""What a write costs and that it is all-or-nothing, on real databases."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.ext.asyncio import create_async_engine

from chatledger import (
    ContentionError,
    Message,
    MessageWindowChatMemory,
)
from chatledger.faults import FAULT_POINTS
from chatledger.window import MessageWindow
from chatledger_sql import AsyncSqlChatMemoryRepository, SqlChatMemoryRepository
from chatledger_sql.dialects import (
    DialectMismatchWarning,
    MariaDBDialect,
    MySQLDialect,
    PostgresDialect,
    pipeline,
)
from chatledger_sql.dialects.base import RetryTransaction
from chatledger_sql.dialects.mysql import MAX_BLOCK_TEXT
from tests.backends import backend_url
from tests.conformance.test_async_sql import with_driver
from tests.sql.conftest import unique_table
from tests.sql.wire import PgWire
from tests.window_append_memory import AsyncWindowAppendMemory, WindowAppendMemory


class Counter:
    """Counts statements (one per round trip) and the rows SELECTs return."""

    def __init__(self, engine: Engine) -> None:
        self.statements: list[str] = []
        self.texts: list[str] = []
        self.rows_read = 0
        event.listen(engine, "before_cursor_execute", self._before)
        event.listen(engine, "after_cursor_execute", self._after)

    def _before(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        self.statements.append(statement.split(None, 1)[0].upper())
        self.texts.append(statement)

    def _after(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if statement.lstrip().upper().startswith("SELECT") and cursor.rowcount > 0:
            self.rows_read += cursor.rowcount

    def reset(self) -> None:
        self.statements.clear()
        self.texts.clear()
        self.rows_read = 0


#: The portable appends (the server-side routines' are in
#: tests/sql/test_append_routine.py): they still run every append a routine
#: leaves to them.
PORTABLE = PostgresDialect(server_append=False)
PORTABLE_MARIADB = MariaDBDialect(server_append=False)


@pytest.fixture
def postgres() -> Iterator[tuple[SqlChatMemoryRepository, PgWire]]:
    """A repository on PostgreSQL whose appends take the portable path."""
    engine = create_engine(backend_url("postgresql"))
    wire = PgWire(engine)
    repository = SqlChatMemoryRepository(
        engine, table_name=unique_table(), dialect=PORTABLE
    )
    yield repository, wire
    repository.drop_schema()
    engine.dispose()
    wire.close()


@pytest.mark.parametrize("window", [10, 1000])
def test_postgres_append_round_trips_are_few_and_flat(
    postgres: tuple[SqlChatMemoryRepository, PgWire], window: int
) -> None:
    """An append is 2 round trips, evicting or not, whatever the window size.

    ``BEGIN`` travels with the upsert that locks the row and reads its state,
    the known ids and the oldest rows; one statement with CTEs, which
    inserts, evicts and updates the row, travels with ``COMMIT``.
    """
    repository, wire = postgres
    memory = WindowAppendMemory(repository, max_messages=window)
    memory.add("c", [Message.system("S")])
    for turn in range(window // 2 + 2):  # fill the window, then overflow it
        memory.add("c", [Message.user(f"u{turn}"), Message.assistant(f"a{turn}")])
    wire.reset()
    memory.add("c", [Message.user("next"), Message.assistant("answer")])
    assert wire.round_trips() == [["BEGIN", "INSERT"], ["WITH", "COMMIT"]]
    # One row, the lock's: the few oldest rows come with it, never the history.
    assert wire.rows_returned() == 1

    memory.clear("c")
    memory.add("c", [Message.user("first")])
    wire.reset()
    memory.add("c", [Message.assistant("no eviction")])
    assert wire.round_trips() == [["BEGIN", "INSERT"], ["WITH", "COMMIT"]]
    assert wire.rows_returned() == 1
    assert [m.content for m in memory.get("c")] == ["first", "no eviction"]


def test_postgres_append_without_pipeline_mode(
    postgres: tuple[SqlChatMemoryRepository, PgWire], monkeypatch: Any
) -> None:
    """A driver without pipelines (psycopg2, libpq before 14): 4 round trips."""
    monkeypatch.setattr(pipeline, "_pipelines", lambda connection: False)
    repository, wire = postgres
    memory = WindowAppendMemory(repository, max_messages=4)
    for turn in range(3):
        memory.add("c", [Message.user(f"u{turn}"), Message.assistant(f"a{turn}")])
    wire.reset()
    memory.add("c", [Message.user("next")])
    assert wire.round_trips() == [["BEGIN"], ["INSERT"], ["WITH"], ["COMMIT"]]
    assert [m.content for m in memory.get("c")] == ["u2", "a2", "next"]


def test_postgres_pipelined_begin_keeps_the_isolation_level() -> None:
    """The BEGIN sent with the lock is the one psycopg would send itself."""
    engine = create_engine(backend_url("postgresql"), isolation_level="SERIALIZABLE")
    wire = PgWire(engine)
    repository = SqlChatMemoryRepository(
        engine, table_name=unique_table(), dialect=PORTABLE
    )
    try:
        memory = WindowAppendMemory(repository, max_messages=10)
        memory.add("c", [Message.user("first")])
        wire.reset()
        memory.add("c", [Message.assistant("second")])
        assert wire.round_trips() == [["BEGIN", "INSERT"], ["WITH", "COMMIT"]]
        sent = [body for direction, _, body in wire.messages() if direction == "F"]
        assert any("BEGIN ISOLATION LEVEL SERIALIZABLE" in body for body in sent)
        assert [m.content for m in memory.get("c")] == ["first", "second"]
    finally:
        repository.drop_schema()
        engine.dispose()
        wire.close()


@pytest.mark.parametrize(
    ("server_append", "trips"),
    [(False, [["BEGIN", "INSERT"], ["WITH", "COMMIT"]]), (True, [["SELECT"]])],
)
def test_postgres_async_append_is_pipelined_like_the_sync_one(
    server_append: bool, trips: list[list[str]]
) -> None:
    """psycopg's async connection: the same round trips per append as sync,
    two on the portable path, one through the server-side function."""
    engine = create_async_engine(with_driver(backend_url("postgresql"), "psycopg"))
    wire = PgWire(engine.sync_engine)
    repository = AsyncSqlChatMemoryRepository(
        engine,
        table_name=unique_table(),
        dialect=PostgresDialect(server_append=server_append),
    )

    async def scenario() -> None:
        memory = AsyncWindowAppendMemory(repository, max_messages=4)
        try:
            for turn in range(3):
                await memory.add(
                    "c", [Message.user(f"u{turn}"), Message.assistant(f"a{turn}")]
                )
            wire.reset()
            await memory.add("c", [Message.user("next")])
            assert wire.round_trips() == trips
            contents = [m.content for m in await memory.get("c")]
            assert contents == ["u2", "a2", "next"]
        finally:
            await repository.drop_schema()
            await engine.dispose()

    try:
        asyncio.run(scenario())
    finally:
        wire.close()


def test_postgres_connection_left_in_pipeline_mode_is_not_pooled() -> None:
    """A failed write whose connection is still in psycopg's pipeline mode
    (an exit from a pipeline interrupted with answers unread leaves it so)
    discards that connection: pooled again, it answered the next ``SELECT``
    with "This result object does not return rows"."""
    engine = create_engine(backend_url("postgresql"), pool_size=1, max_overflow=0)
    try:
        with engine.connect() as connection:
            write = pipeline.PipelinedWrite.start(connection)
            assert write is not None
            write.lock("SELECT 1 AS one", {})
            dbapi = connection.connection.driver_connection
            assert dbapi is not None
            left_open = dbapi.pipeline()
            left_open.__enter__()
            write.abort()
            assert connection.invalidated
        with engine.connect() as connection:
            assert connection.execute(text("SELECT 2")).scalar_one() == 2
    finally:
        engine.dispose()


def test_postgres_retried_append_is_a_noop(
    postgres: tuple[SqlChatMemoryRepository, PgWire],
) -> None:
    """Re-sending an append whose ids are stored writes nothing."""
    repository, wire = postgres
    memory = WindowAppendMemory(repository, max_messages=10)
    batch = [Message.user("u"), Message.assistant("a")]
    memory.add("c", batch)
    wire.reset()
    result = memory.add("c", batch)
    assert result.appended == []
    # Lock, look up the ids, end the transaction: no write.
    assert wire.round_trips() == [["BEGIN", "INSERT"], ["SELECT"], ["COMMIT"]]
    assert len(memory.get("c")) == 2


def _fresh_repository(backend: str, tmp_path: Any) -> SqlChatMemoryRepository:
    """A repository on a new table: a SQLite file here, or the backend's server."""
    url = (
        f"sqlite:///{tmp_path / 'chat.db'}"
        if backend == "sqlite"
        else backend_url(backend)
    )
    return SqlChatMemoryRepository.from_url(url, table_name=unique_table())


@pytest.mark.parametrize("point", [p for p in FAULT_POINTS if p != "after_commit"])
@pytest.mark.parametrize("backend", ["sqlite", "postgresql", "mariadb"])
def test_a_failed_write_changes_nothing(
    backend: str, point: str, tmp_path: Any
) -> None:
    """A failure at any step before commit leaves the conversation as it was."""
    repository = _fresh_repository(backend, tmp_path)
    try:
        memory = MessageWindowChatMemory(repository, max_messages=2)
        memory.add("c", [Message.system("S"), Message.user("U1")])
        before = memory.get("c")

        def fail(reached: str) -> None:
            raise RuntimeError(reached)

        repository.fault_points.on(point, fail)

        def write() -> object:
            batch = [Message.system("S2"), Message.user("U2")]
            if point == "after_delete":
                repository.save_all("c", [Message.user("replacement")])
                return None
            if point == "after_evict":  # a step of the window append only
                return repository.append_to_window("c", batch, memory.window)
            return memory.add("c", batch)

        with pytest.raises(RuntimeError, match=point):
            write()
        repository.fault_points.clear()
        assert memory.get("c") == before
        assert [m.id for m in memory.get("c")] == [m.id for m in before]
        memory.add("c", [Message.user("U3")])
        assert [m.content for m in memory.get("c")] == ["S", "U3"]
    finally:
        repository.drop_schema()
        repository.close()


def test_close_disposes_only_an_owned_engine(tmp_path: Any) -> None:
    """``close`` disposes an engine ``from_url`` made, twice is fine, others stay."""
    owned = SqlChatMemoryRepository.from_url(f"sqlite:///{tmp_path / 'a.db'}")
    owned.save_all("c", [Message.user("x")])
    owned.close()
    owned.close()
    engine = create_engine(f"sqlite:///{tmp_path / 'b.db'}")
    with SqlChatMemoryRepository(engine) as borrowed:
        borrowed.save_all("c", [Message.user("x")])
    assert SqlChatMemoryRepository(engine).find_conversation_ids() == ["c"]
    engine.dispose()


@pytest.mark.parametrize("backend", ["sqlite", "mysql"])
def test_append_statements_one_by_one(backend: str, tmp_path: Any) -> None:
    """SQLite: one upsert locks and probes. MySQLDialect: upsert, one probing read.

    MySQL keeps the two-step lock: a probing upsert takes shared locks on
    message rows under InnoDB and deadlocks concurrent writers; the plain
    SELECT after it reads the state, the known ids and the oldest rows.
    (MySQLDialect runs here on the MariaDB server, which speaks its SQL.)
    """
    url = (
        f"sqlite:///{tmp_path / 'chat.db'}"
        if backend == "sqlite"
        else backend_url("mariadb")
    )
    engine = create_engine(url)
    try:
        if backend == "sqlite":
            repository = SqlChatMemoryRepository(engine, table_name=unique_table())
        else:
            repository = SqlChatMemoryRepository(
                engine, table_name=unique_table(), dialect=MySQLDialect()
            )
            # MariaDB behind mysql:// is told, and warned of, on the first call:
            # here the tables' creation, which the count below leaves out.
            with pytest.warns(DialectMismatchWarning):
                repository.create_schema()
        counter = Counter(engine)
        window = MessageWindow(4)
        repository.append_to_window(
            "c", [Message.user("u0"), Message.assistant("a0")], window
        )
        counter.reset()
        repository.append_to_window(
            "c", [Message.user("u1"), Message.assistant("a1")], window
        )
        lock = ["INSERT"] if backend == "sqlite" else ["INSERT", "SELECT"]
        assert counter.statements == [*lock, "INSERT", "UPDATE"]
        counter.reset()
        repository.append_to_window("c", [Message.user("u2")], window)
        assert counter.statements[: len(lock)] == lock
        assert counter.statements[len(lock) :].count("DELETE") == 1
        # The oldest rows came with the lock: no SELECT to find what to evict.
        assert "SELECT" not in counter.statements[len(lock) :]
        assert counter.statements[-1] == "UPDATE"
        stored = repository.find_by_conversation_id("c")
        assert [m.content for m in stored] == ["u1", "a1", "u2"]
        repository.drop_schema()
    finally:
        engine.dispose()


def test_mariadb_append_is_two_compound_statements() -> None:
    """MariaDB: the upsert with the probing read, then every write, as two blocks.

    Each ``BEGIN NOT ATOMIC ... END`` is one round trip; the lock comes
    first in its block, and nothing reads with a lock on message rows.
    """
    engine = create_engine(backend_url("mariadb"))
    repository = SqlChatMemoryRepository(
        engine, table_name=unique_table(), dialect=PORTABLE_MARIADB
    )
    try:
        counter = Counter(engine)
        memory = WindowAppendMemory(repository, max_messages=5)
        memory.add("c", [Message.system("S"), Message.user("u0")])
        memory.add("c", [Message.assistant("a0")])
        counter.reset()
        memory.add("c", [Message.user("u1"), Message.assistant("a1")])
        assert counter.statements == ["BEGIN", "BEGIN"]
        lock, write = counter.texts
        assert _steps(lock) == ["INSERT", "SELECT"]
        assert "ON DUPLICATE KEY UPDATE" in lock.split("; ")[0]
        assert "FOR UPDATE" not in lock
        assert _steps(write) == ["INSERT", "UPDATE"]

        counter.reset()
        memory.add("c", [Message.system("S2"), Message.user("u2")])
        # A batch with a system message reads the stored ones (the rule
        # that merges them runs in core).
        assert counter.statements == ["BEGIN", "SELECT", "BEGIN"]
        # The old system message goes before the insert of the new one; the
        # oldest turn is evicted, and what left the window is recorded.
        assert _steps(counter.texts[2]) == [
            "DELETE",
            "INSERT",
            "DELETE",
            "INSERT",
            "UPDATE",
        ]
        assert "_evicted" in counter.texts[2].split("; ")[3]
        assert [m.content for m in memory.get("c")] == ["u1", "a1", "S2", "u2"]
    finally:
        repository.drop_schema()
        engine.dispose()


@pytest.mark.parametrize("driver", ["asyncmy", "aiomysql"])
def test_mariadb_async_append_is_two_compound_statements(driver: str) -> None:
    """The async drivers (``format`` parameters) send the same two blocks."""
    engine = create_async_engine(with_driver(backend_url("mariadb"), driver))
    counter = Counter(engine.sync_engine)
    repository = AsyncSqlChatMemoryRepository(
        engine, table_name=unique_table(), dialect=PORTABLE_MARIADB
    )

    async def scenario() -> None:
        memory = AsyncWindowAppendMemory(repository, max_messages=5)
        try:
            await memory.add("c", [Message.system("S"), Message.user("u0")])
            await memory.add("c", [Message.assistant("a0")])
            counter.reset()
            await memory.add("c", [Message.user("u1"), Message.assistant("a1")])
            assert counter.statements == ["BEGIN", "BEGIN"]
            lock, write = counter.texts
            assert _steps(lock) == ["INSERT", "SELECT"]
            assert _steps(write) == ["INSERT", "UPDATE"]
            counter.reset()
            await memory.add("c", [Message.user("u2"), Message.assistant("a2")])
            assert _steps(counter.texts[1]) == [
                "INSERT",
                "DELETE",
                "INSERT",
                "UPDATE",
            ]
            contents = [m.content for m in await memory.get("c")]
            assert contents == ["S", "u1", "a1", "u2", "a2"]
        finally:
            await repository.drop_schema()
            await engine.dispose()

    asyncio.run(scenario())


def _steps(block: str) -> list[str]:
    """The first keyword of each statement in a ``BEGIN NOT ATOMIC ... END``."""
    assert block.startswith("BEGIN NOT ATOMIC ")
    assert block.endswith("; END")
    body = block[len("BEGIN NOT ATOMIC ") : -len("; END")]
    return [part.split(None, 1)[0] for part in body.split("; ")]


def test_mariadb_large_batch_is_sent_statement_by_statement() -> None:
    """A batch past the compound statement's size goes one statement at a time."""
    engine = create_engine(backend_url("mariadb"))
    repository = SqlChatMemoryRepository(
        engine, table_name=unique_table(), dialect=PORTABLE_MARIADB
    )
    try:
        counter = Counter(engine)
        memory = WindowAppendMemory(repository, max_messages=4)
        memory.add("c", [Message.user("u0")])
        counter.reset()
        big = "x" * (MAX_BLOCK_TEXT // 2 + 1)
        memory.add("c", [Message.assistant(big), Message.user(big)])
        assert counter.statements == ["BEGIN", "INSERT", "UPDATE"]
        assert [m.content for m in memory.get("c")] == ["u0", big, big]
    finally:
        repository.drop_schema()
        engine.dispose()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql", "mariadb"])
def test_giving_up_under_contention_raises_contention_error(
    backend: str, tmp_path: Any
) -> None:
    """A write that keeps losing its race stops with ContentionError, unwritten."""
    repository = _fresh_repository(backend, tmp_path)
    try:
        memory = WindowAppendMemory(repository, max_messages=5)
        memory.add("busy", Message.user("before"))
        tries: list[str] = []

        def lose(point: str) -> None:
            tries.append(point)
            raise RetryTransaction

        repository.fault_points.on("after_lock", lose)
        with pytest.raises(ContentionError, match=r"'busy'.* 12 attempts") as caught:
            memory.add("busy", Message.user("after"))
        assert (caught.value.conversation_id, caught.value.attempts) == ("busy", 12)
        assert len(tries) == 12
        repository.fault_points.clear()
        assert [m.content for m in memory.get("busy")] == ["before"]
    finally:
        repository.drop_schema()
        repository.close()
