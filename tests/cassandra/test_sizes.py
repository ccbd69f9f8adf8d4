"""Writes too large for one Cassandra request are refused before they are sent."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from chatledger import Message, MessageTooLargeError, MessageWindow
from chatledger.validation import stamp_messages
from chatledger_cassandra import CassandraChatMemoryRepository
from chatledger_cassandra.sizes import (
    DEFAULT_MAX_WRITE_BYTES,
    check_write,
    write_bytes,
)
from chatledger_cassandra.steps import plan_replace
from tests.backends import backend_url
from tests.cassandra.test_offline import Untouchable


def test_cassandra_write_size_counts_every_value_in_full() -> None:
    text = "é" * 1000  # two bytes each in UTF-8
    plan = plan_replace("c", None, stamp_messages([Message.user(text)]), 0)
    assert write_bytes(plan) > 2000 + len("c")
    check_write(plan, DEFAULT_MAX_WRITE_BYTES, "c")
    with pytest.raises(MessageTooLargeError, match="'c'"):
        check_write(plan, 2000, "c")


@pytest.mark.parametrize("how", ["append", "save_all"])
def test_cassandra_too_large_messages_fail_before_any_io(how: str) -> None:
    untouched: Any = Untouchable()
    repository = CassandraChatMemoryRepository(
        untouched, create_schema=False, max_write_bytes=100_000
    )
    big = [Message.user("x" * 100_000)]
    write: Callable[[], object] = {
        "append": lambda: repository.append_to_window("c", big, MessageWindow(10)),
        "save_all": lambda: repository.save_all("c", big),
    }[how]
    with pytest.raises(MessageTooLargeError):
        write()


def test_cassandra_sixteen_megabytes_do_not_fit_the_default_limit() -> None:
    untouched: Any = Untouchable()
    repository = CassandraChatMemoryRepository(untouched, create_schema=False)
    with pytest.raises(MessageTooLargeError):
        repository.save_all("c", [Message.user("x" * DEFAULT_MAX_WRITE_BYTES)])


@pytest.mark.parametrize("bad", [0, -1, True, 1.5])
def test_cassandra_max_write_bytes_is_a_positive_int(bad: Any) -> None:
    with pytest.raises((TypeError, ValueError)):
        CassandraChatMemoryRepository(Untouchable(), max_write_bytes=bad)


@pytest.fixture
def server_repository(required: set[str]) -> Iterator[CassandraChatMemoryRepository]:
    """A repository on a real server, on a table of its own, dropped afterwards."""
    url = backend_url("cassandra", required)
    repository = CassandraChatMemoryRepository.from_url(
        url, table=f"size_{uuid.uuid4().hex[:12]}", create_keyspace=True
    )
    try:
        yield repository
    finally:
        repository.drop_schema()
        repository.close()


def _three(total: int) -> list[Message]:
    """Three messages of about ``total`` bytes together."""
    return [Message.user(letter * (total // 3)) for letter in "abc"]


@pytest.mark.parametrize("how", ["append", "save_all"])
def test_cassandra_server_batch_over_the_limit_is_refused_and_changes_nothing(
    server_repository: CassandraChatMemoryRepository, how: str
) -> None:
    before = [Message.user("kept")]
    server_repository.save_all("c", before)
    # Each message fits one write; the batch, one mutation, does not.
    batch = _three(DEFAULT_MAX_WRITE_BYTES + 1024 * 1024)
    write: Callable[[], object] = {
        "append": lambda: server_repository.append_to_window(
            "c", batch, MessageWindow(10)
        ),
        "save_all": lambda: server_repository.save_all("c", [*before, *batch]),
    }[how]
    with pytest.raises(
        MessageTooLargeError, match=f"at most {DEFAULT_MAX_WRITE_BYTES} "
    ):
        write()
    stored = server_repository.find_by_conversation_id("c")
    assert stored == before
    assert [m.id for m in stored] == [before[0].id]


def test_cassandra_server_takes_a_batch_at_the_edge_of_the_check(
    server_repository: CassandraChatMemoryRepository,
) -> None:
    # The estimate errs on the large side: what it lets through (here within
    # about 8 KiB of the most it lets through), the server's 16 MiB request
    # and mutation limits take.
    batch = _three(DEFAULT_MAX_WRITE_BYTES - 72 * 1024)
    server_repository.append_to_window("c", batch, MessageWindow(10))
    assert server_repository.find_by_conversation_id("c") == batch
