"""Time to live on real databases: validation, lazy deletion, purge, no TTL."""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, event, func, select, update

from chatledger import Message, MessageWindowChatMemory, TokenWindowChatMemory
from chatledger.errors import ChatLedgerError
from chatledger.ttl import MAX_TTL
from chatledger.validation import utc_now
from chatledger_sql import InvalidTTLError, PostgresDialect, SqlChatMemoryRepository
from tests.backends import backend_url
from tests.sql.conftest import unique_table
from tests.sql.wire import PgWire
from tests.window_append_memory import WindowAppendMemory


@pytest.fixture
def tables(any_engine: Engine) -> Iterator[list[SqlChatMemoryRepository]]:
    """Repositories made in a test; their tables are dropped afterwards."""
    made: list[SqlChatMemoryRepository] = []
    yield made
    for repository in made:
        repository.drop_schema()


def make(
    engine: Engine, made: list[SqlChatMemoryRepository], **options: Any
) -> SqlChatMemoryRepository:
    repository = SqlChatMemoryRepository(engine, **options)
    made.append(repository)
    return repository


def expire(repository: SqlChatMemoryRepository, conversation_id: str) -> None:
    """Move a conversation's expiry into the past, as if its TTL had run out."""
    c = repository.tables.conversations.c
    with repository.engine.begin() as connection:
        connection.execute(
            update(repository.tables.conversations)
            .where(c.conversation_id == conversation_id)
            .values(expires_at=utc_now() - timedelta(seconds=1))
        )


def stored_rows(repository: SqlChatMemoryRepository, conversation_id: str) -> int:
    """Message rows physically present, expired or not."""
    m = repository.tables.messages.c
    with repository.engine.connect() as connection:
        query = select(func.count()).where(m.conversation_id == conversation_id)
        return int(connection.execute(query).scalar_one())


def expiry(repository: SqlChatMemoryRepository, conversation_id: str) -> Any:
    """The stored ``expires_at`` of a conversation (``None`` when none)."""
    c = repository.tables.conversations.c
    with repository.engine.connect() as connection:
        query = select(c.expires_at).where(c.conversation_id == conversation_id)
        return connection.execute(query).scalar_one()


# -- validation ----------------------------------------------------------------


@pytest.mark.parametrize(
    "ttl",
    [
        0,
        -1,
        0.0,
        -0.5,
        1e-9,  # rounds to no time at all
        math.nan,
        math.inf,
        timedelta(0),
        timedelta(seconds=-1),
        MAX_TTL + timedelta(days=1),
        MAX_TTL.total_seconds() + 1,
        True,
        "60",
        b"60",
        [60],
        object(),
    ],
    # No memory address in a test id: parallel runners must collect the same ids.
    ids=lambda value: "object()" if type(value) is object else repr(value),
)
def test_a_bad_ttl_is_rejected_before_any_io(ttl: object) -> None:
    """A bad ``ttl`` raises InvalidTTLError, and no connection is ever opened."""
    engine = create_engine("postgresql+psycopg://nobody@127.0.0.1:1/none")
    connects: list[object] = []
    event.listen(engine, "connect", lambda *args: connects.append(args))
    with pytest.raises(InvalidTTLError, match="ttl") as raised:
        SqlChatMemoryRepository(engine, ttl=ttl)  # type: ignore[arg-type]
    assert isinstance(raised.value, ValueError)
    assert isinstance(raised.value, ChatLedgerError)
    assert connects == []
    # from_url checks it before it makes an engine: no OperationalError here.
    with pytest.raises(InvalidTTLError):
        SqlChatMemoryRepository.from_url(
            "postgresql+psycopg://nobody@127.0.0.1:1/none",
            ttl=ttl,
        )


@pytest.mark.parametrize(
    ("ttl", "expected"),
    [
        (None, None),
        (90, timedelta(seconds=90)),
        (1.5, timedelta(seconds=1.5)),
        (timedelta(days=7), timedelta(days=7)),
        (MAX_TTL, MAX_TTL),
    ],
)
def test_a_good_ttl_is_kept_as_a_timedelta(
    ttl: timedelta | float | None, expected: timedelta | None, tmp_path: Any
) -> None:
    with SqlChatMemoryRepository.from_url(
        f"sqlite:///{tmp_path / 'chat.db'}", ttl=ttl
    ) as repository:
        assert repository.ttl == expected
        assert f"ttl={expected!r}" in repr(repository)


