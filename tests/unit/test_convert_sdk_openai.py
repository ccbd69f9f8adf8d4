"""Each OpenAI Chat Completions message the SDK's types describe comes back exactly.

The messages are built with the SDK's own TypedDicts and checked against its
types with pydantic before they are read. Each either comes back from
``to_openai(from_openai(messages))`` equal to what was given, or is refused
with :class:`UnsupportedContentError` naming the place. Walks over the SDK's
unions of messages, content parts and tool calls, and over the fields of
each, fail for one no example here holds, so what a new SDK release adds is
handled (or refused on purpose) before it reaches a user.
"""

from __future__ import annotations

import base64
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from openai.types.chat import (
    ChatCompletionAssistantMessageParam,
    ChatCompletionContentPartImageParam,
    ChatCompletionContentPartInputAudioParam,
    ChatCompletionContentPartParam,
    ChatCompletionContentPartRefusalParam,
    ChatCompletionContentPartTextParam,
    ChatCompletionDeveloperMessageParam,
    ChatCompletionFunctionMessageParam,
    ChatCompletionMessageCustomToolCallParam,
    ChatCompletionMessageFunctionToolCallParam,
    ChatCompletionMessageParam,
    ChatCompletionMessageToolCallUnionParam,
    ChatCompletionSystemMessageParam,
    ChatCompletionToolMessageParam,
    ChatCompletionUserMessageParam,
)
from openai.types.chat.chat_completion_assistant_message_param import (
    ContentArrayOfContentPart,
)
from openai.types.chat.chat_completion_content_part_param import File
from pydantic import TypeAdapter
from typing_extensions import is_typeddict

from chatledger import Message, connect
from chatledger.convert import (
    UnsupportedContentError,
    from_openai,
    to_openai,
    to_openai_responses,
)

WAV = base64.b64encode(b"RIFF\x00\x00WAVE").decode()
MP3 = base64.b64encode(b"ID3\x03\x00").decode()
PDF = "data:application/pdf;base64," + base64.b64encode(b"%PDF-1.4").decode()
PNG = "data:image/png;base64," + base64.b64encode(b"\x89PNG\r\n").decode()
URL = "https://example.invalid/cat.png"

_BY_ROLE: dict[str, Any] = {
    "system": ChatCompletionSystemMessageParam,
    "developer": ChatCompletionDeveloperMessageParam,
    "user": ChatCompletionUserMessageParam,
    "assistant": ChatCompletionAssistantMessageParam,
    "tool": ChatCompletionToolMessageParam,
    "function": ChatCompletionFunctionMessageParam,
}
_ADAPTERS: dict[str, TypeAdapter[Any]] = {
    role: TypeAdapter(kind) for role, kind in _BY_ROLE.items()
}


def _text(value: str, **fields: Any) -> ChatCompletionContentPartTextParam:
    part = ChatCompletionContentPartTextParam(type="text", text=value)
    part.update(fields)  # type: ignore[typeddict-item]
    return part


def _image(url: str = URL, **fields: Any) -> ChatCompletionContentPartImageParam:
    part = ChatCompletionContentPartImageParam(type="image_url", image_url={"url": url})
    part.update(fields)  # type: ignore[typeddict-item]
    return part


def _audio(data: str, audio_format: Any) -> ChatCompletionContentPartInputAudioParam:
    return ChatCompletionContentPartInputAudioParam(
        type="input_audio", input_audio={"data": data, "format": audio_format}
    )


def _call(call_id: str) -> ChatCompletionMessageFunctionToolCallParam:
    return ChatCompletionMessageFunctionToolCallParam(
        id=call_id,
        type="function",
        function={"name": "look", "arguments": '{"x": 1}'},
    )


_CUSTOM = ChatCompletionMessageCustomToolCallParam(
    id="c3", type="custom", custom={"name": "grep", "input": "a.*b"}
)
_BREAK: Any = {"mode": "explicit", "ttl": "30m"}

