"""to_openai_responses and from_openai_responses: both round trips, refusals named."""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chatledger import ChatLedgerError, Media, Message, Role, ToolCall, ToolResponse
from chatledger.convert import (
    UnsupportedContentError,
    from_openai,
    from_openai_responses,
    to_openai,
    to_openai_responses,
)
from chatledger.messages import MAX_METADATA_DEPTH
from tests.unit.test_convert_from import (
    blobs,
    image_urls,
    names,
    some_text,
    text,
    text_and_parts,
)
from tests.unit.test_json_depth import HOSTILE, nested

PNG = b"\x89PNG\r\n\x1a\n\x00\xff"
PNG_URL = "data:image/png;base64," + base64.b64encode(PNG).decode()
URL = "https://example.invalid/cat.png"
REASONING = {
    "type": "reasoning",
    "id": "rs_1",
    "summary": [{"type": "summary_text", "text": "Look it up."}],
    "encrypted_content": "gAAAAB-opaque",
}
CALL = {
    "type": "function_call",
    "id": "fc_1",
    "call_id": "call_1",
    "name": "weather",
    "arguments": '{"city":"Rome"}',
    "status": "completed",
}
WEATHER = ToolCall("call_1", "weather", '{"city":"Rome"}')


def _openai(**fields: Any) -> dict[str, Any]:
    return {"openai": fields}


