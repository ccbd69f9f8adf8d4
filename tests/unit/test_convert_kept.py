"""What the Chat Completions and Anthropic shapes carry beyond a message's fields.

Each accepted input is read into the message the table gives and written back
exactly; each refusal names the place. The property round trips are in
``test_convert_from.py``.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest

from chatledger import Media, Message, ToolCall, ToolResponse
from chatledger.convert import (
    UnsupportedContentError,
    from_anthropic,
    from_openai,
    to_anthropic,
    to_openai,
    to_openai_responses,
)

PNG = b"\x89PNG\r\n\x1a\n\x00\xff"
PNG_B64 = base64.b64encode(PNG).decode()
URL = "https://example.invalid/cat.png"
EPHEMERAL = {"type": "ephemeral"}


def _call(call_id: str = "c1") -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": "look", "arguments": "{}"},
            }
        ],
    }


CALL = Message.assistant(tool_calls=[ToolCall("c1", "look", "{}")])

#: Chat Completions messages, what from_openai reads, and to_openai writes back.
CHAT_ACCEPTED: list[tuple[str, list[dict[str, Any]], list[Message]]] = [
    (
        "developer role",
        [{"role": "developer", "content": "Be brief."}],
        [Message.system("Be brief.", metadata={"openai": {"role": "developer"}})],
    ),
    (
        "user name",
        [{"role": "user", "content": "hi", "name": "bob"}],
        [Message.user("hi", metadata={"openai": {"name": "bob"}})],
    ),
    (
        "system, developer and assistant names",
        [
            {"role": "system", "content": "A", "name": "ops"},
            {"role": "developer", "content": "B", "name": "dev"},
            {"role": "assistant", "content": "C", "name": "bot"},
        ],
        [
            Message.system("A", metadata={"openai": {"name": "ops"}}),
            Message.system(
                "B", metadata={"openai": {"role": "developer", "name": "dev"}}
            ),
            Message.assistant("C", metadata={"openai": {"name": "bot"}}),
        ],
    ),
    (
        "image detail, per image",
        [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What?"},
                    {"type": "image_url", "image_url": {"url": URL, "detail": "high"}},
                    {
                        "type": "image_url",
                        "image_url": {"url": f"data:image/png;base64,{PNG_B64}"},
                    },
                    {
                        "type": "image_url",
                        "image_url": {"url": URL, "detail": "auto"},
                    },
                ],
            }
        ],
        [
            Message.user(
                "What?",
                media=[
                    Media("image/png", URL),
                    Media("image/png", PNG),
                    Media("image/png", URL),
                ],
                metadata={
                    "openai": {"media": [{"detail": "high"}, {}, {"detail": "auto"}]}
                },
            )
        ],
    ),
    (
        "assistant refusal",
        [{"role": "assistant", "content": None, "refusal": "I can't help."}],
        [Message.assistant(None, metadata={"openai": {"refusal": "I can't help."}})],
    ),
    (
        "assistant refusal beside text",
        [{"role": "assistant", "content": "Well.", "refusal": "No."}],
        [Message.assistant("Well.", metadata={"openai": {"refusal": "No."}})],
    ),
    (
        "tool content as text parts",
        [
            _call(),
            {
                "role": "tool",
                "tool_call_id": "c1",
                "content": [
                    {"type": "text", "text": "a"},
                    {"type": "text", "text": "b\n\nc"},
                ],
            },
        ],
        [
            CALL,
            Message.tool(
                ToolResponse("c1", "look", "a\n\nb\n\nc"),
                metadata={"openai": {"outputs": [{"text_parts": [1, 4]}]}},
            ),
        ],
    ),
    (
        "tool content as one text part, beside a str",
        [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    _call("c1")["tool_calls"][0],
                    _call("c2")["tool_calls"][0],
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "plain"},
            {
                "role": "tool",
                "tool_call_id": "c2",
                "content": [{"type": "text", "text": "part"}],
            },
        ],
        [
            Message.assistant(
                tool_calls=[ToolCall("c1", "look", "{}"), ToolCall("c2", "look", "{}")]
            ),
            Message.tool(
                [
                    ToolResponse("c1", "look", "plain"),
                    ToolResponse("c2", "look", "part"),
                ],
                metadata={"openai": {"outputs": [{}, {"text_parts": [4]}]}},
            ),
        ],
    ),
    (
        "user text parts",
        [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "one"},
                    {"type": "text", "text": ""},
                ],
            }
        ],
        [Message.user("one\n\n", metadata={"openai": {"text_parts": [3, 0]}})],
    ),
    (
        "an empty part list",
        [{"role": "user", "content": []}],
        [Message.user("", metadata={"openai": {"text_parts": []}})],
    ),
    (
        "nothing kept",
        [
            {"role": "system", "content": "Be brief."},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Look"},
                    {"type": "image_url", "image_url": {"url": URL}},
                ],
            },
        ],
        [
            Message.system("Be brief."),
            Message.user("Look", media=[Media("image/png", URL)]),
        ],
    ),
]


@pytest.mark.parametrize(
    ("given", "read"),
    [(given, read) for _, given, read in CHAT_ACCEPTED],
    ids=[name for name, _, _ in CHAT_ACCEPTED],
)
def test_chat_completions_input_is_kept_and_written_back(
    given: list[dict[str, Any]], read: list[Message]
) -> None:
    messages = from_openai(given)
    assert messages == read
    assert to_openai(messages) == given
    assert from_openai(to_openai(read)) == read


#: Other spellings of the same messages: read, and written back as given.
CHAT_SPELLINGS: list[tuple[str, list[dict[str, Any]]]] = [
    (
        "media before the text",
        [
            {
                "role": "user",
                "content": [
                    {"type": "image_url", "image_url": {"url": URL}},
                    {"type": "text", "text": "What?"},
                ],
            }
        ],
    ),
    (
        "a refusal part",
        [{"role": "assistant", "content": [{"type": "refusal", "refusal": "No."}]}],
    ),
    (
        "fields that hold nothing",
        [{"role": "assistant", "content": "Hi.", "refusal": None, "name": ""}],
    ),
    (
        "no content",
        [{key: value for key, value in _call().items() if key != "content"}],
    ),
]


@pytest.mark.parametrize(
    "given",
    [given for _, given in CHAT_SPELLINGS],
    ids=[name for name, _ in CHAT_SPELLINGS],
)
def test_chat_completions_spellings_are_written_back_as_given(
    given: list[dict[str, Any]],
) -> None:
    assert to_openai(from_openai(given)) == given


def test_a_sdk_chat_message_with_a_refusal_is_kept() -> None:
    chat = pytest.importorskip("openai.types.chat")
    answer = chat.ChatCompletionMessage(role="assistant", content=None, refusal="No.")
    [message] = from_openai([answer])
    assert message == Message.assistant(None, metadata={"openai": {"refusal": "No."}})
    assert to_openai([message]) == [
        {"role": "assistant", "content": None, "refusal": "No."}
    ]


def test_a_developer_message_is_a_system_message_for_the_window() -> None:
    [message] = from_openai([{"role": "developer", "content": "Be brief."}])
    assert message.role.value == "system"
    assert to_anthropic([message, Message.user("hi")])["system"] == "Be brief."


#: Anthropic requests, what from_anthropic reads, and to_anthropic writes back.
ANTHROPIC_ACCEPTED: list[tuple[str, dict[str, Any], list[Message]]] = [
    (
        "system blocks, one cached",
        {
            "system": [
                {"type": "text", "text": "Rules.", "cache_control": EPHEMERAL},
                {"type": "text", "text": "More."},
            ],
            "messages": [{"role": "user", "content": "hi"}],
        },
        [
            Message.system(
                "Rules.", metadata={"anthropic": {"cache_control": EPHEMERAL}}
            ),
            Message.system("More."),
            Message.user("hi"),
        ],
    ),
    (
        "cache_control on a text, an image and a call",
        {
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "Look", "cache_control": EPHEMERAL},
                        {
                            "type": "image",
                            "source": {"type": "url", "url": URL},
                            "cache_control": {"type": "ephemeral", "ttl": "1h"},
                        },
                        {"type": "image", "source": {"type": "url", "url": URL}},
                    ],
                },
                {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": "Looking."},
                        {
                            "type": "tool_use",
                            "id": "t1",
                            "name": "look",
                            "input": {},
                            "cache_control": EPHEMERAL,
                        },
                    ],
                },
            ]
        },
        [
            Message.user(
                "Look",
                media=[Media("image/png", URL), Media("image/png", URL)],
                metadata={
                    "anthropic": {
                        "cache_control": EPHEMERAL,
                        "media": [
                            {"cache_control": {"type": "ephemeral", "ttl": "1h"}},
                            {},
                        ],
                    }
                },
            ),
            Message.assistant(
                "Looking.",
                tool_calls=[ToolCall("t1", "look", "{}")],
                metadata={"anthropic": {"calls": [{"cache_control": EPHEMERAL}]}},
            ),
        ],
    ),
    (
        "a tool result: cached, an error, text blocks",
        {
            "messages": [
                {
                    "role": "assistant",
                    "content": [
                        {"type": "tool_use", "id": "t1", "name": "look", "input": {}},
                        {"type": "tool_use", "id": "t2", "name": "look", "input": {}},
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "t1",
                            "content": "no such file",
                            "is_error": True,
                            "cache_control": EPHEMERAL,
                        },
                        {
                            "type": "tool_result",
                            "tool_use_id": "t2",
                            "content": [
                                {"type": "text", "text": "a"},
                                {"type": "text", "text": "b"},
                            ],
                        },
                    ],
                },
            ]
        },
        [
            Message.assistant(
                tool_calls=[ToolCall("t1", "look", "{}"), ToolCall("t2", "look", "{}")]
            ),
            Message.tool(
                [
                    ToolResponse("t1", "look", "no such file"),
                    ToolResponse("t2", "look", "a\n\nb"),
                ],
                metadata={
                    "anthropic": {
                        "outputs": [
                            {"cache_control": EPHEMERAL, "is_error": True},
                            {"text_parts": [1, 1]},
                        ]
                    }
                },
            ),
        ],
    ),
    (
        "citations of a text",
        {
            "messages": [
                {
                    "role": "assistant",
                    "content": [
                        {
                            "type": "text",
                            "text": "Rome is warm.",
                            "citations": [
                                {
                                    "type": "char_location",
                                    "cited_text": "warm",
                                    "document_index": 0,
                                    "start_char_index": 0,
                                    "end_char_index": 4,
                                }
                            ],
                        }
                    ],
                }
            ]
        },
        [
            Message.assistant(
                "Rome is warm.",
                metadata={
                    "anthropic": {
                        "citations": [
                            {
                                "type": "char_location",
                                "cited_text": "warm",
                                "document_index": 0,
                                "start_char_index": 0,
                                "end_char_index": 4,
                            }
                        ]
                    }
                },
            )
        ],
    ),
    (
        "an empty text that is cached",
        {
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "", "cache_control": EPHEMERAL}
                    ],
                }
            ]
        },
        [Message.user("", metadata={"anthropic": {"cache_control": EPHEMERAL}})],
    ),
]


@pytest.mark.parametrize(
    ("given", "read"),
    [(given, read) for _, given, read in ANTHROPIC_ACCEPTED],
    ids=[name for name, _, _ in ANTHROPIC_ACCEPTED],
)
def test_anthropic_input_is_kept_and_written_back(
    given: dict[str, Any], read: list[Message]
) -> None:
    messages = from_anthropic(given)
    assert messages == read
    assert to_anthropic(messages) == given
    assert from_anthropic(to_anthropic(read)) == read


def test_each_api_leaves_the_others_key_out() -> None:
    message = Message.user(
        "hi",
        media=[Media("image/png", URL)],
        metadata={
            "openai": {"name": "bob", "media": [{"detail": "high"}]},
            "anthropic": {"cache_control": EPHEMERAL},
        },
    )
    assert to_anthropic([message])["messages"][0]["content"] == [
        {"type": "text", "text": "hi", "cache_control": EPHEMERAL},
        {"type": "image", "source": {"type": "url", "url": URL}},
    ]
    assert to_openai([message]) == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "hi"},
                {"type": "image_url", "image_url": {"url": URL, "detail": "high"}},
            ],
            "name": "bob",
        }
    ]


def _with(key: str, kept: Any, **fields: Any) -> Message:
    metadata: dict[str, Any] = {key: kept}
    return Message(**{"role": "user", "content": "hi", **fields}, metadata=metadata)


#: Metadata under a reserved key that does not fit the message: refused on
#: the way out, naming the place.
KEPT_REFUSED: list[tuple[str, Any, Message, str]] = [
    (
        "not a dict",
        to_openai,
        _with("openai", "developer"),
        r"messages\[0\]\.metadata\['openai'\] is reserved .* must be a dict",
    ),
    (
        "a key no converter keeps",
        to_openai,
        _with("openai", {"nmae": "bob"}),
        r"messages\[0\]\.metadata\['openai'\]\['nmae'\] is not a field",
    ),
    (
        "a name of the wrong type",
        to_openai,
        _with("openai", {"name": 7}),
        r"\['name'\] must be a str, not int",
    ),
    (
        "a role other than developer",
        to_openai,
        _with("openai", {"role": "user"}),
        r"\['role'\] is 'user': the roles kept are 'developer', on a system",
    ),
    (
        "a developer role on a user message",
        to_openai_responses,
        _with("openai", {"role": "developer"}),
        r"\['role'\] is 'developer'.* on a system message",
    ),
    (
        "a refusal on a user message",
        to_openai,
        _with("openai", {"refusal": "no"}),
        r"\['refusal'\]: only an assistant message refuses",
    ),
    (
        "text parts that do not cut the text",
        to_openai,
        _with("openai", {"text_parts": [1, 1]}),
        r"\['text_parts'\]: the text parts \[1, 1\] do not match the text of 2",
    ),
    (
        "text parts that are not lengths",
        to_openai,
        _with("openai", {"text_parts": [-2]}),
        r"\['text_parts'\] must be a list of text part lengths",
    ),
    (
        "media entries for no media",
        to_openai,
        _with("openai", {"media": [{"detail": "high"}]}),
        r"\['media'\] holds 1 entries for 0 media",
    ),
    (
        "a media entry that is not a dict",
        to_openai,
        _with("openai", {"media": ["high"]}, media=[Media("image/png", URL)]),
        r"\['media'\]\[0\] must be a dict",
    ),
    (
        "a key a media entry does not keep",
        to_openai,
        _with("openai", {"media": [{"size": 1}]}, media=[Media("image/png", URL)]),
        r"\['media'\]\[0\]\['size'\] is not a field",
    ),
    (
        "a participant name, into Responses",
        to_openai_responses,
        _with("openai", {"name": "bob"}),
        r"\['name'\]: the Responses API has no participant name",
    ),
    (
        "anthropic: not a dict",
        to_anthropic,
        _with("anthropic", ["x"]),
        r"messages\[0\]\.metadata\['anthropic'\] is reserved",
    ),
    (
        "anthropic: an OpenAI key",
        to_anthropic,
        _with("anthropic", {"detail": "high"}),
        r"\['detail'\] is not a field chatledger's anthropic converters keep",
    ),
    (
        "anthropic: is_error that is not a bool",
        to_anthropic,
        Message.tool(
            ToolResponse("c", "f", "x"),
            metadata={"anthropic": {"outputs": [{"is_error": "yes"}]}},
        ),
        r"\['outputs'\]\[0\]\['is_error'\] must be a bool, not str",
    ),
    (
        "anthropic: cache_control for a text that is not there",
        to_anthropic,
        Message.assistant(
            None,
            tool_calls=[ToolCall("c", "f", "{}")],
            metadata={"anthropic": {"cache_control": EPHEMERAL}},
        ),
        r"keeps cache_control for a text block, and the message has no text",
    ),
]


@pytest.mark.parametrize(
    ("convert", "message", "expected"),
    [(convert, message, expected) for _, convert, message, expected in KEPT_REFUSED],
    ids=[name for name, _, _, _ in KEPT_REFUSED],
)
def test_kept_fields_that_do_not_fit_are_refused_naming_the_place(
    convert: Any, message: Message, expected: str
) -> None:
    with pytest.raises(UnsupportedContentError, match=expected):
        convert([message])


#: Input the Chat Completions and Anthropic readers refuse, naming the place.
READ_REFUSED: list[tuple[str, Any, Any, str]] = [
    (
        "a second refusal part",
        from_openai,
        [
            {
                "role": "assistant",
                "content": [
                    {"type": "refusal", "refusal": "a"},
                    {"type": "refusal", "refusal": "b"},
                ],
            }
        ],
        r"messages\[0\]\.content\[1\]: a second refusal part",
    ),
    (
        "a refusal part beside the refusal field",
        from_openai,
        [
            {
                "role": "assistant",
                "content": [{"type": "refusal", "refusal": "a"}],
                "refusal": "b",
            }
        ],
        r"messages\[0\]\.content: a refusal part beside the refusal field",
    ),
    (
        "a refusal in a user message",
        from_openai,
        [{"role": "user", "content": [{"type": "refusal", "refusal": "a"}]}],
        r"messages\[0\]\.content: a refusal in a user message",
    ),
    (
        "a name that is not a str",
        from_openai,
        [{"role": "user", "content": "hi", "name": ["bob"]}],
        r"messages\[0\]\.name must be a str, not list",
    ),
    (
        "a detail that is not a str",
        from_openai,
        [
            {
                "role": "user",
                "content": [
                    {"type": "image_url", "image_url": {"url": URL, "detail": 1}}
                ],
            }
        ],
        r"messages\[0\]\.content\[0\]\.image_url\.detail must be a str",
    ),
    (
        "media in a tool output",
        from_openai,
        [
            {
                "role": "tool",
                "tool_call_id": "c",
                "content": [{"type": "image_url", "image_url": {"url": URL}}],
            }
        ],
        r"messages\[0\]\.content: media in a tool output",
    ),
    (
        "cache_control in an OpenAI message",
        from_openai,
        [
            {
                "role": "user",
                "content": [{"type": "text", "text": "x", "cache_control": EPHEMERAL}],
            }
        ],
        r"messages\[0\]\.content\[0\]\.cache_control",
    ),
    (
        "anthropic: is_error that is not a bool",
        from_anthropic,
        [
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t", "is_error": "yes"}
                ],
            }
        ],
        r"messages\[0\]\.content\[0\]\.is_error must be a bool, not str",
    ),
    (
        "anthropic: cache_control that is not JSON",
        from_anthropic,
        [
            {
                "role": "user",
                "content": [{"type": "text", "text": "x", "cache_control": {1, 2}}],
            }
        ],
        r"messages\[0\]\.content\[0\]\.cache_control is a set",
    ),
]


@pytest.mark.parametrize(
    ("read", "given", "expected"),
    [(read, given, expected) for _, read, given, expected in READ_REFUSED],
    ids=[name for name, _, _, _ in READ_REFUSED],
)
def test_what_has_no_place_is_refused_naming_the_field(
    read: Any, given: Any, expected: str
) -> None:
    with pytest.raises(UnsupportedContentError, match=expected):
        read(given)
