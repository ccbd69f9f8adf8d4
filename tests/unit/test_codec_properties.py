"""Property tests: any valid message survives the codec exactly, types included."""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from chatledger import Media, Message, Role, ToolCall, ToolResponse, codec

# Any unicode except lone surrogates (which the model rejects), NUL included.
text = st.text(st.characters(exclude_categories=["Cs"]), max_size=30)
ids = st.text(
    st.characters(exclude_categories=["Cs", "Cc", "Zl", "Zp", "Zs", "Cf", "Co", "Cn"]),
    min_size=1,
    max_size=20,
)
json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=False, allow_infinity=False),
    text,
)
json_value = st.recursive(
    json_leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(text, inner, max_size=4)
    ),
    max_leaves=20,
)
metadata = st.dictionaries(text, json_value, max_size=5)
tool_calls = st.lists(
    st.builds(ToolCall, id=text, name=text, arguments=text, type=text), max_size=3
)
tool_responses = st.lists(
    st.builds(ToolResponse, id=text, name=text, data=text), max_size=3
)
media = st.lists(
    st.builds(
        Media,
        mime_type=text,
        data=st.one_of(st.binary(max_size=64), text),
        name=st.none() | text,
        id=st.none() | text,
    ),
    max_size=2,
)
created = st.none() | st.builds(
    lambda moment, minutes: moment.replace(tzinfo=timezone(timedelta(minutes=minutes))),
    st.datetimes(
        min_value=datetime(1, 1, 2),
        max_value=datetime(9999, 12, 30),
    ),
    st.integers(-23 * 60, 23 * 60),
)


@st.composite
def messages(draw: st.DrawFn) -> Message:
    """Any message the model accepts."""
    role = draw(st.sampled_from(list(Role)))
    content = draw(text if role in (Role.SYSTEM, Role.USER) else st.none() | text)
    return Message(
        role=role,
        content=content,
        tool_calls=draw(tool_calls) if role is Role.ASSISTANT else (),
        tool_responses=draw(tool_responses) if role is Role.TOOL else (),
        media=draw(media) if role in (Role.USER, Role.ASSISTANT) else (),
        metadata=draw(metadata),
        id=draw(ids),
        created_at=draw(created),
    )


def _strictly_equal(left: Any, right: Any) -> bool:
    """Equal values of the same JSON types (True is not 1, 1 is not 1.0, -0.0 kept)."""
    if isinstance(left, Mapping) and isinstance(right, Mapping):
        return left.keys() == right.keys() and all(
            _strictly_equal(left[k], right[k]) for k in left
        )
    if isinstance(left, list | tuple) and isinstance(right, list | tuple):
        return len(left) == len(right) and all(
            _strictly_equal(a, b) for a, b in zip(left, right, strict=True)
        )
    if type(left) is not type(right):
        return False
    if isinstance(left, float):
        return left == right and math.copysign(1, left) == math.copysign(1, right)
    return bool(left == right)


@settings(max_examples=400, deadline=None)
@given(messages())
def test_any_message_round_trips_exactly(message: Message) -> None:
    text_form = codec.to_json(message)
    back = codec.from_json(text_form)
    assert back == message
    assert back.id == message.id
    assert back.created_at == message.created_at
    if back.created_at is not None:
        assert back.created_at.tzinfo is UTC
    assert _strictly_equal(back.metadata, message.metadata)
    assert [type(m.data) for m in back.media] == [type(m.data) for m in message.media]
    assert codec.to_json(back) == text_form
    assert "\x00" not in text_form


@settings(max_examples=200, deadline=None)
@given(messages())
def test_dict_form_round_trips_through_column_split(message: Message) -> None:
    """An adapter may pop columns from the dict and put them back before decoding."""
    encoded = codec.to_dict(message)
    columns: dict[str, Any] = {
        k: encoded.pop(k) for k in ("id", "role", "content") if k in encoded
    }
    rebuilt = codec.from_dict({**encoded, **columns})
    assert rebuilt == message
    assert rebuilt.id == message.id
    assert _strictly_equal(rebuilt.metadata, message.metadata)
