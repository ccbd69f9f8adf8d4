"""The SQL conversation record's own risks: expiry, trims, old stores, plans.

The conformance suite (``ConversationInfoTests``) checks the contract on
every database; these check what the SQL design adds: a write that finds its
conversation expired starts a new record on every write path (the routines
and the one-statement appends included), a retention trim leaves
``updated_at`` alone, a store made before the record gains its columns,
indexes and ``created_at`` (filled from the messages) safely, and an owner's
listing reads the owner index, never the whole table.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, event, text, update

from chatledger import Message, MessageWindow, Retention
from chatledger_sql import SqlChatMemoryRepository
from chatledger_sql.schema import INFO_COLUMNS, conversation_indexes
from tests.backends import backend_url
from tests.sql.conftest import unique_table

#: Long before any test runs: a conversation expiring then has expired.
_LONG_AGO = datetime(2000, 1, 1, tzinfo=UTC)


def _expire(repository: SqlChatMemoryRepository, conversation_id: str) -> None:
    """Make a conversation's row say it expired long ago."""
    conversations = repository.tables.conversations
    with repository.engine.begin() as connection:
        connection.execute(
            update(conversations)
            .where(conversations.c.conversation_id == conversation_id)
            .values(expires_at=_LONG_AGO)
        )


#: Every way a write reaches an existing conversation row.
_WRITES: dict[str, Callable[[Any, str], None]] = {
    # The one-statement (or two-statement) append refuses an expired row and
    # leaves it to the transaction.
    "log append": lambda r, cid: r.append_to_log(cid, [Message.user("new")]),
    # The transaction's own path: a batch with a system message.
    "log append with a system message": lambda r, cid: r.append_to_log(
        cid, [Message.system("S"), Message.user("new")]
    ),
    # The routine on PostgreSQL and MariaDB, the portable append elsewhere.
    "window append": lambda r, cid: r.append_to_window(
        cid, [Message.user("new")], MessageWindow(5)
    ),
    "save_all": lambda r, cid: r.save_all(cid, [Message.user("new")]),
    "save_many": lambda r, cid: r.save_many({cid: [Message.user("new")], "x": []}),
}


@pytest.fixture
def repository(any_engine: Engine) -> Iterator[SqlChatMemoryRepository]:
    repository = SqlChatMemoryRepository(
        any_engine, table_name=unique_table(), ttl=timedelta(hours=1)
    )
    yield repository
    repository.drop_schema()


@pytest.mark.parametrize("write", list(_WRITES))
def test_a_write_to_an_expired_conversation_starts_a_new_record(
    repository: SqlChatMemoryRepository, write: str
) -> None:
    repository.append_to_log("c", [Message.user("old"), Message.assistant("old")])
    old = repository.set_conversation_info("c", owner="alice", metadata={"t": 1})
    _expire(repository, "c")
    assert repository.get_conversation_info("c") is None
    _WRITES[write](repository, "c")
    record = repository.get_conversation_info("c")
    assert record is not None
    held = [m.content for m in repository.find_by_conversation_id("c")]
    assert held[-1] == "new"
    assert "old" not in held
    assert (record.owner, dict(record.metadata), record.message_count) == (
        None,
        {},
        len(held),
    )
    assert record.created_at > old.created_at
    assert record.created_at == record.updated_at


def test_the_portable_window_append_starts_a_new_record_too(
    any_engine: Engine,
) -> None:
    """Where a routine takes window appends, the portable path is checked too."""
    repository = SqlChatMemoryRepository(
        any_engine, table_name=unique_table(), ttl=timedelta(hours=1)
    )
    try:
        repository.append_to_log("c", [Message.user("old")])
        repository.set_conversation_info("c", owner="alice", metadata={"t": 1})
        _expire(repository, "c")
        repository._routine = None  # the path of a store without the routine
        repository.append_to_window("c", [Message.user("new")], MessageWindow(5))
        record = repository.get_conversation_info("c")
        assert record is not None
        assert (record.owner, dict(record.metadata), record.message_count) == (
            None,
            {},
            1,
        )
    finally:
        repository.drop_schema()


def test_setting_an_expired_conversation_starts_a_new_record(
    repository: SqlChatMemoryRepository,
) -> None:
    repository.append_to_log("c", [Message.user("old")])
    old = repository.set_conversation_info("c", owner="alice", metadata={"t": 1})
    _expire(repository, "c")
    record = repository.set_conversation_info("c", owner="bob")
    assert (record.owner, dict(record.metadata), record.message_count) == (
        "bob",
        {},
        0,
    )
    assert record.created_at > old.created_at
    assert record.created_at == record.updated_at
    assert repository.get_conversation_info("c") == record
    assert repository.find_by_conversation_id("c") == []
    # The record's messages were forgotten with it: an id the expired
    # conversation held is new again.
    kept = repository.append_to_log("c", [Message.user("again", id="m1")]).appended
    assert [m.id for m in kept] == ["m1"]


