"""to_llama_index and from_llama_index: both round trips exact, refusals named."""

from __future__ import annotations

import base64
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("llama_index.core")

from llama_index.core.base.llms.types import (
    AudioBlock,
    CacheControl,
    CachePoint,
    ChatMessage,
    DocumentBlock,
    ImageBlock,
    MessageRole,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
)
from pydantic import BaseModel

from chatledger import Media, Message, Role, ToolCall, ToolResponse
from chatledger.convert import UnsupportedContentError
from chatledger.testing import every_kind
from chatledger_llama_index import from_llama_index, to_llama_index
from tests.unit.test_codec_properties import metadata as any_metadata
from tests.unit.test_codec_properties import text
from tests.unit.test_json_depth import HOSTILE, nested

PNG = b"\x89PNG\r\n\x1a\n\x00\xff"
URLS = st.sampled_from(
    [
        "https://example.com/cat.png",
        "https://example.com",  # pydantic spells it with a slash
        "http://example.com/a b.jpg",
        "data:image/png;base64,iVBORw0KGgo=",
    ]
)
images = st.builds(
    Media,
    mime_type=st.sampled_from(["image/png", "image/jpeg", "image/*", "IMAGE/GIF"]),
    data=st.one_of(st.binary(max_size=64), URLS),
    name=st.none() | text,
    id=st.none() | text,
)


@st.composite
def carried(draw: st.DrawFn) -> Message:
    """A message LlamaIndex can carry: image media, at most one tool response."""
    role = draw(st.sampled_from(list(Role)))
    content = draw(text if role in (Role.SYSTEM, Role.USER) else st.none() | text)
    calls = st.lists(
        st.builds(ToolCall, id=text, name=text, arguments=text, type=text),
        max_size=3,
    )
    responses = st.lists(st.builds(ToolResponse, id=text, name=text, data=text))
    return Message(
        role=role,
        content=content,
        tool_calls=draw(calls) if role is Role.ASSISTANT else (),
        tool_responses=draw(responses.map(lambda r: r[:1]))
        if role is Role.TOOL
        else (),
        media=draw(st.lists(images, max_size=2))
        if role in (Role.USER, Role.ASSISTANT)
        else (),
        metadata=draw(any_metadata.filter(lambda m: "llama_index" not in m)),
    )


def _names_kept(history: list[Message]) -> bool:
    """False when an unnamed response answers an earlier call (it gets the name)."""
    calls: set[str] = set()
    for message in history:
        if any(not r.name and r.id in calls for r in message.tool_responses):
            return False
        calls.update(call.id for call in message.tool_calls)
    return True


@settings(max_examples=200, deadline=None)
@given(st.lists(carried(), max_size=6).filter(_names_kept))
def test_chatledger_round_trip(history: list[Message]) -> None:
    assert from_llama_index(to_llama_index(history)) == history


def _split(history: list[Message]) -> list[Message]:
    """A tool message per tool response, its metadata and content on the first."""
    split = []
    for message in history:
        if len(message.tool_responses) < 2:
            split.append(message)
            continue
        for number, response in enumerate(message.tool_responses):
            first = number == 0
            split.append(
                Message.tool(
                    response,
                    content=message.content if first else None,
                    metadata=message.metadata if first else {},
                )
            )
    return split


def test_every_kind_round_trips_a_tool_message_per_response() -> None:
    history = [
        m
        for m in every_kind()
        if all(x.mime_type.startswith("image/") for x in m.media)
    ]
    assert any(len(m.tool_responses) > 1 for m in history)
    back = from_llama_index(to_llama_index(history))
    assert back == _split(history)
    assert from_llama_index(to_llama_index(back)) == back


def test_the_mapping_is_llama_index_native() -> None:
    call = ToolCall("c1", "weather", '{"city":"Rome"}')
    history = [
        Message.system("Be brief."),
        Message.user("Look", media=[Media("image/png", PNG)]),
        Message.assistant(None, tool_calls=[call]),
        Message.tool([ToolResponse("c1", "weather", "24")]),
        Message.assistant("24 °C.", metadata={"model": "m-1"}),
    ]
    system, user, assistant, tool, answer = to_llama_index(history)
    assert system == ChatMessage(role=MessageRole.SYSTEM, content="Be brief.")
    assert user.blocks == [
        TextBlock(text="Look"),
        ImageBlock(image=base64.b64encode(PNG), image_mimetype="image/png"),
    ]
    assert user.additional_kwargs == {}
    assert assistant == ChatMessage(
        role=MessageRole.ASSISTANT,
        blocks=[],
        additional_kwargs={
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city":"Rome"}'},
                }
            ]
        },
    )
    assert assistant.content is None
    # Named after its call, so nothing travels beside it.
    assert tool == ChatMessage(
        role=MessageRole.TOOL, content="24", additional_kwargs={"tool_call_id": "c1"}
    )
    assert answer.additional_kwargs == {"chatledger": {"metadata": {"model": "m-1"}}}