#: Responses items, what from_openai_responses reads, and writes back exactly.
ACCEPTED: list[tuple[str, list[dict[str, Any]], list[Message]]] = [
    (
        "easy messages of each role",
        [
            {"role": "system", "content": "Be brief."},
            {"role": "developer", "content": "Answer in Celsius."},
            {"role": "user", "content": "Weather in Rome?"},
            {"role": "assistant", "content": "Sunny."},
        ],
        [
            Message.system("Be brief."),
            Message.system("Answer in Celsius.", metadata=_openai(role="developer")),
            Message.user("Weather in Rome?"),
            Message.assistant("Sunny."),
        ],
    ),
    (
        "a tool round with reasoning, as a response returns it",
        [
            {"role": "user", "content": "Weather in Rome?"},
            REASONING,
            CALL,
            {"type": "function_call_output", "call_id": "call_1", "output": "24 C"},
            {"type": "reasoning", "id": "rs_2", "summary": []},
            {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "content": [
                    {"type": "output_text", "text": "24 °C.", "annotations": []}
                ],
                "status": "completed",
                "phase": "final_answer",
            },
        ],
        [
            Message.user("Weather in Rome?"),
            Message.assistant(
                None,
                tool_calls=[WEATHER],
                metadata=_openai(
                    reasoning=[REASONING], calls=[{"id": "fc_1", "status": "completed"}]
                ),
            ),
            Message.tool(ToolResponse("call_1", "weather", "24 C")),
            Message.assistant(
                "24 °C.",
                metadata=_openai(
                    reasoning=[{"type": "reasoning", "id": "rs_2", "summary": []}],
                    id="msg_1",
                    status="completed",
                    phase="final_answer",
                ),
                id="msg_1",
            ),
        ],
    ),
    (
        "reasoning, a message and calls make one assistant message",
        [
            REASONING,
            {"role": "assistant", "content": "Checking."},
            CALL,
            {
                "type": "function_call",
                "call_id": "call_2",
                "name": "weather",
                "arguments": "{}",
            },
            {"type": "function_call_output", "call_id": "call_2", "output": "?"},
            {"type": "function_call_output", "call_id": "call_1", "output": "24 C"},
        ],
        [
            Message.assistant(
                "Checking.",
                tool_calls=[WEATHER, ToolCall("call_2", "weather", "{}")],
                metadata=_openai(
                    reasoning=[REASONING],
                    calls=[{"id": "fc_1", "status": "completed"}, {}],
                ),
            ),
            Message.tool(
                [
                    ToolResponse("call_2", "weather", "?"),
                    ToolResponse("call_1", "weather", "24 C"),
                ]
            ),
        ],
    ),
    (
        "reasoning with nothing after it",
        [{"role": "user", "content": "Think."}, REASONING, REASONING],
        [
            Message.user("Think."),
            Message.assistant(None, metadata=_openai(reasoning=[REASONING, REASONING])),
        ],
    ),
    (
        "media with detail, and files",
        [
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "And these?"},
                    {"type": "input_image", "image_url": URL, "detail": "high"},
                    {"type": "input_image", "image_url": PNG_URL, "detail": "auto"},
                    {
                        "type": "input_file",
                        "file_data": "data:application/pdf;base64,JVBERg==",
                        "filename": "a.pdf",
                    },
                    {
                        "type": "input_file",
                        "file_url": "https://example.invalid/b.pdf",
                        "filename": "b.pdf",
                        "detail": "low",
                    },
                ],
            }
        ],
        [
            Message.user(
                "And these?",
                media=[
                    Media("image/png", URL),
                    Media("image/png", PNG),
                    Media("application/pdf", b"%PDF", name="a.pdf"),
                    Media(
                        "application/pdf", "https://example.invalid/b.pdf", name="b.pdf"
                    ),
                ],
                metadata=_openai(media=[{"detail": "high"}, {}, {}, {"detail": "low"}]),
            )
        ],
    ),
    (
        "a refusal and annotations of an output message",
        [
            {
                "type": "message",
                "id": "msg_2",
                "role": "assistant",
                "content": [
                    {
                        "type": "output_text",
                        "text": "See Rome.",
                        "annotations": [
                            {
                                "type": "url_citation",
                                "start_index": 4,
                                "end_index": 8,
                                "title": "Rome",
                                "url": "https://example.invalid/rome",
                            }
                        ],
                        "logprobs": [
                            {
                                "token": "See",
                                "bytes": [83],
                                "logprob": -0.5,
                                "top_logprobs": [],
                            }
                        ],
                    },
                    {"type": "output_text", "text": "More.", "annotations": []},
                    {"type": "refusal", "refusal": "Not the rest."},
                ],
                "status": "completed",
            }
        ],
        [
            Message.assistant(
                "See Rome.\n\nMore.",
                metadata=_openai(
                    id="msg_2",
                    status="completed",
                    refusal="Not the rest.",
                    annotations=[
                        [
                            {
                                "type": "url_citation",
                                "start_index": 4,
                                "end_index": 8,
                                "title": "Rome",
                                "url": "https://example.invalid/rome",
                            }
                        ],
                        None,
                    ],
                    logprobs=[
                        [
                            {
                                "token": "See",
                                "bytes": [83],
                                "logprob": -0.5,
                                "top_logprobs": [],
                            }
                        ],
                        None,
                    ],
                    text_parts=[9, 5],
                ),
                id="msg_2",
            )
        ],
    ),
    (
        "a refusal alone",
        [
            {
                "type": "message",
                "id": "msg_3",
                "role": "assistant",
                "content": [{"type": "refusal", "refusal": "No."}],
                "status": "completed",
            }
        ],
        [
            Message.assistant(
                None,
                metadata=_openai(id="msg_3", status="completed", refusal="No."),
                id="msg_3",
            )
        ],
    ),
    (
        "custom tool calls and outputs",
        [
            {"role": "user", "content": "Patch it."},
            {
                "type": "custom_tool_call",
                "id": "ctc_1",
                "call_id": "call_9",
                "name": "apply",
                "input": "*** Begin Patch",
            },
            {"type": "custom_tool_call_output", "call_id": "call_9", "output": "ok"},
        ],
        [
            Message.user("Patch it."),
            Message.assistant(
                tool_calls=[ToolCall("call_9", "apply", "*** Begin Patch", "custom")],
                metadata=_openai(calls=[{"id": "ctc_1"}]),
            ),
            Message.tool(ToolResponse("call_9", "apply", "ok")),
        ],
    ),
    (
        "outputs as text parts, with fields of their own",
        [
            {"role": "user", "content": "Go."},
            CALL,
            {
                "type": "function_call_output",
                "call_id": "call_1",
                "output": [
                    {"type": "input_text", "text": "24 C"},
                    {"type": "input_text", "text": "sunny"},
                ],
                "id": "fco_1",
                "status": "completed",
                "name": "weather",
            },
            {"type": "custom_tool_call_output", "call_id": "elsewhere", "output": "x"},
        ],
        [
            Message.user("Go."),
            Message.assistant(
                tool_calls=[WEATHER],
                metadata=_openai(calls=[{"id": "fc_1", "status": "completed"}]),
            ),
            Message.tool(
                [
                    ToolResponse("call_1", "weather", "24 C\n\nsunny"),
                    ToolResponse("elsewhere", "", "x"),
                ],
                metadata=_openai(
                    outputs=[
                        {
                            "text_parts": [4, 5],
                            "id": "fco_1",
                            "status": "completed",
                            "name": "weather",
                        },
                        {"type": "custom_tool_call_output"},
                    ]
                ),
            ),
        ],
    ),
    (
        "typed input messages with a status, and text parts",
        [
            {
                "type": "message",
                "role": "developer",
                "content": [{"type": "input_text", "text": "Rules."}],
                "status": "completed",
            },
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "a"},
                    {"type": "input_text", "text": "b"},
                ],
            },
        ],
        [
            Message.system(
                "Rules.", metadata=_openai(role="developer", status="completed")
            ),
            Message.user("a\n\nb", metadata=_openai(text_parts=[1, 1])),
        ],
    ),
]


