"""The SQL log's own risks: mixed writers, old stores, statements per call, races."""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import pytest
from sqlalchemy import Engine, create_engine, event, text

from chatledger import (
    InMemoryChatMemoryRepository,
    Message,
    StoreNotFoundError,
)
from chatledger.testing import random_turns
from chatledger.tokens import estimate_tokens
from chatledger.window import MessageWindow, TokenWindow, Window
from chatledger_sql import SqlChatMemoryRepository
from chatledger_sql.schema import LOG_COLUMNS
from tests.backends import backend_url
from tests.sql.conftest import make_url, unique_table

T = TypeVar("T")


def _ids(messages: list[Message]) -> list[str]:
    return [m.id for m in messages]


def _walk(repository: Any, cid: str, newest_first: bool) -> list[str]:
    walked: list[str] = []
    cursor = None
    while True:
        page = repository.find_messages_page(
            cid, cursor, limit=3, newest_first=newest_first
        )
        walked += _ids(page.messages)
        if page.next_cursor is None:
            return walked
        cursor = page.next_cursor


def _at_once(work: Callable[[int], T], threads: int) -> list[T]:
    """Run ``work(0)`` ... ``work(threads - 1)`` in threads released together.

    Returns what each returned; the first error any raised is raised here.
    """
    start = threading.Barrier(threads)
    results: list[Any] = [None] * threads
    errors: list[BaseException] = []

    def run(index: int) -> None:
        try:
            start.wait()
            results[index] = work(index)
        except BaseException as error:
            errors.append(error)

    running = [threading.Thread(target=run, args=(n,)) for n in range(threads)]
    for thread in running:
        thread.start()
    for thread in running:
        thread.join()
    if errors:
        raise errors[0]
    return results


@pytest.fixture
def repository(any_engine: Engine) -> Iterator[SqlChatMemoryRepository]:
    repository = SqlChatMemoryRepository(any_engine, table_name=unique_table())
    yield repository
    repository.drop_schema()


@pytest.mark.parametrize("seed", range(2))
@pytest.mark.parametrize("kind", ["messages", "tokens"])
def test_a_window_written_conversation_reads_as_its_window(
    repository: SqlChatMemoryRepository, seed: int, kind: str
) -> None:
    """After window appends (the store of release 0.2), the view is the window.

    Evictions leave the sequence without its head and replaced system
    messages leave holes in it; the conversation row does not know where the
    system messages are, and the view finds them.
    """
    rng = random.Random(seed)
    window: Window
    if kind == "messages":
        limit = rng.randint(2, 10)
        window = MessageWindow(limit)
    else:
        limit = rng.randint(20, 120)
        window = TokenWindow(limit, estimate_tokens)
    for batch in random_turns(rng, 30):
        repository.append_to_window("w", batch, window)
        stored = repository.find_by_conversation_id("w")
        assert _ids(repository.find_window("w", window)) == _ids(stored)
    stored_ids = _ids(repository.find_by_conversation_id("w"))
    assert _walk(repository, "w", newest_first=False) == stored_ids
    assert _walk(repository, "w", newest_first=True) == stored_ids[::-1]


@pytest.mark.parametrize("seed", range(3))
def test_mixed_writers_agree_with_the_reference(
    repository: SqlChatMemoryRepository, seed: int
) -> None:
    """Log appends, window appends and saves, in any order, read as in memory.

    The in-memory repository is the reference for every call: what is
    stored, what each view shows, the count the conversation row keeps, and
    the pages; so the row's counts, sizes and system range stay right
    whichever writer went last.
    """
    rng = random.Random(seed)
    reference = InMemoryChatMemoryRepository()
    windows: list[Window | None] = [
        None,
        MessageWindow(rng.randint(3, 12)),
        TokenWindow(rng.randint(40, 200), estimate_tokens),
        TokenWindow(rng.randint(40, 200), estimate_tokens, "other"),
    ]
    for step, batch in enumerate(random_turns(rng, 40)):
        window = rng.choice(windows)
        choice = rng.random()
        if step == 20:
            saved = repository.find_by_conversation_id("mix")[-5:]
            repository.save_all("mix", saved)
            reference.save_all("mix", saved)
        if window is not None and choice < 0.4:
            got = repository.append_to_window("mix", batch, window)
            expected = reference.append_to_window("mix", batch, window)
            assert sorted(got.evicted_ids) == sorted(expected.evicted_ids)
        else:
            got = repository.append_to_log("mix", batch, window)
            expected = reference.append_to_log("mix", batch, window)
        assert _ids(got.appended) == _ids(expected.appended)
        assert _ids(repository.find_by_conversation_id("mix")) == _ids(
            reference.find_by_conversation_id("mix")
        )
        assert repository.count_messages("mix") == reference.count_messages("mix")
        for shown in windows[1:]:
            assert shown is not None
            assert _ids(repository.find_window("mix", shown)) == _ids(
                reference.find_window("mix", shown)
            )
    stored_ids = _ids(reference.find_by_conversation_id("mix"))
    assert _walk(repository, "mix", newest_first=True) == stored_ids[::-1]