def test_metadata_the_query_cannot_compare_is_compared_by_the_repository(
    repository: SqlChatMemoryRepository,
) -> None:
    """NUL (which PostgreSQL's text and jsonb refuse) and integers past 64
    bits (which SQLite does not bind) fall back to the comparison in Python,
    for the filter and for the records scanned, with the same answers."""
    odd = {"title": "a\x00b", "n": 2**70, "t": True, "k\x00": "v"}
    repository.set_conversation_info("odd", metadata=odd)
    repository.set_conversation_info("plain", metadata={"t": True, "n": 1})
    cases: list[tuple[dict[str, Any], list[str]]] = [
        ({"t": True}, ["plain", "odd"]),
        ({"t": 1}, []),
        ({"title": "a\x00b"}, ["odd"]),
        ({"k\x00": "v"}, ["odd"]),
        ({"n": 2**70}, ["odd"]),
        ({"n": float(2**70)}, ["odd"]),
        ({"n": 1.0, "t": True}, ["plain"]),
    ]
    for wanted, ids in cases:
        found = repository.find_conversations(metadata=wanted).items
        assert [r.id for r in found] == ids, wanted
    record = repository.get_conversation_info("odd")
    assert record is not None
    assert dict(record.metadata) == odd


def test_a_trim_leaves_updated_at(any_engine: Engine) -> None:
    """A bounded log's trim is the store's doing: ``updated_at`` stays at the
    append that made it due, whose messages carry that same moment."""
    repository = SqlChatMemoryRepository(
        any_engine, table_name=unique_table(), retention=Retention.last(4)
    )
    try:
        last: list[Message] = []
        for n in range(40):
            last = repository.append_to_log("c", [Message.user(f"m{n}")]).appended
        record = repository.get_conversation_info("c")
        assert record is not None
        assert record.message_count < 40, "no trim ran"
        assert record.message_count == repository.count_messages("c")
        assert record.updated_at == last[0].created_at
    finally:
        repository.drop_schema()


def _strip_the_record(repository: SqlChatMemoryRepository) -> None:
    """Make the store one the log's release made: no record columns, no indexes."""
    dialect = repository._dialect()
    tables = repository.tables
    with repository.engine.begin() as connection:
        if dialect.keeps_conversation_indexes:
            for index in conversation_indexes(tables):
                index.drop(connection)
        for column in INFO_COLUMNS:
            connection.execute(
                text(f"ALTER TABLE {tables.conversations.name} DROP COLUMN {column}")
            )


def test_an_upgrade_fills_created_at_from_the_messages(any_engine: Engine) -> None:
    """``created_at``: the oldest message's, but never after the row's last
    write (messages may carry any time); a row without messages: its last
    write."""
    table = unique_table()
    repository = SqlChatMemoryRepository(any_engine, table_name=table)
    past = datetime(2021, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)
    future = datetime(2999, 1, 1, tzinfo=UTC)
    try:
        repository.save_all(
            "imported",
            [
                Message.user("old").stamped(past + timedelta(days=1)),
                Message.user("older").stamped(past),
            ],
        )
        repository.save_all("ahead", [Message.user("x").stamped(future)])
        repository.append_to_log("emptied", [Message.user("gone")])
        repository.remove_newest("emptied")
        written = {
            cid: repository.get_conversation_info(cid)
            for cid in ("imported", "ahead", "emptied")
        }
        _strip_the_record(repository)
        older = SqlChatMemoryRepository(
            any_engine, table_name=table, create_schema=False
        )
        changes = older.upgrade_schema()
        assert [c for c in changes if "column" in c] == [
            f"added column {c} to table {table}_conversation" for c in INFO_COLUMNS
        ]
        assert older.upgrade_schema() == []
        found = {cid: older.get_conversation_info(cid) for cid in written}
        assert found["imported"] is not None
        assert found["imported"].created_at == past
        for cid in ("ahead", "emptied"):
            record, before = found[cid], written[cid]
            assert record is not None
            assert before is not None
            assert record.created_at == before.updated_at == record.updated_at
        assert [r.id for r in older.find_conversations().items if r] == [
            "emptied",
            "ahead",
            "imported",
        ]
    finally:
        repository.drop_schema()


