"""The conformance suite on a STAND-IN, not on MongoDB.

No MongoDB server runs where these tests were written, and mongomock alone
cannot evaluate the adapter's update pipeline (it lacks ``$reduce``, ``$range``,
``$mergeObjects`` and ``$anyElementTrue``), so the suite does not run on plain
mongomock. This class runs it on :class:`tests.mongodb.standin.StandInClient`:
mongomock storage plus a test-only evaluator of the pipeline's operators, one
lock standing in for single-document atomicity. It checks the adapter's code
and the window logic of its pipeline; it says nothing about a real server,
which ``tests/conformance/test_mongodb.py`` covers where one is reachable.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
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

pytest.importorskip("mongomock")

from chatledger_mongodb import MongoDBChatMemoryRepository
from tests.conformance.test_mongodb import small_reads
from tests.mongodb.standin import StandInClient


class TestMongoDBStandInEvaluator(ChatMemoryRepositoryTests, ConversationInfoTests):
    """Suite on mongomock + the pipeline evaluator: a stand-in, NOT a server."""

    supports_atomic_append = True
    supports_ttl = True
    supports_retention = True

    @pytest.fixture
    def client(self) -> StandInClient:
        return StandInClient()

    @pytest.fixture
    def repository(self, client: StandInClient) -> MongoDBChatMemoryRepository:
        return MongoDBChatMemoryRepository(client, collection=f"c_{uuid.uuid4().hex}")  # type: ignore[arg-type]

    @pytest.fixture
    def make_repository_with_ttl(
        self, client: StandInClient
    ) -> Callable[[timedelta], Any]:
        return lambda ttl: MongoDBChatMemoryRepository(
            client,  # type: ignore[arg-type]
            collection=f"c_{uuid.uuid4().hex}",
            ttl=ttl,
        )

    @pytest.fixture
    def make_repository_with_retention(
        self, client: StandInClient
    ) -> Callable[[Retention], Any]:
        return lambda retention: MongoDBChatMemoryRepository(
            client,  # type: ignore[arg-type]
            collection=f"c_{uuid.uuid4().hex}",
            retention=retention,
        )


class TestMongoDBStandInLogInSmallReads(LogTests, LogRemovalTests, RetentionTests):
    """The log suite on the stand-in (NOT a server), views read a row or two at a time.

    Every view of the random histories then reads further back through the
    further-read aggregation, and meets a read's boundary at every row; so
    does the view a bounded log's trim reads.
    """

    supports_retention = True

    @pytest.fixture
    def repository(self) -> MongoDBChatMemoryRepository:
        repository = MongoDBChatMemoryRepository(
            StandInClient(),  # type: ignore[arg-type]
            collection=f"c_{uuid.uuid4().hex}",
        )
        repository._view_reads = small_reads
        return repository

    @pytest.fixture
    def make_repository_with_retention(self) -> Callable[[Retention], Any]:
        def make(retention: Retention) -> MongoDBChatMemoryRepository:
            repository = MongoDBChatMemoryRepository(
                StandInClient(),  # type: ignore[arg-type]
                collection=f"c_{uuid.uuid4().hex}",
                retention=retention,
            )
            repository._view_reads = small_reads
            return repository

        return make
