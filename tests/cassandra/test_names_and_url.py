"""Names, replication options, TTL conversion and URL parsing (no server)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from chatledger import InvalidNameError
from chatledger_cassandra import (
    MAX_TTL_SECONDS,
    InvalidTTLError,
    InvalidURLError,
    parse_url,
    ttl_seconds,
)
from chatledger_cassandra.names import render_replication, validate_name


@pytest.mark.parametrize("name", ["a", "chat_memory", "t1", "x" * 48, "select"])
def test_cassandra_accepts_lower_case_names(name: str) -> None:
    assert validate_name(name, "table") == name


@pytest.mark.parametrize(
    "name",
    [
        "",
        "1table",
        "_t",
        "Chat",
        "x" * 49,
        "a-b",
        "a b",
        'a"b',
        "a;DROP",
        "t\n",
        "ké",
        None,
        42,
    ],
)
def test_cassandra_rejects_other_names(name: object) -> None:
    with pytest.raises(InvalidNameError, match="not allowed"):
        validate_name(name, "keyspace")


def test_cassandra_renders_replication() -> None:
    assert (
        render_replication({"class": "NetworkTopologyStrategy", "dc-1": 3, "dc2": "2"})
        == "{'class': 'NetworkTopologyStrategy', 'dc-1': '3', 'dc2': '2'}"
    )


@pytest.mark.parametrize(
    "replication",
    [
        {},
        {"replication_factor": 1},
        {"class": "SimpleStrategy"},
        {"class": "Simple'Strategy", "replication_factor": 1},
        {"class": "SimpleStrategy", "replication_factor": 0},
        {"class": "SimpleStrategy", "replication_factor": True},
        {"class": "SimpleStrategy", "replication_factor": "1'}"},
        {"class": "SimpleStrategy", "dc'1": 1},
    ],
)
def test_cassandra_rejects_bad_replication(replication: dict[str, object]) -> None:
    with pytest.raises(InvalidNameError):
        render_replication(replication)


@pytest.mark.parametrize(
    ("ttl", "seconds"),
    [
        (None, 0),
        (timedelta(seconds=1), 1),
        (timedelta(milliseconds=1500), 2),
        (0.2, 1),
        (3600, 3600),
        (MAX_TTL_SECONDS, MAX_TTL_SECONDS),
    ],
)
def test_cassandra_ttl_is_whole_seconds_rounded_up(ttl: object, seconds: int) -> None:
    assert ttl_seconds(ttl) == seconds  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "ttl", [0, -1, timedelta(0), float("nan"), MAX_TTL_SECONDS + 1, True, "60"]
)
def test_cassandra_rejects_bad_ttl(ttl: object) -> None:
    with pytest.raises(InvalidTTLError):
        ttl_seconds(ttl)  # type: ignore[arg-type]


def test_cassandra_url_with_everything() -> None:
    url = parse_url(
        "cassandra://app%40corp:p%3Ass@db1,db2:9142,[::1]:9043/chat_ks"
        "?local_dc=dc1&ttl=60&table=mem"
    )
    assert url.contact_points == [("db1", 9042), ("db2", 9142), ("::1", 9043)]
    assert url.keyspace == "chat_ks"
    assert url.username == "app@corp"
    assert url.password == "p:ss"
    assert url.options == {"local_dc": "dc1", "ttl": "60", "table": "mem"}
    assert "p:ss" not in repr(url)


def test_cassandra_url_minimal() -> None:
    url = parse_url("cassandra://localhost")
    assert url.contact_points == [("localhost", 9042)]
    assert url.keyspace is None
    assert url.username is None
    assert url.password is None
    assert url.options == {}


@pytest.mark.parametrize(
    "url",
    [
        "redis://localhost",
        "cassandra://",
        "cassandra://host:0",
        "cassandra://host:99999",
        "cassandra://host:abc",
        "cassandra://a,,b",
        "cassandra://[::1",
        "cassandra://host/ks/extra",
        "cassandra://host/ks?bogus=1",
        "cassandra://host/ks?ttl=1&ttl=2",
        "cassandra://host/ks#frag",
    ],
)
def test_cassandra_rejects_bad_urls(url: str) -> None:
    with pytest.raises(InvalidURLError):
        parse_url(url)
