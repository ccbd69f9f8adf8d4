"""to_langchain and from_langchain: both round trips exact, refusals named."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("langchain_core")

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from chatledger import Media, Message, Role, ToolCall, ToolResponse
from chatledger.convert import UnsupportedContentError
from chatledger.messages import MAX_METADATA_DEPTH
from chatledger.testing import every_kind
from chatledger_langchain import from_langchain, to_langchain
from tests.unit.test_codec_properties import messages as any_message
from tests.unit.test_json_depth import HOSTILE, nested

PNG = b"\x89PNG\r\n\x1a\n"


def _storable(message: Message) -> bool:
    """What LangChain can carry: every message but a tool message without response."""
    no_response = message.role is Role.TOOL and not message.tool_responses
    return not no_response and "langchain" not in message.metadata


@settings(max_examples=200, deadline=None)
@given(st.lists(any_message().filter(_storable), max_size=5, unique_by=lambda m: m.id))
def test_chatledger_round_trip(history: list[Message]) -> None:
    back = from_langchain(to_langchain(history))
    assert back == history
    assert [m.id for m in back] == [m.id for m in history]


def test_every_kind_round_trips() -> None:
    history = [m for m in every_kind() if _storable(m)]
    assert from_langchain(to_langchain(history)) == history


def test_the_mapping_is_langchain_native() -> None:
    call = ToolCall("c1", "weather", '{"city":"Rome"}')
    history = [
        Message.system("Be brief.", id="s"),
        Message.user("Look", media=[Media("image/png", PNG)], id="u"),
        Message.assistant(None, tool_calls=[call], id="a"),
        Message.tool(
            [
                ToolResponse("c1", "weather", "24"),
                ToolResponse("c2", "clock", "noon"),
            ],
            id="t",
        ),
        Message.assistant("24 °C.", metadata={"model": "m-1"}, id="b"),
    ]
    system, user, ai, tool_1, tool_2, answer = to_langchain(history)
    assert system == SystemMessage("Be brief.", id="s")
    assert isinstance(user, HumanMessage)
    assert user.content == [
        {"type": "text", "text": "Look"},
        {"type": "image", "base64": "iVBORw0KGgo=", "mime_type": "image/png"},
    ]
    assert isinstance(ai, AIMessage)
    assert ai.tool_calls == [
        {"name": "weather", "args": {"city": "Rome"}, "id": "c1", "type": "tool_call"}
    ]
    assert ai.response_metadata == {"chatledger": {"content": None}}
    assert isinstance(tool_1, ToolMessage)
    assert isinstance(tool_2, ToolMessage)
    assert (tool_1.tool_call_id, tool_1.content, tool_1.name) == ("c1", "24", "weather")
    assert (tool_2.tool_call_id, tool_2.id) == ("c2", "t")
    assert answer.response_metadata == {"chatledger": {"metadata": {"model": "m-1"}}}
    assert from_langchain([system, user, ai, tool_1, tool_2, answer]) == history


def _langchain_messages() -> list[BaseMessage]:
    return [
        SystemMessage("Be brief.", id="s1"),
        HumanMessage(
            [
                {"type": "text", "text": "What is this?"},
                {
                    "type": "image_url",
                    "image_url": {"url": "https://example.invalid/a.png"},
                },
            ],
            id="h1",
            name="alice",
        ),
        AIMessage(
            [
                {"type": "text", "text": "Let me look."},
                {
                    "type": "tool_use",
                    "id": "t1",
                    "name": "look",
                    "input": {"at": "a.png"},
                },
            ],
            id="run-1",
            tool_calls=[
                {
                    "name": "look",
                    "args": {"at": "a.png"},
                    "id": "t1",
                    "type": "tool_call",
                }
            ],
            invalid_tool_calls=[
                {
                    "name": "zoom",
                    "args": "{bad",
                    "id": "t2",
                    "error": "bad JSON",
                    "type": "invalid_tool_call",
                }
            ],
            usage_metadata={"input_tokens": 5, "output_tokens": 7, "total_tokens": 12},
            response_metadata={"model_name": "fake", "stop_reason": "tool_use"},
            additional_kwargs={"custom": [1, 2]},
        ),
        ToolMessage(
            "a cat",
            tool_call_id="t1",
            id="tool-1",
            artifact={"pixels": [1, 2, 3]},
            status="error",
        ),
        HumanMessage(
            [
                {"type": "text", "text": "And this file?"},
                {
                    "type": "file",
                    "base64": "JVBERg==",
                    "mime_type": "application/pdf",
                    "id": "f1",
                    "extras": {"filename": "a.pdf"},
                },
            ],
            id="h2",
        ),
        AIMessage("A PDF.", id="run-2"),
    ]


def test_langchain_round_trip() -> None:
    original = _langchain_messages()
    stored = from_langchain(original)
    assert to_langchain(stored) == original


def test_langchain_messages_read_as_chatledger_fields() -> None:
    system, user, ai, tool, pdf, answer = from_langchain(_langchain_messages())
    assert (system.role, system.content) == (Role.SYSTEM, "Be brief.")
    assert user.content == "What is this?"
    assert ai.content == "Let me look."
    assert ai.tool_calls == (ToolCall("t1", "look", '{"at":"a.png"}'),)
    extras: Any = ai.metadata["langchain"]
    assert extras["usage_metadata"]["total_tokens"] == 12
    assert tool.tool_responses == (ToolResponse("t1", "", "a cat"),)
    assert pdf.media == (Media("application/pdf", b"%PDF", name="a.pdf", id="f1"),)
    assert pdf.metadata == {}
    assert answer.id == "run-2"


def test_messages_without_id_get_one() -> None:
    first, second = from_langchain([HumanMessage("a"), HumanMessage("a")])
    assert first.id != second.id


def test_consecutive_tool_messages_with_one_id_make_one_message() -> None:
    parts = [
        ToolMessage("1", tool_call_id="a", id="t"),
        ToolMessage("2", tool_call_id="b", id="t"),
        ToolMessage("3", tool_call_id="c", id="u"),
        ToolMessage("4", tool_call_id="d"),
    ]
    merged = from_langchain(parts)
    assert [len(m.tool_responses) for m in merged] == [2, 1, 1]


@pytest.mark.parametrize(
    ("messages", "where"),
    [
        ([HumanMessage("a"), FunctionMessage(content="x", name="f")], r"messages\[1\]"),
        ([ChatMessage(content="x", role="critic")], r"messages\[0\]"),
        ([ChatMessage(content="x", role="user")], r"messages\[0\].*HumanMessage"),
        (
            [HumanMessage("a"), ToolMessage("x", tool_call_id="t", artifact=object())],
            r"messages\[1\].*artifact",
        ),
        (
            [AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": None}])],
            r"messages\[0\]\.tool_calls\[0\]\.id",
        ),
        (["text"], r"messages\[0\]"),
    ],
)
def test_refusals_name_the_message(messages: list[Any], where: str) -> None:
    with pytest.raises(UnsupportedContentError, match=where):
        from_langchain(messages)


def test_a_tool_message_without_response_is_refused() -> None:
    with pytest.raises(UnsupportedContentError, match=r"messages\[1\]"):
        to_langchain([Message.user("a"), Message.tool([])])


# --- Hostile input: chatledger's error, never a builtin one from deep inside ----


class _Opaque:
    def __repr__(self) -> str:
        raise AssertionError("an error message must not run a caller's __repr__")


def _calling(args: object) -> AIMessage:
    """An AIMessage whose call holds ``args`` as a tool may leave them (unvalidated)."""
    message = AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "t1"}])
    message.tool_calls[0]["args"] = args  # type: ignore[typeddict-item]
    return message


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (_calling({"a": nested(HOSTILE)}), "nests deeper"),
        (_calling({"a": {1, 2}}), "is a set"),
        (_calling({1: "a"}), "key 1"),
        (_calling({"a": float("nan")}), "nan"),
        (_calling({"a": b"x"}), "bytes"),
        (_calling({"a": _Opaque()}), "_Opaque"),
        (HumanMessage("hi", additional_kwargs={"k": nested(HOSTILE)}), "deeper"),
        (ToolMessage("r", tool_call_id="t1", artifact=nested(HOSTILE)), "deeper"),
        (
            HumanMessage("hi", response_metadata={"chatledger": {"metadata": [[1]]}}),
            "dict",
        ),
    ],
    ids=[
        "deep",
        "set",
        "int key",
        "NaN",
        "bytes",
        "object",
        "kwargs",
        "artifact",
        "side",
    ],
)
def test_hostile_input_gets_a_chatledger_error(
    message: BaseMessage, expected: str
) -> None:
    with pytest.raises(UnsupportedContentError, match=expected) as caught:
        from_langchain([message])
    assert "messages[0]" in str(caught.value)
    assert isinstance(caught.value, TypeError)


def test_argument_text_too_deep_to_parse_goes_as_an_invalid_call() -> None:
    deep = "[" * HOSTILE
    message = Message.assistant(tool_calls=[ToolCall("t1", "f", deep)])
    [converted] = to_langchain([message])
    assert isinstance(converted, AIMessage)
    assert converted.tool_calls == []
    assert converted.invalid_tool_calls[0]["args"] == deep
    assert from_langchain([converted]) == [message]


def test_arguments_at_the_depth_limit_round_trip() -> None:
    deepest = {"a": nested(MAX_METADATA_DEPTH - 1)}
    [message] = from_langchain([_calling(deepest)])
    [converted] = to_langchain([message])
    assert isinstance(converted, AIMessage)
    assert converted.tool_calls[0]["args"] == deepest
    with pytest.raises(UnsupportedContentError, match="nests deeper"):
        from_langchain([_calling({"a": nested(MAX_METADATA_DEPTH)})])


def test_a_message_given_without_id_comes_back_without_one() -> None:
    given = [
        HumanMessage("a"),
        AIMessage("b"),
        ToolMessage("c", tool_call_id="t"),
        SystemMessage("d", id="s"),
    ]
    stored = from_langchain(given)
    assert all(m.id for m in stored)
    assert to_langchain(stored) == given
    with_ids = to_langchain(stored, stored_ids=True)
    assert [m.id for m in with_ids] == [m.id for m in stored]
    assert stored[3].metadata == {}
