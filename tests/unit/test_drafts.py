"""Objects built as drafts are the frozen class itself, field for field."""

from __future__ import annotations

import copy
import dataclasses
from datetime import UTC, datetime
from typing import Any

import pytest

from chatledger import Message, ToolCall, ToolResponse, codec
from chatledger.drafts import draft_of


@dataclasses.dataclass(frozen=True, slots=True)
class _Point:
    x: int
    y: int


def test_a_draft_becomes_the_frozen_class_and_stays_frozen() -> None:
    point: Any = object.__new__(draft_of(_Point))
    point.x, point.y = 1, 2
    point.__class__ = _Point
    assert type(point) is _Point
    assert point == _Point(1, 2)
    assert hash(point) == hash(_Point(1, 2))
    with pytest.raises(dataclasses.FrozenInstanceError):
        point.x = 3  # type: ignore[misc]


class _Plain:
    pass


class _Base:
    __slots__ = ("a",)


class _Derived(_Base):
    __slots__ = ("b",)


@pytest.mark.parametrize("cls", [_Plain, _Derived])
def test_a_class_of_another_layout_is_refused_when_its_draft_is_made(cls: type) -> None:
    with pytest.raises(TypeError, match=cls.__name__):
        draft_of(cls)


def test_decoded_messages_are_messages_equal_to_the_ones_encoded() -> None:
    sent = [
        Message.user("hi", metadata={"k": [1, {"n": None}]}),
        Message.assistant(
            None, tool_calls=[ToolCall("c1", "lookup", '{"q": 1}')]
        ).stamped(datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC)),
        Message.tool([ToolResponse("c1", "lookup", "42")]),
    ]
    for message in sent:
        decoded = codec.from_json(codec.to_json(message))
        assert type(decoded) is Message
        assert decoded == message
        assert hash(decoded) == hash(message)
        assert copy.copy(decoded) == message
        for call in decoded.tool_calls:
            assert type(call) is ToolCall
        for response in decoded.tool_responses:
            assert type(response) is ToolResponse
        with pytest.raises(dataclasses.FrozenInstanceError):
            decoded.content = "changed"  # type: ignore[misc]
