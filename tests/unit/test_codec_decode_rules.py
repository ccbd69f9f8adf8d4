"""The decoder's fast path keeps every rule of the ``Message`` constructor.

``codec.from_json`` checks the plain values ``json.loads`` makes without going
through the general constructor; these tests pin that a tampered stored row is
still rejected (or read as inert data) on that path, for text and for bytes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from types import MappingProxyType
from typing import Any

import pytest

from chatledger import InvalidMessageError, Message, ToolCall, ToolResponse, codec
from chatledger.messages import MAX_METADATA_DEPTH, JsonArray
from chatledger.testing import every_kind

BASE: dict[str, Any] = {
    "v": 1,
    "id": "m1",
    "role": "user",
    "content": "c",
    "created_at": "2026-01-02T03:04:05.000006+00:00",
}


def _as_text(data: dict[str, Any]) -> str:
    return json.dumps(data, ensure_ascii=False, allow_nan=True)


READERS: list[Callable[[dict[str, Any]], Message]] = [
    lambda data: codec.from_json(_as_text(data)),
    lambda data: codec.from_json(_as_text(data).encode("utf-8", "surrogatepass")),
    lambda data: codec.from_json(json.dumps(data, allow_nan=True)),  # ASCII escapes
    lambda data: codec.from_dict(json.loads(json.dumps(data, allow_nan=True))),
]
READER_IDS = ["text", "bytes", "ascii", "dict"]


def _nested(depth: int, leaf: object, as_list: bool) -> object:
    value = leaf
    for _ in range(depth):
        value = [value] if as_list else {"k": value}
    return value


TAMPERED: dict[str, dict[str, Any]] = {
    "lone surrogate content": {**BASE, "content": "a\ud800b"},
    "lone low surrogate content": {**BASE, "content": "\udc00"},
    "surrogate metadata value": {**BASE, "metadata": {"k": ["\udfff"]}},
    "surrogate metadata key": {**BASE, "metadata": {"\ud83d": 1}},
    "surrogate tool call": {
        **BASE,
        "role": "assistant",
        "tool_calls": [
            {"id": "c", "type": "function", "name": "\ud800", "arguments": ""}
        ],
    },
    "surrogate tool response": {
        **BASE,
        "role": "tool",
        "content": None,
        "tool_responses": [{"id": "c", "name": "n", "data": "x\udbff"}],
    },
    "surrogate id": {**BASE, "id": "a\ud800"},
    "NaN metadata": {**BASE, "metadata": {"x": float("nan")}},
    "Infinity metadata": {**BASE, "metadata": {"x": [float("inf")]}},
    "too deep dict": {
        **BASE,
        "metadata": {"d": _nested(MAX_METADATA_DEPTH, 1, as_list=False)},
    },
    "too deep list": {
        **BASE,
        "metadata": {"d": _nested(MAX_METADATA_DEPTH, "x", as_list=True)},
    },
    "content not str": {**BASE, "content": 5},
    "content list": {**BASE, "content": ["c"]},
    "user without content": {**BASE, "content": None},
    "system without content": {**BASE, "role": "system", "content": None},
    "missing content": {k: v for k, v in BASE.items() if k != "content"},
    "unknown role": {**BASE, "role": "admin"},
    "role not str": {**BASE, "role": ["user"]},
    "version": {**BASE, "v": 2},
    "no version": {k: v for k, v in BASE.items() if k != "v"},
    "empty id": {**BASE, "id": ""},
    "id not printable": {**BASE, "id": "a\nb"},
    "id not str": {**BASE, "id": 7},
    "naive created_at": {**BASE, "created_at": "2026-01-02T03:04:05"},
    "created_at not a time": {**BASE, "created_at": "yesterday"},
    "created_at number": {**BASE, "created_at": 5},
    "metadata null": {**BASE, "metadata": None},
    "metadata list": {**BASE, "metadata": [1]},
    "tool calls on a user message": {
        **BASE,
        "tool_calls": [{"id": "c", "type": "function", "name": "n", "arguments": ""}],
    },
    "tool responses on an assistant message": {
        **BASE,
        "role": "assistant",
        "tool_responses": [{"id": "c", "name": "n", "data": ""}],
    },
    "tool call not an object": {**BASE, "role": "assistant", "tool_calls": ["c"]},
    "tool call missing a field": {
        **BASE,
        "role": "assistant",
        "tool_calls": [{"id": "c", "name": "n", "arguments": ""}],
    },
    "tool call field not str": {
        **BASE,
        "role": "assistant",
        "tool_calls": [{"id": 1, "type": "function", "name": "n", "arguments": ""}],
    },
    "tool calls not a list": {**BASE, "role": "assistant", "tool_calls": "c"},
    "media on a system message": {
        **BASE,
        "role": "system",
        "media": [{"mime_type": "text/plain", "url": "http://x"}],
    },
}


@pytest.mark.parametrize("reader", READERS, ids=READER_IDS)
@pytest.mark.parametrize("data", TAMPERED.values(), ids=TAMPERED.keys())
def test_a_tampered_row_is_rejected(
    reader: Callable[[dict[str, Any]], Message], data: dict[str, Any]
) -> None:
    with pytest.raises(InvalidMessageError):
        reader(data)


def test_encoded_surrogates_in_bytes_are_rejected() -> None:
    raw = _as_text({**BASE, "content": "\ud800"}).encode("utf-8", "surrogatepass")
    assert b"\xed\xa0\x80" in raw
    with pytest.raises(InvalidMessageError, match="surrogate"):
        codec.from_json(raw)


def test_a_raw_lone_surrogate_in_text_is_rejected() -> None:
    text = _as_text({**BASE, "metadata": {"a": "é", "b": "\ud800"}})
    assert "\ud800" in text
    with pytest.raises(InvalidMessageError, match="surrogate"):
        codec.from_json(text)


def test_errors_name_the_place() -> None:
    with pytest.raises(InvalidMessageError, match=r"metadata\['a'\]\[1\]"):
        codec.from_json(_as_text({**BASE, "metadata": {"a": [0, float("nan")]}}))
    with pytest.raises(InvalidMessageError, match="deeper"):
        codec.from_json(_as_text(TAMPERED["too deep dict"]))


@pytest.mark.parametrize("reader", READERS, ids=READER_IDS)
def test_the_deepest_allowed_metadata_and_paired_surrogates_are_read(
    reader: Callable[[dict[str, Any]], Message],
) -> None:
    deep = _nested(MAX_METADATA_DEPTH - 2, 1.5, as_list=True)
    data = {**BASE, "content": "emoji \U0001f600", "metadata": {"d": deep, "e": "é"}}
    message = reader(data)
    assert message.content == "emoji \U0001f600"
    assert message == Message.user("emoji \U0001f600", metadata={"d": deep, "e": "é"})


@pytest.mark.parametrize("reader", READERS, ids=READER_IDS)
def test_unknown_keys_are_inert(reader: Callable[[dict[str, Any]], Message]) -> None:
    message = reader({**BASE, "__class__": "os.system", "extra": {"x": float("nan")}})
    assert message.content == "c"


def test_metadata_comes_back_frozen() -> None:
    text = _as_text({**BASE, "metadata": {"a": [1, {"b": [2.5, True, None]}]}})
    metadata = codec.from_json(text).metadata
    assert isinstance(metadata, MappingProxyType)
    assert isinstance(metadata["a"], JsonArray)
    assert isinstance(metadata["a"][1], MappingProxyType)
    assert isinstance(metadata["a"][1]["b"], JsonArray)
    with pytest.raises(TypeError):
        metadata["x"] = 1  # type: ignore[index]


def test_created_at_is_utc() -> None:
    text = _as_text({**BASE, "created_at": "2026-01-02T05:04:05+02:00"})
    created = codec.from_json(text).created_at
    assert created == datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert created is not None
    assert created.tzinfo is UTC
    assert created.utcoffset() == timedelta(0)


@pytest.mark.parametrize("fast", [True, False], ids=["plain", "mapping"])
def test_from_dict_takes_an_aware_datetime_as_created_at(fast: bool) -> None:
    moment = datetime(2026, 1, 2, 5, 4, 5, 6, tzinfo=timezone(timedelta(hours=2)))
    data = {**BASE, "created_at": moment}
    created = codec.from_dict(data if fast else MappingProxyType(data)).created_at
    assert created == moment
    assert created is not None
    assert created.tzinfo is UTC
    utc = datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC)
    assert codec.from_dict({**BASE, "created_at": utc}).created_at is utc


@pytest.mark.parametrize("fast", [True, False], ids=["plain", "mapping"])
def test_from_dict_refuses_a_naive_datetime_as_created_at(fast: bool) -> None:
    data = {**BASE, "created_at": datetime(2026, 1, 2, 3, 4, 5)}
    with pytest.raises(InvalidMessageError, match="timezone-aware"):
        codec.from_dict(data if fast else MappingProxyType(data))


@pytest.mark.parametrize("message", every_kind(), ids=lambda m: m.role.value)
def test_the_fast_path_builds_what_the_constructor_builds(message: Message) -> None:
    stamped = message.stamped(datetime(2026, 11, 29, tzinfo=UTC))
    text = codec.to_json(stamped)
    for decoded in (codec.from_json(text), codec.from_json(text.encode())):
        assert decoded == stamped
        assert decoded.id == stamped.id
        assert decoded.created_at == stamped.created_at
        for field in Message.__dataclass_fields__:
            assert type(getattr(decoded, field)) is type(getattr(stamped, field))
    assert all(type(c) is ToolCall for c in codec.from_json(text).tool_calls)
    assert all(type(r) is ToolResponse for r in codec.from_json(text).tool_responses)


@pytest.mark.parametrize(
    "text", [" " + _as_text(BASE), _as_text(BASE) + "\n", _as_text(BASE) + " x"]
)
def test_text_around_the_object_goes_through_json_loads(text: str) -> None:
    if text.endswith("x"):
        with pytest.raises(InvalidMessageError, match="JSON"):
            codec.from_json(text)
    else:
        assert codec.from_json(text).content == "c"
