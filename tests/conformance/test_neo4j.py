"""The conformance suite on Neo4j 5 (``CHATLEDGER_TEST_NEO4J_URL`` or a container)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
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
from chatledger_neo4j import Neo4jChatMemoryRepository
from tests.backends import backend_url
from tests.neo4j.label_pool import LabelPool


@pytest.fixture(scope="module")
def neo4j_url(required: set[str]) -> str:
    return backend_url("neo4j", required)


@pytest.fixture(scope="module")
def labels(neo4j_url: str) -> Iterator[LabelPool]:
    """Label pairs this module's tests take and give back emptied."""
    pool = LabelPool(neo4j_url, "T")
    yield pool
    pool.close()


def small_reads(window: Window) -> Iterator[int]:
    """One row first, then two a read: every view walks back through further reads."""
    yield 1
    yield from itertools.repeat(2)


def _fresh(
    neo4j_url: str, labels: LabelPool, **options: Any
) -> Neo4jChatMemoryRepository:
    """A repository on a label pair of the pool's that holds nothing."""
    conversation_label, message_label = labels.take()
    return Neo4jChatMemoryRepository.from_url(
        neo4j_url,
        conversation_label=conversation_label,
        message_label=message_label,
        **options,
    )


def _given_back(labels: LabelPool, repository: Neo4jChatMemoryRepository) -> None:
    try:
        labels.give_back(repository)
    finally:
        repository.close()


def _made(
    neo4j_url: str,
    labels: LabelPool,
    reads: Callable[[Window], Iterator[int]] | None,
) -> Iterator[Callable[[Retention], Neo4jChatMemoryRepository]]:
    """A factory of bounded repositories, each on labels of its own."""
    made: list[Neo4jChatMemoryRepository] = []

    def make(retention: Retention) -> Neo4jChatMemoryRepository:
        repository = _fresh(neo4j_url, labels, retention=retention)
        if reads is not None:
            repository._view_reads = reads
        made.append(repository)
        return repository

    try:
        yield make
    finally:
        for repository in made:
            _given_back(labels, repository)


class TestNeo4jConformance(ChatMemoryRepositoryTests, ConversationInfoTests):
    supports_atomic_append = True
    supports_retention = True

    @pytest.fixture
    def repository(
        self, neo4j_url: str, labels: LabelPool
    ) -> Iterator[Neo4jChatMemoryRepository]:
        repository = _fresh(neo4j_url, labels)
        try:
            yield repository
        finally:
            _given_back(labels, repository)

    @pytest.fixture
    def make_repository_with_retention(
        self, neo4j_url: str, labels: LabelPool
    ) -> Iterator[Callable[[Retention], Neo4jChatMemoryRepository]]:
        yield from _made(neo4j_url, labels, None)


class TestNeo4jLogInSmallReads(LogTests, LogRemovalTests, RetentionTests):
    """The log, removal and retention suites with views read a row or two at
    a time.

    The suite's own views (the window's limit plus a few rows) rarely read
    twice: here every view of the random histories reads further back, a
    row or two per statement, and meets a read's boundary at every row;
    so does the view a trim reads holding the conversation's lock, and the
    views of a log that removals left holes in.
    """

    supports_retention = True

    @pytest.fixture
    def repository(
        self, neo4j_url: str, labels: LabelPool
    ) -> Iterator[Neo4jChatMemoryRepository]:
        repository = _fresh(neo4j_url, labels)
        repository._view_reads = small_reads
        try:
            yield repository
        finally:
            _given_back(labels, repository)

    @pytest.fixture
    def make_repository_with_retention(
        self, neo4j_url: str, labels: LabelPool
    ) -> Iterator[Callable[[Retention], Neo4jChatMemoryRepository]]:
        yield from _made(neo4j_url, labels, small_reads)