@pytest.mark.parametrize(
    ("items", "read"),
    [(items, read) for _, items, read in ACCEPTED],
    ids=[name for name, _, _ in ACCEPTED],
)
def test_responses_items_are_read_and_written_back(
    items: list[dict[str, Any]], read: list[Message]
) -> None:
    messages = from_openai_responses(items)
    assert messages == read
    assert to_openai_responses(messages) == items
    assert from_openai_responses(to_openai_responses(read)) == read
    # A message item's id is also the message's id.
    for message in messages:
        kept = message.metadata.get("openai")
        if isinstance(kept, Mapping) and "id" in kept:
            assert message.id == kept["id"]


#: Other spellings of the same items: read, and written the one way.
RESPELLED: list[tuple[str, list[dict[str, Any]], list[dict[str, Any]]]] = [
    (
        "a typed message without id or status",
        [
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "hi"}],
            }
        ],
        [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}],
    ),
    (
        "an image without detail gets the API's default",
        [
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "x"},
                    {"type": "input_image", "image_url": URL},
                ],
            }
        ],
        [
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "x"},
                    {"type": "input_image", "image_url": URL, "detail": "auto"},
                ],
            }
        ],
    ),
    (
        "fields that hold None, as an SDK object dumps them",
        [
            {
                "type": "function_call",
                "call_id": "c",
                "name": "f",
                "arguments": "{}",
                "id": None,
                "status": None,
                "namespace": None,
            },
            {
                "type": "function_call_output",
                "call_id": "c",
                "output": "x",
                "id": None,
            },
        ],
        [
            {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c", "output": "x"},
        ],
    ),
    (
        "an output text without annotations",
        [
            {
                "type": "message",
                "id": "m",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "x"}],
            }
        ],
        [
            {
                "type": "message",
                "id": "m",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "x", "annotations": []}],
            }
        ],
    ),
]


@pytest.mark.parametrize(
    ("items", "written"),
    [(items, written) for _, items, written in RESPELLED],
    ids=[name for name, _, _ in RESPELLED],
)
def test_responses_spellings_are_written_one_way(
    items: list[dict[str, Any]], written: list[dict[str, Any]]
) -> None:
    assert to_openai_responses(from_openai_responses(items)) == written
    assert from_openai_responses(written) == from_openai_responses(items)