#: Messages read and written back exactly: (name, messages).
EXACT: list[tuple[str, list[Any]]] = [
    (
        "system and developer, str and text parts, with names",
        [
            ChatCompletionSystemMessageParam(role="system", content="Rules."),
            ChatCompletionSystemMessageParam(
                role="system", content=[_text("A"), _text("")], name="ops"
            ),
            ChatCompletionDeveloperMessageParam(
                role="developer", content="Be brief.", name=""
            ),
            ChatCompletionDeveloperMessageParam(role="developer", content=[]),
        ],
    ),
    (
        "user parts: text, image by URL and data, audio, file, in any order",
        [
            ChatCompletionUserMessageParam(
                role="user",
                content=[
                    _image(PNG),
                    _text("What are these?"),
                    _audio(WAV, "wav"),
                    _text("And this?"),
                    _audio(MP3, "mp3"),
                    File(
                        type="file",
                        file={"file_data": PDF, "filename": "report.pdf"},
                    ),
                    _image(URL, image_url={"url": URL, "detail": "low"}),
                ],
                name="bob",
            ),
            ChatCompletionUserMessageParam(role="user", content=[_audio(WAV, "wav")]),
            ChatCompletionUserMessageParam(role="user", content=""),
        ],
    ),
    (
        "files by id and as bare base64, kept whole",
        [
            ChatCompletionUserMessageParam(
                role="user",
                content=[
                    _text("Compare."),
                    File(type="file", file={"file_id": "file-1"}),
                    File(
                        type="file",
                        file={"file_id": "file-2", "filename": "b.pdf"},
                    ),
                    File(type="file", file={"file_data": "JVBERi0=", "filename": "c"}),
                ],
            )
        ],
    ),
    (
        "prompt cache breakpoints on every kind of part",
        [
            ChatCompletionSystemMessageParam(
                role="system",
                content=[_text("Rules.", prompt_cache_breakpoint=_BREAK)],
            ),
            ChatCompletionUserMessageParam(
                role="user",
                content=[
                    _text("a"),
                    _text("b", prompt_cache_breakpoint={"mode": "explicit"}),
                    _image(PNG, prompt_cache_breakpoint=_BREAK),
                    {**_audio(WAV, "wav"), "prompt_cache_breakpoint": _BREAK},
                    File(
                        type="file",
                        file={"file_data": PDF},
                        prompt_cache_breakpoint=_BREAK,
                    ),
                ],
            ),
            ChatCompletionAssistantMessageParam(
                role="assistant", tool_calls=[_call("c")]
            ),
            ChatCompletionToolMessageParam(
                role="tool",
                tool_call_id="c",
                content=[_text("x", prompt_cache_breakpoint=_BREAK), _text("y")],
            ),
        ],
    ),
    (
        "assistant: str, parts, refusals, names, fields holding nothing",
        [
            ChatCompletionAssistantMessageParam(role="assistant", content="Hi."),
            ChatCompletionAssistantMessageParam(
                role="assistant",
                content=[
                    _text("Well"),
                    ChatCompletionContentPartRefusalParam(
                        type="refusal", refusal="No."
                    ),
                    _text(""),
                ],
                name="bot",
            ),
            ChatCompletionAssistantMessageParam(
                role="assistant", content=None, refusal="No."
            ),
            ChatCompletionAssistantMessageParam(
                role="assistant",
                content="Hi.",
                refusal=None,
                audio=None,
                function_call=None,
                tool_calls=[],
            ),
            ChatCompletionAssistantMessageParam(role="assistant", content=[]),
        ],
    ),
    (
        "tool calls of both kinds, their answers as str and as text parts",
        [
            ChatCompletionUserMessageParam(role="user", content="Look."),
            ChatCompletionAssistantMessageParam(
                role="assistant",
                content=None,
                tool_calls=[_call("c1"), _call("c2"), _CUSTOM],
            ),
            ChatCompletionToolMessageParam(role="tool", tool_call_id="c2", content=""),
            ChatCompletionToolMessageParam(
                role="tool", tool_call_id="c1", content=[_text("a"), _text("b")]
            ),
            ChatCompletionToolMessageParam(role="tool", tool_call_id="c3", content=[]),
            ChatCompletionAssistantMessageParam(
                role="assistant", tool_calls=[_call("c4")]
            ),
            ChatCompletionToolMessageParam(
                role="tool", tool_call_id="c4", content="done"
            ),
        ],
    ),
    (
        "an assistant's audio, by id",
        [
            ChatCompletionUserMessageParam(role="user", content="Say hi."),
            ChatCompletionAssistantMessageParam(
                role="assistant", content=None, audio={"id": "audio_1"}
            ),
            ChatCompletionAssistantMessageParam(
                role="assistant", audio={"id": "audio_2"}, content="Hi."
            ),
        ],
    ),
    (
        "the deprecated function call and function messages",
        [
            ChatCompletionAssistantMessageParam(
                role="assistant",
                content=None,
                function_call={"name": "look", "arguments": '{"x": 1}'},
            ),
            ChatCompletionFunctionMessageParam(
                role="function", name="look", content="sunny"
            ),
            ChatCompletionFunctionMessageParam(role="function", name="", content=None),
            ChatCompletionAssistantMessageParam(
                role="assistant", tool_calls=[_call("c")]
            ),
            ChatCompletionToolMessageParam(role="tool", tool_call_id="c", content="x"),
            ChatCompletionFunctionMessageParam(
                role="function", name="look", content="y"
            ),
        ],
    ),
]

#: Messages refused, naming the place: (name, messages, a pattern of the error).
REFUSED: list[tuple[str, list[Any], str]] = [
    (
        "a data URL image whose base64 would not encode back",
        [
            ChatCompletionUserMessageParam(
                role="user", content=[_image("data:image/png;base64,iVBORx==")]
            )
        ],
        r"messages\[0\]\.content\[0\] is not base64 as it is written",
    ),
    (
        "audio whose base64 would not encode back",
        [ChatCompletionUserMessageParam(role="user", content=[_audio("AB==", "wav")])],
        r"messages\[0\]\.content\[0\]\.input_audio\.data is not base64",
    ),
]