def test_a_conversation_saved_whole_is_one_batch(
    repository: SqlChatMemoryRepository,
) -> None:
    """``save_all`` (and 0.2) records no system range: every system message shows."""
    saved = [
        Message.system("A"),
        Message.user("u1"),
        Message.assistant("a1"),
        Message.system("B"),
        Message.user("u2"),
    ]
    repository.save_all("s", saved)
    window = MessageWindow(10)
    assert _ids(repository.find_window("s", window)) == _ids(saved)
    # Equal to one of the saved set: not stored again.
    assert repository.append_to_log("s", [Message.system("A")]).appended == []
    assert repository.append_to_log("s", [Message.system("C"), Message.user("u3")])
    view = repository.find_window("s", window)
    assert [m.content for m in view] == ["u1", "a1", "u2", "C", "u3"]
    assert [m.content for m in repository.find_by_conversation_id("s")] == [
        "A",
        "u1",
        "a1",
        "B",
        "u2",
        "C",
        "u3",
    ]


def _drop_log_columns(engine: Engine, table: str) -> None:
    with engine.begin() as connection:
        for column in LOG_COLUMNS:
            connection.execute(
                text(f"ALTER TABLE {table}_conversation DROP COLUMN {column}")
            )


def test_a_store_made_before_the_log_gains_its_columns(
    any_engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    """A conversation table without the log's columns (release 0.2's) is upgraded.

    Opened with ``create_schema=False`` it names the fix; opened as usual
    the columns are added, with a log line, and nothing stored changes:
    the messages read back, the window shows what the store kept, and
    appends continue the sequence.
    """
    table = unique_table()
    old = SqlChatMemoryRepository(any_engine, table_name=table)
    window = MessageWindow(4)
    old.append_to_window("c", [Message.system("S"), Message.user("u1")], window)
    old.append_to_window("c", [Message.assistant("a1"), Message.user("u2")], window)
    old.append_to_window("c", [Message.assistant("a2")], window)
    before = old.find_by_conversation_id("c")
    _drop_log_columns(any_engine, table)
    try:
        unready = SqlChatMemoryRepository(
            any_engine, table_name=table, create_schema=False
        )
        with pytest.raises(StoreNotFoundError, match="create_schema"):
            unready.append_to_log("c", [Message.user("u3")])
        upgraded = SqlChatMemoryRepository(any_engine, table_name=table)
        with caplog.at_level(logging.INFO, logger="chatledger.sql"):
            # The first call adds them.
            assert upgraded.find_by_conversation_id("c") == before
        added = [r.getMessage() for r in caplog.records if "adding column" in r.message]
        assert len(added) == len(LOG_COLUMNS)
        assert upgraded.find_window("c", MessageWindow(4)) == before
        appended = upgraded.append_to_log("c", [Message.user("u3")]).appended
        assert upgraded.find_by_conversation_id("c") == [*before, *appended]
        again = SqlChatMemoryRepository(any_engine, table_name=table)
        assert again.find_by_conversation_id("c") == [*before, *appended]
    finally:
        old.drop_schema()


def test_openers_upgrading_at_once_all_open(tmp_path: Path, any_engine: Engine) -> None:
    """Openers racing to add the columns: each opens, the columns come once."""
    table = unique_table()
    SqlChatMemoryRepository(any_engine, table_name=table).save_all(
        "c", [Message.user("kept")]
    )
    _drop_log_columns(any_engine, table)
    opened: list[SqlChatMemoryRepository] = []

    def open_one(index: int) -> None:
        repository = SqlChatMemoryRepository(
            create_engine(any_engine.url), table_name=table
        )
        repository.find_conversation_ids()  # the first call adds the columns
        opened.append(repository)

    try:
        _at_once(open_one, 4)
        repository = opened[0]
        assert [m.content for m in repository.find_by_conversation_id("c")] == ["kept"]
        repository.append_to_log("c", [Message.user("more")])
        assert repository.count_messages("c") == 2
    finally:
        for repository in opened:
            repository.engine.dispose()
        SqlChatMemoryRepository(any_engine, table_name=table).drop_schema()


def _statements(engine: Engine) -> list[str]:
    seen: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        seen.append(statement.split(None, 1)[0].upper())

    event.listen(engine, "before_cursor_execute", record)
    return seen


#: The statements of an append without a system message, by database.
_PLAIN_APPEND = {
    # In BEGIN IMMEDIATE: the upsert that advances the row, the insert.
    "sqlite": ["INSERT", "INSERT"],
    # One statement that locks, inserts and commits alone.
    "postgresql": ["WITH"],
    # One compound statement (BEGIN NOT ATOMIC ... END) that commits; the
    # server behind mysql:// here is MariaDB.
    "mariadb": ["BEGIN"],
    "mysql": ["BEGIN"],
    # A locking read, then the probe of the ids.
    "duckdb": ["SELECT", "SELECT", "INSERT", "UPDATE"],
}


def test_a_view_and_a_page_are_one_query_each(any_engine: Engine) -> None:
    """A view done in its first read and a page are one query each; an append
    reads the log only for a system message it holds."""
    repository = SqlChatMemoryRepository(any_engine, table_name=unique_table())
    try:
        repository.append_to_log("c", [Message.system("S"), Message.user("u0")])
        for n in range(1, 60):
            repository.append_to_log(
                "c", [Message.assistant(f"a{n}"), Message.user(f"u{n}")]
            )
        seen = _statements(any_engine)
        view = repository.find_window("c", MessageWindow(5))
        assert [m.content for m in view] == ["S", "u58", "a59", "u59"]
        assert seen == ["SELECT"]
        seen.clear()
        repository.find_messages_page("c", limit=10)
        assert seen == ["SELECT"]
        seen.clear()
        repository.append_to_log("c", [Message.assistant("a60")])
        assert seen == _PLAIN_APPEND[any_engine.dialect.name]
        seen.clear()
        repository.append_to_log("c", [Message.system("S"), Message.user("u61")])
        # One read more: the current system messages.
        plain = _PLAIN_APPEND[any_engine.dialect.name]
        assert seen.count("SELECT") == plain.count("SELECT") + 1
    finally:
        repository.drop_schema()


@pytest.mark.parametrize("size", [1, 16, 17, 300])
def test_a_log_append_stores_its_batch_whole_and_in_order(
    repository: SqlChatMemoryRepository, size: int
) -> None:
    """Whatever form the statement takes for the batch's size (PostgreSQL:
    parameters of their own up to 16 messages, arrays past them), every
    message is stored once, in order, after what was there, and reads back
    equal; the batch sent again stores nothing."""
    window = TokenWindow(10**6, estimate_tokens)
    first = [Message.user("before"), Message.assistant("answer")]
    batch = [
        Message.user(f"u{index} é ✓")
        if index % 2 == 0
        else Message.assistant(f"a{index}", metadata={"n": index})
        for index in range(size)
    ]
    repository.append_to_log("order", first, window)
    result = repository.append_to_log("order", batch, window)
    assert _ids(list(result.appended)) == _ids(batch)
    assert repository.find_by_conversation_id("order") == first + batch
    assert _walk(repository, "order", newest_first=False) == _ids(first + batch)
    assert list(repository.append_to_log("order", batch, window).appended) == []
    assert len(repository.find_by_conversation_id("order")) == size + 2


@pytest.mark.parametrize("name", ["sqlite", "postgresql", "mariadb"])
def test_concurrent_log_appends_keep_one_gap_free_sequence(
    name: str, tmp_path: Path
) -> None:
    """Writers of one conversation queue: every message once, each append's
    messages adjacent, sequence numbers without a gap."""
    repository = SqlChatMemoryRepository.from_url(
        make_url(name, tmp_path), table_name=unique_table()
    )
    batches = [
        [Message.user(f"w{w} b{b} u"), Message.assistant(f"w{w} b{b} a")]
        for w in range(4)
        for b in range(15)
    ]

    def write(worker: int) -> None:
        for batch in batches[worker * 15 : (worker + 1) * 15]:
            repository.append_to_log("race", batch)

    try:
        _at_once(write, 4)
        stored = repository.find_by_conversation_id("race")
        assert sorted(_ids(stored)) == sorted(m.id for b in batches for m in b)
        for first, second in zip(stored[::2], stored[1::2], strict=True):
            assert str(first.content)[:-1] == str(second.content)[:-1]
        with repository.engine.connect() as connection:
            seqs = [
                row[0]
                for row in connection.execute(
                    repository._sql.page_oldest.limit(1000),
                    {"cid": "race", "now": None},
                )
            ]
        assert seqs == list(range(len(seqs)))
    finally:
        repository.drop_schema()
        repository.close()


@pytest.mark.parametrize("name", ["sqlite", "postgresql", "mariadb"])
def test_a_batch_sent_by_several_writers_at_once_is_stored_once(
    name: str, tmp_path: Path
) -> None:
    """Retries racing each other: one stores the batch, the others find its ids.

    On PostgreSQL the one-statement append of the others may not see the
    batch in its snapshot; the unique key stops it, and the write runs again.
    """
    repository = SqlChatMemoryRepository.from_url(
        make_url(name, tmp_path), table_name=unique_table()
    )
    stored: list[int] = []
    try:
        for round_ in range(5):
            batch = [Message.user(f"r{round_} u"), Message.assistant(f"r{round_} a")]

            def write(index: int, messages: list[Message] = batch) -> int:
                return len(repository.append_to_log("dup", messages).appended)

            stored += _at_once(write, 6)
        assert sorted(stored) == [0] * 25 + [2] * 5
        contents = [m.content for m in repository.find_by_conversation_id("dup")]
        assert contents == [f"r{r} {k}" for r in range(5) for k in ("u", "a")]
    finally:
        repository.drop_schema()
        repository.close()


def test_a_sqlite_append_is_one_transaction_of_two_statements(tmp_path: Path) -> None:
    """On the driver's own connection (no SQLAlchemy listener), as SQLite runs
    it: the write lock, the upsert that advances the row, the insert, the
    commit; the busy timeout is set once per connection, not per append."""
    repository = SqlChatMemoryRepository.from_url(f"sqlite:///{tmp_path / 'chat.db'}")
    seen: list[str] = []

    def trace(dbapi_connection: Any, record: Any) -> None:
        dbapi_connection.set_trace_callback(seen.append)

    event.listen(repository.engine, "connect", trace)
    repository.engine.dispose()
    try:
        repository.append_to_log("c", [Message.system("S"), Message.user("u0")])
        seen.clear()
        for n in range(3):
            repository.append_to_log("c", [Message.assistant(f"a{n}")])
        words = [statement.split(None, 1)[0].upper() for statement in seen]
        assert words == ["BEGIN", "INSERT", "INSERT", "COMMIT"] * 3
        assert seen[0] == "BEGIN IMMEDIATE"
        assert [m.content for m in repository.find_by_conversation_id("c")] == [
            "S",
            "u0",
            "a0",
            "a1",
            "a2",
        ]
    finally:
        repository.drop_schema()
        repository.close()


def _session_status(repository: SqlChatMemoryRepository, name: str) -> int:
    """MariaDB's session counter ``name`` on the repository's one pooled
    connection, this read included."""
    # On the pooled connection's own cursor: SQLAlchemy would add a
    # ROLLBACK after the SHOW.
    connection = repository.engine.raw_connection()
    try:
        cursor = connection.cursor()
        cursor.execute(f"SHOW SESSION STATUS LIKE '{name}'")
        row = cursor.fetchone()
        assert row is not None
        return int(row[1])
    finally:
        connection.close()


def _questions(repository: SqlChatMemoryRepository) -> int:
    """How many statements the server has had from the repository's one
    pooled connection, this one included."""
    return _session_status(repository, "Questions")


def test_a_mariadb_append_is_one_round_trip() -> None:
    """The server counts one statement from the client per append (the
    compound statement; what runs inside it is not counted), for a new
    conversation and an existing one, and no ROLLBACK after it. The warm-up
    appends a batch of the same size: the connection's first append of a
    size also prepares its statement (test_mariadb_prepared.py)."""
    repository = SqlChatMemoryRepository.from_url(
        backend_url("mariadb"),
        table_name=unique_table(),
        engine_options={"pool_size": 1, "max_overflow": 0},
    )

    try:
        repository.append_to_log("warm", [Message.user("u"), Message.assistant("a")])
        for cid in ("new", "new"):
            before = _questions(repository)
            repository.append_to_log(cid, [Message.user("u"), Message.assistant("a")])
            # The append, then this SHOW itself.
            assert _questions(repository) - before == 2
        assert [m.content for m in repository.find_by_conversation_id("new")] == [
            "u",
            "a",
            "u",
            "a",
        ]
    finally:
        repository.drop_schema()
        repository.close()


def test_a_mariadb_view_is_one_round_trip() -> None:
    """The view's read and the end of its transaction go as one compound
    statement: one statement from the client, where a ROLLBACK after the
    SELECT was a second."""
    repository = SqlChatMemoryRepository.from_url(
        backend_url("mariadb"),
        table_name=unique_table(),
        engine_options={"pool_size": 1, "max_overflow": 0},
    )
    window = MessageWindow(5)
    try:
        repository.append_to_log("c", [Message.system("S"), Message.user("u")])
        repository.find_window("c", window)
        before = _questions(repository)
        assert [m.content for m in repository.find_window("c", window)] == ["S", "u"]
        assert _questions(repository) - before == 2  # the view, then this SHOW
    finally:
        repository.drop_schema()
        repository.close()


def test_a_mariadb_view_makes_no_temporary_table() -> None:
    """The view's newest rows are a member of its ``UNION ALL`` of their own
    (``SqlDialect.limits_union_members``): read from a derived table, they
    were copied into a temporary table on every read first."""
    repository = SqlChatMemoryRepository.from_url(
        backend_url("mariadb"),
        table_name=unique_table(),
        engine_options={"pool_size": 1, "max_overflow": 0},
    )

    window = MessageWindow(2)
    try:
        repository.append_to_log(
            "c", [Message.system("S"), Message.user("u"), Message.assistant("a")]
        )
        repository.append_to_log("c", [Message.user("v")])
        repository.find_window("c", window)
        before = _session_status(repository, "Created_tmp_tables")
        assert [m.content for m in repository.find_window("c", window)] == [
            "S",
            "v",
        ]
        assert _session_status(repository, "Created_tmp_tables") == before
    finally:
        repository.drop_schema()
        repository.close()


def _rows_read(repository: SqlChatMemoryRepository) -> int:
    """How many index and table rows the server has read on the repository's
    one pooled connection (MariaDB's handler counters)."""
    connection = repository.engine.raw_connection()
    try:
        cursor = connection.cursor()
        cursor.execute("SHOW SESSION STATUS LIKE 'Handler_read%'")
        return sum(int(value) for _, value in cursor.fetchall())
    finally:
        connection.close()


def test_a_saved_conversation_views_without_reading_its_whole_log() -> None:
    """save_all records where its system messages are, as an append does, so
    the view of a conversation saved whole (an import, a copy) reads about the
    window's rows, not every row looking for system messages."""
    repository = SqlChatMemoryRepository.from_url(
        backend_url("mariadb"),
        table_name=unique_table(),
        engine_options={"pool_size": 1, "max_overflow": 0},
    )
    window = MessageWindow(5)
    turns = [
        m
        for n in range(1000)
        for m in (Message.user(f"u{n}"), Message.assistant(f"a{n}"))
    ]
    try:
        repository.save_all("saved", [Message.system("S"), *turns])
        repository.append_to_log("logged", [Message.system("S"), *turns])
        costs = {}
        for cid in ("saved", "logged"):
            repository.find_window(cid, window)
            before = _rows_read(repository)
            view = repository.find_window(cid, window)
            costs[cid] = _rows_read(repository) - before
            assert [m.content for m in view] == [
                "S",
                "u998",
                "a998",
                "u999",
                "a999",
            ]
        assert costs["saved"] == costs["logged"] < 100
        # A system message saved later in the list is current too.
        repository.save_all("saved", [*turns[:4], Message.system("T"), *turns[4:]])
        assert repository.find_window("saved", window)[0].content == "T"
    finally:
        repository.drop_schema()
        repository.close()


def test_a_raw_write_stores_times_as_sqlalchemy_does(tmp_path: Path) -> None:
    """A created_at written on the driver's connection is SQLAlchemy's text
    form of it on SQLite, microseconds included when they are zero, so that
    times compare as text alike whichever path wrote them."""
    repository = SqlChatMemoryRepository.from_url(f"sqlite:///{tmp_path / 'chat.db'}")
    moment = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    try:
        repository.append_to_log("c", [Message.user("u").stamped(moment)])
        with repository.engine.connect() as connection:
            stored = connection.exec_driver_sql(
                f"SELECT created_at FROM {repository.tables.messages.name}"
            ).scalar()
        assert stored == "2026-01-02 03:04:05.000000"
        assert repository.find_by_conversation_id("c")[0].created_at == moment
    finally:
        repository.drop_schema()
        repository.close()
