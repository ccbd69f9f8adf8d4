"""Reads on the DBAPI cursor: the same messages, errors and pool state.

``find_by_conversation_id`` and the window's view run their SELECTs, compiled
once, on the pooled DBAPI cursor for SQLite, psycopg and PyMySQL; any other
driver, ``echo``, or a cursor-execute listener (logging, tracing) keeps
SQLAlchemy's own path.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine

from chatledger import Message, MessageWindow, StoreNotFoundError
from chatledger.testing import every_kind
from chatledger_sql import SqlChatMemoryRepository
from chatledger_sql.compiled import RAW_DRIVERS, runs_raw
from tests.sql.conftest import unique_table


@pytest.fixture
def repository(any_engine: Engine) -> Iterator[SqlChatMemoryRepository]:
    repository = SqlChatMemoryRepository(any_engine, table_name=unique_table())
    yield repository
    repository.drop_schema()


def _raw(engine: Engine) -> bool:
    return (engine.dialect.name, engine.dialect.driver) in RAW_DRIVERS


def _history() -> list[Any]:
    moment = datetime(2026, 12, 1, 12, 0, 0, 123456, tzinfo=UTC)
    return [m.stamped(moment) for m in every_kind()]


def test_both_paths_read_the_same_messages(repository: SqlChatMemoryRepository) -> None:
    engine = repository.engine
    history = _history()
    repository.save_all("c", history)
    assert runs_raw(engine) is _raw(engine)
    direct = repository.find_by_conversation_id("c")
    assert (("read",) in repository._raw_reads) is _raw(engine)
    seen: list[str] = []

    def listener(*args: Any) -> None:
        seen.append(args[2])

    event.listen(engine, "before_cursor_execute", listener)
    try:
        assert not runs_raw(engine)
        through_sqlalchemy = repository.find_by_conversation_id("c")
    finally:
        event.remove(engine, "before_cursor_execute", listener)
    assert direct == through_sqlalchemy == history
    assert [m.id for m in direct] == [m.id for m in history]
    assert [m.created_at for m in direct] == [m.created_at for m in history]
    # The listener saw the read itself, not only what surrounds it.
    assert any(repository.tables.messages.name in sql for sql in seen)


def test_echo_keeps_reads_in_sqlalchemy(any_engine: Engine) -> None:
    any_engine.echo = True
    try:
        assert not runs_raw(any_engine)
    finally:
        any_engine.echo = False


def test_the_connection_goes_back_as_it_came(
    repository: SqlChatMemoryRepository,
) -> None:
    engine = repository.engine
    repository.save_all("c", _history())
    repository.find_by_conversation_id("c")
    assert engine.pool.checkedout() == 0  # type: ignore[attr-defined]
    with engine.connect() as connection:
        driver = connection.connection.driver_connection
        if engine.dialect.name == "postgresql":
            # The read ran in autocommit; the pool's next user gets transactions.
            assert driver.autocommit is False  # type: ignore[union-attr]
        assert not connection.in_transaction()


def test_a_failed_read_raises_as_sqlalchemy_would_and_recovers(
    repository: SqlChatMemoryRepository,
) -> None:
    engine = repository.engine
    repository.save_all("c", _history())
    repository.drop_schema()
    with pytest.raises(StoreNotFoundError, match=repository.tables.messages.name):
        repository.find_by_conversation_id("c")
    assert engine.pool.checkedout() == 0  # type: ignore[attr-defined]
    repository.create_schema()
    repository.save_all("c", _history())
    assert repository.find_by_conversation_id("c") == _history()


def test_a_read_keeps_no_snapshot_for_the_next_one(any_engine: Engine) -> None:
    """A write committed elsewhere between two reads is seen by the second.

    InnoDB opens a transaction for a plain SELECT without flagging it in the
    status the pool of a ``from_url`` engine checks before its ROLLBACK; a
    snapshot left open would hide the write.
    """
    url = any_engine.url.render_as_string(hide_password=False)
    table = unique_table()
    reader = SqlChatMemoryRepository.from_url(url, table_name=table)
    writer = SqlChatMemoryRepository.from_url(url, table_name=table)
    try:
        window = MessageWindow(5)
        reader.save_all("c", [Message.user("before")])
        assert [m.content for m in reader.find_by_conversation_id("c")] == ["before"]
        writer.save_all("c", [Message.user("after")])
        assert [m.content for m in reader.find_by_conversation_id("c")] == ["after"]
        assert [m.content for m in reader.find_window("c", window)] == ["after"]
        writer.append_to_log("c", [Message.assistant("later")])
        assert [m.content for m in reader.find_window("c", window)] == [
            "after",
            "later",
        ]
    finally:
        writer.close()
        reader.drop_schema()
        reader.close()