# -- expiry and a later append -------------------------------------------------


def test_an_append_after_expiry_starts_fresh(
    any_engine: Engine, tables: list[SqlChatMemoryRepository]
) -> None:
    """Expired messages are deleted by the next append and never come back."""
    repository = make(any_engine, tables, table_name=unique_table(), ttl=3600)
    memory = MessageWindowChatMemory(repository, max_messages=3)
    old = [Message.system("S"), Message.user("U1"), Message.assistant("A1")]
    memory.add("c", old)
    memory.add("other", [Message.user("kept")])
    expire(repository, "c")

    assert memory.get("c") == []
    assert repository.find_conversation_ids() == ["other"]
    assert stored_rows(repository, "c") == 3  # lazy: still on disk

    # A retried id of an expired message is new again, not a duplicate.
    result = memory.add("c", [old[1]])
    assert [m.id for m in result.appended] == [old[1].id]
    assert result.evicted_ids == []
    assert [m.content for m in memory.get("c")] == ["U1"]
    assert stored_rows(repository, "c") == 1
    # The counts restarted from zero: two more fill the window of three.
    memory.add("c", [Message.assistant("A2"), Message.user("U3")])
    assert [m.content for m in memory.get("c")] == ["U1", "A2", "U3"]
    assert sorted(repository.find_conversation_ids()) == ["c", "other"]
    assert expiry(repository, "c") > utc_now() + timedelta(minutes=59)
    assert [m.content for m in memory.get("other")] == ["kept"]


def test_a_token_window_append_after_expiry_starts_fresh(
    any_engine: Engine, tables: list[SqlChatMemoryRepository]
) -> None:
    """The stored token totals are forgotten with the expired messages."""
    repository = make(any_engine, tables, table_name=unique_table(), ttl=3600)
    memory = TokenWindowChatMemory(repository, max_tokens=10, token_counter=len_of)
    memory.add("c", [Message.system("SS"), Message.user("UUUU"), Message.user("VVVV")])
    expire(repository, "c")
    memory.add("c", [Message.user("WWWW"), Message.assistant("XXXX")])
    # Had the old 10 tokens been kept, "WWWW" would have been evicted.
    assert [m.content for m in memory.get("c")] == ["WWWW", "XXXX"]


def len_of(message: Message) -> int:
    return len(message.content or "")


def test_expiry_is_read_from_the_row_by_any_repository(
    any_engine: Engine, tables: list[SqlChatMemoryRepository]
) -> None:
    """A repository without TTL hides an expired conversation too."""
    table = unique_table()
    with_ttl = make(any_engine, tables, table_name=table, ttl=60)
    without = SqlChatMemoryRepository(any_engine, table_name=table)
    with_ttl.save_all("c", [Message.user("U")])
    expire(with_ttl, "c")
    assert without.find_by_conversation_id("c") == []
    assert without.find_conversation_ids() == []


@pytest.mark.parametrize("server_append", [True, False])
def test_a_window_append_with_ttl_costs_no_extra_statement(server_append: bool) -> None:
    """PostgreSQL: the expiry rides on the conversation UPDATE.

    The server-side append forgets an expired conversation in its one call;
    the portable one deletes its messages and evicted ids in one more
    statement.
    """
    engine = create_engine(backend_url("postgresql"))
    wire = PgWire(engine)
    repository = SqlChatMemoryRepository(
        engine,
        table_name=unique_table(),
        ttl=60,
        dialect=PostgresDialect(server_append=server_append),
    )
    try:
        memory = WindowAppendMemory(repository, max_messages=10)
        memory.add("c", [Message.user("first")])
        wire.reset()
        memory.add("c", [Message.assistant("second")])
        one_append = (
            [["SELECT"]] if server_append else [["BEGIN", "INSERT"], ["WITH", "COMMIT"]]
        )
        assert wire.round_trips() == one_append
        expire(repository, "c")
        wire.reset()
        memory.add("c", [Message.user("third")])
        if server_append:
            assert wire.round_trips() == [["SELECT"]]
        else:
            assert wire.round_trips() == [
                ["BEGIN", "INSERT"],
                ["WITH"],
                ["WITH", "COMMIT"],
            ]
        assert [m.content for m in memory.get("c")] == ["third"]
    finally:
        repository.drop_schema()
        engine.dispose()
        wire.close()


# -- purge_expired -------------------------------------------------------------


