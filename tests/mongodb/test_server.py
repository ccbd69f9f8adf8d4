"""MongoDB adapter tests that only a real server can answer.

Skipped with a reason unless ``CHATLEDGER_TEST_MONGODB_URL`` is set or a Docker
daemon answers (see ``tests/backends.py``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from chatledger import Message, MessageTooLargeError
from chatledger.adapters import TURN_SLACK
from chatledger.validation import stamp_messages
from chatledger.window import MessageWindow
from tests.backends import backend_url

pymongo = pytest.importorskip("pymongo")

import bson  # noqa: E402
from pymongo import monitoring  # noqa: E402

from chatledger_mongodb import MongoDBChatMemoryRepository  # noqa: E402


@pytest.fixture
def server_repository(required: set[str]) -> Iterator[MongoDBChatMemoryRepository]:
    client: Any = pymongo.MongoClient(backend_url("mongodb", required))
    name = f"cl_{uuid.uuid4().hex}"
    try:
        yield MongoDBChatMemoryRepository(
            client, database="chatledger_test", collection=name
        )
    finally:
        client["chatledger_test"].drop_collection(name)
        client.close()


def test_mongodb_server_refuses_a_grown_document_and_changes_nothing(
    server_repository: MongoDBChatMemoryRepository,
) -> None:
    """Two 9 MB appends do not fit one document: the second raises, atomically."""
    first = Message.user("a" * 9_000_000)
    server_repository.append_to_window("big", [first], MessageWindow(10))
    before = server_repository.collection.find_one({"_id": "big"}, {"version": 1})
    with pytest.raises(MessageTooLargeError):
        server_repository.append_to_window(
            "big", [Message.assistant("b" * 9_000_000)], MessageWindow(10)
        )
    after = server_repository.collection.find_one({"_id": "big"}, {"version": 1})
    assert after == before
    assert [m.id for m in server_repository.find_by_conversation_id("big")] == [
        first.id
    ]


def test_mongodb_server_has_the_ttl_index(
    server_repository: MongoDBChatMemoryRepository,
) -> None:
    """The TTL index exists once, however often the repository is constructed."""
    server_repository.create_indexes()
    info = server_repository.collection.index_information()
    assert info["chatledger_expires_at"]["expireAfterSeconds"] == 0


def test_mongodb_server_refuses_a_log_past_16_mib_and_changes_nothing(
    server_repository: MongoDBChatMemoryRepository,
) -> None:
    """The log is one document: an append past 16 MiB raises, atomically."""
    first = Message.user("a" * 9_000_000)
    server_repository.append_to_log("big", [first])
    before = server_repository.collection.find_one({"_id": "big"}, {"version": 1})
    with pytest.raises(MessageTooLargeError):
        server_repository.append_to_log("big", [Message.assistant("b" * 9_000_000)])
    after = server_repository.collection.find_one({"_id": "big"}, {"version": 1})
    assert after == before
    assert [m.id for m in server_repository.find_by_conversation_id("big")] == [
        first.id
    ]


class _Commands(monitoring.CommandListener):
    """Each command the client sends, with what it carried and what came back."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, int]] = []
        self.rows: list[int] = []

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        command = event.command
        payload = command.get("update", command.get("pipeline"))
        self.sent.append((event.command_name, len(bson.encode({"p": payload}))))

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        if event.command_name == "aggregate":
            (found,) = event.reply["cursor"]["firstBatch"]
            self.rows.append(len(found.get("tail", found.get("rows", []))))

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass


@pytest.mark.parametrize("limit", [20, 200])
def test_mongodb_server_log_append_view_and_page_are_one_command_each(
    required: set[str], limit: int
) -> None:
    """On 20 and 2000 stored messages, the same three commands, one per call.

    A log append is one ``findAndModify``, a view that its first read
    settles one ``aggregate`` (no ``getMore``), a page one ``aggregate``; the
    rows that cross are the window's limit plus ``TURN_SLACK`` at most, and
    the page's size plus one.
    """
    listener = _Commands()
    at = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
    batch = stamp_messages([Message.user("next")], at)
    client: Any = pymongo.MongoClient(
        backend_url("mongodb", required), event_listeners=[listener]
    )
    name = f"cl_{uuid.uuid4().hex}"
    window = MessageWindow(limit)
    try:
        repository = MongoDBChatMemoryRepository(
            client, database="chatledger_test", collection=name
        )
        sent: dict[int, list[tuple[str, int]]] = {}
        for count in (20, 2000):
            cid = f"c{count:04d}"
            repository.save_all(
                cid,
                [
                    m
                    for n in range(count // 2)
                    for m in (Message.user(f"u{n}"), Message.assistant(f"a{n}"))
                ],
            )
            listener.sent.clear()
            listener.rows.clear()
            repository.append_to_log(cid, batch, window)
            assert len(repository.find_window(cid, window)) <= limit
            assert len(repository.find_messages_page(cid, limit=10).messages) == 10
            assert [n for n, _ in listener.sent] == [
                "findAndModify",
                "aggregate",
                "aggregate",
            ]
            sent[count] = list(listener.sent)
            assert listener.rows == [min(count + 1, limit + TURN_SLACK), 11]
        assert sent[20] == sent[2000]
    finally:
        client["chatledger_test"].drop_collection(name)
        client.close()
