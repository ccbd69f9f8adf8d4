"""The log on a real Cassandra: round trips, bounded reads, older data, races.

The server comes from ``CHATLEDGER_TEST_CASSANDRA_URL`` (see
``tests/conformance/test_cassandra.py``); without one these tests are skipped,
or fail when the backend is required. Requests are counted by wrapping the
driver session (:mod:`tests.cassandra.counting`), rows and cells read back
with plain CQL.
"""

from __future__ import annotations

import multiprocessing
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from cassandra import InvalidRequest
from cassandra.cluster import Session

from chatledger import (
    Message,
    MessageTooLargeError,
    MessageWindow,
    TokenWindow,
    ToolCall,
    ToolResponse,
    codec,
)
from chatledger.tokens import estimate_tokens
from chatledger.window import apply_window
from chatledger_cassandra import CassandraChatMemoryRepository, id_index, parse_url
from chatledger_cassandra.log_views import NEWEST_SYSTEM_ROWS
from chatledger_cassandra.statements import (
    LANE_EVICTED,
    LANE_IDS,
    LANE_OTHER,
    LANE_SYSTEM,
)
from tests.backends import backend_url
from tests.cassandra.counting import CountingSession

#: How long a thread or process of a race may take: a bound for a stuck
#: server, not a timing the test relies on.
WAIT_SECONDS = 300


@pytest.fixture(scope="module")
def url(required: set[str]) -> str:
    return backend_url("cassandra", required)


@pytest.fixture(scope="module")
def session(url: str) -> Iterator[Session]:
    """One session on the test keyspace for every test of the module."""
    root = CassandraChatMemoryRepository.from_url(
        url, create_keyspace=True, create_schema=False
    )
    yield root.session
    root.close()


@pytest.fixture
def keyspace(url: str) -> str:
    return parse_url(url).keyspace or "chatledger"


@pytest.fixture
def make(
    session: Session, keyspace: str
) -> Iterator[Callable[..., CassandraChatMemoryRepository]]:
    """Make repositories on one fresh table (``table=`` names another)."""
    tables: set[str] = set()
    default = f"log_{uuid.uuid4().hex[:12]}"

    def make_one(**options: Any) -> CassandraChatMemoryRepository:
        options.setdefault("table", default)
        tables.add(options["table"])
        return CassandraChatMemoryRepository(session, keyspace=keyspace, **options)

    yield make_one
    for table in tables:
        session.execute(f'DROP TABLE IF EXISTS "{keyspace}"."{table}"')


def _cql(repository: CassandraChatMemoryRepository, text: str, *values: Any) -> Any:
    """Run ``text``, where ``T`` stands for the repository's table."""
    table = f'"{repository.keyspace}"."{repository.table}"'
    return list(repository.session.execute(text.replace(" T ", f" {table} "), values))


def _messages_in(repository: CassandraChatMemoryRepository, cid: str) -> Any:
    return _cql(
        repository,
        "SELECT lane, seq, msg_id FROM T WHERE conversation_id = %s AND lane < %s",
        cid,
        LANE_EVICTED,
    )


def _index(repository: CassandraChatMemoryRepository, cid: str) -> list[str]:
    rows = _cql(
        repository,
        "SELECT msg_id FROM T WHERE conversation_id = %s AND lane = %s",
        cid,
        LANE_IDS,
    )
    return [row.msg_id for row in rows]


def _turn(n: int) -> list[Message]:
    if n % 3 == 2:
        call = ToolCall(id=f"t{n}", name="f", arguments="{}")
        return [
            Message.user(f"u{n}"),
            Message.assistant(None, tool_calls=[call]),
            Message.tool(ToolResponse(id=call.id, name="f", data="r")),
            Message.assistant(f"a{n}"),
        ]
    return [Message.user(f"u{n}"), Message.assistant(f"a{n}")]


def _log_of(repository: CassandraChatMemoryRepository, cid: str, size: int) -> None:
    """A log of about ``size`` messages, a system prompt first, in log appends."""
    batch = [Message.system("You are brief.")]
    n = 0
    while n < size:
        while len(batch) < 100 and n < size:
            batch += _turn(n)
            n += 1
        repository.append_to_log(cid, batch)
        batch = []


