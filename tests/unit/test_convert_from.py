"""Reading OpenAI and Anthropic shapes back into messages, and the round trips."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chatledger import ChatLedgerError, Media, Message, Role, ToolCall, ToolResponse
from chatledger.convert import (
    UnsupportedContentError,
    from_anthropic,
    from_openai,
    to_anthropic,
    to_openai,
)
from chatledger.messages import MAX_METADATA_DEPTH
from tests.unit.test_json_depth import HOSTILE, nested

PNG = b"\x89PNG\r\n\x1a\n\x00\xff"
PNG_B64 = base64.b64encode(PNG).decode()

text = st.text(st.characters(exclude_categories=["Cs"]), max_size=20)
some_text = st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=20)
names = st.text("abcdefgh_", min_size=1, max_size=8)
blobs = st.binary(min_size=1, max_size=32)
image_mimes = st.sampled_from(["image/png", "image/jpeg", "image/gif", "image/webp"])
image_urls = st.builds(
    lambda stem, ext: (f"image/{ext}", f"https://example.invalid/{stem}.{ext}"),
    names,
    st.sampled_from(["png", "gif"]),
)
json_objects = st.dictionaries(
    names,
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats(allow_nan=False, allow_infinity=False)
        | text,
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(names, inner, max_size=3)
        ),
        max_leaves=8,
    ),
    max_size=3,
)


def _openai_media() -> st.SearchStrategy[Media]:
    return st.one_of(
        st.builds(Media, image_mimes, blobs),
        image_urls.map(lambda pair: Media(*pair)),
        st.builds(Media, st.sampled_from(["audio/wav", "audio/mpeg"]), blobs),
        st.builds(
            Media,
            st.sampled_from(["application/pdf", "text/csv", "audio/ogg"]),
            blobs,
            name=st.none() | names,
        ),
    )


def _metadata(key: str, fields: dict[str, Any]) -> dict[str, Any]:
    """``{key: fields}`` without the fields that hold nothing, as converters keep it."""
    kept = {name: value for name, value in fields.items() if value is not None}
    return {key: kept} if kept else {}


@st.composite
def text_and_parts(draw: st.DrawFn) -> tuple[str, list[int] | None]:
    """A text, and the lengths of the parts it came as (``None``: a str)."""
    if not draw(st.booleans()):
        return draw(text), None
    parts = draw(st.lists(text, min_size=1, max_size=3))
    return "\n\n".join(parts), [len(part) for part in parts]


@st.composite
def _openai_media_kept(draw: st.DrawFn) -> tuple[Media, dict[str, Any]]:
    media = draw(_openai_media())
    if not media.mime_type.startswith("image/") or draw(st.booleans()):
        return media, {}
    return media, {"detail": draw(st.sampled_from(["auto", "low", "high"]))}


@st.composite
def openai_histories(draw: st.DrawFn) -> list[Message]:
    """Histories the Chat Completions shape carries exactly, with what it keeps."""
    history: list[Message] = []
    fields: dict[str, Any]
    maybe_name = st.none() | names
    for turn in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(["system", "user", "answer", "tools"]))
        if kind == "system":
            content, parts = draw(text_and_parts())
            role = draw(st.sampled_from([None, "developer"]))
            fields = {"role": role, "name": draw(maybe_name), "text_parts": parts}
            history.append(
                Message.system(content, metadata=_metadata("openai", fields))
            )
        elif kind == "user":
            kept_media = draw(st.lists(_openai_media_kept(), max_size=3))
            content, parts = draw(text_and_parts())
            entries = [entry for _, entry in kept_media]
            fields = {
                "name": draw(maybe_name),
                # With media the text is one part, which to_openai writes anyway.
                "text_parts": None if kept_media else parts,
                "media": entries if any(entries) else None,
            }
            history.append(
                Message.user(
                    content,
                    media=[media for media, _ in kept_media],
                    metadata=_metadata("openai", fields),
                )
            )
        elif kind == "answer":
            content, parts = draw(text_and_parts())
            fields = {
                "name": draw(maybe_name),
                "refusal": draw(st.none() | some_text),
                "text_parts": parts,
            }
            history.append(
                Message.assistant(
                    draw(st.none() | st.just(content)),
                    metadata=_metadata("openai", fields),
                )
                if parts is None
                else Message.assistant(content, metadata=_metadata("openai", fields))
            )
        else:
            calls = [
                ToolCall(
                    f"call-{turn}-{n}",
                    draw(names),
                    draw(text),
                    draw(st.sampled_from(["function", "custom"])),
                )
                for n in range(draw(st.integers(1, 3)))
            ]
            history.append(Message.assistant(draw(st.none() | text), tool_calls=calls))
            answered = draw(st.permutations(calls))
            outputs = [draw(text_and_parts()) for _ in answered]
            entries = [{} if p is None else {"text_parts": p} for _, p in outputs]
            history.append(
                Message.tool(
                    [
                        ToolResponse(c.id, c.name, data)
                        for c, (data, _) in zip(answered, outputs, strict=True)
                    ],
                    metadata=_metadata(
                        "openai", {"outputs": entries if any(entries) else None}
                    ),
                )
            )
    return history


def _anthropic_media() -> st.SearchStrategy[Media]:
    return st.one_of(
        st.builds(Media, image_mimes, blobs),
        image_urls.map(lambda pair: Media(*pair)),
        st.builds(Media, st.just("application/pdf"), blobs),
        st.just(Media("application/pdf", "https://example.invalid/doc.pdf")),
        text.map(lambda t: Media("text/plain", t.encode("utf-8"))),
    )


_CACHE = st.none() | st.sampled_from(
    [{"type": "ephemeral"}, {"type": "ephemeral", "ttl": "1h"}]
)


def _entries(entries: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """Per-item entries without the empty fields; ``None`` when none holds any."""
    cleaned = [{k: v for k, v in e.items() if v is not None} for e in entries]
    return cleaned if any(cleaned) else None


@st.composite
def anthropic_histories(draw: st.DrawFn) -> list[Message]:
    """Histories the Anthropic Messages shape carries exactly, with what it keeps."""
    history: list[Message] = []
    fields: dict[str, Any]
    if draw(st.booleans()):
        fields = {"cache_control": draw(_CACHE)}
        history.append(
            Message.system(draw(text), metadata=_metadata("anthropic", fields))
        )
    for turn in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(["user", "answer", "tools"]))
        if kind == "user":
            media = draw(st.lists(_anthropic_media(), max_size=3))
            fields = {
                "cache_control": draw(_CACHE),
                "media": _entries([{"cache_control": draw(_CACHE)} for _ in media]),
            }
            history.append(
                Message.user(
                    draw(some_text),
                    media=media,
                    metadata=_metadata("anthropic", fields),
                )
            )
        elif kind == "answer":
            citations = st.none() | st.just(
                [{"type": "char_location", "cited_text": "x", "document_index": 0}]
            )
            fields = {"cache_control": draw(_CACHE), "citations": draw(citations)}
            history.append(
                Message.assistant(
                    draw(some_text), metadata=_metadata("anthropic", fields)
                )
            )
        else:
            calls = [
                ToolCall(
                    f"call-{turn}-{n}",
                    draw(names),
                    json.dumps(
                        draw(json_objects), ensure_ascii=False, separators=(",", ":")
                    ),
                )
                for n in range(draw(st.integers(1, 3)))
            ]
            previous = history[-1].role if history else None
            # Without text, the calls would join an assistant message before.
            content = draw(st.none() | some_text)
            if content is None and previous is Role.ASSISTANT:
                content = draw(some_text)
            call_entries = _entries([{"cache_control": draw(_CACHE)} for _ in calls])
            history.append(
                Message.assistant(
                    content,
                    tool_calls=calls,
                    metadata=_metadata("anthropic", {"calls": call_entries}),
                )
            )
            answered = draw(st.permutations(calls))
            outputs = [draw(text_and_parts()) for _ in answered]
            output_entries = _entries(
                [
                    {
                        "cache_control": draw(_CACHE),
                        "is_error": draw(st.sampled_from([None, True])),
                        "text_parts": parts,
                    }
                    for _, parts in outputs
                ]
            )
            history.append(
                Message.tool(
                    [
                        ToolResponse(c.id, c.name, data)
                        for c, (data, _) in zip(answered, outputs, strict=True)
                    ],
                    metadata=_metadata("anthropic", {"outputs": output_entries}),
                )
            )
    return history


@settings(max_examples=300, deadline=None)
@given(openai_histories())
def test_openai_round_trip(history: list[Message]) -> None:
    assert from_openai(to_openai(history)) == history


@settings(max_examples=300, deadline=None)
@given(anthropic_histories())
def test_anthropic_round_trip(history: list[Message]) -> None:
    assert from_anthropic(to_anthropic(history)) == history


def test_openai_chat_completions_messages() -> None:
    messages = from_openai(
        [
            {"role": "developer", "content": "Be brief."},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is this?"},
                    {
                        "type": "image_url",
                        "image_url": {
                            "url": f"data:image/png;base64,{PNG_B64}",
                            "detail": "auto",
                        },
                    },
                ],
            },
            {
                "role": "assistant",
                "content": None,
                "refusal": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "look", "arguments": '{"x": 1}'},
                    },
                    {
                        "id": "c2",
                        "type": "function",
                        "function": {"name": "zoom", "arguments": "{}"},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "c2", "content": "zoomed"},
            {
                "role": "tool",
                "tool_call_id": "c1",
                "content": [{"type": "text", "text": "a cat"}],
            },
            {"role": "assistant", "content": "A cat."},
        ]
    )
    assert messages == [
        Message.system("Be brief.", metadata={"openai": {"role": "developer"}}),
        Message.user(
            "What is this?",
            media=[Media("image/png", PNG)],
            metadata={"openai": {"media": [{"detail": "auto"}]}},
        ),
        Message.assistant(
            None,
            tool_calls=[
                ToolCall("c1", "look", '{"x": 1}'),
                ToolCall("c2", "zoom", "{}"),
            ],
            metadata={"openai": {"empty": {"refusal": None}}},
        ),
        Message.tool(
            [ToolResponse("c2", "zoom", "zoomed"), ToolResponse("c1", "look", "a cat")],
            metadata={"openai": {"outputs": [{}, {"text_parts": [5]}]}},
        ),
        Message.assistant("A cat."),
    ]


def test_openai_responses_items() -> None:
    messages = from_openai(
        [
            {"role": "user", "content": [{"type": "input_text", "text": "Weather?"}]},
            {
                "type": "message",
                "role": "assistant",
                "id": "msg_1",
                "status": "completed",
                "content": [
                    {"type": "output_text", "text": "Checking.", "annotations": []}
                ],
            },
            {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "call_1",
                "name": "weather",
                "arguments": '{"city":"Rome"}',
            },
            {"type": "function_call_output", "call_id": "call_1", "output": "24 C"},
            {
                "type": "message",
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "And this?"},
                    {
                        "type": "input_image",
                        "image_url": "https://example.invalid/a.jpg",
                    },
                    {
                        "type": "input_file",
                        "filename": "a.pdf",
                        "file_data": "data:application/pdf;base64,JVBERg==",
                    },
                ],
            },
        ]
    )
    assert messages == [
        # Without a type, a message is read as Chat Completions writes it.
        Message.user("Weather?", metadata={"openai": {"text_parts": [8]}}),
        Message.assistant(
            "Checking.",
            tool_calls=[ToolCall("call_1", "weather", '{"city":"Rome"}')],
            metadata={
                "openai": {
                    "id": "msg_1",
                    "status": "completed",
                    "calls": [{"id": "fc_1"}],
                }
            },
        ),
        Message.tool(ToolResponse("call_1", "weather", "24 C")),
        Message.user(
            "And this?",
            media=[
                Media("image/jpeg", "https://example.invalid/a.jpg"),
                Media("application/pdf", b"%PDF", name="a.pdf"),
            ],
        ),
    ]
    assert messages[1].id == "msg_1"


@pytest.mark.parametrize(
    ("items", "where"),
    [
        (
            [{"role": "user", "content": "hi"}, {"type": "web_search_call", "id": "w"}],
            r"messages\[1\]\.type",
        ),
        (
            [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "x"},
                        {"type": "image_url", "image_url": {"url": "u", "x": "y"}},
                    ],
                }
            ],
            r"messages\[0\]\.content\[1\]\.image_url\.x",
        ),
        (
            [{"role": "tool", "tool_call_id": "c", "content": "x", "name": "f"}],
            r"messages\[0\]\.name",
        ),
        (
            [
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "input_audio",
                            "input_audio": {"data": "", "format": "flac"},
                        }
                    ],
                }
            ],
            r"messages\[0\]\.content\[0\]\.input_audio\.format",
        ),
        ([{"role": "tool", "content": "x"}], r"messages\[0\]\.tool_call_id"),
        (
            [{"role": "assistant", "content": None, "audio": {"id": "a1", "x": 1}}],
            r"messages\[0\]\.audio\.x",
        ),
        (
            [{"role": "function", "content": "x"}],
            r"messages\[0\]\.name must be a str",
        ),
        (
            [{"role": "user", "content": [{"type": "file", "file": {"file": "f"}}]}],
            r"messages\[0\]\.content\[0\]\.file\.file",
        ),
        (["hello"], r"messages\[0\]"),
    ],
)
def test_openai_refuses_what_it_cannot_carry_naming_the_field(
    items: list[Any], where: str
) -> None:
    with pytest.raises(UnsupportedContentError, match=where):
        from_openai(items)


def test_anthropic_request() -> None:
    messages = from_anthropic(
        {
            "model": "m",
            "max_tokens": 100,
            "system": [
                {
                    "type": "text",
                    "text": "Be brief.",
                    "cache_control": {"type": "ephemeral"},
                }
            ],
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "image",
                            "source": {
                                "type": "base64",
                                "media_type": "image/png",
                                "data": PNG_B64,
                            },
                        },
                        {"type": "text", "text": "What is this?"},
                    ],
                },
                {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": "Let me look."},
                        {
                            "type": "tool_use",
                            "id": "t1",
                            "name": "look",
                            "input": {"x": 1},
                        },
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "t1",
                            "content": [{"type": "text", "text": "a cat"}],
                        },
                        {"type": "text", "text": "Thanks"},
                    ],
                },
                {"role": "assistant", "content": "A cat."},
            ],
        }
    )
    assert messages == [
        Message.system(
            "Be brief.",
            metadata={"anthropic": {"cache_control": {"type": "ephemeral"}}},
        ),
        Message.user("", media=[Media("image/png", PNG)]),
        Message.user("What is this?"),
        Message.assistant(
            "Let me look.", tool_calls=[ToolCall("t1", "look", '{"x":1}')]
        ),
        Message.tool(
            ToolResponse("t1", "look", "a cat"),
            metadata={"anthropic": {"outputs": [{"text_parts": [5]}]}},
        ),
        Message.user("Thanks"),
        Message.assistant("A cat."),
    ]


def test_anthropic_takes_a_bare_message_list() -> None:
    assert from_anthropic([{"role": "user", "content": "hi"}]) == [Message.user("hi")]


@pytest.mark.parametrize(
    ("request_", "where"),
    [
        (
            [{"role": "user", "content": [{"type": "citation_carrier", "text": "x"}]}],
            r"messages\[0\]\.content\[0\]\.type: a 'citation_carrier' block",
        ),
        (
            [
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "t",
                            "content": [{"type": "thinking", "thinking": "x"}],
                        }
                    ],
                }
            ],
            r"messages\[0\]\.content\[0\]\.content\[0\]\.type",
        ),
        (
            [
                {"role": "user", "content": "a"},
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_use", "id": "t", "name": "f", "input": {}}
                    ],
                },
            ],
            r"messages\[1\]\.content\[0\]\.type",
        ),
        (
            [
                {
                    "role": "user",
                    "content": [
                        {"type": "image", "source": {"type": "text", "data": "f"}}
                    ],
                }
            ],
            r"messages\[0\]\.content\[0\]\.source\.",
        ),
        ({"system": 3, "messages": []}, r"system"),
        ([{"role": "developer", "content": "x"}], r"messages\[0\]\.role"),
        (
            [{"role": "system", "content": [{"type": "image", "source": {}}]}],
            r"messages\[0\]\.content\[0\]\.type: a 'image' block in a system",
        ),
    ],
)
def test_anthropic_refuses_what_it_cannot_carry_naming_the_field(
    request_: Any, where: str
) -> None:
    with pytest.raises(UnsupportedContentError, match=where):
        from_anthropic(request_)


# --- Hostile input: chatledger's error, never a builtin one from deep inside ----

_DEEP = nested(HOSTILE)


class _Opaque:
    def __repr__(self) -> str:
        raise AssertionError("an error message must not run a caller's __repr__")


def _tool_use(value: object) -> list[dict[str, Any]]:
    block = {"type": "tool_use", "id": "t1", "name": "f", "input": value}
    return [{"role": "assistant", "content": [block]}]


@pytest.mark.parametrize(
    ("read", "expected"),
    [
        (
            lambda: from_openai([{"role": "user", "content": "hi", "name": _DEEP}]),
            "name",
        ),
        (lambda: from_openai([{"role": _DEEP, "content": "hi"}]), "role"),
        (lambda: from_openai([{"type": _DEEP}]), "type"),
        (lambda: from_openai([{"role": "user", "content": _DEEP}]), "content"),
        (lambda: from_openai([{"role": "user", "content": "a", "id": _DEEP}]), "id"),
        (lambda: from_openai([{"role": "user", "content": "a", ("k",): 1}]), "k"),
        (lambda: from_openai([{"role": "user", "content": "a", "x": _Opaque()}]), "x"),
        (lambda: from_anthropic(_tool_use({"a": {1, 2}})), "is a set"),
        (lambda: from_anthropic(_tool_use({"a": _DEEP})), "nests deeper"),
        (lambda: from_anthropic(_tool_use({"a": float("nan")})), "nan"),
        (lambda: from_anthropic(_tool_use({1: "a"})), "key 1"),
        (lambda: from_anthropic(_tool_use({"a": b"x"})), "bytes"),
        (lambda: from_anthropic(_tool_use({"a": _Opaque()})), "_Opaque"),
        (lambda: from_anthropic({"system": _DEEP, "messages": []}), "system"),
        (lambda: from_anthropic([{"role": _DEEP, "content": "a"}]), "role"),
        (
            lambda: to_anthropic(
                [Message.assistant(tool_calls=[ToolCall("t", "f", "[" * HOSTILE)])]
            ),
            "nests deeper",
        ),
    ],
    ids=[
        "openai name",
        "openai role",
        "openai type",
        "openai content",
        "openai id",
        "openai tuple key",
        "openai object",
        "anthropic set",
        "anthropic deep input",
        "anthropic NaN",
        "anthropic int key",
        "anthropic bytes",
        "anthropic object",
        "anthropic system",
        "anthropic role",
        "to_anthropic deep arguments",
    ],
)
def test_hostile_input_gets_a_chatledger_error(
    read: Callable[[], object], expected: str
) -> None:
    with pytest.raises(ChatLedgerError, match=expected) as caught:
        read()
    assert isinstance(caught.value, ValueError)
    assert isinstance(caught.value, TypeError)


def test_tool_input_at_the_depth_limit_is_kept() -> None:
    deepest = {"a": nested(MAX_METADATA_DEPTH - 1)}
    [message] = from_anthropic(_tool_use(deepest))
    assert json.loads(message.tool_calls[0].arguments) == deepest
    assert to_anthropic([message])["messages"][0]["content"][0]["input"] == deepest
    with pytest.raises(UnsupportedContentError, match="nests deeper"):
        from_anthropic(_tool_use({"a": nested(MAX_METADATA_DEPTH)}))