def test_sdk_output_items_are_read() -> None:
    responses = pytest.importorskip("openai.types.responses")
    output = [
        responses.ResponseReasoningItem(
            id="rs_1", type="reasoning", summary=[], encrypted_content="gAAA"
        ),
        responses.ResponseOutputMessage(
            id="msg_1",
            type="message",
            role="assistant",
            status="completed",
            content=[
                responses.ResponseOutputText(
                    type="output_text", text="Hi.", annotations=[], logprobs=[]
                )
            ],
        ),
        responses.ResponseFunctionToolCall(
            type="function_call",
            id="fc_1",
            call_id="c1",
            name="f",
            arguments="{}",
            status="completed",
            **{"async": True},
        ),
    ]
    [message] = from_openai_responses(output)
    assert message.content == "Hi."
    assert message.tool_calls == (ToolCall("c1", "f", "{}"),)
    assert to_openai_responses([message]) == [
        {
            "id": "rs_1",
            "type": "reasoning",
            "summary": [],
            "content": None,
            "encrypted_content": "gAAA",
            "status": None,
        },
        {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Hi.", "annotations": []}],
            "status": "completed",
        },
        {
            "type": "function_call",
            "call_id": "c1",
            "name": "f",
            "arguments": "{}",
            "id": "fc_1",
            "status": "completed",
            "async": True,
        },
    ]


def test_a_history_from_chat_completions_goes_to_responses() -> None:
    messages = from_openai(
        [
            {"role": "developer", "content": "Be brief."},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What?"},
                    {"type": "image_url", "image_url": {"url": URL, "detail": "low"}},
                ],
            },
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "look", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "a cat"},
            {"role": "assistant", "content": "A cat."},
        ]
    )
    assert to_openai_responses(messages) == [
        {"role": "developer", "content": "Be brief."},
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "What?"},
                {"type": "input_image", "image_url": URL, "detail": "low"},
            ],
        },
        {"type": "function_call", "call_id": "c1", "name": "look", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "a cat"},
        {"role": "assistant", "content": "A cat."},
    ]


def test_chat_completions_leaves_out_what_only_responses_carries() -> None:
    messages = from_openai_responses(ACCEPTED[1][1])
    assert to_openai(messages) == [
        {"role": "user", "content": "Weather in Rome?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city":"Rome"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "24 C"},
        {"role": "assistant", "content": "24 °C."},
    ]


