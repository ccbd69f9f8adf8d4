"""MariaDB's append procedure evicting more ids than ``group_concat_max_len`` holds.

The procedure answers the evicted ids as one JSON array, built by an
aggregate that MariaDB caps at the session's ``group_concat_max_len`` (1 MiB
unless set). A window append evicting thousands of long ids crosses it; the
procedure lifts the cap for its own statements and gives the caller's value
back before it answers, on error too.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import StaticPool

from chatledger import Message, MessageWindow
from chatledger_sql import AsyncSqlChatMemoryRepository, SqlChatMemoryRepository
from chatledger_sql.dialects.append_routine import ROUTINE_SUFFIX
from chatledger_sql.dialects.mariadb_routine import MariaDBAppendRoutine
from tests.backends import backend_url
from tests.conformance.test_async_sql import with_driver
from tests.sql.conftest import unique_table
from tests.sql.test_writes import Counter

#: Messages in each of the two appends: 5,000 ids of 250 characters are about
#: 1.25 MiB as a JSON array, past the 1 MiB default in both the stored rows
#: evicted and the new ones dropped at once.
_COUNT = 5_000
#: The caller's own cap, set on the connection: the procedure leaves it so.
_CALLERS_CAP = 4096


def _ids(prefix: str) -> list[str]:
    return [f"{prefix}-{i:05d}-".ljust(250, "x") for i in range(_COUNT)]


def _batch(prefix: str) -> list[Message]:
    return [Message.user(f"{prefix} {i}", id=id) for i, id in enumerate(_ids(prefix))]


def _set_callers_cap(dbapi: Any, record: Any) -> None:
    cursor = dbapi.cursor()
    cursor.execute(f"SET SESSION group_concat_max_len = {_CALLERS_CAP}")
    cursor.close()


def _session_cap(engine: Engine) -> int:
    with engine.connect() as connection:
        found = connection.execute(text("SELECT @@SESSION.group_concat_max_len"))
        return int(found.scalar_one())


@pytest.fixture
def engine() -> Iterator[Engine]:
    # One connection: what the procedure leaves in the session, the next
    # statement sees.
    engine = create_engine(backend_url("mariadb"), poolclass=StaticPool)
    event.listen(engine, "connect", _set_callers_cap)
    yield engine
    engine.dispose()


def test_a_window_append_returns_every_evicted_id_past_the_cap(engine: Engine) -> None:
    """Thousands of long ids evicted at once: all of them, in order, one CALL."""
    repository = SqlChatMemoryRepository(engine, table_name=unique_table())
    repository.create_schema()
    counter = Counter(engine)
    try:
        first = _batch("old")
        repository.append_to_window("c", first, MessageWindow(2 * _COUNT))
        second = _batch("new")
        counter.reset()
        result = repository.append_to_window("c", second, MessageWindow(3))
        assert counter.statements == ["CALL"]
        assert ROUTINE_SUFFIX in counter.texts[0]
        assert result.evicted_ids == [m.id for m in first + second[:-3]]
        assert [m.id for m in result.appended] == [m.id for m in second]
        stored = repository.find_by_conversation_id("c")
        assert [m.id for m in stored] == [m.id for m in second[-3:]]
        assert _session_cap(engine) == _CALLERS_CAP
    finally:
        repository.drop_schema()


def test_evicted_ids_longer_than_a_packet_are_left_to_the_portable_append(
    engine: Engine,
) -> None:
    """No string outgrows max_allowed_packet: the CALL declines, nothing is cut."""
    repository = SqlChatMemoryRepository(engine, table_name=unique_table())
    repository.create_schema()
    tables = repository.tables
    m, c = tables.messages, tables.conversations
    try:
        with engine.connect() as connection:
            packet = connection.execute(text("SELECT @@max_allowed_packet"))
            stored = int(packet.scalar_one()) // 250 + 1000
        if stored > 200_000:
            pytest.skip("max_allowed_packet is too large to fill here")
        first = Message.user("first")
        repository.append_to_window("c", [first], MessageWindow(10**9))
        # Rows made by the server itself: a Python client would take minutes.
        with engine.begin() as connection:
            connection.execute(
                text(
                    f"INSERT INTO {m.name} (conversation_id, seq, message_id, role, "
                    "content, payload, weight, created_at) "
                    "SELECT m.conversation_id, s.seq, "
                    "concat(lpad(s.seq, 8, '0'), repeat('x', 242)), m.role, "
                    "m.content, m.payload, m.weight, m.created_at "
                    f"FROM {m.name} AS m JOIN seq_1_to_{stored} AS s "
                    "WHERE m.conversation_id = 'c' AND m.seq = 0"
                )
            )
            connection.execute(
                text(
                    f"UPDATE {c.name} SET next_seq = :n, other_count = :n "
                    "WHERE conversation_id = 'c'"
                ),
                {"n": stored + 1},
            )
        counter = Counter(engine)
        last = Message.user("last")
        result = repository.append_to_window("c", [last], MessageWindow(1))
        assert counter.statements[0] == "CALL"
        assert len(counter.statements) > 1  # declined: the portable append ran
        expected = [f"{seq:08d}".ljust(250, "x") for seq in range(1, stored + 1)]
        assert result.evicted_ids == [first.id, *expected]
        assert [m.id for m in repository.find_by_conversation_id("c")] == [last.id]
        assert _session_cap(engine) == _CALLERS_CAP
    finally:
        repository.drop_schema()


def test_the_callers_cap_is_given_back_when_the_procedure_fails(
    engine: Engine,
) -> None:
    """An error inside the procedure rolls back and leaves the session as it was."""
    repository = SqlChatMemoryRepository(engine, table_name=unique_table())
    repository.create_schema()
    try:
        routine = MariaDBAppendRoutine(repository.tables)
        now = datetime.now(UTC)
        parameters, _ = routine.parameters(
            "c", [Message.user("u")], MessageWindow(3), now, None
        )
        # No id: the procedure fails on the insert, after lifting the cap.
        parameters["batch"] = parameters["batch"].replace('"id":', '"no_id":')
        with pytest.raises(DBAPIError), engine.connect() as connection:
            connection.execute(routine.call, parameters)
        assert _session_cap(engine) == _CALLERS_CAP
        assert repository.find_by_conversation_id("c") == []
    finally:
        repository.drop_schema()


@pytest.mark.parametrize("driver", ["asyncmy", "aiomysql"])
def test_an_async_window_append_returns_every_evicted_id_past_the_cap(
    driver: str,
) -> None:
    """The same through the async repository."""
    engine = create_async_engine(
        with_driver(backend_url("mariadb"), driver), poolclass=StaticPool
    )
    repository = AsyncSqlChatMemoryRepository(engine, table_name=unique_table())
    counter = Counter(engine.sync_engine)

    async def scenario() -> None:
        try:
            await repository.create_schema()
            first = _batch("old")
            await repository.append_to_window("c", first, MessageWindow(2 * _COUNT))
            second = _batch("new")
            counter.reset()
            result = await repository.append_to_window("c", second, MessageWindow(3))
            assert counter.statements == ["CALL"]
            assert result.evicted_ids == [m.id for m in first + second[:-3]]
            stored = await repository.find_by_conversation_id("c")
            assert [m.id for m in stored] == [m.id for m in second[-3:]]
        finally:
            await repository.drop_schema()
            await engine.dispose()

    asyncio.run(scenario())
