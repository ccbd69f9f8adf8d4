"""MariaDB's log append and reads run as statements prepared once per connection.

Sync (PyMySQL) and async (asyncmy: its log append alone goes to the driver's
connection).

The compound statement of a log append (``MariaDBDialect.log_append_statement``)
is prepared on a connection's first append of a batch size and run with
``EXECUTE ... USING`` after; a connection whose server forgot it prepares it
again, and a server that refuses to prepare gets the statement itself. Every
way, each message is stored once and in order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import bindparam, text

from chatledger import Message, StoreNotFoundError
from chatledger_sql import AsyncSqlChatMemoryRepository, SqlChatMemoryRepository
from chatledger_sql.compiled import CompiledStatement, fetch_all
from chatledger_sql.dialects.prepared import PreparedStatement
from tests.backends import backend_url
from tests.conformance.test_async_sql import with_driver
from tests.sql.conftest import unique_table


@pytest.fixture
def repository() -> Iterator[SqlChatMemoryRepository]:
    """A MariaDB repository on one pooled connection."""
    made = SqlChatMemoryRepository.from_url(
        backend_url("mariadb"),
        table_name=unique_table(),
        engine_options={"pool_size": 1, "max_overflow": 0},
    )
    try:
        yield made
    finally:
        made.drop_schema()
        made.close()


def _on_connection(repository: SqlChatMemoryRepository, sql: str) -> list[Any]:
    """Run ``sql`` on the repository's one pooled connection."""
    connection = repository.engine.raw_connection()
    try:
        cursor = connection.cursor()
        cursor.execute(sql)
        return list(cursor.fetchall())
    finally:
        connection.close()


def _status(repository: SqlChatMemoryRepository) -> dict[str, int]:
    """The connection's counts of PREPARE and EXECUTE statements."""
    rows = _on_connection(
        repository,
        "SHOW SESSION STATUS WHERE Variable_name IN "
        "('Com_prepare_sql', 'Com_execute_sql')",
    )
    return {name: int(value) for name, value in rows}


def _prepared_names(repository: SqlChatMemoryRepository) -> list[str]:
    return [
        statement.name
        for statement in repository._raw_statements.values()
        if isinstance(statement, PreparedStatement)
    ]


def _turn(index: int) -> list[Message]:
    return [Message.user(f"u{index}"), Message.assistant(f"a{index}")]


def _contents(repository: SqlChatMemoryRepository, cid: str) -> list[str | None]:
    return [m.content for m in repository.find_by_conversation_id(cid)]


def test_appends_prepare_once_then_execute(
    repository: SqlChatMemoryRepository,
) -> None:
    repository.append_to_log("c", _turn(0))
    before = _status(repository)
    for index in range(1, 6):
        repository.append_to_log("c", _turn(index))
    after = _status(repository)
    assert after["Com_prepare_sql"] == before["Com_prepare_sql"]
    assert after["Com_execute_sql"] - before["Com_execute_sql"] == 5
    assert _contents(repository, "c") == [
        text for index in range(6) for text in (f"u{index}", f"a{index}")
    ]


def test_a_forgotten_statement_is_prepared_again(
    repository: SqlChatMemoryRepository,
) -> None:
    repository.append_to_log("c", _turn(0))
    (name,) = _prepared_names(repository)
    _on_connection(repository, f"DEALLOCATE PREPARE {name}")
    before = _status(repository)
    result = repository.append_to_log("c", _turn(1))
    after = _status(repository)
    assert [m.content for m in result.appended] == ["u1", "a1"]
    assert after["Com_prepare_sql"] - before["Com_prepare_sql"] == 1
    assert _contents(repository, "c") == ["u0", "a0", "u1", "a1"]
    # Resent ids are still recognised through the prepared statement.
    again = repository.append_to_log("c", repository.find_by_conversation_id("c"))
    assert again.appended == []
    assert _contents(repository, "c") == ["u0", "a0", "u1", "a1"]


def test_a_server_that_refuses_to_prepare_gets_the_statement(
    repository: SqlChatMemoryRepository,
) -> None:
    (limit,) = _on_connection(repository, "SELECT @@GLOBAL.max_prepared_stmt_count")
    _on_connection(repository, "SET GLOBAL max_prepared_stmt_count = 0")
    try:
        for index in range(3):
            result = repository.append_to_log("c", _turn(index))
            assert len(result.appended) == 2
        status = _status(repository)
    finally:
        _on_connection(repository, f"SET GLOBAL max_prepared_stmt_count = {limit[0]}")
    assert _contents(repository, "c") == ["u0", "a0", "u1", "a1", "u2", "a2"]
    # Refused once, then the statement itself: no EXECUTE ran.
    assert status["Com_execute_sql"] == 0