def _same(adapter: TypeAdapter[Any], value: Any) -> None:
    assert adapter.dump_python(adapter.validate_python(value), mode="json") == value


def _valid(messages: list[Any]) -> None:
    """Refuse an example the SDK's types do not describe (an unknown key too)."""
    for message in messages:
        _same(_ADAPTERS[message["role"]], message)


@pytest.mark.parametrize("messages", [m for _, m in EXACT], ids=[n for n, _ in EXACT])
def test_the_sdk_messages_come_back_exactly(messages: list[Any]) -> None:
    _valid(messages)
    read = from_openai(messages)
    assert to_openai(read) == messages
    assert from_openai(to_openai(read)) == read


@pytest.mark.parametrize(
    ("messages", "where"),
    [(m, w) for _, m, w in REFUSED],
    ids=[n for n, _, _ in REFUSED],
)
def test_what_cannot_come_back_is_refused_naming_the_place(
    messages: list[Any], where: str
) -> None:
    _valid(messages)
    with pytest.raises(UnsupportedContentError, match=where):
        from_openai(messages)


@pytest.mark.parametrize(
    ("messages", "where"),
    [
        (
            [
                ChatCompletionAssistantMessageParam(
                    role="assistant", content=None, audio={"id": "a"}
                )
            ],
            r"messages\[0\]\.metadata\['openai'\]\['audio'\]: the Responses API",
        ),
        (
            [
                ChatCompletionAssistantMessageParam(
                    role="assistant",
                    content=None,
                    function_call={"name": "f", "arguments": "{}"},
                )
            ],
            r"\['function_call'\]: the Responses API has no place",
        ),
        (
            [
                ChatCompletionUserMessageParam(
                    role="user",
                    content=[File(type="file", file={"file_id": "file-1"})],
                )
            ],
            r"\['parts'\]\[0\]: the Responses API has no place",
        ),
        (
            [ChatCompletionFunctionMessageParam(role="function", name="f", content="")],
            r"messages\[0\]\.metadata\['openai'\]\['name'\]: the Responses API",
        ),
    ],
)
def test_what_only_chat_completions_carries_is_refused_by_responses(
    messages: list[Any], where: str
) -> None:
    with pytest.raises(UnsupportedContentError, match=where):
        to_openai_responses(from_openai(messages))


# --- Every member and field the SDK names is one of the examples' ----------------


def _literal(typed_dict: Any, key: str) -> str:
    literal = typing.get_type_hints(typed_dict, include_extras=True)[key]
    while typing.get_origin(literal) is not typing.Literal:
        literal = typing.get_args(literal)[0]  # Required[...]
    [value] = typing.get_args(literal)
    assert isinstance(value, str)
    return value


def _members(union: Any) -> list[Any]:
    members = typing.get_args(union)
    assert members
    assert all(is_typeddict(m) for m in members)
    return list(members)


def _walk(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, dict):
        yield value
        for inner in value.values():
            yield from _walk(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from _walk(inner)


_ALL = [message for _, messages in EXACT for message in messages]


def test_every_message_role_and_field_of_the_sdk_is_an_example() -> None:
    for kind in _members(ChatCompletionMessageParam):
        role = _literal(kind, "role")
        given = {key for m in _ALL if m["role"] == role for key in m}
        missing = set(typing.get_type_hints(kind)) - given
        assert not missing, f"{role} message fields without an example: {missing}"


def test_every_content_part_and_its_fields_of_the_sdk_is_an_example() -> None:
    parts = [
        part
        for message in _ALL
        if isinstance(message.get("content"), list)
        for part in message["content"]
    ]
    unions = (ChatCompletionContentPartParam, ContentArrayOfContentPart)
    for kind in (member for union in unions for member in _members(union)):
        name = _literal(kind, "type")
        given = {key for part in parts if part["type"] == name for key in part}
        assert given, f"no example of a {name} part"
        missing = set(typing.get_type_hints(kind)) - given
        assert not missing, f"{name} part fields without an example: {missing}"


def test_every_tool_call_kind_of_the_sdk_is_an_example() -> None:
    kinds = {
        _literal(m, "type") for m in _members(ChatCompletionMessageToolCallUnionParam)
    }
    given = {call["type"] for m in _ALL for call in m.get("tool_calls") or ()}
    assert kinds <= given


# --- Stored and read back unchanged ----------------------------------------------


@pytest.fixture(params=["memory", "sqlite"])
def repository(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    url = "memory://" if request.param == "memory" else f"sqlite:///{tmp_path}/c.db"
    opened: Any = connect(url)
    with opened:
        yield opened


def test_messages_of_every_example_store_and_read_back_unchanged(
    repository: Any,
) -> None:
    for index, (_, given) in enumerate(EXACT):
        messages = from_openai(given)
        repository.save_all(f"c{index}", messages)
        stored: list[Message] = repository.find_by_conversation_id(f"c{index}")
        assert stored == messages
        assert [m.id for m in stored] == [m.id for m in messages]
        assert to_openai(stored) == given