def test_an_unnamed_response_gets_its_calls_name() -> None:
    call = ToolCall("c1", "weather", "{}")
    history = [Message.assistant(None, tool_calls=[call])]
    history.append(Message.tool(ToolResponse("c1", "", "24")))
    back = from_llama_index(to_llama_index(history))
    assert back[1].tool_responses == (ToolResponse("c1", "weather", "24"),)


class SdkToolCall(BaseModel):
    """Stands for an SDK object, such as OpenAI's ChatCompletionMessageToolCall."""

    id: str
    type: str
    function: dict[str, str]


def llama_index_messages(tmp: Path) -> list[ChatMessage]:
    """LlamaIndex messages of every shape this mapping reads."""
    streamed = {"index": 0, **SDK_DICT}
    return [
        ChatMessage(role="system", content="Be brief."),
        ChatMessage(role="user", blocks=[TextBlock(text="a"), TextBlock(text="b\nc")]),
        ChatMessage(
            role="user",
            blocks=[ImageBlock(image=PNG), TextBlock(text="What is it?")],
        ),
        ChatMessage(role="user", blocks=[]),
        ChatMessage(role="user", blocks=[ImageBlock(url="https://example.com/cat")]),
        ChatMessage(
            role="user",
            blocks=[
                ImageBlock(url="https://example.com/cat.png", detail="high"),
                ImageBlock(image=base64.b64encode(PNG), image_mimetype="image/png"),
            ],
        ),
        ChatMessage(
            role="assistant",
            blocks=[
                TextBlock(text="Checking."),
                ToolCallBlock(tool_call_id="t1", tool_name="f", tool_kwargs={"a": 1}),
                ToolCallBlock(tool_call_id="t2", tool_name="g", tool_kwargs="raw"),
            ],
        ),
        ChatMessage(role="tool", content="1", additional_kwargs={"tool_call_id": "t1"}),
        ChatMessage(
            role="tool",
            blocks=[TextBlock(text="x"), TextBlock(text="y")],
            additional_kwargs={"tool_call_id": "t2", "name": "g"},
        ),
        ChatMessage(role="tool", blocks=[], additional_kwargs={"tool_call_id": "t3"}),
        ChatMessage(role="tool", content="no call id"),
        ChatMessage(role="tool", blocks=[]),
        ChatMessage(
            role="assistant",
            content="done",
            additional_kwargs={"tool_call_id": "t2", "usage": {"tokens": [1, 2.5]}},
        ),
        ChatMessage(role="assistant", content="", additional_kwargs={"tool_calls": []}),
        ChatMessage(
            role="assistant",
            blocks=[
                ToolCallBlock(
                    tool_call_id="s1", tool_name="lookup", tool_kwargs='{"q":"x"}'
                )
            ],
            additional_kwargs={"tool_calls": [SDK_DICT]},
        ),
        ChatMessage(role="assistant", additional_kwargs={"tool_calls": [streamed]}),
        ChatMessage(role="user", content="x", additional_kwargs={"chatledger": {}}),
    ]


SDK_DICT: dict[str, Any] = {
    "id": "s1",
    "type": "function",
    "function": {"name": "lookup", "arguments": '{"q":"x"}'},
}


def test_llama_index_round_trip(tmp_path: Path) -> None:
    given_messages = llama_index_messages(tmp_path)
    stored = from_llama_index(given_messages)
    back = to_llama_index(stored)
    # An empty side entry is not written back.
    assert back[:-1] == given_messages[:-1]
    assert back[-1] == ChatMessage(role="user", content="x")


def test_sdk_tool_calls_come_back_as_dicts() -> None:
    sdk = ChatMessage(
        role="assistant",
        blocks=[
            ToolCallBlock(
                tool_call_id="s1", tool_name="lookup", tool_kwargs='{"q":"x"}'
            )
        ],
        additional_kwargs={"tool_calls": [SdkToolCall(**SDK_DICT)]},
    )
    [stored] = from_llama_index([sdk])
    assert stored.tool_calls == (ToolCall("s1", "lookup", '{"q":"x"}'),)
    assert "llama_index" in stored.metadata  # the call was a block too
    [back] = to_llama_index([stored])
    assert back.additional_kwargs == {"tool_calls": [SDK_DICT]}
    assert back.blocks == sdk.blocks


