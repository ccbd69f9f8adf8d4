"""The JSON codec: exact round trips and clear errors on malformed input."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

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


def _columns(
    message: Message,
) -> tuple[str, str, str | None, str | None, dict[str, Any]]:
    data = codec.to_dict(message)
    created = data.pop("created_at", None)
    return data.pop("id"), data.pop("role"), data.pop("content"), created, data


@pytest.mark.parametrize("message", every_kind(), ids=lambda m: m.role.value)
def test_from_columns_reads_what_from_dict_reads(message: Message) -> None:
    stamped = message.stamped(datetime(2026, 12, 4, 21, 0, 0, 654321, tzinfo=UTC))
    message_id, role, content, created, rest = _columns(stamped)
    text = codec.dumps(rest)
    assert codec.from_columns(message_id, role, content, created, text) == stamped
    assert (
        codec.from_columns(message_id, role, content, created, text.encode()) == stamped
    )
    if rest == {"v": codec.CODEC_VERSION}:
        assert codec.from_columns(message_id, role, content, created) == stamped
    # A content kept in the rest wins over the column's.
    moved = codec.from_columns(
        message_id, role, "column", created, codec.dumps({**rest, "content": content})
    )
    assert moved == stamped


@pytest.mark.parametrize(
    ("fields", "rest"),
    [
        (("m1", "user", None, None), None),  # a user message needs content
        (("m1", "boss", "hi", None), None),
        (("", "user", "hi", None), None),
        (("m\n1", "user", "hi", None), None),
        (("m1", "user", "a\ud800b", None), None),
        (("m1", "user", "hi", datetime(2026, 1, 2)), None),  # naive
        (("m1", "user", "hi", "yesterday"), None),
        (("m1", "user", "hi", None), {"v": 2}),
        (("m1", "user", "hi", None), {"v": 1, "metadata": None}),
        (("m1", "user", "hi", None), {"v": 1, "metadata": {"k": "\udfff"}}),
        (("m1", "user", "hi", None), {"v": 1, "content": None}),
        (("m1", "tool", "hi", None), {"v": 1, "tool_calls": [{"id": "c"}]}),
        (("m1", "user", "hi", None), {"v": 1, "media": [{"mime_type": 1}]}),
    ],
)
def test_from_columns_refuses_what_from_dict_refuses(
    fields: tuple[Any, ...], rest: dict[str, Any] | None
) -> None:
    message_id, role, content, created = fields
    whole = {
        "v": 1,
        **(rest or {}),
        "id": message_id,
        "role": role,
        "created_at": created,
    }
    whole.setdefault("content", content)
    with pytest.raises(InvalidMessageError) as from_dict:
        codec.from_dict(whole)
    text = None if rest is None else json.dumps(rest)
    with pytest.raises(InvalidMessageError) as from_columns:
        codec.from_columns(message_id, role, content, created, text)
    assert str(from_columns.value) == str(from_dict.value)


@pytest.mark.parametrize(
    "rest",
    ["[1]", "not json", "{", '{"v": 1, "metadata": ' + "[" * 100 + "]" * 100 + "}"],
)
def test_from_columns_refuses_stored_fields_that_are_no_message(rest: str) -> None:
    with pytest.raises(InvalidMessageError):
        codec.from_columns("m1", "user", "hi", None, rest)