@pytest.mark.parametrize("size", [20, 2000])
def test_cassandra_log_calls_cost_the_same_round_trips_on_any_log(
    make: Callable[..., CassandraChatMemoryRepository], session: Session, size: int
) -> None:
    writer = make()
    _log_of(writer, "c", size)
    counting = CountingSession(session)
    # The writer made the table: the first call counted below only reads.
    repository = CassandraChatMemoryRepository(
        counting, keyspace=writer.keyspace, table=writer.table, create_schema=False
    )
    window = MessageWindow(20)
    with counting.counting() as calls:
        view = repository.find_window("c", window)
    # Cold: the newest rows and the newest system rows, sent together.
    assert (calls.requests, calls.round_trips) == (2, 1)
    assert max(calls.rows) <= 20 + 8
    stored = writer.find_by_conversation_id("c")
    assert view == apply_window([], stored, window).messages
    with counting.counting() as calls:
        assert repository.find_window("c", window) == view
    # The system messages of that batch are remembered: one read.
    assert (calls.requests, calls.round_trips) == (1, 1)
    # An append on what the view read: the batch, and the record's listing
    # row sent just before it.
    with counting.counting() as calls:
        repository.append_to_log("c", [Message.user("next")])
    assert (calls.requests, calls.round_trips, calls.statements[1]) == (2, 1, "BATCH")
    assert calls.statements[0].startswith(f'INSERT INTO "{writer.keyspace}"."')
    assert "_records" in calls.statements[0]
    with counting.counting() as calls:
        repository.append_to_log("c", [Message.assistant("again")])
    assert (calls.requests, calls.round_trips) == (2, 1)
    # Another writer moved the conversation: the batch fails, the state, the
    # slots of the ids and the newest system rows are read together, the batch
    # goes again.
    writer.append_to_log("c", [Message.user("elsewhere")])
    with counting.counting() as calls:
        repository.append_to_log("c", [Message.assistant("late")])
    assert calls.statements.count("BATCH") == 2
    assert (calls.requests, calls.round_trips) == (7, 3)
    # A repository that knows nothing reads first: two round trips.
    cold = CassandraChatMemoryRepository(
        counting, keyspace=writer.keyspace, table=writer.table, create_schema=False
    )
    with counting.counting() as calls:
        cold.append_to_log("c", [Message.user("cold")])
    assert (calls.requests, calls.round_trips) == (5, 2)
    with counting.counting() as calls:
        cold.append_to_log("c", [Message.system("new prompt"), Message.user("q")])
    assert (calls.requests, calls.round_trips) == (2, 1)
    # A retried append whose ids the remembered state cannot know: its slots
    # refuse the batch, and the read that follows finds them held.
    with counting.counting() as calls:
        assert repository.append_to_log("c", stored[-2:]).appended == []
    assert calls.statements.count("BATCH") == 1
    # A page: both message lanes, read together.
    with counting.counting() as calls:
        page = repository.find_messages_page("c", limit=10)
    assert (calls.requests, calls.round_trips) == (2, 1)
    assert max(calls.rows) <= 11
    assert [m.content for m in page.messages[:2]] == ["q", "new prompt"]
    log = writer.find_by_conversation_id("c")
    assert len(log) == len({m.id for m in log}) == len(stored) + 7


def test_cassandra_log_append_with_a_system_message_reads_the_current_set(
    make: Callable[..., CassandraChatMemoryRepository], session: Session
) -> None:
    writer = make()
    prompts = [Message.system(f"rule {n}") for n in range(NEWEST_SYSTEM_ROWS + 3)]
    writer.append_to_log("c", [*prompts, Message.user("u")])
    counting = CountingSession(session)
    cold = CassandraChatMemoryRepository(  # on the writer's table: it only reads
        counting, keyspace=writer.keyspace, table=writer.table, create_schema=False
    )
    with counting.counting() as calls:
        same = [Message.system(f"rule {n}") for n in range(len(prompts))]
        assert cold.append_to_log("c", same).appended == []
    # The newest system rows could not hold the whole set: it is read whole.
    assert (calls.requests, calls.round_trips) == (4, 2)
    assert "BATCH" not in calls.statements
    view = cold.find_window("c", MessageWindow(30))
    assert [m.content for m in view] == [*(m.content for m in prompts), "u"]


