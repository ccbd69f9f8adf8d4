"""Connecting to a real Cassandra when the driver fails a frame checksum on connect.

The DataStax driver now and then rejects a healthy node's first v5 frame on a
new connection ("CRC mismatch on header ..."). Here a loopback relay in front
of the real node spoils exactly that checksum, on the control connection or on
the session's pool, so the repositories' connect meets the same failure on
demand: it must connect again, and give up after ``CONNECT_ATTEMPTS`` such
failures; any other failure is not retried. The server comes from
``CHATLEDGER_TEST_CASSANDRA_URL`` (see ``tests/conformance/test_cassandra.py``);
without one these tests are skipped, or fail when the backend is required.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterator

import pytest
from cassandra.cluster import NoHostAvailable
from cassandra.connection import ConnectionShutdown

from chatledger import Message
from chatledger_cassandra import (
    AsyncCassandraChatMemoryRepository,
    CassandraChatMemoryRepository,
    parse_url,
)
from chatledger_cassandra.opening import CONNECT_ATTEMPTS, failed_on_checksums
from tests.backends import backend_url
from tests.cassandra.checksum_proxy import ChecksumBreakingProxy


@pytest.fixture
def relay_url(required: set[str]) -> Iterator[tuple[str, ChecksumBreakingProxy]]:
    """A URL through a relay that breaks no checksum until told which, on a
    fresh table of the test keyspace."""
    parsed = parse_url(backend_url("cassandra", required))
    table = f"open_{uuid.uuid4().hex[:12]}"
    with ChecksumBreakingProxy(parsed.contact_points[0], breaking=()) as proxy:
        relayed = f"cassandra://127.0.0.1:{proxy.port}/{parsed.keyspace}"
        yield f"{relayed}?table={table}", proxy
    cleanup = CassandraChatMemoryRepository.from_url(
        backend_url("cassandra", required), table=table, create_schema=False
    )
    cleanup.session.execute(f'DROP TABLE IF EXISTS "{parsed.keyspace}"."{table}"')
    cleanup.close()


#: The v5 connections a connect starts, in order: the control connection, then
#: the session's pool on the one node.
FIRST_CONNECTIONS = pytest.mark.parametrize(
    "broken", [1, 2], ids=["control-connection", "session-pool"]
)


@FIRST_CONNECTIONS
def test_a_connect_failing_on_a_checksum_is_made_again(
    relay_url: tuple[str, ChecksumBreakingProxy],
    broken: int,
    caplog: pytest.LogCaptureFixture,
) -> None:
    url, proxy = relay_url
    proxy.breaking = {broken}
    repository = CassandraChatMemoryRepository.from_url(url, create_keyspace=True)
    try:
        with caplog.at_level(logging.WARNING, logger="chatledger_cassandra.opening"):
            repository.append_to_log("c", [Message.user("hello")])
        assert [m.content for m in repository.find_by_conversation_id("c")] == ["hello"]
    finally:
        repository.close()
    assert proxy.broken == 1
    assert "on frame checksums (attempt 1 of 3)" in caplog.text


@FIRST_CONNECTIONS
def test_the_async_connect_is_made_again_too(
    relay_url: tuple[str, ChecksumBreakingProxy], broken: int
) -> None:
    url, proxy = relay_url
    proxy.breaking = {broken}

    async def scenario() -> list[str | None]:
        repository = AsyncCassandraChatMemoryRepository.from_url(
            url, create_keyspace=True
        )
        try:
            await repository.append_to_log("c", [Message.user("hello")])
            return [m.content for m in await repository.find_by_conversation_id("c")]
        finally:
            await repository.aclose()

    assert asyncio.run(scenario()) == ["hello"]
    assert proxy.broken == 1


def test_a_connect_that_keeps_failing_gives_up(
    relay_url: tuple[str, ChecksumBreakingProxy],
) -> None:
    url, proxy = relay_url
    proxy.breaking = range(1, 100)
    repository = CassandraChatMemoryRepository.from_url(url)
    try:
        with pytest.raises(NoHostAvailable, match="CRC mismatch"):
            repository.find_by_conversation_id("c")
    finally:
        repository.close()
    assert proxy.broken == CONNECT_ATTEMPTS


def test_only_checksum_failures_count() -> None:
    crc = ConnectionShutdown('CRC mismatch on header 20009. Received 1", computed 2.')
    refused = ConnectionRefusedError(111, "Connection refused")
    assert failed_on_checksums(NoHostAvailable("x", {"a": crc, "b": crc}))
    assert not failed_on_checksums(NoHostAvailable("x", {"a": crc, "b": refused}))
    assert not failed_on_checksums(NoHostAvailable("x", {}))
    assert not failed_on_checksums(ConnectionShutdown("CRC mismatch on header"))
