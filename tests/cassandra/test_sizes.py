"""Writes too large for one Cassandra request are refused before they are sent."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from chatledger import Message, MessageTooLargeError, MessageWindow
from chatledger.validation import stamp_messages
from chatledger_cassandra import CassandraChatMemoryRepository
from chatledger_cassandra.plan import plan_replace
from chatledger_cassandra.sizes import (
    DEFAULT_MAX_WRITE_BYTES,
    check_write,
    write_bytes,
)
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