def test_writing_leaves_out_an_empty_answer_and_a_tool_messages_content() -> None:
    messages = [
        Message.user("hi"),
        Message.assistant(None),
        Message.assistant(tool_calls=[ToolCall("c", "f", "{}")]),
        Message.tool(ToolResponse("c", "f", "done"), content="tool text"),
    ]
    assert to_openai_responses(messages) == [
        {"role": "user", "content": "hi"},
        {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c", "output": "done"},
    ]


#: What to_openai_responses has no place for, naming the message.
WRITE_REFUSED: list[tuple[str, Message, str]] = [
    (
        "media on an assistant message",
        Message.assistant("x", media=[Media("image/png", URL)]),
        r"messages\[0\]\.media: a Responses assistant message carries no media",
    ),
    (
        "a tool call of another type",
        Message.assistant(tool_calls=[ToolCall("c", "f", "{}", "mcp")]),
        r"messages\[0\]\.tool_calls\[0\]: a tool call of type 'mcp'",
    ),
    (
        "a tool message without responses",
        Message.tool([], content="orphan"),
        r"messages\[0\]: a tool message without tool responses",
    ),
    (
        "a kept output type that is no output",
        Message.tool(
            ToolResponse("c", "f", "x"),
            metadata=_openai(outputs=[{"type": "message"}]),
        ),
        r"\['outputs'\]\[0\]\['type'\] is 'message', not an output item type",
    ),
    (
        "kept reasoning that is no reasoning item",
        Message.assistant("x", metadata=_openai(reasoning=[{"type": "message"}])),
        r"\['reasoning'\]\[0\] must be a reasoning item",
    ),
    (
        "annotations for other text parts",
        Message.assistant("x", metadata=_openai(id="m", annotations=[[], []])),
        r"\['annotations'\] holds 2 entries for 1 text parts",
    ),
]


@pytest.mark.parametrize(
    ("message", "expected"),
    [(message, expected) for _, message, expected in WRITE_REFUSED],
    ids=[name for name, _, _ in WRITE_REFUSED],
)
def test_to_responses_refuses_what_has_no_place(
    message: Message, expected: str
) -> None:
    with pytest.raises(UnsupportedContentError, match=expected):
        to_openai_responses([message])


#: Items from_openai_responses has no place for, named by index and key.
READ_REFUSED: list[tuple[str, Any, str]] = [
    ("not a list", {"role": "user", "content": "hi"}, r"^items must be a list"),
    ("not an item", ["hello"], r"^items\[0\] must be a dict"),
    (
        "a hosted tool call",
        [{"role": "user", "content": "hi"}, {"type": "web_search_call", "id": "w"}],
        r"^items\[1\]\.type: a 'web_search_call' item",
    ),
    (
        "an item reference",
        [{"type": "item_reference", "id": "msg_0"}],
        r"^items\[0\]\.type: a 'item_reference' item",
    ),
    (
        "a Chat Completions tool message",
        [{"role": "tool", "tool_call_id": "c", "content": "x"}],
        r"^items\[0\]\.role: the role 'tool'",
    ),
    (
        "a participant name",
        [{"role": "user", "content": "hi", "name": "bob"}],
        r"^items\[0\]\.name: holds 'bob'",
    ),
    (
        "Chat Completions tool calls",
        [{"role": "assistant", "content": None, "tool_calls": [{"id": "c"}]}],
        r"^items\[0\]\.tool_calls",
    ),
    (
        "a Chat Completions image part",
        [
            {
                "role": "user",
                "content": [{"type": "image_url", "image_url": {"url": URL}}],
            }
        ],
        r"^items\[0\]\.content\[0\]\.type: a 'image_url' part",
    ),
    (
        "an image by file id",
        [
            {
                "role": "user",
                "content": [{"type": "input_image", "file_id": "f", "detail": "auto"}],
            }
        ],
        r"^items\[0\]\.content\[0\]\.file_id",
    ),
    (
        "a file by file id",
        [{"role": "user", "content": [{"type": "input_file", "file_id": "file-1"}]}],
        r"^items\[0\]\.content\[0\]\.file_id",
    ),
    (
        "media in an assistant message",
        [
            {
                "role": "assistant",
                "content": [
                    {"type": "input_image", "image_url": URL, "detail": "auto"}
                ],
            }
        ],
        r"^items\[0\]\.content: media in a assistant message",
    ),
    (
        "media in a tool output",
        [
            {
                "type": "function_call_output",
                "call_id": "c",
                "output": [{"type": "input_image", "image_url": URL, "detail": "auto"}],
            }
        ],
        r"^items\[0\]\.output: media in a tool output",
    ),
    (
        "annotations in a user message",
        [
            {
                "role": "user",
                "content": [
                    {"type": "output_text", "text": "x", "annotations": [{"a": 1}]}
                ],
            }
        ],
        r"^items\[0\]\.content: annotations in a user message",
    ),
    (
        "a refusal in a system message",
        [{"role": "system", "content": [{"type": "refusal", "refusal": "no"}]}],
        r"^items\[0\]\.content: a refusal in a system message",
    ),
    (
        "a field a call item does not have",
        [{**CALL, "extra": 1}],
        r"^items\[0\]\.extra: holds 1",
    ),
    (
        "a call without a call id",
        [{"type": "function_call", "name": "f", "arguments": "{}"}],
        r"^items\[0\]\.call_id must be a str, not NoneType",
    ),
    (
        "a reasoning item that is not JSON",
        [{**REASONING, "summary": {1, 2}}],
        r"^JSON value at items\[0\]\['summary'\] is a set",
    ),
    (
        "a reasoning item nested too deep",
        [{**REASONING, "summary": nested(MAX_METADATA_DEPTH)}],
        r"nests deeper than 64 levels at items\[0\]\['summary'\]",
    ),
    (
        "a caller nested too deep",
        [{**CALL, "caller": nested(HOSTILE)}],
        r"nests deeper than 64 levels at items\[0\]\.caller",
    ),
    (
        "a phase that is not a str",
        [{"role": "assistant", "content": "x", "phase": 1}],
        r"^items\[0\]\.phase must be a str, not int",
    ),
    (
        "prompt_cache_breakpoint",
        [
            {
                "role": "user",
                "content": [
                    {
                        "type": "input_text",
                        "text": "x",
                        "prompt_cache_breakpoint": {"mode": "explicit"},
                    }
                ],
            }
        ],
        r"^items\[0\]\.content\[0\]\.prompt_cache_breakpoint",
    ),
]


@pytest.mark.parametrize(
    ("items", "expected"),
    [(items, expected) for _, items, expected in READ_REFUSED],
    ids=[name for name, _, _ in READ_REFUSED],
)
def test_from_responses_refuses_what_has_no_place(items: Any, expected: str) -> None:
    with pytest.raises(UnsupportedContentError, match=expected) as caught:
        from_openai_responses(items)
    assert isinstance(caught.value, ValueError)
    assert isinstance(caught.value, TypeError)


def test_reasoning_at_the_depth_limit_is_kept() -> None:
    # metadata > "openai" > "reasoning" > the item > "summary" > ...
    deepest = {**REASONING, "summary": nested(MAX_METADATA_DEPTH - 4)}
    [message] = from_openai_responses([deepest])
    assert to_openai_responses([message]) == [deepest]


def test_a_bad_message_id_is_the_models_error() -> None:
    with pytest.raises(ChatLedgerError, match="message id"):
        from_openai_responses(
            [{"type": "message", "id": "a\nb", "role": "user", "content": "x"}]
        )


# --- Property round trip ------------------------------------------------------


def _responses_media() -> st.SearchStrategy[tuple[Media, dict[str, Any]]]:
    images = st.one_of(
        st.builds(Media, st.sampled_from(["image/png", "image/jpeg"]), blobs),
        image_urls.map(lambda pair: Media(*pair)),
    )
    files = st.one_of(
        st.builds(
            Media,
            st.sampled_from(["application/pdf", "audio/wav", "text/csv"]),
            blobs,
            name=st.none() | names,
        ),
        st.builds(
            lambda stem, name: Media(
                "application/pdf", f"https://example.invalid/{stem}.pdf", name=name
            ),
            names,
            st.none() | names,
        ),
    )
    image_detail = st.sampled_from([{}, {"detail": "high"}, {"detail": "low"}])
    file_detail = st.sampled_from([{}, {"detail": "auto"}, {"detail": "high"}])
    return st.tuples(images, image_detail) | st.tuples(files, file_detail)


def _kept(fields: dict[str, Any]) -> dict[str, Any]:
    kept = {name: value for name, value in fields.items() if value is not None}
    return {"openai": kept} if kept else {}


def _entries(entries: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    return entries if any(entries) else None


_ITEM_IDS = st.none() | st.builds("msg_{}".format, names)
_STATUS = st.none() | st.sampled_from(["completed", "incomplete"])


@st.composite
def responses_histories(draw: st.DrawFn) -> list[Message]:
    """Histories the Responses shape carries exactly, with what it keeps."""
    history: list[Message] = []
    fields: dict[str, Any]
    for turn in range(draw(st.integers(0, 5))):
        kind = draw(st.sampled_from(["system", "user", "answer", "tools"]))
        if kind == "system":
            content, parts = draw(text_and_parts())
            status = draw(_STATUS)
            if status is not None and parts == [len(content)] and content:
                parts = None  # a list anyway, the text as one part
            fields = {
                "role": draw(st.sampled_from([None, "developer"])),
                "status": status,
                "text_parts": parts,
            }
            history.append(Message.system(content, metadata=_kept(fields)))
        elif kind == "user":
            media = draw(st.lists(_responses_media(), max_size=3))
            status = draw(_STATUS)
            content, parts = draw(text_and_parts())
            if media or status:  # a list anyway, the text as one part
                content, parts = draw(text), None
            fields = {
                "status": status,
                "text_parts": parts,
                "media": _entries([entry for _, entry in media]),
            }
            history.append(
                Message.user(
                    content, media=[m for m, _ in media], metadata=_kept(fields)
                )
            )
        elif kind == "answer":
            item_id = draw(_ITEM_IDS)
            fields = {
                "reasoning": draw(
                    st.none()
                    | st.lists(
                        st.builds(
                            lambda n: {
                                "type": "reasoning",
                                "id": f"rs_{n}",
                                "summary": [],
                            },
                            names,
                        ),
                        min_size=1,
                        max_size=2,
                    )
                ),
                "id": item_id,
                "status": draw(_STATUS) if item_id else None,
                "phase": draw(st.none() | st.just("final_answer")),
                "refusal": draw(st.none() | some_text),
            }
            answer = Message.assistant(draw(text), metadata=_kept(fields))
            history.append(
                answer
                if item_id is None
                else Message.assistant(
                    answer.content, metadata=_kept(fields), id=item_id
                )
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
            call_entries = [
                draw(st.sampled_from([{}, {"id": "fc_x", "status": "completed"}]))
                for _ in calls
            ]
            previous = history[-1].role if history else None
            # Call items alone would join the assistant message before.
            said = draw(st.none() | text)
            if said is None and previous is Role.ASSISTANT:
                said = draw(text)
            history.append(
                Message.assistant(
                    said,
                    tool_calls=calls,
                    metadata=_kept({"calls": _entries(call_entries)}),
                )
            )
            answered = draw(st.permutations(calls))
            outputs = [draw(text_and_parts()) for _ in answered]
            entries = [
                {} if parts is None else {"text_parts": parts} for _, parts in outputs
            ]
            history.append(
                Message.tool(
                    [
                        ToolResponse(c.id, c.name, data)
                        for c, (data, _) in zip(answered, outputs, strict=True)
                    ],
                    metadata=_kept({"outputs": _entries(entries)}),
                )
            )
    return history


@settings(max_examples=300, deadline=None)
@given(responses_histories())
def test_responses_round_trip(history: list[Message]) -> None:
    items = to_openai_responses(history)
    assert from_openai_responses(items) == history
    assert to_openai_responses(from_openai_responses(items)) == items


# --- Hostile input ------------------------------------------------------------


@pytest.mark.parametrize(
    "read",
    [
        lambda: from_openai_responses([{"role": "user", "content": nested(HOSTILE)}]),
        lambda: from_openai_responses([{"type": nested(HOSTILE)}]),
        lambda: from_openai_responses([{**REASONING, "id": nested(HOSTILE)}]),
        lambda: from_openai_responses([{"role": "user", "content": "a", ("k",): 1}]),
    ],
    ids=["content", "type", "reasoning", "tuple key"],
)
def test_hostile_items_get_a_chatledger_error(read: Callable[[], object]) -> None:
    with pytest.raises(ChatLedgerError) as caught:
        read()
    assert isinstance(caught.value, ValueError)
    assert isinstance(caught.value, TypeError)
