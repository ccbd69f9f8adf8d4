"""MongoDB adapter tests that only a real server can answer.

Skipped with a reason unless ``CHATLEDGER_TEST_MONGODB_URL`` is set or a Docker
daemon answers (see ``tests/backends.py``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from chatledger import Message, MessageTooLargeError
from chatledger.window import MessageWindow
from tests.backends import backend_url

pymongo = pytest.importorskip("pymongo")

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