def test_a_large_batch_is_not_prepared(repository: SqlChatMemoryRepository) -> None:
    batch = [Message.user(f"m{index}") for index in range(9)]
    before = _status(repository)
    repository.append_to_log("c", batch)
    after = _status(repository)
    assert after == before
    assert _contents(repository, "c") == [f"m{index}" for index in range(9)]


def test_reads_are_prepared_once_then_executed(
    repository: SqlChatMemoryRepository,
) -> None:
    repository.append_to_log("c", _turn(0))
    assert _contents(repository, "c") == ["u0", "a0"]
    before = _status(repository)
    for _ in range(4):
        assert _contents(repository, "c") == ["u0", "a0"]
    after = _status(repository)
    assert after["Com_prepare_sql"] == before["Com_prepare_sql"]
    assert after["Com_execute_sql"] - before["Com_execute_sql"] == 4


def test_a_question_mark_of_the_text_is_never_taken_for_a_placeholder(
    repository: SqlChatMemoryRepository,
) -> None:
    statement = text("SELECT '?' AS mark, :word AS word").bindparams(bindparam("word"))
    with repository.engine.connect() as connection:
        compiled = PreparedStatement(CompiledStatement(connection.dialect, [statement]))
        rows = fetch_all(connection, compiled, {"word": "hi"}, autocommit=False)
    assert [tuple(row) for row in rows] == [("?", "hi")]
    assert _status(repository)["Com_prepare_sql"] == 0


def test_a_missing_table_fails_as_before_and_is_prepared_once_made(
    repository: SqlChatMemoryRepository,
) -> None:
    repository.append_to_log("c", _turn(0))
    repository.drop_schema()
    with pytest.raises(StoreNotFoundError):
        repository.append_to_log("c", _turn(1))
    repository.create_schema()
    before = _status(repository)
    repository.append_to_log("c", _turn(2))
    after = _status(repository)
    assert after["Com_execute_sql"] - before["Com_execute_sql"] == 1
    assert _contents(repository, "c") == ["u2", "a2"]


# -- asyncmy: the log append goes to the driver's connection, prepared --------


@pytest.fixture
def async_repository() -> Iterator[AsyncSqlChatMemoryRepository]:
    """An asyncmy repository on one pooled connection, its tables made."""
    made = AsyncSqlChatMemoryRepository.from_url(
        with_driver(backend_url("mariadb"), "asyncmy"),
        table_name=unique_table(),
        engine_options={"pool_size": 1, "max_overflow": 0},
    )
    asyncio.run(made.create_schema())
    try:
        yield made
    finally:

        async def drop() -> None:
            await made.drop_schema()
            await made.aclose()

        asyncio.run(drop())


async def _async_status(repository: AsyncSqlChatMemoryRepository) -> dict[str, int]:
    """The one pooled connection's counts of PREPARE, EXECUTE and ROLLBACK
    (this read ends with a ROLLBACK of its own, counted by the next)."""
    async with repository.engine.connect() as connection:
        found = await connection.exec_driver_sql(
            "SHOW SESSION STATUS WHERE Variable_name IN "
            "('Com_prepare_sql', 'Com_execute_sql', 'Com_rollback')"
        )
        rows: list[Any] = list(found.all())
    return {str(name): int(value) for name, value in rows}


def test_async_appends_are_prepared_once_and_end_with_nothing_more(
    async_repository: AsyncSqlChatMemoryRepository,
) -> None:
    async def scenario() -> tuple[dict[str, int], dict[str, int], list[str | None]]:
        await async_repository.append_to_log("c", _turn(0))
        before = await _async_status(async_repository)
        for index in range(1, 6):
            await async_repository.append_to_log("c", _turn(index))
        after = await _async_status(async_repository)
        stored = await async_repository.find_by_conversation_id("c")
        return before, after, [m.content for m in stored]

    before, after, contents = asyncio.run(scenario())
    assert after["Com_prepare_sql"] == before["Com_prepare_sql"]
    assert after["Com_execute_sql"] - before["Com_execute_sql"] == 5
    # The status read's own ROLLBACK alone: none after an append.
    assert after["Com_rollback"] - before["Com_rollback"] == 1
    assert contents == [
        text for index in range(6) for text in (f"u{index}", f"a{index}")
    ]


