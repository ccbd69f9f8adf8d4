"""What the adapter leaves in a real Cassandra, beyond what the conformance suite sees.

The server comes from ``CHATLEDGER_TEST_CASSANDRA_URL`` (see
``tests/conformance/test_cassandra.py``); without one these tests are skipped,
or fail when the backend is required.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
from cassandra import InvalidRequest

from chatledger import Message, MessageWindow, StoreNotFoundError, ToolResponse
from chatledger.adapters import EVICTED_IDS_KEPT
from chatledger_cassandra import CassandraChatMemoryRepository
from chatledger_cassandra.statements import LANE_EVICTED
from tests.backends import backend_url
from tests.docs.examples import readme_examples


def _orphan(call: str) -> Message:
    """A tool response whose call is not stored: the one message a window
    takes out of a history with no user message."""
    return Message.tool(ToolResponse(id=call, name="f", data="{}"))


@pytest.fixture
def repository(required: set[str]) -> Iterator[CassandraChatMemoryRepository]:
    """A repository on a table of its own, dropped afterwards."""
    url = backend_url("cassandra", required)
    repository = CassandraChatMemoryRepository.from_url(
        url, table=f"srv_{uuid.uuid4().hex[:12]}", create_keyspace=True
    )
    try:
        yield repository
    finally:
        repository.drop_schema()
        repository.close()


def _elsewhere(url: str, keyspace: str) -> str:
    """``url`` with its keyspace replaced by ``keyspace``."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{keyspace}"))


def _listed(url: str, options: dict[str, Any]) -> list[str]:
    with CassandraChatMemoryRepository.from_url(url, **options) as repository:
        return repository.find_conversation_ids()


@pytest.mark.parametrize(
    "options", [{}, {"create_schema": False}], ids=["writer", "reader"]
)
def test_cassandra_a_missing_keyspace_names_create_keyspace(
    required: set[str], options: dict[str, Any]
) -> None:
    keyspace = f"absent_{uuid.uuid4().hex[:12]}"
    url = _elsewhere(backend_url("cassandra", required), keyspace)
    with pytest.raises(StoreNotFoundError) as raised:
        _listed(url, options)
    message = str(raised.value)
    assert f"keyspace {keyspace!r} does not exist" in message
    assert "create_keyspace=True" in message
    assert isinstance(raised.value.__cause__, InvalidRequest)


def test_cassandra_readme_example_with_its_own_session(required: set[str]) -> None:
    # As written but for the host and the keyspace: one made for this test.
    [_, example, _] = [
        e.code for e in readme_examples() if e.group == "packages/cassandra/README.md"
    ]
    url = backend_url("cassandra", required)
    host, keyspace = urlsplit(url).hostname, f"readme_{uuid.uuid4().hex[:12]}"
    assert '["127.0.0.1"]' in example
    assert 'keyspace="chat"' in example
    code = example.replace('["127.0.0.1"]', f"[{host!r}]").replace(
        'keyspace="chat"', f"keyspace={keyspace!r}"
    )
    # The README's first block imported the class.
    namespace: dict[str, Any] = {
        "CassandraChatMemoryRepository": CassandraChatMemoryRepository
    }
    exec(compile(code, "packages/cassandra/README.md", "exec"), namespace)
    repository = namespace["repository"]
    session = namespace["session"]
    try:
        repository.save_all("c1", [Message.user("hi")])
        assert [m.content for m in repository.find_by_conversation_id("c1")] == ["hi"]
    finally:
        session.execute(f'DROP KEYSPACE IF EXISTS "{keyspace}"')
        session.cluster.shutdown()


def _tombstone_reports(repository: CassandraChatMemoryRepository) -> list[str]:
    """What the server's trace says a read of conversation ``c`` stepped over."""
    result = repository.session.execute(
        f'SELECT * FROM "{repository.keyspace}"."{repository.table}" '
        "WHERE conversation_id = %s",
        ("c",),
        trace=True,
    )
    rows = list(result)
    assert rows
    events = result.get_query_trace(max_wait_sec=30).events
    return [e.description for e in events if "tombstone cells" in e.description]


def test_cassandra_messages_without_a_size_leave_no_tombstones(
    repository: CassandraChatMemoryRepository,
) -> None:
    # A message window stores no size: those columns must be left unset, not
    # written as nulls (each null is a tombstone every later read steps over).
    for n in range(5):
        repository.append_to_window(
            "c", [Message.user(f"u{n}"), Message.assistant(f"a{n}")], MessageWindow(100)
        )
    reports = _tombstone_reports(repository)
    assert reports, "the trace reports no read"
    assert all(r.endswith(" 0 tombstone cells") for r in reports), reports


def _record(repository: CassandraChatMemoryRepository, conversation_id: str) -> Any:
    """The rows of a conversation's record of evicted ids, with their TTLs."""
    return list(
        repository.session.execute(
            f"SELECT seq, msg_id, TTL(msg_id) AS ttl FROM "
            f'"{repository.keyspace}"."{repository.table}" '
            "WHERE conversation_id = %s AND lane = %s",
            (conversation_id, LANE_EVICTED),
        )
    )


