"""Sample messages the conformance suite stores on every backend."""

from __future__ import annotations

from chatledger.messages import Media, Message, ToolCall, ToolResponse

__all__ = [
    "BAD_CONVERSATION_IDS",
    "ODD_CONVERSATION_IDS",
    "UNICODE_CORPUS",
    "every_kind",
]

#: Text that has broken stores before: 4-byte emoji, ZWJ, CJK, RTL override,
#: combining marks, NFC and NFD forms, BOM, line and paragraph separators, NUL.
UNICODE_CORPUS = [
    "plain ascii",
    "emoji 😀🚀 and ZWJ family 👩\u200d👩\u200d👧",
    "CJK 會話 日本語 한국어",
    "RTL \u202eevil\u202c and Arabic مرحبا and Hebrew שלום",
    "combining e\u0301 (NFD) vs \u00e9 (NFC)",
    "\ufeffBOM first, U+2028 \u2028 and U+2029 \u2029",
    "NUL a\x00b and other controls \x01\x1f\x7f",
    "quotes ' \" ` and backslash \\ and percent % and underscore _",
    "",
]

#: Conversation ids that must be accepted and kept apart from each other.
ODD_CONVERSATION_IDS = [
    "a",
    "A",
    "a*",
    "a?",
    "[x]",
    "{t}",
    "a:b",
    "a:msgs",
    "@x|y",
    "100%",
    "a_b",
    "a/b\\c",
    "with space",
    "會話-😀",
    "e\u0301",
    "\u00e9",
    "x'; DROP TABLE chat_memory;--",
    "' OR '1'='1",
    '"}) DETACH DELETE n //',
    "$ne",
    "k" * 255,
    "é" * 127,
]

#: Values no layer may accept as a conversation id.
BAD_CONVERSATION_IDS = [
    None,
    "",
    " ",
    "\t\n",
    "a ",
    " a",
    "a\x00b",
    "conv\n",
    "\x1b[31m",
    "k" * 256,
    "é" * 128,
    "\ud800",
    123,
    b"bytes",
    {"$ne": None},
    ["a"],
]


def every_kind() -> list[Message]:
    """One message of every kind and shape the model allows."""
    return [
        Message.system("You are terse.", metadata={"source": "config"}),
        Message.user("What is the weather in Paris and Rome?"),
        Message.assistant(
            None,
            tool_calls=[
                ToolCall(id="call_1", name="weather", arguments='{"city":"Paris"}'),
                ToolCall(
                    id="call_2", name="weather", arguments='{ "city" : "Rome 🇮🇹" }'
                ),
                ToolCall(
                    id="call_3",
                    name="clock",
                    arguments="not json at all",
                    type="custom",
                ),
            ],
        ),
        Message.tool(
            [
                ToolResponse(id="call_2", name="weather", data='{"c": 24}'),
                ToolResponse(id="call_1", name="weather", data='{"c": 21}'),
                ToolResponse(id="call_3", name="clock", data=""),
            ]
        ),
        Message.assistant(
            "Paris 21°C, Rome 24°C.", metadata={"model": "m-1", "tokens": 12}
        ),
        Message.user(
            "Look at these",
            media=[
                Media(
                    "image/png",
                    b"\x89PNG\r\n\x1a\n\x00\xff" * 64,
                    name="pic.png",
                    id="m1",
                ),
                Media("image/jpeg", "https://example.invalid/cat.jpg"),
            ],
        ),
        Message.assistant("", media=[Media("audio/wav", b"RIFF\x00\x00")]),
        Message.tool(ToolResponse(id="x", name="y", data="z"), content="tool text"),
        Message.user(
            "metadata",
            metadata={
                "int": 2**63 + 1,
                "negative": -(2**70),
                "float": 0.1,
                "exp": 1e300,
                "bool": True,
                "null": None,
                "list": [1, "two", [3.5, False], {"k": None}],
                "nested": {"a": {"b": {"c": [[], {}]}}},
                "$set": "mongo operator key",
                "a.b": "dotted key",
                "": "empty key",
                "unicode ключ 😀": "值",
            },
        ),
    ]
