"""Retention: what a bound means, which values it takes, when a trim is due."""

from __future__ import annotations

import pytest

from chatledger import (
    AsyncInMemoryChatMemoryRepository,
    AsyncMessageWindowChatMemory,
    InMemoryChatMemoryRepository,
    InvalidRetentionError,
    MessageWindowChatMemory,
    Retention,
    TokenWindowChatMemory,
    connect,
)
from chatledger.retention import to_retention


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, Retention.everything()),
        ("all", Retention.everything()),
        (" Everything ", Retention.everything()),
        (100, Retention(100, 25)),
        ("20", Retention(20, 10)),
        (Retention.last(7, slack=3), Retention(7, 3)),
    ],
)
def test_the_values_retention_takes(value: object, expected: Retention) -> None:
    assert to_retention(value) == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (0, "keep must be from 1"),
        (-3, "keep must be from 1"),
        (True, "must be a Retention, a number of messages or None, not bool"),
        (2.5, "not float"),
        ("last 10", "must be 'all' or a number of messages"),
        ("\uff11\uff10", "must be 'all' or a number of messages"),
        ("", "must be 'all' or a number of messages"),
    ],
)
def test_what_retention_refuses(value: object, message: str) -> None:
    with pytest.raises(InvalidRetentionError, match=message):
        to_retention(value)


def test_a_bound_refuses_a_bad_slack() -> None:
    with pytest.raises(InvalidRetentionError, match="slack must be from 1"):
        Retention.last(10, slack=0)
    with pytest.raises(InvalidRetentionError, match="no slack"):
        Retention(None, 5)


def test_a_trim_is_due_once_per_slack() -> None:
    keep = Retention.last(10, slack=4)
    due = [n for n in range(1, 41) if keep.trim_due(n, n)]
    assert due == [12, 16, 20, 24, 28, 32, 36, 40]
    assert keep.trim_due(13, 17)  # a batch crossing a multiple
    assert not keep.trim_due(13, 15)
    assert not Retention.everything().trim_due(1, 10**6)


def test_the_cutoff_falls_where_a_turn_starts_and_spares_the_view() -> None:
    keep = Retention.last(10, slack=4)
    assert keep.first_kept(40) == 31
    assert keep.first_kept(5) == 1
    assert keep.cutoff(40, user_from=None) == 31
    assert keep.cutoff(40, user_from=33) == 33
    assert keep.cutoff(40, user_from=33, shown_from=25) == 25
    assert Retention.everything().cutoff(40, user_from=33) == 1


def test_repr_names_the_bound() -> None:
    assert repr(Retention.last(50)) == "Retention.last(50, slack=12)"
    assert repr(Retention.everything()) == "Retention.everything()"


def test_a_message_window_must_fit_in_the_bound() -> None:
    bounded = InMemoryChatMemoryRepository(retention=Retention.last(10))
    with pytest.raises(InvalidRetentionError, match="window of 11 messages"):
        MessageWindowChatMemory(bounded, max_messages=11)
    with pytest.raises(InvalidRetentionError, match="window of 11 messages"):
        AsyncMessageWindowChatMemory(
            AsyncInMemoryChatMemoryRepository(retention=10), max_messages=11
        )
    MessageWindowChatMemory(bounded, max_messages=10)
    TokenWindowChatMemory(bounded, max_tokens=10_000)  # its view is kept whole


def test_connect_passes_retention_on() -> None:
    repository = connect("memory://", retention="8")
    assert repository.retention == Retention.last(8)  # type: ignore[attr-defined]
    with pytest.raises(InvalidRetentionError):
        connect("memory://", retention="eight")