def test_cassandra_log_reads_a_conversation_the_window_and_save_all_wrote(
    make: Callable[..., CassandraChatMemoryRepository],
) -> None:
    repository = make()
    window = MessageWindow(4)
    sent: list[Message] = []
    kept: list[Message] = []
    for n in range(6):
        batch = [Message.system("S"), *_turn(n)]
        repository.append_to_window("w", batch, window)
        sent += batch
        kept = apply_window(kept, [m for m in batch if m not in kept], window).messages
    stored = repository.find_by_conversation_id("w")
    assert [m.id for m in stored] == [m.id for m in kept]
    other = make()
    assert other.find_window("w", window) == stored
    assert [m.id for m in other.find_messages_page("w", limit=50).messages] == [
        m.id for m in reversed(stored)
    ]
    assert _index(repository, "w") == []
    held = _cql(
        repository,
        "SELECT msg_id FROM T WHERE conversation_id = %s AND lane <= %s",
        "w",
        LANE_EVICTED,
    )
    assert len(held) > len(stored), "the window evicted some"
    # Every id the window held, evicted or stored, is a retry (and the system
    # messages the window did not store are equal to the current one).
    assert other.append_to_log("w", sent).appended == []
    fresh = [Message.user("after")]
    assert other.append_to_log("w", [*sent, *fresh]).appended == fresh
    indexed = [row.msg_id for row in held] + [fresh[0].id]
    assert sorted(_index(repository, "w")) == sorted(indexed)
    assert repository.find_by_conversation_id("w") == [*stored, *fresh]
    # A window append drops the index again; save_all too.
    repository.append_to_window("w", [Message.assistant("done")], window)
    assert _index(repository, "w") == []
    other.append_to_log("w", [Message.user("more")])
    assert _index(repository, "w")
    saved = [Message.system("T"), Message.user("x")]
    repository.save_all("w", saved)
    assert _index(repository, "w") == []
    assert other.find_window("w", window) == saved
    assert other.append_to_log("w", saved).appended == []
    assert other.append_to_log("w", [Message.system("T")]).appended == []


#: The table release 0.2 made, before the log's static columns.
_OLDER_TABLE = (
    "CREATE TABLE {} (conversation_id text, lane tinyint, seq bigint, "
    "next_seq bigint static, emptied boolean static, msg_id text, role text, "
    "size_counter text, size int, payload text, "
    "PRIMARY KEY ((conversation_id), lane, seq)) "
    "WITH CLUSTERING ORDER BY (lane ASC, seq ASC)"
)


def test_cassandra_log_opens_a_table_made_before_the_log(
    make: Callable[..., CassandraChatMemoryRepository],
    session: Session,
    keyspace: str,
) -> None:
    table = f"old_{uuid.uuid4().hex[:12]}"
    session.execute(_OLDER_TABLE.format(f'"{keyspace}"."{table}"'))
    old = [Message.system("S"), Message.user("u1"), Message.assistant("a1")]
    gone = Message.user("evicted")
    # As release 0.2 wrote a window: system lane, message lane, record, version.
    insert = (
        f'INSERT INTO "{keyspace}"."{table}" '
        "(conversation_id, lane, seq, msg_id, role, payload) VALUES (?, ?, ?, ?, ?, ?)"
    )
    prepared = session.prepare(insert)
    for seq, message in enumerate(old, 11):
        lane = LANE_SYSTEM if seq == 11 else LANE_OTHER
        session.execute(
            prepared,
            ("c", lane, seq, message.id, message.role.value, codec.to_json(message)),
        )
    session.execute(
        f'INSERT INTO "{keyspace}"."{table}" (conversation_id, lane, seq, msg_id) '
        "VALUES (%s, %s, %s, %s)",
        ("c", LANE_EVICTED, 10, gone.id),
    )
    session.execute(
        f'UPDATE "{keyspace}"."{table}" SET next_seq = 14 WHERE conversation_id = %s',
        ("c",),
    )
    unprepared = make(table=table, create_schema=False)
    with pytest.raises(InvalidRequest) as refused:
        unprepared.find_window("c", MessageWindow(10))
    assert "create_schema()" in "".join(refused.value.__notes__)
    repository = make(table=table)  # adds the columns
    assert [m.id for m in repository.find_window("c", MessageWindow(10))] == [
        m.id for m in old
    ]
    assert repository.append_to_log("c", [gone, old[1], old[0]]).appended == []
    fresh = [Message.system("S2"), Message.user("u2")]
    assert repository.append_to_log("c", [*old, *fresh]).appended == fresh
    assert [m.content for m in repository.find_window("c", MessageWindow(10))] == [
        "u1",
        "a1",
        "S2",
        "u2",
    ]
    assert [m.content for m in repository.find_by_conversation_id("c")] == [
        "S",
        "u1",
        "a1",
        "S2",
        "u2",
    ]
    rows = _messages_in(repository, "c")
    assert sorted(row.seq for row in rows) == [11, 12, 13, 14, 15]


