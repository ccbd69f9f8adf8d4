"""What the adapter leaves in a real Cassandra, beyond what the conformance suite sees.

The server comes from ``CHATLEDGER_TEST_CASSANDRA_URL`` (see
``tests/conformance/test_cassandra.py``); without one these tests are skipped,
or fail when the backend is required.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from chatledger import Message, MessageWindow
from chatledger_cassandra import CassandraChatMemoryRepository
from tests.backends import backend_url


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
