"""The read path converts raw ``created_at`` values exactly as ``UtcDateTime`` does."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from sqlalchemy import Engine, create_engine

from chatledger import Message
from chatledger_sql import SqlChatMemoryRepository
from chatledger_sql.rows import moment as _moment
from chatledger_sql.types import UtcDateTime
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
