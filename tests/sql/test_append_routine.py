"""Server-side appends: one round trip, and the portable append's result.

PostgreSQL's function (``chatledger_sql.dialects.postgresql_routine``) and
MariaDB's procedure (``chatledger_sql.dialects.mariadb_routine``) are the
window rule in each server's language. Beside the conformance suite, which
checks the stored window against ``apply_window`` on random histories, these
tests run one random workload through a routine and through the portable
append and compare every row both leave in the three tables, and count what
an append sends.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, event, select, text
from sqlalchemy.ext.asyncio import create_async_engine

from chatledger import (
    Message,
    MessageWindow,
    TokenWindow,
    ToolCall,
    ToolResponse,
)
from chatledger.testing.window_tests import random_turns
from chatledger.tokens import estimate_tokens
from chatledger.window import Window
from chatledger_sql import (
    AsyncSqlChatMemoryRepository,
    PostgresDialect,
    SqlChatMemoryRepository,
)
from chatledger_sql.dialects import MariaDBDialect
from chatledger_sql.dialects.append_routine import (
    RETIRED_SUFFIXES,
    ROUTINE_SUFFIX,
    AppendRoutine,
)
from chatledger_sql.dialects.mariadb_routine import MariaDBAppendRoutine
from chatledger_sql.dialects.postgresql_routine import PostgresAppendRoutine
from chatledger_sql.schema import derived_name
from tests.backends import backend_url
from tests.conformance.test_async_sql import with_driver
from tests.sql.conftest import unique_table
from tests.sql.test_ttl import expire
from tests.sql.test_writes import Counter
from tests.sql.wire import PgWire
from tests.window_append_memory import AsyncWindowAppendMemory, WindowAppendMemory

_DIALECTS = {"postgresql": PostgresDialect, "mariadb": MariaDBDialect}
#: What one append through the routine sends, as SQLAlchemy sees it.
_CALL = {"postgresql": ["SELECT"], "mariadb": ["CALL"]}


@pytest.fixture(params=["postgresql", "mariadb"])
def engine(request: pytest.FixtureRequest) -> Iterator[Engine]:
    engine = create_engine(backend_url(request.param))
    yield engine
    engine.dispose()


def _kind(engine: Engine) -> str:
    """The server behind ``engine``: MariaDB here behind a ``mysql`` URL."""
    return "postgresql" if engine.dialect.name == "postgresql" else "mariadb"


def _repository(
    engine: Engine, *, server_append: bool = True, **options: Any
) -> SqlChatMemoryRepository:
    dialect = _DIALECTS[_kind(engine)](server_append=server_append)
    repository = SqlChatMemoryRepository(
        engine, table_name=unique_table(), dialect=dialect, **options
    )
    if options.get("create_schema", True):
        # The tests look for the routine, and read the tables, before any call.
        repository.create_schema()
    return repository


def _routine(repository: SqlChatMemoryRepository) -> AppendRoutine:
    assert repository.dialect is not None  # create_schema told it
    if repository.dialect.name == "postgresql":
        return PostgresAppendRoutine(repository.tables)
    return MariaDBAppendRoutine(repository.tables)


def _routine_calls(counter: Counter) -> int:
    return sum(ROUTINE_SUFFIX in statement for statement in counter.texts)


@pytest.mark.parametrize("window", [10, 1000])
def test_an_append_is_one_round_trip_whatever_the_window(window: int) -> None:
    """PostgreSQL, evicting or not, at any window size: one call, one row back."""
    engine = create_engine(backend_url("postgresql"))
    wire = PgWire(engine)
    repository = _repository(engine)
    try:
        memory = WindowAppendMemory(repository, max_messages=window)
        memory.add("c", [Message.system("S")])
        for turn in range(window // 2 + 2):  # fill the window, then overflow it
            memory.add("c", [Message.user(f"u{turn}"), Message.assistant(f"a{turn}")])
        wire.reset()
        result = memory.add("c", [Message.user("next"), Message.assistant("answer")])
        assert wire.round_trips() == [["SELECT"]]
        assert wire.rows_returned() == 1
        assert len(result.evicted_ids) == 2
        stored = memory.get("c")
        assert [m.content for m in stored[:1] + stored[-2:]] == ["S", "next", "answer"]
        assert len(stored) == window - 1  # S and whole turns: the cut snaps to a user

        memory.clear("c")
        memory.add("c", [Message.user("first")])
        wire.reset()
        memory.add("c", [Message.assistant("no eviction")])
        assert wire.round_trips() == [["SELECT"]]
        assert [m.content for m in memory.get("c")] == ["first", "no eviction"]
    finally:
        repository.drop_schema()
        wire.close()
        engine.dispose()


class PyMySQLCommands:
    """Every command PyMySQL sends (one round trip each), seen below SQLAlchemy.

    A cursor-execute listener would send the call back through SQLAlchemy's
    execute (see ``chatledger_sql.compiled.runs_raw``); this wraps the
    driver's own command method on each checkout instead.
    """

    def __init__(self, engine: Engine) -> None:
        self.sent: list[str] = []
        event.listen(engine, "checkout", self._wrap)

    def _wrap(self, dbapi: Any, record: Any, proxy: Any) -> None:
        if record.info.get("commands_wrapped"):
            return
        record.info["commands_wrapped"] = True
        original = dbapi._execute_command

        def execute(command: int, sql: Any) -> Any:
            text = sql.decode() if isinstance(sql, bytes) else str(sql)
            self.sent.append(text.split(None, 1)[0].upper())
            return original(command, sql)

        dbapi._execute_command = execute


@pytest.mark.parametrize("window", [10, 1000])
def test_mariadb_an_append_is_one_call_whatever_the_window(window: int) -> None:
    """MariaDB: one CALL, evicting or not, nothing before or after it."""
    repository = SqlChatMemoryRepository.from_url(
        backend_url("mariadb"), table_name=unique_table()
    )
    commands = PyMySQLCommands(repository.engine)
    try:
        memory = WindowAppendMemory(repository, max_messages=window)
        memory.add("c", [Message.system("S")])
        for turn in range(window // 2 + 2):
            memory.add("c", [Message.user(f"u{turn}"), Message.assistant(f"a{turn}")])
        commands.sent.clear()
        result = memory.add("c", [Message.user("next"), Message.assistant("answer")])
        assert commands.sent == ["CALL"]
        assert len(result.evicted_ids) == 2
        assert len(memory.get("c")) == window - 1
        # The procedure committed: a write from elsewhere is seen at once.
        commands.sent.clear()
        memory.add("c", [Message.user("more")])
        assert commands.sent == ["CALL"]
        assert memory.get("c")[-1].content == "more"
    finally:
        repository.drop_schema()
        repository.close()


def test_asyncpg_calls_it() -> None:
    """asyncpg binds the arrays and timestamps the call takes."""
    engine = create_async_engine(with_driver(backend_url("postgresql"), "asyncpg"))
    repository = AsyncSqlChatMemoryRepository(engine, table_name=unique_table())
    counter = Counter(engine.sync_engine)

    async def scenario() -> None:
        memory = AsyncWindowAppendMemory(repository, max_messages=2)
        try:
            await memory.add("c", [Message.user("u1"), Message.assistant("a1")])
            counter.reset()
            result = await memory.add("c", [Message.user("u2")])
            assert counter.statements == ["SELECT"]
            assert ROUTINE_SUFFIX in counter.texts[0]
            assert len(result.evicted_ids) == 2
            assert [m.content for m in await memory.get("c")] == ["u2"]
        finally:
            await repository.drop_schema()
            await engine.dispose()

    asyncio.run(scenario())


def test_what_it_declines_the_portable_append_writes(engine: Engine) -> None:
    """A system message, some known ids, a new token counter: portable, right."""
    repository = _repository(engine)
    counter = Counter(engine)
    try:
        window = MessageWindow(3)
        first = [Message.user("u1"), Message.assistant("a1")]
        repository.append_to_window("c", first, window)

        counter.reset()
        result = repository.append_to_window("c", [Message.system("S")], window)
        assert _routine_calls(counter) == 0  # rule 1 reads stored messages
        assert [m.content for m in result.appended] == ["S"]
        assert result.evicted_ids == []

        counter.reset()
        again = [first[1], Message.user("u2")]
        result = repository.append_to_window("c", again, window)
        assert _routine_calls(counter) == 1  # declined: a1 is stored
        assert [m.content for m in result.appended] == ["u2"]
        assert result.evicted_ids == [first[0].id, first[1].id]

        counter.reset()
        tokens = TokenWindow(1000, estimate_tokens)
        result = repository.append_to_window("c", [Message.assistant("a2")], tokens)
        assert _routine_calls(counter) == 1
        assert [m.content for m in repository.find_by_conversation_id("c")] == [
            "S",
            "u2",
            "a2",
        ]
        # Sizes are now stored under the token counter: the next one is taken.
        counter.reset()
        repository.append_to_window("c", [Message.user("u3")], tokens)
        assert counter.statements == _CALL[_kind(engine)]
    finally:
        repository.drop_schema()


def test_a_store_without_the_function_keeps_to_the_portable_append(
    engine: Engine,
) -> None:
    """A store made before the function existed: the first call fails, no more."""
    repository = _repository(engine)
    counter = Counter(engine)
    try:
        with engine.begin() as connection:
            connection.execute(text(_routine(repository).drop_sql()))
        window = MessageWindow(2)
        repository.append_to_window("c", [Message.user("u1")], window)
        repository.append_to_window("c", [Message.assistant("a1")], window)
        counter.reset()
        result = repository.append_to_window("c", [Message.user("u2")], window)
        assert _routine_calls(counter) == 0
        assert len(result.evicted_ids) == 2
        assert [m.content for m in repository.find_by_conversation_id("c")] == ["u2"]
        # create_schema makes it; a new repository calls it.
        repository.create_schema()
        again = SqlChatMemoryRepository(
            engine,
            table_name=repository.tables.messages.name,
            create_schema=False,
            dialect=repository.dialect,
        )
        again.append_to_window("c", [Message.assistant("a2")], window)
        counter.reset()
        again.append_to_window("c", [Message.user("u3")], window)
        assert counter.statements == _CALL[_kind(engine)]
    finally:
        repository.drop_schema()


def test_a_write_with_a_fault_handler_takes_the_stepped_path(engine: Engine) -> None:
    """Fault points name the portable append's steps: a handler makes it run."""
    repository = _repository(engine)
    reached: list[str] = []
    try:
        repository.fault_points.on("after_insert", reached.append)
        repository.append_to_window("c", [Message.user("u")], MessageWindow(5))
        assert reached == ["after_insert"]
    finally:
        repository.drop_schema()