def test_what_only_one_side_has_travels_in_the_others_field() -> None:
    [stored] = from_llama_index(
        [
            ChatMessage(
                role="user",
                blocks=[ImageBlock(url="https://example.com/cat.png", detail="low")],
                additional_kwargs={"trace": "abc"},
            )
        ]
    )
    assert stored.content == ""
    assert stored.media == (Media("image/png", "https://example.com/cat.png"),)
    assert stored.metadata == {
        "llama_index": {
            "images": [{"detail": "low"}],
            "additional_kwargs": {"trace": "abc"},
        }
    }
    named = Message.user(
        "Look", media=[Media("image/png", "https://example.com", name="n", id="m")]
    )
    [sent] = to_llama_index([named])
    assert sent.additional_kwargs == {
        "chatledger": {
            "media": [{"url": "https://example.com", "name": "n", "id": "m"}]
        }
    }


@pytest.mark.parametrize(
    ("chat", "where"),
    [
        (ChatMessage(role=MessageRole.FUNCTION, content="x"), r"\[0\]\.role"),
        (ChatMessage(role=MessageRole.DEVELOPER, content="x"), r"\[0\]\.role"),
        (
            ChatMessage(role="user", blocks=[AudioBlock(audio=b"RIFF", format="wav")]),
            r"\[0\]\.blocks\[0\]: a block of type 'audio'",
        ),
        (
            ChatMessage(role="user", blocks=[DocumentBlock(data=b"%PDF")]),
            r"\[0\]\.blocks\[0\]: a block of type 'document'",
        ),
        (
            ChatMessage(role="assistant", blocks=[ThinkingBlock(content="hm")]),
            r"\[0\]\.blocks\[0\]: a block of type 'thinking'",
        ),
        (
            ChatMessage(
                role="user",
                blocks=[CachePoint(cache_control=CacheControl(type="ephemeral"))],
            ),
            r"\[0\]\.blocks\[0\]: a block of type 'cache'",
        ),
        (
            ChatMessage(role="system", blocks=[ImageBlock(image=PNG)]),
            r"\[0\]\.blocks\[0\]: a block of type 'image' in a system message",
        ),
        (
            ChatMessage(role="assistant", blocks=[ToolCallBlock(tool_name="f")]),
            r"\[0\]\.blocks\[0\]\.tool_call_id is None",
        ),
        (
            ChatMessage(
                role="assistant",
                blocks=[
                    ToolCallBlock(
                        tool_call_id="t", tool_name="f", tool_kwargs={"a": (1, 2)}
                    )
                ],
            ),
            r"\[0\]\.blocks\[0\]\.tool_kwargs",
        ),
        (
            ChatMessage(role="user", content="x", additional_kwargs={"o": object()}),
            r"\[0\]: .*'o'.* not JSON",
        ),
        (
            ChatMessage(
                role="assistant",
                additional_kwargs={"tool_calls": [{"function": {"name": "f"}}]},
            ),
            r"\[0\]\.additional_kwargs\['tool_calls'\]\[0\]\.id",
        ),
        (
            ChatMessage(
                role="assistant",
                blocks=[ToolCallBlock(tool_call_id="other", tool_name="lookup")],
                additional_kwargs={"tool_calls": [SDK_DICT]},
            ),
            r"\[0\]\.blocks\[0\] differs",
        ),
        (
            ChatMessage(role="user", content="x", additional_kwargs={"chatledger": 1}),
            r"\[0\]\.additional_kwargs\['chatledger'\] is reserved",
        ),
        (
            ChatMessage(
                role="user",
                content="x",
                additional_kwargs={"chatledger": {"metadata": {"llama_index": 1}}},
            ),
            r"\[0\]\.additional_kwargs\['chatledger'\]\['metadata'\] must be a dict "
            "without the key 'llama_index'",
        ),
    ],
)
def test_what_chatledger_cannot_hold_is_named(chat: ChatMessage, where: str) -> None:
    with pytest.raises(UnsupportedContentError, match=rf"^chat_messages{where}"):
        from_llama_index([chat])


def test_an_image_by_path_and_other_items_are_refused(tmp_path: Path) -> None:
    picture = tmp_path / "cat.png"
    picture.write_bytes(PNG)
    by_path = ChatMessage(role="user", blocks=[ImageBlock(path=picture)])
    with pytest.raises(UnsupportedContentError, match=r"\[1\]\.blocks\[0\]\.path"):
        from_llama_index([ChatMessage(role="user", content="hi"), by_path])
    with pytest.raises(UnsupportedContentError, match=r"chat_messages\[0\] must be"):
        from_llama_index(["hi"])  # type: ignore[list-item]
    with pytest.raises(UnsupportedContentError, match="must be a list"):
        from_llama_index(ChatMessage(role="user", content="hi"))  # type: ignore[arg-type]


