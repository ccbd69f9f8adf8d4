"""What the repository does before it talks to a server (no server needed)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from importlib.metadata import entry_points
from typing import Any

import pytest
from cassandra import DriverException

from chatledger import (
    AppendResult,
    InvalidConversationIdError,
    InvalidMessageError,
    InvalidNameError,
    InvalidPageError,
    Message,
    MessageTooLargeError,
    MessageWindow,
    connect_async,
)
from chatledger_cassandra import (
    AsyncCassandraChatMemoryRepository,
    CassandraChatMemoryRepository,
    InvalidTTLError,
    InvalidURLError,
)
from chatledger_cassandra.connecting import url_settings


class Untouchable:
    """A stand-in session that fails the test if the repository uses it."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the session was used ({name}) before validation")


def test_cassandra_module_imports_without_a_server() -> None:
    code = (
        "import chatledger_cassandra as m, socket\n"
        "assert m.CassandraChatMemoryRepository.from_url\n"
        "print('ok')"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_cassandra_entry_point_resolves_to_from_url() -> None:
    (entry,) = [
        e
        for e in entry_points(group="chatledger.repositories")
        if e.name == "cassandra"
    ]
    assert entry.value == "chatledger_cassandra:CassandraChatMemoryRepository.from_url"
    assert entry.load() == CassandraChatMemoryRepository.from_url


@pytest.mark.parametrize(
    "options",
    [
        {"keyspace": "Bad"},
        {"table": "no-dash"},
        {"table": "x" * 49},
        {"create_keyspace": True, "replication": {"class": "SimpleStrategy"}},
        {"replication": {"class": "SimpleStrategy", "replication_factor": "1'"}},
    ],
)
def test_cassandra_bad_names_fail_before_any_io(options: dict[str, Any]) -> None:
    with pytest.raises(InvalidNameError):
        CassandraChatMemoryRepository(Untouchable(), **options)


def test_cassandra_bad_ttl_fails_before_any_io() -> None:
    with pytest.raises(InvalidTTLError):
        CassandraChatMemoryRepository(Untouchable(), ttl=-5)


def test_cassandra_missing_session_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        CassandraChatMemoryRepository(None)


@pytest.mark.parametrize(
    "url",
    [
        "cassandra://127.0.0.1:1/ks?bogus=1",
        "cassandra://127.0.0.1:1/ks?create_schema=maybe",
        "cassandra://127.0.0.1:1/ks?ttl=soon",
        "cassandra://127.0.0.1:1/ks?protocol_version=v4",
        "cassandra://127.0.0.1:1/ks?replication_factor=three",
        "postgresql://127.0.0.1/ks",
    ],
)
def test_cassandra_from_url_rejects_bad_urls_before_connecting(url: str) -> None:
    with pytest.raises(InvalidURLError):
        CassandraChatMemoryRepository.from_url(url)


def test_cassandra_from_url_bad_name_fails_before_connecting() -> None:
    with pytest.raises(InvalidNameError):
        CassandraChatMemoryRepository.from_url("cassandra://127.0.0.1:1/Bad_Keyspace")


def test_cassandra_unreachable_server_raises_the_driver_error() -> None:
    from cassandra.cluster import NoHostAvailable

    # Nothing listens on port 1: opening does not notice, and the first call
    # raises the driver's own error unchanged.
    with (
        CassandraChatMemoryRepository.from_url(
            "cassandra://127.0.0.1:1/ks?connect_timeout=2&protocol_version=4"
        ) as repository,
        pytest.raises(NoHostAvailable),
    ):
        repository.find_conversation_ids()


def test_cassandra_async_entry_point_resolves_to_from_url() -> None:
    (entry,) = [
        e
        for e in entry_points(group="chatledger.async_repositories")
        if e.name == "cassandra"
    ]
    assert entry.load() == AsyncCassandraChatMemoryRepository.from_url


def test_cassandra_connect_async_opens_nothing() -> None:
    # No host resolves here and nothing listens on port 1: opening the
    # repository must not notice, because it does no I/O.
    for url in (
        "cassandra://no-such-host.invalid/ks",
        "cassandra://127.0.0.1:1/ks?connect_timeout=1",
    ):
        repository = connect_async(url, table="memory")
        assert isinstance(repository, AsyncCassandraChatMemoryRepository)
        assert repository.session is None
        asyncio.run(repository.aclose())


def test_cassandra_async_first_call_raises_the_driver_error() -> None:
    from cassandra.cluster import NoHostAvailable

    async def main() -> None:
        async with AsyncCassandraChatMemoryRepository.from_url(
            "cassandra://127.0.0.1:1/ks?connect_timeout=2&protocol_version=4"
        ) as repository:
            for _ in range(2):  # a failed connect is tried again by the next call
                with pytest.raises(NoHostAvailable):
                    await repository.find_conversation_ids()
        with pytest.raises(DriverException):
            await repository.find_conversation_ids()  # closed: never reconnects

    asyncio.run(main())


@pytest.mark.parametrize(
    "options",
    [
        {"keyspace": "Bad"},
        {"table": "no-dash"},
        {"replication": {"class": "SimpleStrategy", "replication_factor": "1'"}},
    ],
)
def test_cassandra_async_bad_names_fail_before_any_io(options: dict[str, Any]) -> None:
    with pytest.raises(InvalidNameError):
        AsyncCassandraChatMemoryRepository(Untouchable(), **options)
    with pytest.raises(InvalidNameError):
        AsyncCassandraChatMemoryRepository.from_url(
            "cassandra://127.0.0.1:1/ks", **options
        )


def test_cassandra_async_bad_options_fail_before_any_io() -> None:
    with pytest.raises(InvalidTTLError):
        AsyncCassandraChatMemoryRepository(Untouchable(), ttl=-5)
    with pytest.raises(InvalidTTLError):
        AsyncCassandraChatMemoryRepository.from_url("cassandra://127.0.0.1:1/ks?ttl=-1")
    with pytest.raises(InvalidURLError):
        AsyncCassandraChatMemoryRepository.from_url("cassandra://127.0.0.1:1/ks?x=1")
    with pytest.raises(TypeError):
        AsyncCassandraChatMemoryRepository(None)
    with pytest.raises(ValueError, match="max_attempts"):
        AsyncCassandraChatMemoryRepository(Untouchable(), max_attempts=0)


def test_cassandra_async_bad_input_fails_before_any_io() -> None:
    repository = AsyncCassandraChatMemoryRepository(Untouchable(), create_schema=False)
    window = MessageWindow(5)

    async def main() -> None:
        with pytest.raises(InvalidConversationIdError):
            await repository.find_by_conversation_id("")
        with pytest.raises(InvalidConversationIdError):
            await repository.count_messages(" ")
        with pytest.raises(InvalidMessageError):
            await repository.save_all("c", [None])  # type: ignore[list-item]
        with pytest.raises(InvalidMessageError):
            await repository.append_to_window("c", [None], window)  # type: ignore[list-item]
        with pytest.raises(InvalidPageError):
            await repository.find_conversation_ids_page("not-a-token")
        big = Message.user("x" * 2_000_000)
        small_limit = AsyncCassandraChatMemoryRepository(
            Untouchable(), create_schema=False, max_write_bytes=1_000_000
        )
        with pytest.raises(MessageTooLargeError):
            await small_limit.append_to_window("c", [big], window)
        assert await repository.append_to_window("c", [], window) == AppendResult()

    asyncio.run(main())


def test_the_control_connection_waits_ten_seconds_unless_told() -> None:
    """The driver's 2 s for the schema queries of a connect failed it on a
    busy node (NoHostAvailable, OperationTimedOut)."""
    cluster, _ = url_settings("cassandra://127.0.0.1/ks", {})
    assert cluster["control_connection_timeout"] == 10.0
    cluster, _ = url_settings(
        "cassandra://127.0.0.1/ks?control_connection_timeout=3.5", {}
    )
    assert cluster["control_connection_timeout"] == 3.5
    cluster, _ = url_settings(
        "cassandra://127.0.0.1/ks?control_connection_timeout=3.5",
        {"control_connection_timeout": 20},
    )
    assert cluster["control_connection_timeout"] == 20.0
    with pytest.raises(InvalidURLError):
        url_settings("cassandra://127.0.0.1/ks?control_connection_timeout=soon", {})