def test_drop_schema_drops_the_function(engine: Engine) -> None:
    repository = _repository(engine)
    routine = _routine(repository)
    with engine.connect() as connection:
        assert connection.execute(text(routine.exists_sql())).scalar() is not None
    repository.drop_schema()
    with engine.connect() as connection:
        assert connection.execute(text(routine.exists_sql())).scalar() is None


# A routine by an earlier version's name: only its name and parameters matter.
_RETIRED_STAND_IN = {
    "postgresql": (
        "CREATE FUNCTION {name}(TEXT, TIMESTAMPTZ, TIMESTAMPTZ, BIGINT, TEXT, JSON) "
        "RETURNS INTEGER LANGUAGE sql AS 'SELECT 1'"
    ),
    "mariadb": "CREATE PROCEDURE {name}() BEGIN END",
}
_ROUTINE_COUNT = {
    "postgresql": "SELECT count(*) FROM pg_proc WHERE proname = :name",
    "mariadb": (
        "SELECT count(*) FROM information_schema.routines "
        "WHERE routine_schema = DATABASE() AND routine_name = :name"
    ),
}


def test_drop_schema_drops_the_routines_earlier_versions_made(engine: Engine) -> None:
    """A store that had an older routine loses it with the current one."""
    repository = _repository(engine)
    kind = _kind(engine)
    table = repository.tables.messages.name
    names = [derived_name(table, suffix) for suffix in RETIRED_SUFFIXES]

    def count(name: str) -> int:
        with engine.connect() as connection:
            found = connection.execute(text(_ROUTINE_COUNT[kind]), {"name": name})
            return int(found.scalar_one())

    try:
        with engine.begin() as connection:
            for name in names:
                connection.execute(text(_RETIRED_STAND_IN[kind].format(name=name)))
        assert [count(name) for name in names] == [1] * len(names)
        # Never called: appends take the current routine.
        counter = Counter(engine)
        repository.append_to_window("c", [Message.user("u")], MessageWindow(5))
        assert _routine_calls(counter) == 1
        assert not [t for t in counter.texts for s in RETIRED_SUFFIXES if s in t]
    finally:
        repository.drop_schema()
    assert [count(name) for name in names] == [0] * len(names)
    assert count(derived_name(table, ROUTINE_SUFFIX)) == 0