def test_cassandra_log_ids_that_share_a_slot_are_told_apart(
    make: Callable[..., CassandraChatMemoryRepository],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Four home slots for every id: most ids collide and are probed further.
    home = id_index.home_slot
    monkeypatch.setattr(id_index, "home_slot", lambda i: home(i) % 4)
    first, second = make(), make()
    sent: list[Message] = []
    for n in range(8):
        batch = _turn(n)
        writer = first if n % 2 else second
        assert writer.append_to_log("c", [*sent[-3:], *batch]).appended == batch
        sent += batch
    assert [m.id for m in first.find_by_conversation_id("c")] == [m.id for m in sent]
    assert sorted(_index(first, "c")) == sorted(m.id for m in sent)
    assert make().append_to_log("c", sent).appended == []


def test_cassandra_log_with_a_ttl_rewrites_every_cell_in_one_batch(
    make: Callable[..., CassandraChatMemoryRepository],
) -> None:
    repository = make(ttl=3600)
    window = TokenWindow(500, estimate_tokens, "estimate_tokens")
    repository.append_to_log("c", [Message.system("S"), *_turn(0)], window)
    repository.append_to_log("c", _turn(1), window)
    rows = _cql(
        repository,
        "SELECT lane, WRITETIME(msg_id) AS at, TTL(msg_id) AS ttl FROM T "
        "WHERE conversation_id = %s",
        "c",
    )
    assert {row.lane for row in rows} == {LANE_SYSTEM, LANE_OTHER, LANE_IDS}
    assert len({row.at for row in rows}) == 1, "one batch wrote every row"
    assert all(3000 < row.ttl <= 3600 for row in rows)
    statics = _cql(
        repository,
        "SELECT TTL(next_seq) AS a, TTL(system_batch) AS b, TTL(indexed) AS c "
        "FROM T WHERE conversation_id = %s LIMIT 1",
        "c",
    )
    assert all(3000 < ttl <= 3600 for ttl in statics[0])
    repository.append_to_log("c", [Message.user("x" * 30_000)])
    small = make(ttl=3600, max_write_bytes=96 * 1024, table=repository.table)
    small.append_to_log("d", [Message.user("x" * 20_000)])  # fits alone
    with pytest.raises(MessageTooLargeError):
        # The log no longer fits one write with every cell rewritten.
        small.append_to_log("c", [Message.user("x" * 20_000)])
    assert len(repository.find_by_conversation_id("c")) == 6


def _appender(url: str, table: str, name: str, count: int) -> None:
    """Append ``count`` messages to conversation ``race``, in its own process."""
    repository = CassandraChatMemoryRepository.from_url(url, table=table)
    try:
        for n in range(count):
            repository.append_to_log("race", [Message.user(f"{name}-{n}")])
    finally:
        repository.close()


def test_cassandra_log_appends_from_threads_and_processes_are_gap_free(
    make: Callable[..., CassandraChatMemoryRepository], url: str
) -> None:
    shared = make()
    shared.append_to_log("race", [Message.system("S")])
    per_writer = 12
    failures: list[BaseException] = []

    def run(repository: CassandraChatMemoryRepository, name: str) -> None:
        try:
            for n in range(per_writer):
                repository.append_to_log("race", [Message.user(f"{name}-{n}")])
        except BaseException as error:  # reported below
            failures.append(error)

    threads = [
        threading.Thread(target=run, args=(shared, "shared-a")),
        threading.Thread(target=run, args=(shared, "shared-b")),
        threading.Thread(target=run, args=(make(), "own")),
    ]
    context = multiprocessing.get_context("spawn")
    processes = [
        context.Process(target=_appender, args=(url, shared.table, f"p{n}", per_writer))
        for n in range(2)
    ]
    for thread in threads:
        thread.start()
    for process in processes:
        process.start()
    for thread in threads:
        thread.join(WAIT_SECONDS)
    for process in processes:
        process.join(WAIT_SECONDS)
    assert failures == []
    assert [p.exitcode for p in processes] == [0, 0]
    rows = sorted(_messages_in(shared, "race"), key=lambda row: row.seq)
    assert len(rows) == 1 + 5 * per_writer
    seqs = [row.seq for row in rows]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), "gap-free"
    contents = [m.content or "" for m in shared.find_by_conversation_id("race")]
    assert len(set(contents)) == len(contents)
    for name in ("shared-a", "shared-b", "own", "p0", "p1"):
        mine = [c for c in contents if c.startswith(f"{name}-")]
        assert mine == [f"{name}-{n}" for n in range(per_writer)], "in order"
    assert sorted(_index(shared, "race")) == sorted(row.msg_id for row in rows)