def test_what_llama_index_cannot_carry_is_named() -> None:
    audio = Message.user("hear", media=[Media("audio/wav", b"RIFF")])
    with pytest.raises(UnsupportedContentError, match=r"^messages\[1\]\.media\[0\]"):
        to_llama_index([Message.user("hi"), audio])
    bad_url = Message.user("see", media=[Media("image/png", "not a url")])
    with pytest.raises(UnsupportedContentError, match=r"^messages\[0\]\.media\[0\]"):
        to_llama_index([bad_url])
    reserved = Message.user("x", metadata={"llama_index": "text"})
    with pytest.raises(UnsupportedContentError, match=r"\['llama_index'\] is reserved"):
        to_llama_index([reserved])
    stale = Message.user("changed", metadata={"llama_index": {"blocks": [1, 1]}})
    with pytest.raises(UnsupportedContentError, match="does not match the message"):
        to_llama_index([stale])
    with pytest.raises(UnsupportedContentError, match=r"messages\[0\] must be"):
        to_llama_index(["hi"])  # type: ignore[list-item]


def test_the_result_feeds_llama_index_as_its_own_messages() -> None:
    converted: Any = to_llama_index(every_kind()[:5])
    assert all(isinstance(m, ChatMessage) for m in converted)
    assert [m.content for m in converted][:2] == [
        "You are terse.",
        "What is the weather in Paris and Rome?",
    ]


# --- Hostile input: chatledger's error, never a builtin one from deep inside ----


class _Opaque:
    def __repr__(self) -> str:
        raise AssertionError("an error message must not run a caller's __repr__")


def _block_call(kwargs: object) -> ChatMessage:
    block = ToolCallBlock(tool_call_id="t1", tool_name="f", tool_kwargs={})
    block.tool_kwargs = kwargs  # type: ignore[assignment]
    return ChatMessage(role="assistant", blocks=[block])


def _kwargs_call(arguments: object, call_id: object = "t1") -> ChatMessage:
    call = {"id": call_id, "type": "function", "function": {"name": "f"}}
    call["function"]["arguments"] = arguments  # type: ignore[index]
    return ChatMessage(role="assistant", additional_kwargs={"tool_calls": [call]})


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (
            lambda: _block_call({"a": nested(HOSTILE)}),
            r"deeper than 64 levels at .*tool_kwargs\['a'\]",
        ),
        (lambda: _block_call({"a": {1, 2}}), "is a set"),
        (lambda: _block_call({1: "a"}), "key 1"),
        (lambda: _block_call({"a": float("nan")}), "nan"),
        (lambda: _block_call({"a": _Opaque()}), "_Opaque"),
        (
            lambda: _kwargs_call({"a": nested(HOSTILE)}),
            r"deeper than 64 levels at .*arguments\['a'\]",
        ),
        (lambda: _kwargs_call({"a": b"x"}), "bytes"),
        (lambda: _kwargs_call("{}", call_id=nested(HOSTILE)), r"\.id is a list"),
        (
            lambda: ChatMessage(role="user", additional_kwargs={"k": nested(HOSTILE)}),
            "deeper",
        ),
    ],
    ids=[
        "block deep",
        "block set",
        "block int key",
        "block NaN",
        "block object",
        "kwargs deep",
        "kwargs bytes",
        "kwargs deep id",
        "additional_kwargs deep",
    ],
)
def test_hostile_input_gets_a_chatledger_error(
    make: Callable[[], ChatMessage], expected: str
) -> None:
    with pytest.raises(UnsupportedContentError, match=expected) as caught:
        from_llama_index([make()])
    assert "chat_messages[0]" in str(caught.value)
    assert isinstance(caught.value, TypeError)


def test_argument_text_too_deep_to_parse_is_no_tool_call_block() -> None:
    deep = "[" * HOSTILE
    message = Message.assistant(
        tool_calls=[ToolCall("t1", "f", deep)],
        metadata={"llama_index": {"blocks": ["tool_call"], "tool_calls_in": "blocks"}},
    )
    with pytest.raises(UnsupportedContentError, match="not an object"):
        to_llama_index([message])
    plain = Message.assistant(tool_calls=[ToolCall("t1", "f", deep)])
    assert from_llama_index(to_llama_index([plain])) == [plain]