def test_purge_removes_only_expired_conversations(
    any_engine: Engine, tables: list[SqlChatMemoryRepository]
) -> None:
    table = unique_table()
    repository = make(any_engine, tables, table_name=table, ttl=3600)
    forever = SqlChatMemoryRepository(any_engine, table_name=table)
    for name in ("e1", "e2", "e3", "live"):
        repository.save_all(name, [Message.user(name), Message.assistant("a")])
    forever.save_all("forever", [Message.user("f")])
    for name in ("e1", "e2", "e3"):
        expire(repository, name)

    assert repository.purge_expired(batch_size=2) == 3  # two batches
    for name in ("e1", "e2", "e3"):
        assert stored_rows(repository, name) == 0
    assert sorted(repository.find_conversation_ids()) == ["forever", "live"]
    c = repository.tables.conversations.c
    with any_engine.connect() as connection:
        rows = connection.execute(select(c.conversation_id)).scalars()
        assert sorted(rows) == ["forever", "live"]
    assert stored_rows(repository, "live") == 2
    assert [m.content for m in forever.find_by_conversation_id("forever")] == ["f"]
    assert repository.purge_expired() == 0


def test_purge_spares_a_conversation_renewed_after_it_was_found(
    any_engine: Engine, tables: list[SqlChatMemoryRepository]
) -> None:
    """The candidates are checked again under lock before they are deleted."""
    repository = make(any_engine, tables, table_name=unique_table(), ttl=3600)
    repository.save_all("c", [Message.user("old")])
    repository.save_all("gone", [Message.user("old")])
    expire(repository, "c")
    expire(repository, "gone")
    renewed: list[bool] = []

    def renew_after_search(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        # The search for candidates; the locking read compares no expiry.
        if not renewed and "expires_at <=" in statement:
            renewed.append(True)
            repository.save_all("c", [Message.user("new")])

    event.listen(any_engine, "after_cursor_execute", renew_after_search)
    try:
        assert repository.purge_expired() == 1
    finally:
        event.remove(any_engine, "after_cursor_execute", renew_after_search)
    assert renewed == [True]
    assert [m.content for m in repository.find_by_conversation_id("c")] == ["new"]
    assert stored_rows(repository, "gone") == 0


@pytest.mark.parametrize("batch_size", [0, -1, 1001, 2.0, True, "10"])
def test_purge_rejects_a_bad_batch_size(batch_size: Any, tmp_path: Any) -> None:
    with (
        SqlChatMemoryRepository.from_url(
            f"sqlite:///{tmp_path / 'chat.db'}"
        ) as repository,
        pytest.raises(ValueError, match="batch_size"),
    ):
        repository.purge_expired(batch_size=batch_size)


# -- no TTL --------------------------------------------------------------------


def test_without_ttl_nothing_ever_expires(
    any_engine: Engine, tables: list[SqlChatMemoryRepository]
) -> None:
    """No ``expires_at`` is written, and a write clears one another TTL set."""
    table = unique_table()
    repository = make(any_engine, tables, table_name=table)
    assert repository.ttl is None
    memory = MessageWindowChatMemory(repository, max_messages=10)
    repository.save_all("saved", [Message.user("s")])
    memory.add("appended", [Message.user("a")])
    assert expiry(repository, "saved") is None
    assert expiry(repository, "appended") is None
    assert repository.purge_expired() == 0
    assert sorted(repository.find_conversation_ids()) == ["appended", "saved"]

    with_ttl = SqlChatMemoryRepository(any_engine, table_name=table, ttl=60)
    MessageWindowChatMemory(with_ttl, max_messages=10).add("saved", Message.user("t"))
    assert expiry(repository, "saved") is not None
    memory.add("saved", [Message.user("u")])
    assert expiry(repository, "saved") is None
    assert [m.content for m in memory.get("saved")] == ["s", "t", "u"]


def test_every_write_with_ttl_slides_the_expiry(
    any_engine: Engine, tables: list[SqlChatMemoryRepository]
) -> None:
    repository = make(any_engine, tables, table_name=unique_table(), ttl=600)
    memory = MessageWindowChatMemory(repository, max_messages=10)
    before = utc_now()
    repository.save_all("c", [Message.user("s")])
    first = expiry(repository, "c")
    assert (
        before + timedelta(seconds=600) <= first <= utc_now() + timedelta(seconds=600)
    )
    memory.add("c", [Message.user("a")])
    second = expiry(repository, "c")
    assert second >= first
    assert second <= utc_now() + timedelta(seconds=600)
