"""``LogRow`` builds its slots directly and stays a frozen dataclass."""

from __future__ import annotations

import dataclasses

import pytest

from chatledger import Message
from chatledger.window_view import LogRow


def test_a_log_row_is_built_by_position_or_by_name_with_no_size_by_default() -> None:
    message = Message.user("hi")
    assert LogRow(3, message) == LogRow(sequence=3, message=message, size=None)
    row = LogRow(3, message, 7)
    assert (row.sequence, row.message, row.size) == (3, message, 7)
    assert LogRow(3, message).size is None
    assert (
        repr(LogRow(3, message, 7))
        == f"LogRow(sequence=3, message={message!r}, size=7)"
    )


def test_a_log_row_is_frozen_and_hashes_by_value() -> None:
    message = Message.user("hi")
    row = LogRow(3, message, 7)
    with pytest.raises(dataclasses.FrozenInstanceError):
        row.size = 8  # type: ignore[misc]
    assert row != LogRow(4, message, 7)
    assert hash(row) == hash(LogRow(3, message, 7))
    assert [f.name for f in dataclasses.fields(row)] == ["sequence", "message", "size"]
    with pytest.raises(TypeError):
        LogRow(3)  # type: ignore[call-arg]
