"""The converters to the OpenAI and Anthropic request shapes."""

from __future__ import annotations

import base64

import pytest

from chatledger import Media, Message, ToolCall, ToolResponse
from chatledger.convert import UnsupportedContentError, to_anthropic, to_openai

PNG = b"\x89PNG\r\n\x1a\n\x00\xff"


def _tool_round() -> list[Message]:
    return [
        Message.system("Be brief.", metadata={"source": "config"}),
        Message.user("Weather in Paris and Rome?"),
        Message.assistant(
            None,
            tool_calls=[
                ToolCall("call_1", "weather", '{"city":"Paris"}'),
                ToolCall("call_2", "weather", '{ "city" : "Rome 🇮🇹" }'),
            ],
        ),
        Message.tool(
            [
                ToolResponse("call_2", "weather", '{"c": 24}'),
                ToolResponse("call_1", "weather", '{"c": 21}'),
            ]
        ),
        Message.assistant("Paris 21, Rome 24.", metadata={"tokens": 5}),
    ]


def test_openai_tool_round() -> None:
    assert to_openai(_tool_round()) == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris and Rome?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city":"Paris"}'},
                },
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {
                        "name": "weather",
                        "arguments": '{ "city" : "Rome 🇮🇹" }',
                    },
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_2", "content": '{"c": 24}'},
        {"role": "tool", "tool_call_id": "call_1", "content": '{"c": 21}'},
        {"role": "assistant", "content": "Paris 21, Rome 24."},
    ]


def test_openai_media_parts() -> None:
    message = Message.user(
        "Look",
        media=[
            Media("image/png", PNG, name="p.png"),
            Media("image/jpeg", "https://example.invalid/cat.jpg"),
            Media("audio/wav", b"RIFF"),
            Media("application/pdf", b"%PDF-1.7", name="doc.pdf"),
        ],
    )
    [converted] = to_openai([message])
    b64 = base64.b64encode(PNG).decode()
    assert converted == {
        "role": "user",
        "content": [
            {"type": "text", "text": "Look"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{b64}"}},
            {
                "type": "image_url",
                "image_url": {"url": "https://example.invalid/cat.jpg"},
            },
            {
                "type": "input_audio",
                "input_audio": {
                    "data": base64.b64encode(b"RIFF").decode(),
                    "format": "wav",
                },
            },
            {
                "type": "file",
                "file": {
                    "file_data": "data:application/pdf;base64,"
                    + base64.b64encode(b"%PDF-1.7").decode(),
                    "filename": "doc.pdf",
                },
            },
        ],
    }


@pytest.mark.parametrize(
    "message",
    [
        Message.user(
            "x", media=[Media("application/pdf", "https://example.invalid/a.pdf")]
        ),
        Message.assistant("", media=[Media("audio/wav", b"RIFF")]),
        Message.tool([], content="orphan text"),
    ],
)
def test_openai_refuses_what_it_cannot_carry(message: Message) -> None:
    with pytest.raises(UnsupportedContentError):
        to_openai([message])


def test_openai_leaves_out_tool_message_content_only() -> None:
    message = Message.tool(ToolResponse("x", "y", "z"), content="tool text")
    assert to_openai([message]) == [
        {"role": "tool", "tool_call_id": "x", "content": "z"}
    ]


def test_anthropic_tool_round() -> None:
    request = to_anthropic([*_tool_round(), Message.user("Thanks")])
    assert request == {
        "system": "Be brief.",
        "messages": [
            {"role": "user", "content": "Weather in Paris and Rome?"},
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": "call_1",
                        "name": "weather",
                        "input": {"city": "Paris"},
                    },
                    {
                        "type": "tool_use",
                        "id": "call_2",
                        "name": "weather",
                        "input": {"city": "Rome 🇮🇹"},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "call_2",
                        "content": '{"c": 24}',
                    },
                    {
                        "type": "tool_result",
                        "tool_use_id": "call_1",
                        "content": '{"c": 21}',
                    },
                ],
            },
            {"role": "assistant", "content": "Paris 21, Rome 24."},
            {"role": "user", "content": "Thanks"},
        ],
    }


def test_anthropic_merges_roles_and_puts_tool_results_first() -> None:
    request = to_anthropic(
        [
            Message.system("A"),
            Message.system("B"),
            Message.user("q", media=[Media("image/png", PNG)]),
            Message.assistant("", tool_calls=[ToolCall("c", "f", "")]),
            Message.user("also this"),
            Message.tool(ToolResponse("c", "f", "done")),
            Message.assistant(""),
        ]
    )
    assert request["system"] == "A\n\nB"
    first, call, answer = request["messages"]
    assert first["content"][1] == {
        "type": "image",
        "source": {
            "type": "base64",
            "media_type": "image/png",
            "data": base64.b64encode(PNG).decode(),
        },
    }
    assert call == {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "c", "name": "f", "input": {}}],
    }
    assert [b["type"] for b in answer["content"]] == ["tool_result", "text"]


def test_anthropic_without_system_has_no_system_key() -> None:
    assert "system" not in to_anthropic([Message.user("hi")])


@pytest.mark.parametrize(
    "message",
    [
        Message.assistant(tool_calls=[ToolCall("c", "f", "not json")]),
        Message.assistant(tool_calls=[ToolCall("c", "f", "[1, 2]")]),
        Message.user("x", media=[Media("audio/wav", b"RIFF")]),
        Message.tool([], content="orphan"),
    ],
)
def test_anthropic_refuses_what_it_cannot_carry(message: Message) -> None:
    with pytest.raises(UnsupportedContentError):
        to_anthropic([message])