def test_drop_schema_sends_no_drop_of_a_missing_routine(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    """Only the routines found are dropped: asyncmy logs a warning for the
    server's note on each ``DROP ... IF EXISTS`` of a missing one."""
    repository = _repository(engine)
    counter = Counter(engine)
    repository.drop_schema()
    drops = [t for t in counter.texts if t.startswith("DROP") and "TABLE" not in t]
    assert drops == [_routine(repository).drop_sql()]
    if _kind(engine) == "mariadb":

        async def scenario() -> None:
            url = with_driver(backend_url("mariadb"), "asyncmy")
            async_engine = create_async_engine(url)
            repository = AsyncSqlChatMemoryRepository(
                async_engine, table_name=unique_table()
            )
            try:
                await repository.create_schema()
                await repository.drop_schema()
            finally:
                await async_engine.dispose()

        with caplog.at_level(logging.WARNING, logger="asyncmy"):
            asyncio.run(scenario())
        assert not [r for r in caplog.records if r.name == "asyncmy"]


def test_a_conversation_expired_is_forgotten_in_the_call(engine: Engine) -> None:
    """Its messages and evicted ids go; the new ones start a fresh window."""
    repository = _repository(engine, ttl=60)
    try:
        window = MessageWindow(2)
        old = [Message.system("S"), Message.user("u1"), Message.assistant("a1")]
        repository.append_to_window("c", old, window)
        repository.append_to_window("c", [Message.user("u2")], window)
        expire(repository, "c")
        batch = [old[1], Message.assistant("b")]
        result = repository.append_to_window("c", batch, window)
        assert [m.content for m in result.appended] == ["u1", "b"]
        assert result.evicted_ids == []
        assert [m.content for m in repository.find_by_conversation_id("c")] == [
            "u1",
            "b",
        ]
    finally:
        repository.drop_schema()


# -- the same rows as the portable append ---------------------------------------


def _tool_loop(rng: random.Random, turn: int) -> list[Message]:
    calls = [ToolCall(id=f"t{turn}-{i}", name="f", arguments="{}") for i in range(3)]
    batch: list[Message] = []
    for call in calls[: rng.randint(1, 3)]:
        batch.append(Message.assistant(None, tool_calls=[call]))
        batch.append(Message.tool(ToolResponse(id=call.id, name="f", data="ok")))
    return batch


def _workload(seed: int, agent: bool) -> list[tuple[list[Message], Window]]:
    """Random batches, each with the window it is appended under.

    Windows change now and then (a new token counter re-measures); some
    batches are long (evicting hundreds at once, so the record of evicted
    ids is trimmed), some are retries of a batch already sent, whole or in
    part, and some open with a tool response. An empty batch stands for
    clearing the conversation. With ``agent`` no batch holds a user message:
    each conversation is one turn in progress, kept whole.
    """
    rng = random.Random(seed)
    windows: list[Window] = [
        MessageWindow(rng.randint(1, 8)),
        TokenWindow(rng.randint(10, 90), estimate_tokens),
        TokenWindow(rng.randint(10, 90), estimate_tokens, counter_id="other"),
    ]
    window = windows[0]
    sent: list[list[Message]] = []
    workload: list[tuple[list[Message], Window]] = []
    bulk = Message.assistant if agent else Message.user
    for turn, batch in enumerate(random_turns(rng, 120, agent=agent)):
        if rng.random() < 0.05:
            window = rng.choice(windows)
        roll = rng.random()
        if roll < 0.04:
            size = rng.randint(200, 400)
            batch = [bulk(f"bulk {turn}.{i}") for i in range(size)]
        elif roll < 0.08 and sent:
            batch = list(rng.choice(sent))
        elif roll < 0.12 and sent:
            batch = [rng.choice(rng.choice(sent)), *batch]
        elif roll < 0.18:
            batch = [*_tool_loop(rng, turn)[1:], *batch]
        elif roll < 0.22:
            workload.append(([], window))
            batch = [*_tool_loop(rng, turn)[1:], *batch]
        sent.append(batch)
        workload.append((batch, window))
    return workload


def _state(repository: SqlChatMemoryRepository) -> dict[str, Any]:
    """Every row of the three tables but the clocks and the lock counter."""
    tables = repository.tables
    m, c, e = tables.messages.c, tables.conversations.c, tables.evicted.c
    with repository.engine.connect() as connection:
        return {
            "messages": connection.execute(
                select(m.seq, m.message_id, m.role, m.content, m.payload, m.weight)
                .where(m.conversation_id == "c")
                .order_by(m.seq)
            ).all(),
            "conversation": connection.execute(
                select(
                    c.next_seq,
                    c.system_count,
                    c.other_count,
                    c.weight_counter,
                    c.system_weight,
                    c.other_weight,
                ).where(c.conversation_id == "c")
            ).all(),
            "evicted": connection.execute(
                select(e.message_id, e.seq)
                .where(e.conversation_id == "c")
                .order_by(e.seq, e.message_id)
            ).all(),
        }


@pytest.mark.parametrize(
    ("seed", "agent"), [(0, False), (1, False), (2, False), (3, False), (4, True)]
)
def test_it_leaves_the_rows_the_portable_append_leaves(
    engine: Engine, seed: int, agent: bool
) -> None:
    """Message rows, conversation row, evicted-id record and results: equal."""
    server = _repository(engine)
    portable = _repository(engine, server_append=False)
    counter = Counter(engine)
    try:
        calls = 0
        for batch, window in _workload(seed, agent):
            if not batch:
                server.delete_by_conversation_id("c")
                portable.delete_by_conversation_id("c")
                continue
            counter.reset()
            by_server = server.append_to_window("c", batch, window)
            calls += _routine_calls(counter)
            by_portable = portable.append_to_window("c", batch, window)
            assert [m.id for m in by_server.appended] == [
                m.id for m in by_portable.appended
            ]
            assert by_server.evicted_ids == by_portable.evicted_ids
            assert _state(server) == _state(portable)
        assert _state(server)["evicted"]  # the record was written and trimmed
        assert calls > 60  # most appends went through the function
    finally:
        server.drop_schema()
        portable.drop_schema()