def test_openers_adding_the_record_at_once_all_open(any_engine: Engine) -> None:
    """Four processes' worth of openers race to add the columns and indexes."""
    table = unique_table()
    first = SqlChatMemoryRepository(any_engine, table_name=table)
    first.save_all("c", [Message.user("kept")])
    _strip_the_record(first)
    start = threading.Barrier(4)
    errors: list[BaseException] = []
    opened: list[SqlChatMemoryRepository] = []

    def open_one() -> None:
        try:
            repository = SqlChatMemoryRepository(
                create_engine(any_engine.url), table_name=table
            )
            opened.append(repository)
            start.wait()
            repository.find_conversation_ids()  # the first call adds them
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=open_one) for _ in range(4)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        record = opened[0].get_conversation_info("c")
        assert record is not None
        assert record.message_count == 1
        assert opened[0].upgrade_schema() == []
        opened[0].set_conversation_info("c", owner="alice")
        assert [r.id for r in opened[1].find_conversations(owner="alice").items] == [
            "c"
        ]
    finally:
        for repository in opened:
            repository.engine.dispose()
        first.drop_schema()


def _sent(engine: Engine) -> list[tuple[str, Any]]:
    """The statements and parameters the engine sends from now on."""
    seen: list[tuple[str, Any]] = []

    def record(
        conn: Any, cursor: Any, statement: str, parameters: Any, *_: Any
    ) -> None:
        seen.append((statement, parameters))

    event.listen(engine, "before_cursor_execute", record)
    return seen


def _listing_plans(
    repository: SqlChatMemoryRepository, explain: str, owner: str | None
) -> list[str]:
    """The plans of the queries of a two-page walk of ``owner``'s listing."""
    seen = _sent(repository.engine)
    page = repository.find_conversations(owner=owner, limit=10)
    assert page.next_cursor is not None
    repository.find_conversations(owner=owner, cursor=page.next_cursor, limit=10)
    listings = [(s, p) for s, p in seen if "ORDER BY" in s]
    assert len(listings) == 2
    plans = []
    raw: Any = repository.engine.raw_connection()
    try:
        for statement, parameters in listings:
            cursor = raw.cursor()
            cursor.execute(f"{explain} {statement}", parameters)
            plans.append("\n".join(str(row) for row in cursor.fetchall()))
            cursor.close()
    finally:
        raw.close()
    return plans


def _populated(url: str, **options: Any) -> SqlChatMemoryRepository:
    """2000 conversations of 20 owners, written in one transaction."""
    repository = SqlChatMemoryRepository.from_url(
        url, table_name=unique_table(), **options
    )
    repository.save_many({f"c{n:04d}": [Message.user("hi")] for n in range(2000)})
    conversations = repository.tables.conversations
    with repository.engine.begin() as connection:
        for owner in range(20):
            connection.execute(
                update(conversations)
                .where(
                    conversations.c.conversation_id.in_(
                        [f"c{n:04d}" for n in range(owner, 2000, 20)]
                    )
                )
                .values(owner=f"owner-{owner}")
            )
    return repository


def test_postgresql_lists_an_owner_through_the_owner_index() -> None:
    repository = _populated(backend_url("postgresql"))
    try:
        with repository.engine.begin() as connection:
            connection.exec_driver_sql(
                f"ANALYZE {repository.tables.conversations.name}"
            )
        by_owner, by_update = (
            index.name for index in conversation_indexes(repository.tables)
        )
        for plan in _listing_plans(repository, "EXPLAIN", "owner-3"):
            assert f"Index Scan Backward using {by_owner}" in plan, plan
            assert "Seq Scan" not in plan, plan
            assert "Sort" not in plan, plan
        for plan in _listing_plans(repository, "EXPLAIN", None):
            assert f"Index Scan Backward using {by_update}" in plan, plan
            assert "Seq Scan" not in plan, plan
            assert "Sort" not in plan, plan
    finally:
        repository.drop_schema()
        repository.close()


def test_sqlite_lists_an_owner_through_the_owner_index(tmp_path: Path) -> None:
    repository = _populated(f"sqlite:///{tmp_path / 'chat.db'}")
    try:
        by_owner, by_update = (
            index.name for index in conversation_indexes(repository.tables)
        )
        for plan in _listing_plans(repository, "EXPLAIN QUERY PLAN", "owner-3"):
            assert f"USING INDEX {by_owner} (owner=?" in plan, plan
            assert "SCAN" not in plan, plan
            assert "TEMP B-TREE" not in plan, plan
        for plan in _listing_plans(repository, "EXPLAIN QUERY PLAN", None):
            assert f"INDEX {by_update}" in plan, plan
            assert "TEMP B-TREE" not in plan, plan
    finally:
        repository.drop_schema()
        repository.close()
