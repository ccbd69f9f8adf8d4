"""The message model: construction rules, immutability and equality."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from chatledger import InvalidMessageError, Media, Message, Role, ToolCall, ToolResponse
from chatledger.messages import MAX_METADATA_DEPTH


def test_constructors_set_roles() -> None:
    assert Message.user("u").role is Role.USER
    assert Message.system("s").role is Role.SYSTEM
    assert Message.assistant().role is Role.ASSISTANT
    assert Message.tool([]).role is Role.TOOL


def test_role_accepts_lower_case_value_only() -> None:
    assert Message(role="user", content="x").role is Role.USER  # type: ignore[arg-type]
    for bad in ("USER", "admin", "", None):
        with pytest.raises(InvalidMessageError, match="role"):
            Message(role=bad, content="x")  # type: ignore[arg-type]


@pytest.mark.parametrize("factory", [Message.user, Message.system])
def test_user_and_system_need_content(factory: object) -> None:
    with pytest.raises(InvalidMessageError, match="needs content"):
        factory(None)  # type: ignore[operator]


def test_assistant_and_tool_allow_none_content() -> None:
    assert Message.assistant(None).content is None
    assert Message.tool([], content=None).content is None


def test_role_specific_fields_only_on_their_role() -> None:
    call = ToolCall(id="1", name="f", arguments="{}")
    response = ToolResponse(id="1", name="f", data="")
    with pytest.raises(InvalidMessageError, match="tool_calls"):
        Message(role=Role.USER, content="x", tool_calls=[call])
    with pytest.raises(InvalidMessageError, match="tool_responses"):
        Message(role=Role.ASSISTANT, content="x", tool_responses=[response])
    with pytest.raises(InvalidMessageError, match="media"):
        Message(role=Role.SYSTEM, content="x", media=[Media("image/png", b"")])


@pytest.mark.parametrize(
    "bad",
    [
        {"when": datetime(2026, 1, 2, tzinfo=UTC)},
        {"set": {1, 2}},
        {"bytes": b"x"},
        {"nan": float("nan")},
        {"inf": float("inf")},
        {1: "non-str key"},
        {"obj": object()},
        {"surrogate": "\ud800"},
    ],
    # No memory address in a test id: parallel runners must collect the same ids.
    ids=lambda bad: "{'obj': object()}" if "obj" in bad else repr(bad),
)
def test_metadata_must_be_json(bad: dict[object, object]) -> None:
    with pytest.raises(InvalidMessageError, match="metadata"):
        Message.user("x", metadata=bad)  # type: ignore[arg-type]


def test_metadata_nesting_is_bounded() -> None:
    deep: object = "leaf"
    for _ in range(MAX_METADATA_DEPTH + 1):
        deep = {"k": deep}
    with pytest.raises(InvalidMessageError, match="deeper"):
        Message.user("x", metadata={"deep": deep})
    shallow: object = "leaf"
    for _ in range(MAX_METADATA_DEPTH - 2):
        shallow = [shallow]
    assert Message.user("x", metadata={"ok": shallow}).metadata["ok"] == shallow


def test_thousand_levels_rejected_without_recursion_error() -> None:
    deep: object = 1
    for _ in range(1000):
        deep = [deep]
    with pytest.raises(InvalidMessageError):
        Message.user("x", metadata={"d": deep})


def test_lone_surrogate_content_rejected() -> None:
    with pytest.raises(InvalidMessageError, match="surrogate"):
        Message.user("a\ud800b")


def test_metadata_is_frozen_copy() -> None:
    source = {"list": [1, 2], "dict": {"a": 1}}
    message = Message.user("x", metadata=source)
    source["list"].append(3)  # type: ignore[attr-defined]
    assert message.metadata["list"] == [1, 2]
    with pytest.raises(TypeError):
        message.metadata["new"] = 1  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        message.content = "y"  # type: ignore[misc]


def test_equality_ignores_id_and_created_at() -> None:
    a = Message.user("same", metadata={"k": [1]})
    b = Message.user("same", metadata={"k": [1]}, id="other")
    assert a == b
    assert hash(a) == hash(b)
    assert a.id != b.id
    assert a.stamped(datetime.now(UTC)) == a


def test_media_equality_is_by_value() -> None:
    assert Media("image/png", bytearray(b"ab")) == Media("image/png", b"ab")  # type: ignore[arg-type]


def test_created_at_must_be_aware_and_becomes_utc() -> None:
    with pytest.raises(InvalidMessageError, match="timezone-aware"):
        Message(role=Role.USER, content="x", created_at=datetime(2026, 1, 1))
    paris = timezone(timedelta(hours=1))
    message = Message(
        role=Role.USER, content="x", created_at=datetime(2026, 1, 1, tzinfo=paris)
    )
    assert message.created_at is not None
    assert message.created_at.tzinfo == UTC


def test_stamped_keeps_an_existing_created_at() -> None:
    first = Message.user("x").stamped(datetime(2026, 1, 1, tzinfo=UTC))
    assert (
        first.stamped(datetime(2027, 1, 1, tzinfo=UTC)).created_at == first.created_at
    )


@pytest.mark.parametrize("bad_id", ["", "a\nb", 5])
def test_message_id_must_be_printable_text(bad_id: object) -> None:
    with pytest.raises(InvalidMessageError, match="message id"):
        Message.user("x", id=bad_id)  # type: ignore[arg-type]


def test_each_message_gets_a_unique_id() -> None:
    assert len({Message.user("x").id for _ in range(1000)}) == 1000


MADE = datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC)
COPIED = [
    Message(
        Role.USER,
        "look",
        media=[Media("image/png", b"\x89PNG", name="a.png"), Media("text/html", "u")],
        metadata={"tags": ["a", {"deep": [1, 2.5, None, True]}], "n": 3},
        id="m1",
        created_at=MADE,
    ),
    Message.assistant(None, tool_calls=[ToolCall("c1", "f", '{"x": 1}')]),
    Message.tool([ToolResponse("c1", "f", "done")]),
    Message.system("be brief"),
]


@pytest.mark.parametrize("message", COPIED, ids=lambda m: m.role.value)
def test_a_message_pickles_whole(message: Message) -> None:
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        back = pickle.loads(pickle.dumps(message, protocol))
        assert back == message
        assert (back.id, back.created_at) == (message.id, message.created_at)
        assert back.metadata == message.metadata
        with pytest.raises(TypeError):
            back.metadata["n"] = 4  # type: ignore[index]  # still read-only


@pytest.mark.parametrize("message", COPIED, ids=lambda m: m.role.value)
def test_a_message_is_its_own_copy(message: Message) -> None:
    # Immutable all the way down, as a tuple of strings is.
    assert copy.copy(message) is message
    assert copy.deepcopy(message) is message
    state: dict[str, Any] = {"history": [message], "extra": {"k": [1, 2]}}
    copied = copy.deepcopy(state)
    assert copied == state
    assert copied["history"][0] is message