def _partitions(repository: CassandraChatMemoryRepository) -> set[str]:
    rows = repository.session.execute(
        f'SELECT DISTINCT conversation_id FROM "{repository.keyspace}".'
        f'"{repository.table}"'
    )
    return {row.conversation_id for row in rows}


def test_cassandra_emptied_conversation_keeps_its_record_unlisted(
    repository: CassandraChatMemoryRepository,
) -> None:
    window = MessageWindow(1)
    # Only tool responses without their calls all go: a history with no user
    # message is otherwise kept whole (rules 3 and 4).
    first = [_orphan("c1")]
    repository.save_all("gone", first)
    repository.append_to_window("kept", [Message.user("U")], window)
    second = [_orphan("c2")]
    repository.append_to_window("gone", second, window)
    # The window took every message out: the partition stays for the record.
    assert "gone" in _partitions(repository)
    assert {r.msg_id for r in _record(repository, "gone")} == {
        m.id for m in first + second
    }
    assert repository.find_by_conversation_id("gone") == []
    assert repository.count_messages("gone") == 0
    assert repository.find_conversation_ids() == ["kept"]
    page = repository.find_conversation_ids_page(limit=1)
    assert (page.ids, page.next_cursor) == (["kept"], None)
    # A late retry is still a no-op, seen by another repository as well.
    other = CassandraChatMemoryRepository(
        repository.session, keyspace=repository.keyspace, table=repository.table
    )
    assert other.append_to_window("gone", first, window).appended == []
    assert repository.find_conversation_ids() == ["kept"]
    third = [Message.user("U3")]
    assert other.append_to_window("gone", third, window).appended == third
    assert sorted(repository.find_conversation_ids()) == ["gone", "kept"]
    # Reads never make a partition.
    repository.find_by_conversation_id("never")
    repository.count_messages("never")
    assert "never" not in _partitions(repository)
    repository.delete_by_conversation_id("gone")
    assert "gone" not in _partitions(repository)


def test_cassandra_record_is_read_by_a_repository_that_did_not_write_it(
    repository: CassandraChatMemoryRepository,
) -> None:
    window = MessageWindow(2)
    other = CassandraChatMemoryRepository(
        repository.session, keyspace=repository.keyspace, table=repository.table
    )
    first = [Message.user("U1"), Message.assistant("A1")]
    second = [Message.user("U2"), Message.assistant("A2")]
    repository.append_to_window("c", first, window)
    other.append_to_window("c", second, window)  # evicts first
    # repository's remembered snapshot is stale: it reads the partition again.
    assert repository.append_to_window("c", first, window).appended == []
    assert repository.find_by_conversation_id("c") == second


def test_cassandra_pages_step_over_emptied_partitions(
    repository: CassandraChatMemoryRepository,
) -> None:
    window = MessageWindow(1)
    listed = {f"keep{n}" for n in range(7)}
    for n in range(20):
        repository.save_all(f"gone{n}", [_orphan("c1")])
        repository.append_to_window(f"gone{n}", [_orphan("c2")], window)
    for conversation_id in listed:
        repository.append_to_window(conversation_id, [Message.user("U")], window)
    assert len(_partitions(repository)) == 27
    for limit in (1, 2, 3, 7, 8, 100):
        seen: list[str] = []
        cursor = None
        while True:
            page = repository.find_conversation_ids_page(cursor, limit)
            seen += page.ids
            if page.next_cursor is None:
                assert len(page.ids) <= limit
                break
            assert len(page.ids) == limit
            cursor = page.next_cursor
        assert sorted(seen) == sorted(listed)


def test_cassandra_record_of_a_huge_eviction_keeps_the_newest_ids(
    repository: CassandraChatMemoryRepository,
) -> None:
    many = [Message.user(f"u{n}") for n in range(EVICTED_IDS_KEPT + 300)]
    repository.save_all("c", many)
    window = MessageWindow(1)
    result = repository.append_to_window("c", [Message.user("last")], window)
    assert result.evicted_ids == [m.id for m in many]
    assert {r.msg_id for r in _record(repository, "c")} == {
        m.id for m in many[-EVICTED_IDS_KEPT:]
    }
    assert repository.append_to_window("c", many[-1:], window).appended == []
    # An id older than the newest EVICTED_IDS_KEPT is no longer recognised.
    assert repository.append_to_window("c", many[:1], window).appended == many[:1]
    repository.save_all("c", many[:2])
    assert _record(repository, "c") == []


def test_cassandra_record_rows_expire_with_the_conversation(
    required: set[str],
) -> None:
    url = backend_url("cassandra", required)
    with CassandraChatMemoryRepository.from_url(
        url, table=f"srv_{uuid.uuid4().hex[:12]}", create_keyspace=True, ttl=600
    ) as repository:
        try:
            window = MessageWindow(1)
            repository.save_all("c", [_orphan("c1")])
            repository.append_to_window("c", [_orphan("c2")], window)
            rows = _record(repository, "c")
            assert len(rows) == 2
            assert all(0 < row.ttl <= 600 for row in rows)
        finally:
            repository.drop_schema()
