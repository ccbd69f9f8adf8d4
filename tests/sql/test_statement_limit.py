"""Statements a server or driver refuses for their size, and what is sent instead.

MariaDB drops the connection on a statement over ``max_allowed_packet``.

The repository reads the limit once and refuses a message whose row cannot
fit a statement with ``MessageTooLargeError`` before it writes anything,
instead of surfacing a "server has gone away" from the middle of a
transaction. A batch whose rows each fit but whose stored-procedure call
(the whole batch in one value) would not is sent a row per statement
instead, by every driver.

PostgreSQL takes at most 65,535 parameters in a statement (asyncpg 32,767),
which the client finds out only as it sends it: a log append of more
messages than its one statement names goes to the transaction instead.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine

from chatledger import Message, MessageTooLargeError, MessageWindowChatMemory
from chatledger.window import MessageWindow
from chatledger_sql import SqlChatMemoryRepository
from chatledger_sql.async_repository import AsyncSqlChatMemoryRepository
from chatledger_sql.dialects.append_routine import AppendRoutine
from chatledger_sql.rows import STATEMENT_OVERHEAD_BYTES
from tests.backends import backend_url
from tests.conformance.test_async_sql import with_driver
from tests.sql.conftest import unique_table


@pytest.fixture
def mariadb() -> Iterator[SqlChatMemoryRepository]:
    engine = create_engine(backend_url("mariadb"), pool_pre_ping=True)
    repository = SqlChatMemoryRepository(engine, table_name=unique_table())
    yield repository
    repository.drop_schema()
    engine.dispose()


def _limit(repository: SqlChatMemoryRepository) -> int:
    with repository.engine.connect() as connection:
        limit = connection.exec_driver_sql("SELECT @@max_allowed_packet").scalar()
    assert limit is not None
    return int(limit)


@pytest.mark.parametrize("how", ["append", "save_all"])
def test_mariadb_refuses_a_message_over_the_packet_limit_before_writing(
    mariadb: SqlChatMemoryRepository, how: str
) -> None:
    before = [Message.user("kept")]
    mariadb.save_all("c", before)
    # Quotes are escaped to two bytes on the wire: the estimate counts them.
    text = "'" * (_limit(mariadb) // 2)
    huge = Message.user(text)

    def write() -> None:
        if how == "append":
            mariadb.append_to_window("c", [huge], MessageWindow(10))
        else:
            mariadb.save_all("c", [*before, huge])

    with pytest.raises(MessageTooLargeError, match="max_allowed_packet") as caught:
        write()
    assert f"at most {_limit(mariadb)} " in str(caught.value)
    assert [m.id for m in mariadb.find_by_conversation_id("c")] == [before[0].id]


def test_mariadb_stores_a_message_just_under_the_packet_limit(
    mariadb: SqlChatMemoryRepository,
) -> None:
    size = _limit(mariadb) - STATEMENT_OVERHEAD_BYTES - 64
    text = "x" * size
    mariadb.append_to_window("c", [Message.user(text)], MessageWindow(10))
    assert mariadb.find_by_conversation_id("c")[0].content == text


def _batch_over(limit: int) -> list[Message]:
    """Three messages, each well under ``limit``, together over it."""
    return [Message.user(letter * (limit * 2 // 5)) for letter in "abc"]


def test_mariadb_appends_a_batch_over_the_packet_limit_a_row_at_a_time(
    mariadb: SqlChatMemoryRepository,
) -> None:
    before = [Message.user("kept")]
    mariadb.save_all("c", before)
    batch = _batch_over(_limit(mariadb))
    MessageWindowChatMemory(repository=mariadb, max_messages=20).add("c", batch)
    stored = mariadb.find_by_conversation_id("c")
    assert stored == [*before, *batch]
    assert [m.id for m in stored] == [m.id for m in [*before, *batch]]


def test_mariadb_saves_a_conversation_over_the_packet_limit(
    mariadb: SqlChatMemoryRepository,
) -> None:
    batch = [Message.user("kept"), *_batch_over(_limit(mariadb))]
    mariadb.save_all("c", batch)
    assert mariadb.find_by_conversation_id("c") == batch


@pytest.mark.parametrize("driver", ["asyncmy", "aiomysql"])
def test_mariadb_async_appends_a_batch_over_the_packet_limit(driver: str) -> None:
    async def scenario() -> None:
        repository = AsyncSqlChatMemoryRepository.from_url(
            with_driver(backend_url("mariadb"), driver), table_name=unique_table()
        )
        try:
            before = [Message.user("kept")]
            await repository.save_all("c", before)
            async with repository.engine.connect() as connection:
                found = await connection.exec_driver_sql("SELECT @@max_allowed_packet")
                limit = int(found.scalar_one())
            batch = _batch_over(limit)
            await repository.append_to_window("c", batch, MessageWindow(20))
            assert await repository.find_by_conversation_id("c") == [*before, *batch]
            huge = Message.user("x" * limit)
            with pytest.raises(MessageTooLargeError, match=f"at most {limit} "):
                await repository.append_to_window("c", [huge], MessageWindow(20))
            assert await repository.find_by_conversation_id("c") == [*before, *batch]
        finally:
            try:
                await repository.drop_schema()
            finally:
                await repository.aclose()

    asyncio.run(scenario())


def test_routine_call_size_counts_escapes_and_every_text_value() -> None:
    # Quotes are escaped to two bytes; "é" takes two in UTF-8.
    parameters = {"cid": "é", "counter": None, "batch": "'" * 1000}
    size = 2 + 2 * 1000
    assert AppendRoutine.fits(parameters, size + STATEMENT_OVERHEAD_BYTES)
    assert not AppendRoutine.fits(parameters, size + STATEMENT_OVERHEAD_BYTES - 1)
    assert AppendRoutine.fits(parameters, None)


#: More messages than a PostgreSQL statement has parameters for.
_PAST_PARAMETERS = 70_000


@pytest.mark.parametrize("driver", ["psycopg", "asyncpg"])
def test_postgresql_log_append_past_the_parameter_limit_is_stored_whole(
    driver: str,
) -> None:
    url = with_driver(backend_url("postgresql"), driver)
    batch = [Message.user(f"m{n}") for n in range(_PAST_PARAMETERS)]
    table = unique_table()
    if driver == "psycopg":
        repository = SqlChatMemoryRepository.from_url(url, table_name=table)
        try:
            repository.append_to_log("c", [Message.user("first")])
            assert len(repository.append_to_log("c", batch).appended) == len(batch)
            stored = repository.find_by_conversation_id("c")
        finally:
            repository.drop_schema()
            repository.close()
    else:

        async def scenario() -> list[Message]:
            repository = AsyncSqlChatMemoryRepository.from_url(url, table_name=table)
            try:
                await repository.append_to_log("c", [Message.user("first")])
                result = await repository.append_to_log("c", batch)
                assert len(result.appended) == len(batch)
                return await repository.find_by_conversation_id("c")
            finally:
                try:
                    await repository.drop_schema()
                finally:
                    await repository.aclose()

        stored = asyncio.run(scenario())
    assert [m.content for m in stored] == ["first", *(m.content for m in batch)]
