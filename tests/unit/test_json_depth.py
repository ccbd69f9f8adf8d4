"""One nesting limit for every JSON value, found before anything recurses.

A million levels of ``[`` must get chatledger's own error from every reader
(msgspec and the json module both recurse and would raise RecursionError),
and the limit must be the same whether it is met in a value or in text.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from chatledger import InvalidMessageError, Message, codec
from chatledger.messages import MAX_METADATA_DEPTH

#: Far beyond any recursion limit.
HOSTILE = 500_000


def nested(levels: int, leaf: object = 1, *, as_list: bool = True) -> object:
    """A value whose deepest item sits at level ``levels`` (the value is level 1).

    Built in a loop, so a test can make one far deeper than Python recurses.
    """
    value = leaf
    for _ in range(levels - 1):
        value = [value] if as_list else {"k": value}
    return value


def _message_text(metadata: str) -> str:
    return '{"v":1,"id":"m1","role":"user","content":"c","metadata":' + metadata + "}"


TEXT_READERS: dict[str, Callable[[Any], object]] = {
    "from_json": lambda text: codec.from_json(text),
    "loads": lambda text: codec.loads(text),
    "loads_value": lambda text: codec.loads_value(text),
}

HOSTILE_TEXTS = {
    "open lists": "[" * HOSTILE,
    "closed lists": "[" * HOSTILE + "]" * HOSTILE,
    "objects": '{"a":' * HOSTILE + "1" + "}" * HOSTILE,
    "in metadata": _message_text("[" * HOSTILE + "]" * HOSTILE),
    # NaN sends the text past msgspec to the json module's reader.
    "for the json module": _message_text('{"n":NaN,"d":' + "[" * HOSTILE + "]}"),
}


@pytest.mark.parametrize("reader", TEXT_READERS, ids=list(TEXT_READERS))
@pytest.mark.parametrize("text", HOSTILE_TEXTS.values(), ids=list(HOSTILE_TEXTS))
@pytest.mark.parametrize("as_bytes", [False, True], ids=["str", "bytes"])
def test_hostile_nesting_gets_chatledgers_error_from_every_reader(
    reader: str, text: str, as_bytes: bool
) -> None:
    with pytest.raises(InvalidMessageError, match="nests deeper than"):
        TEXT_READERS[reader](text.encode() if as_bytes else text)


@pytest.mark.parametrize("as_list", [True, False], ids=["lists", "dicts"])
@pytest.mark.parametrize("leaf", [1, "x", [], {}], ids=["int", "str", "[]", "{}"])
@pytest.mark.parametrize(
    "levels", [MAX_METADATA_DEPTH - 2, MAX_METADATA_DEPTH - 1, MAX_METADATA_DEPTH]
)
def test_text_and_values_meet_the_same_limit(
    levels: int, leaf: object, as_list: bool
) -> None:
    """Metadata, stored text and converter JSON agree level for level."""
    value = nested(levels, leaf, as_list=as_list)
    # Each check holds the value one level down: its deepest item one lower.
    allowed = levels + 1 <= MAX_METADATA_DEPTH
    outcomes = []
    for check in (
        lambda: Message.user("c", metadata={"d": value}),  # metadata is level 1
        lambda: codec.from_json(_message_text(json.dumps({"d": value}))),
        lambda: codec.from_json(_message_text(json.dumps({"d": value})).encode()),
        lambda: codec.loads_value(json.dumps([value])),
        lambda: codec.dumps_value([value]),
    ):
        try:
            check()
            outcomes.append("kept")
        except InvalidMessageError as exc:
            outcomes.append("too deep" if "deeper" in str(exc) else str(exc))
    assert outcomes == ["kept" if allowed else "too deep"] * 5


def test_brackets_inside_strings_are_text() -> None:
    brackets = "[{" * 1000 + '\\"' + "]}" * 10
    message = Message.user(brackets, metadata={"k": [brackets], brackets: 1})
    assert codec.from_json(codec.to_json(message)) == message
    assert codec.from_json(codec.to_json(message).encode()) == message
    assert codec.loads_value(json.dumps({"k": brackets})) == {"k": brackets}


def test_dumps_value_takes_what_json_keeps() -> None:
    value = {"a": [1, 2.5, True, None, "é", {"b": []}], "big": 2**70}
    text = codec.dumps_value(value)
    assert text == json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    assert codec.loads_value(text) == value


class Opaque:
    def __repr__(self) -> str:
        raise AssertionError("an error message must not run a caller's __repr__")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"a": {1, 2}}, r"value at v\['a'\] is a set"),
        ({"a": b"x"}, r"value at v\['a'\] is a bytes"),
        ({1: "a"}, "key 1 at v must be a str"),
        ({(1, (2,)): "a"}, r"key \(1, \(2,\)\) at v must be a str"),
        ({"a": [float("nan")]}, r"value at v\['a'\]\[0\] is nan"),
        ({"a": float("inf")}, "is inf, not JSON"),
        ({"a": Opaque()}, "is a Opaque"),
        ({"a": nested(HOSTILE)}, f"nests deeper than {MAX_METADATA_DEPTH} levels"),
        ({"\ud800": 1}, "surrogate"),
    ],
    ids=["set", "bytes", "int key", "tuple key", "NaN", "inf", "object", "deep", "Cs"],
)
def test_dumps_value_refuses_what_json_does_not_keep(
    value: object, expected: str
) -> None:
    with pytest.raises(InvalidMessageError, match=expected) as caught:
        codec.dumps_value(value, "v")
    assert isinstance(caught.value, ValueError)
    assert isinstance(caught.value, TypeError)


@pytest.mark.parametrize(
    "text", ["[NaN]", '{"a": Infinity}', '"\\ud800"', b'"\xff"', "{", ""]
)
def test_loads_value_refuses_what_is_not_json(text: str | bytes) -> None:
    with pytest.raises(InvalidMessageError, match="not JSON"):
        codec.loads_value(text)


DEEP = nested(HOSTILE)


@pytest.mark.parametrize(
    "fields",
    [
        {"role": DEEP, "content": "c"},
        {"role": "user", "content": "c", "id": DEEP},
        {"role": "user", "content": DEEP},
        {"role": "user", "content": "c", "metadata": {"k": DEEP}},
        {"role": "user", "content": "c", "metadata": {Opaque(): 1}},
        {"role": "user", "content": "c", "created_at": DEEP},
    ],
    ids=["role", "id", "content", "metadata value", "metadata key", "created_at"],
)
def test_a_message_refuses_hostile_fields(fields: dict[str, Any]) -> None:
    with pytest.raises(InvalidMessageError):
        Message(**fields)


@pytest.mark.parametrize(
    "data",
    [
        {"v": DEEP},
        {"v": 1, "id": "m", "role": DEEP, "content": "c"},
        {"v": 1, "id": DEEP, "role": "user", "content": "c"},
        {"v": 1, "id": "m", "role": "user", "content": "c", "metadata": DEEP},
        {"v": 1, "id": "m", "role": "user", "content": "c", "metadata": {"k": DEEP}},
        {"v": 1, "id": "m", "role": "assistant", "content": None, "tool_calls": DEEP},
        {"v": 1, "id": "m", "role": "user", "content": "c", "media": [DEEP]},
    ],
    ids=["version", "role", "id", "metadata", "metadata value", "calls", "media"],
)
def test_from_dict_refuses_hostile_values(data: dict[str, Any]) -> None:
    """Adapters that store dicts (not text) decode through from_dict."""
    with pytest.raises(InvalidMessageError):
        codec.from_dict(data)
