"""The conformance suite on a real MongoDB server.

The server comes from ``CHATLEDGER_TEST_MONGODB_URL`` (e.g.
``mongodb://127.0.0.1:27017/?replicaSet=rs0``), else a ``mongo:8`` container
where a Docker daemon answers, else the tests are skipped with that reason.
Each test gets its own collection in the database ``chatledger_test`` and drops
it afterwards.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest

from chatledger.retention import Retention
from chatledger.testing import (
    ChatMemoryRepositoryTests,
    ConversationInfoTests,
    LogRemovalTests,
    LogTests,
    RetentionTests,
)
from chatledger.window import Window
from tests.backends import backend_url

pymongo = pytest.importorskip("pymongo")
chatledger_mongodb = pytest.importorskip("chatledger_mongodb")

DATABASE = "chatledger_test"


@pytest.fixture(scope="module")
def mongo_client(required: set[str]) -> Iterator[Any]:
    client = pymongo.MongoClient(backend_url("mongodb", required))
    yield client
    client.close()


@pytest.fixture
def collections(mongo_client: Any) -> Iterator[list[str]]:
    """The names of the collections a test made, dropped after it."""
    names: list[str] = []
    yield names
    for name in names:
        mongo_client[DATABASE].drop_collection(name)


def small_reads(window: Window) -> Iterator[int]:
    """One row first, then two a read: every view walks back through further reads."""
    yield 1
    yield from itertools.repeat(2)


class TestMongoDBConformance(ChatMemoryRepositoryTests, ConversationInfoTests):
    """The whole suite against a real MongoDB server."""

    supports_atomic_append = True
    supports_ttl = True
    supports_retention = True
    # SCAN and cursors fetch in batches: the paging test crosses them.
    many_conversations = 10_000

    def _make(self, client: Any, names: list[str], **options: Any) -> Any:
        name = f"cl_{uuid.uuid4().hex}"
        names.append(name)
        return chatledger_mongodb.MongoDBChatMemoryRepository(
            client, database=DATABASE, collection=name, **options
        )

    @pytest.fixture
    def repository(self, mongo_client: Any, collections: list[str]) -> Any:
        return self._make(mongo_client, collections)

    @pytest.fixture
    def make_repository_with_ttl(
        self, mongo_client: Any, collections: list[str]
    ) -> Callable[[timedelta], Any]:
        return lambda ttl: self._make(mongo_client, collections, ttl=ttl)

    @pytest.fixture
    def make_repository_with_retention(
        self, mongo_client: Any, collections: list[str]
    ) -> Callable[[Retention], Any]:
        return lambda retention: self._make(
            mongo_client, collections, retention=retention
        )


class TestMongoDBLogInSmallReads(LogTests, LogRemovalTests, RetentionTests):
    """The log suite with views read a row or two at a time.

    The suite's own views (the window's limit plus a few rows) rarely read
    twice: here every view of the random histories reads further back, a
    row or two per aggregation, and meets a read's boundary at every row;
    so does the view a bounded log's trim reads.
    """

    supports_retention = True

    @pytest.fixture
    def repository(self, mongo_client: Any, collections: list[str]) -> Any:
        name = f"cl_{uuid.uuid4().hex}"
        collections.append(name)
        repository = chatledger_mongodb.MongoDBChatMemoryRepository(
            mongo_client, database=DATABASE, collection=name
        )
        repository._view_reads = small_reads
        return repository

    @pytest.fixture
    def make_repository_with_retention(
        self, mongo_client: Any, collections: list[str]
    ) -> Callable[[Retention], Any]:
        def make(retention: Retention) -> Any:
            name = f"cl_{uuid.uuid4().hex}"
            collections.append(name)
            repository = chatledger_mongodb.MongoDBChatMemoryRepository(
                mongo_client, database=DATABASE, collection=name, retention=retention
            )
            repository._view_reads = small_reads
            return repository

        return make