def test_async_a_forgotten_statement_is_prepared_again_and_a_retry_stores_nothing(
    async_repository: AsyncSqlChatMemoryRepository,
) -> None:
    async def scenario() -> None:
        await async_repository.append_to_log("c", _turn(0))
        async with async_repository.engine.connect() as connection:
            raw = await connection.get_raw_connection()
            prepared = raw.info["chatledger.prepared"]
            (name,) = prepared
            await connection.exec_driver_sql(f"DEALLOCATE PREPARE {name}")
        before = await _async_status(async_repository)
        result = await async_repository.append_to_log("c", _turn(1))
        after = await _async_status(async_repository)
        assert [m.content for m in result.appended] == ["u1", "a1"]
        assert after["Com_prepare_sql"] - before["Com_prepare_sql"] == 1
        stored = await async_repository.find_by_conversation_id("c")
        again = await async_repository.append_to_log("c", stored)
        assert again.appended == []
        assert [
            m.content for m in await async_repository.find_by_conversation_id("c")
        ] == [
            "u0",
            "a0",
            "u1",
            "a1",
        ]

    asyncio.run(scenario())


def test_async_a_server_that_refuses_to_prepare_gets_the_statement(
    async_repository: AsyncSqlChatMemoryRepository,
    repository: SqlChatMemoryRepository,
) -> None:
    (limit,) = _on_connection(repository, "SELECT @@GLOBAL.max_prepared_stmt_count")

    async def scenario() -> dict[str, int]:
        for index in range(3):
            result = await async_repository.append_to_log("c", _turn(index))
            assert len(result.appended) == 2
        return await _async_status(async_repository)

    _on_connection(repository, "SET GLOBAL max_prepared_stmt_count = 0")
    try:
        status = asyncio.run(scenario())
    finally:
        _on_connection(repository, f"SET GLOBAL max_prepared_stmt_count = {limit[0]}")
    assert status["Com_execute_sql"] == 0

    async def contents() -> list[str | None]:
        return [m.content for m in await async_repository.find_by_conversation_id("c")]

    assert asyncio.run(contents()) == ["u0", "a0", "u1", "a1", "u2", "a2"]


def test_async_reads_are_prepared_once_and_end_their_snapshot_themselves(
    async_repository: AsyncSqlChatMemoryRepository,
) -> None:
    """One statement a read, its ROLLBACK inside it: none after it."""

    async def scenario() -> tuple[dict[str, int], dict[str, int]]:
        await async_repository.append_to_log("c", _turn(0))
        assert [m.content for m in await async_repository.find_by_conversation_id("c")]
        before = await _async_status(async_repository)
        for _ in range(4):
            stored = await async_repository.find_by_conversation_id("c")
            assert [m.content for m in stored] == ["u0", "a0"]
        return before, await _async_status(async_repository)

    before, after = asyncio.run(scenario())
    assert after["Com_prepare_sql"] == before["Com_prepare_sql"]
    assert after["Com_execute_sql"] - before["Com_execute_sql"] == 4
    # Each read's own ROLLBACK, and the status read's.
    assert after["Com_rollback"] - before["Com_rollback"] == 4 + 1


def test_async_a_read_sees_what_another_writer_committed_since(
    async_repository: AsyncSqlChatMemoryRepository,
) -> None:
    """No read leaves an InnoDB snapshot open on the pooled connection."""
    writer = SqlChatMemoryRepository.from_url(
        backend_url("mariadb"),
        table_name=async_repository.tables.messages.name,
        create_schema=False,
    )

    async def contents() -> list[str | None]:
        return [m.content for m in await async_repository.find_by_conversation_id("c")]

    try:
        writer.append_to_log("c", _turn(0))
        assert asyncio.run(contents()) == ["u0", "a0"]
        writer.append_to_log("c", _turn(1))
        assert asyncio.run(contents()) == ["u0", "a0", "u1", "a1"]
    finally:
        writer.close()


@pytest.mark.parametrize("failing", ["append", "read"])
def test_async_a_missing_table_fails_as_before_and_recovers(
    async_repository: AsyncSqlChatMemoryRepository, failing: str
) -> None:
    async def scenario() -> list[str | None]:
        await async_repository.append_to_log("c", _turn(0))
        await async_repository.drop_schema()
        call = (
            async_repository.append_to_log("c", _turn(1))
            if failing == "append"
            else async_repository.find_by_conversation_id("c")
        )
        with pytest.raises(StoreNotFoundError):
            await call
        await async_repository.create_schema()
        await async_repository.append_to_log("c", _turn(2))
        return [m.content for m in await async_repository.find_by_conversation_id("c")]

    assert asyncio.run(scenario()) == ["u2", "a2"]
