"""The read path converts raw ``created_at`` values exactly as ``UtcDateTime`` does."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta, timezone

import pytest
from sqlalchemy import Engine, create_engine
from sqlalchemy.ext.asyncio import create_async_engine

from chatledger import AsyncMessageWindowChatMemory, Message, MessageWindowChatMemory
from chatledger_sql import SqlChatMemoryRepository
from chatledger_sql.async_repository import AsyncSqlChatMemoryRepository
from chatledger_sql.rows import moment as _moment
from chatledger_sql.types import UtcDateTime
from tests.backends import backend_url
from tests.conformance.test_async_sql import with_driver
from tests.sql.conftest import unique_table

MOMENTS = [
    datetime(1, 1, 1),
    datetime(1969, 12, 31, 23, 59, 59, 999999),
    datetime(2026, 1, 2, 3, 4, 5, 6),
    datetime(9999, 12, 31, 23, 59, 59, 999999),
]


@pytest.mark.parametrize("naive", MOMENTS, ids=str)
def test_raw_values_read_as_the_column_type_reads_them(naive: datetime) -> None:
    dialect = create_engine("sqlite://").dialect
    column = UtcDateTime()
    text = naive.strftime("%Y-%m-%d %H:%M:%S.%f").rjust(26, "0")
    for raw in (naive, text):
        expected = column.process_result_value(raw, dialect)  # type: ignore[arg-type]
        got = _moment(raw)
        assert got == expected
        assert got.tzinfo is UTC
    # An aware value (PostgreSQL) is the same instant; the codec converts it.
    offset = timedelta(hours=-5 if naive.year < 9999 else 5)
    aware = naive.replace(tzinfo=timezone(offset))
    expected = column.process_result_value(aware, dialect)
    assert _moment(aware) == expected


@pytest.mark.parametrize(
    "moment",
    [
        datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC),
        datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        datetime(1970, 1, 1, tzinfo=UTC),
        datetime(2999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
    ],
    ids=str,
)
def test_created_at_reads_back_to_the_microsecond(
    any_engine: Engine, moment: datetime
) -> None:
    repository = SqlChatMemoryRepository(any_engine, table_name=unique_table())
    try:
        stamped = Message.user("hi").stamped(moment)
        repository.save_all("c", [stamped])
        (read,) = repository.find_by_conversation_id("c")
        assert read.created_at == moment
        assert read.created_at is not None
        assert read.created_at.tzinfo is UTC
    finally:
        repository.drop_schema()


#: Session time zones far from UTC, on both sides, with odd offsets.
SESSION_ZONES = ["Asia/Kathmandu", "America/St_Johns"]


@pytest.mark.parametrize("zone", SESSION_ZONES)
@pytest.mark.parametrize("driver", ["psycopg", "asyncpg"])
def test_postgresql_reads_utc_whatever_the_session_time_zone(
    zone: str, driver: str
) -> None:
    # The reads select the wall-clock time in UTC: what the session's zone
    # would have made of it must not show in any read, window or page.
    url = with_driver(backend_url("postgresql"), driver)
    moments = [
        datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC),
        datetime(2026, 7, 1, 23, 59, 59, 999999, tzinfo=UTC),
        datetime(1970, 1, 1, tzinfo=UTC),
    ]
    stamped = [
        Message.user(f"m{index}").stamped(moment)
        for index, moment in enumerate(moments)
    ]
    table = unique_table()

    async def scenario() -> list[list[Message]]:
        options = (
            {"server_settings": {"timezone": zone}}
            if driver == "asyncpg"
            else {"options": f"-c TimeZone={zone}"}
        )
        engine = create_async_engine(url, connect_args=options)
        repository = AsyncSqlChatMemoryRepository(engine, table_name=table)
        try:
            async with engine.connect() as connection:
                shown = await connection.exec_driver_sql("SHOW TimeZone")
                assert shown.scalar() == zone
            await repository.save_all("c", stamped)
            memory = AsyncMessageWindowChatMemory(repository, max_messages=10)
            page = await repository.find_messages_page("c", newest_first=False)
            return [
                await repository.find_by_conversation_id("c"),
                await memory.get("c"),
                list(page.messages),
            ]
        finally:
            await repository.drop_schema()
            await repository.aclose()
            await engine.dispose()

    for read in asyncio.run(scenario()):
        assert [m.created_at for m in read] == moments
        assert all(
            m.created_at is not None and m.created_at.tzinfo is UTC for m in read
        )


@pytest.mark.parametrize("zone", SESSION_ZONES)
def test_postgresql_sync_reads_utc_whatever_the_session_time_zone(zone: str) -> None:
    engine = create_engine(
        backend_url("postgresql"), connect_args={"options": f"-c TimeZone={zone}"}
    )
    repository = SqlChatMemoryRepository(engine, table_name=unique_table())
    moment = datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC)
    try:
        with engine.connect() as connection:
            assert connection.exec_driver_sql("SHOW TimeZone").scalar() == zone
        repository.save_all("c", [Message.user("hi").stamped(moment)])
        memory = MessageWindowChatMemory(repository, max_messages=10)
        reads = [
            repository.find_by_conversation_id("c"),
            memory.get("c"),
            list(repository.find_messages_page("c").messages),
        ]
        for read in reads:
            (message,) = read
            assert message.created_at == moment
            assert message.created_at is not None
            assert message.created_at.tzinfo is UTC
    finally:
        repository.drop_schema()
        engine.dispose()
