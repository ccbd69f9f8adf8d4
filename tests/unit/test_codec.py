"""The JSON codec: exact round trips and clear errors on malformed input."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from chatledger import InvalidMessageError, Message, codec
from chatledger.testing import every_kind


@pytest.mark.parametrize("message", every_kind(), ids=lambda m: m.role.value)
def test_every_kind_round_trips_with_id(message: Message) -> None:
    stamped = message.stamped(datetime(2026, 11, 29, 12, 0, 0, 123456, tzinfo=UTC))
    back = codec.from_json(codec.to_json(stamped))
    assert back == stamped
    assert back.id == stamped.id
    assert back.created_at == stamped.created_at


def test_big_ints_and_floats_are_exact() -> None:
    message = Message.user("x", metadata={"big": 2**200, "f": 0.1, "neg": -(2**64)})
    back = codec.from_json(codec.to_json(message))
    assert back.metadata["big"] == 2**200
    assert repr(back.metadata["f"]) == "0.1"


def test_encoded_text_has_no_raw_nul() -> None:
    text = codec.to_json(Message.user("a\x00b", metadata={"k\x00": "v\x00"}))
    assert "\x00" not in text
    assert codec.from_json(text).content == "a\x00b"


def test_bytes_media_survive_as_base64() -> None:
    message = every_kind()[5]
    encoded = codec.to_dict(message)
    assert "data_b64" in encoded["media"][0]
    assert codec.from_dict(encoded).media[0].data == message.media[0].data


def test_version_is_written_and_checked() -> None:
    encoded = codec.to_dict(Message.user("x"))
    assert encoded["v"] == codec.CODEC_VERSION
    encoded["v"] = 999
    with pytest.raises(InvalidMessageError, match="version"):
        codec.from_dict(encoded)


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "[]",
        json.dumps({"v": 1}),
        json.dumps({"v": 1, "id": "x", "role": "admin", "content": "c"}),
        json.dumps({"v": 1, "id": "x", "role": "user", "content": "c", "media": [{}]}),
        json.dumps({"v": 1, "id": "x", "role": "user", "content": None}),
        json.dumps(
            {"v": 1, "id": "x", "role": "user", "content": "c", "__class__": "os"}
        ),
    ],
)
def test_malformed_or_tampered_input_is_rejected_or_inert(text: str) -> None:
    try:
        message = codec.from_json(text)
    except InvalidMessageError:
        return
    assert message.content == "c"  # unknown keys are ignored, never executed


def test_none_and_empty_content_are_distinct() -> None:
    assert codec.from_json(codec.to_json(Message.assistant(None))).content is None
    assert codec.from_json(codec.to_json(Message.assistant(""))).content == ""


@pytest.mark.parametrize("message", every_kind(), ids=lambda m: m.role.value)
def test_the_encoding_is_plain_json_any_reader_takes(message: Message) -> None:
    stamped = message.stamped(datetime(2026, 11, 29, tzinfo=UTC))
    text = codec.to_json(stamped)
    assert json.loads(text) == codec.to_dict(stamped)
    assert codec.from_json(json.dumps(codec.to_dict(stamped))) == stamped


def test_dumps_and_loads_keep_every_json_value() -> None:
    value = {"big": -(2**70), "f": 1e16, "s": "é\x00\u2028", "l": [None, True, 0.1]}
    text = codec.dumps(value)
    assert "é" in text
    assert "\x00" not in text
    assert codec.loads(text) == value == codec.loads(text.encode())
    assert codec.loads('{"nan": NaN}')["nan"] != codec.loads('{"nan": NaN}')["nan"]
    with pytest.raises(ValueError):
        codec.loads("{not json")
