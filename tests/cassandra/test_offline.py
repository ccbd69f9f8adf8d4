"""What the repository does before it talks to a server (no server needed)."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import entry_points
from typing import Any

import pytest

from chatledger import InvalidNameError
from chatledger_cassandra import (
    CassandraChatMemoryRepository,
    InvalidTTLError,
    InvalidURLError,
)


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

    # Nothing listens on port 1: the driver's own error comes through unchanged.
    with pytest.raises(NoHostAvailable):
        CassandraChatMemoryRepository.from_url(
            "cassandra://127.0.0.1:1/ks?connect_timeout=2&protocol_version=4"
        )
