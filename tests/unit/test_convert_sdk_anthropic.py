"""Each Anthropic ``MessageParam`` the SDK's types describe comes back exactly.

The requests are built with the SDK's own TypedDicts and checked against its
types with pydantic before they are read. Each either comes back from
``to_anthropic(from_anthropic(request))`` equal to what was given, or is
refused with :class:`UnsupportedContentError` naming the place. A walk over
the SDK's unions of block types fails for a block type no request here holds,
so a new SDK release's block is handled (or refused on purpose) before it
reaches a user.
"""

from __future__ import annotations

import base64
import io
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("anthropic")

from anthropic.types import (
    AssistantMessageParam,
    Base64ImageSourceParam,
    Base64PDFSourceParam,
    CacheControlEphemeralParam,
    CitationCharLocationParam,
    CitationsConfigParam,
    CitationSearchResultLocationParam,
    ContainerUploadBlockParam,
    ContentBlockParam,
    ContentBlockSourceParam,
    DocumentBlockParam,
    ImageBlockParam,
    MessageParam,
    PlainTextSourceParam,
    RedactedThinkingBlock,
    RedactedThinkingBlockParam,
    SearchResultBlockParam,
    ServerToolUseBlock,
    ServerToolUseBlockParam,
    SystemMessageParam,
    TextBlock,
    TextBlockParam,
    ThinkingBlock,
    ThinkingBlockParam,
    ToolReferenceBlockParam,
    ToolResultBlockParam,
    ToolUseBlock,
    ToolUseBlockParam,
    URLImageSourceParam,
    URLPDFSourceParam,
    UserMessageParam,
    WebSearchResultBlock,
    WebSearchResultBlockParam,
    WebSearchToolResultBlock,
    WebSearchToolResultBlockParam,
)
from anthropic.types.bash_code_execution_tool_result_block_param import (
    BashCodeExecutionToolResultBlockParam,
)
from anthropic.types.code_execution_tool_result_block_param import (
    CodeExecutionToolResultBlockParam,
)
from anthropic.types.file_document_source_param import (
    FileDocumentSourceParam,
)
from anthropic.types.file_image_source_param import FileImageSourceParam
from anthropic.types.message_content_param import MessageContentParam
from anthropic.types.text_editor_code_execution_tool_result_block_param import (
    TextEditorCodeExecutionToolResultBlockParam,
)
from anthropic.types.tool_result_block_param import (
    Content as ToolResultContent,
)
from anthropic.types.tool_search_tool_result_block_param import (
    ToolSearchToolResultBlockParam,
)
from anthropic.types.web_fetch_tool_result_block_param import (
    WebFetchToolResultBlockParam,
)
from pydantic import TypeAdapter
from typing_extensions import is_typeddict

from chatledger import Message, connect
from chatledger.convert import (
    UnsupportedContentError,
    from_anthropic,
    to_anthropic,
)

PDF = base64.b64encode(b"%PDF-1.4 a tiny one").decode()
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n\x00\xff").decode()
CACHED = CacheControlEphemeralParam(type="ephemeral", ttl="1h")

#: One adapter per role: pydantic checks an Iterable lazily, and a union that
#: tries one role after another would see a list the first try consumed.
_TURNS: dict[str, TypeAdapter[Any]] = {
    "user": TypeAdapter(UserMessageParam),
    "assistant": TypeAdapter(AssistantMessageParam),
    "system": TypeAdapter(SystemMessageParam),
}
#: Each block alone too: the turns' union also takes the SDK's response models,
#: whose dump adds their own fields, so a block is checked as a param.
_BLOCK: TypeAdapter[Any] = TypeAdapter(ContentBlockParam)
_SEARCH_RESULT_ITEM: TypeAdapter[Any] = TypeAdapter(WebSearchResultBlockParam)
_SYSTEM: TypeAdapter[Any] = TypeAdapter(str | list[TextBlockParam])


def _user(*blocks: Any) -> MessageParam:
    return {"role": "user", "content": list(blocks)}


def _assistant(*blocks: Any) -> MessageParam:
    return {"role": "assistant", "content": list(blocks)}


def _text(value: str, **fields: Any) -> TextBlockParam:
    block = TextBlockParam(type="text", text=value)
    block.update(fields)  # type: ignore[typeddict-item]
    return block


def _call(call_id: str = "t1", **fields: Any) -> ToolUseBlockParam:
    block = ToolUseBlockParam(
        type="tool_use", id=call_id, name="look", input={"x": 1.5, "y": [1]}
    )
    block.update(fields)  # type: ignore[typeddict-item]
    return block


def _result(call_id: str = "t1", **fields: Any) -> ToolResultBlockParam:
    block = ToolResultBlockParam(type="tool_result", tool_use_id=call_id)
    block.update(fields)  # type: ignore[typeddict-item]
    return block


_THINKING = ThinkingBlockParam(type="thinking", thinking="Hm.", signature="c2ln")
_REDACTED = RedactedThinkingBlockParam(type="redacted_thinking", data="ZW5j")
_SEARCH_RESULT = SearchResultBlockParam(
    type="search_result",
    source="https://example.invalid/a",
    title="A",
    content=[_text("Alpha.")],
    citations=CitationsConfigParam(enabled=True),
)
_PDF_DOCUMENT = DocumentBlockParam(
    type="document",
    source=Base64PDFSourceParam(type="base64", media_type="application/pdf", data=PDF),
    title="Report",
    context="Q3",
    citations=CitationsConfigParam(enabled=True),
    cache_control=CACHED,
)
_TEXT_DOCUMENT = DocumentBlockParam(
    type="document",
    source=PlainTextSourceParam(type="text", media_type="text/plain", data="été"),
)
_URL_DOCUMENT = DocumentBlockParam(
    type="document",
    source=URLPDFSourceParam(type="url", url="https://example.invalid/r"),
)
_CONTENT_DOCUMENT = DocumentBlockParam(
    type="document",
    source=ContentBlockSourceParam(
        type="content", content=[_text("One."), _text("Two.")]
    ),
    citations=CitationsConfigParam(enabled=True),
)
_FILE_DOCUMENT = DocumentBlockParam(
    type="document", source=FileDocumentSourceParam(type="file", file_id="file_1")
)
_IMAGE = ImageBlockParam(
    type="image",
    source=Base64ImageSourceParam(type="base64", media_type="image/png", data=PNG),
)
_URL_IMAGE = ImageBlockParam(
    type="image", source=URLImageSourceParam(type="url", url="https://x.invalid/a")
)
_FILE_IMAGE = ImageBlockParam(
    type="image", source=FileImageSourceParam(type="file", file_id="file_2")
)
_SERVER_CALL = ServerToolUseBlockParam(
    type="server_tool_use", id="s1", name="web_search", input={"query": "rome"}
)
_WEB_SEARCH = WebSearchToolResultBlockParam(
    type="web_search_tool_result",
    tool_use_id="s1",
    content=[
        WebSearchResultBlockParam(
            type="web_search_result",
            url="https://example.invalid/r",
            title="Rome",
            encrypted_content="ZQ==",
            page_age=None,
        )
    ],
)
_WEB_FETCH = WebFetchToolResultBlockParam(
    type="web_fetch_tool_result",
    tool_use_id="s2",
    content={
        "type": "web_fetch_result",
        "url": "https://example.invalid/p",
        "content": _TEXT_DOCUMENT,
    },
)
_CODE = CodeExecutionToolResultBlockParam(
    type="code_execution_tool_result",
    tool_use_id="s3",
    content={
        "type": "code_execution_result",
        "stdout": "4\n",
        "stderr": "",
        "return_code": 0,
        "content": [],
    },
)
_BASH = BashCodeExecutionToolResultBlockParam(
    type="bash_code_execution_tool_result",
    tool_use_id="s4",
    content={
        "type": "bash_code_execution_result",
        "stdout": "ok",
        "stderr": "",
        "return_code": 0,
        "content": [],
    },
)
_EDITOR = TextEditorCodeExecutionToolResultBlockParam(
    type="text_editor_code_execution_tool_result",
    tool_use_id="s5",
    content={
        "type": "text_editor_code_execution_tool_result_error",
        "error_code": "unavailable",
    },
)
_TOOL_SEARCH = ToolSearchToolResultBlockParam(
    type="tool_search_tool_result",
    tool_use_id="s6",
    content={
        "type": "tool_search_tool_search_result",
        "tool_references": [
            ToolReferenceBlockParam(type="tool_reference", tool_name="look")
        ],
    },
)
_UPLOAD = ContainerUploadBlockParam(type="container_upload", file_id="file_3")
_CITED = _text(
    "It rose.",
    citations=[
        CitationCharLocationParam(
            type="char_location",
            cited_text="rose",
            document_index=0,
            document_title="Report",
            start_char_index=3,
            end_char_index=7,
        ),
        CitationSearchResultLocationParam(
            type="search_result_location",
            cited_text="Alpha.",
            search_result_index=0,
            source="https://example.invalid/a",
            title=None,
            start_block_index=0,
            end_block_index=1,
        ),
    ],
)

#: Requests read and written back exactly: (name, request).
EXACT: list[tuple[str, dict[str, Any]]] = [
    ("a str turn", {"messages": [{"role": "user", "content": "hi"}]}),
    ("an empty str turn", {"messages": [{"role": "user", "content": ""}]}),
    ("one text block", {"messages": [_user(_text("hi"))]}),
    ("an empty text block", {"messages": [_user(_text(""))]}),
    ("no blocks", {"messages": [_user(), _assistant()]}),
    (
        "turns of one role in a row",
        {
            "messages": [
                {"role": "user", "content": "a"},
                {"role": "user", "content": "b"},
                _user(_text("c"), _text("d")),
                _assistant(_text("e")),
                {"role": "assistant", "content": "f"},
            ]
        },
    ),
    (
        "system as a list without fields, and as a str",
        {"system": [_text("Rules."), _text("More.")], "messages": []},
    ),
    ("system as one str", {"system": "Rules.\n\nMore.", "messages": []}),
    (
        "a system turn among the messages",
        {
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "system", "content": "Be brief."},
                {"role": "system", "content": [_text("Now."), _text("Really.")]},
                {"role": "system", "content": [_text("One block.")]},
            ]
        },
    ),
    (
        "text block fields, empty ones too",
        {
            "system": [_text("Rules.", cache_control=CACHED, citations=None)],
            "messages": [
                _user(_text("hi", cache_control=None), _text("", citations=[])),
                _assistant(_CITED),
            ],
        },
    ),
    (
        "thinking and redacted thinking before the answer and the call",
        {
            "messages": [
                {"role": "user", "content": "Weather?"},
                _assistant(_THINKING, _REDACTED, _text("Looking."), _call()),
                _user(_result(content="sunny")),
                _assistant(_THINKING, _call("t2"), _text("After the call.")),
            ]
        },
    ),
    (
        "thinking alone",
        {"messages": [_assistant(_THINKING), _assistant(_REDACTED, _call())]},
    ),
    (
        "documents: base64 PDF with its fields, plain text, URL, content, file",
        {
            "messages": [
                _user(
                    _PDF_DOCUMENT,
                    _TEXT_DOCUMENT,
                    _URL_DOCUMENT,
                    _CONTENT_DOCUMENT,
                    _FILE_DOCUMENT,
                    _text("Summarize them."),
                ),
                _assistant(_CITED),
            ]
        },
    ),
    (
        "images: base64, URL, file, with fields",
        {
            "messages": [
                _user(
                    _text("Look."),
                    _URL_IMAGE,
                    {**_IMAGE, "cache_control": CACHED},
                    _FILE_IMAGE,
                    {**_IMAGE, "cache_control": None},
                )
            ]
        },
    ),
    (
        "media and calls interleaved, on an assistant too",
        {
            "messages": [
                _user(_IMAGE, _text("a"), _URL_DOCUMENT),
                _assistant(_call("t1"), _IMAGE, _call("t2")),
            ]
        },
    ),
    (
        "a search result block",
        {"messages": [_user(_SEARCH_RESULT, _text("Use it.")), _assistant(_CITED)]},
    ),
    (
        "server tools and their results",
        {
            "messages": [
                {"role": "user", "content": "Find Rome."},
                _assistant(
                    _SERVER_CALL,
                    _WEB_SEARCH,
                    _WEB_FETCH,
                    _CODE,
                    _BASH,
                    _EDITOR,
                    _TOOL_SEARCH,
                    _text("Found."),
                ),
                _user(_UPLOAD, _text("Run it.")),
            ]
        },
    ),
    (
        "tool use fields",
        {
            "messages": [
                _assistant(
                    _call("t1", cache_control=CACHED, toolset_name="browser"),
                    _call("t2", caller={"type": "direct"}, toolset_name=None),
                ),
                _user(_result("t1"), _result("t2", content="")),
            ]
        },
    ),
    (
        "tool results: str, blocks, no content, error flags, nested blocks",
        {
            "messages": [
                _assistant(*(_call(f"t{n}") for n in range(6))),
                _user(
                    _result("t0", content="plain", is_error=False),
                    _result("t1", content=[_text("a"), _text("b")], is_error=True),
                    _result("t2"),
                    _result("t3", content=[], cache_control=CACHED),
                    _result(
                        "t4",
                        content=[
                            _text("see"),
                            _IMAGE,
                            _SEARCH_RESULT,
                            _PDF_DOCUMENT,
                            ToolReferenceBlockParam(
                                type="tool_reference", tool_name="look"
                            ),
                            _text("cached", cache_control=CACHED),
                            {
                                "type": "browser_state",
                                "tabs": [
                                    {
                                        "tab_id": "1",
                                        "url": "https://example.invalid",
                                        "title": "E",
                                        "active": True,
                                    }
                                ],
                            },
                        ],
                        toolset_name="browser",
                    ),
                    _result("t5", content="x", cache_control=None),
                    _text("Thanks."),
                ),
                {"role": "user", "content": "More?"},
            ]
        },
    ),
]

#: Requests refused, naming the place: (name, request, a pattern of the error).
REFUSED: list[tuple[str, dict[str, Any], str]] = [
    (
        "a tool result after text",
        {"messages": [_user(_text("a"), _result())]},
        r"messages\[0\]\.content\[1\]: a tool_result after another block",
    ),
    (
        "a tool use in a user turn",
        {"messages": [_user(_call())]},
        r"messages\[0\]\.content\[0\]\.type: a 'tool_use' block in a user turn",
    ),
    (
        "a tool result in an assistant turn",
        {"messages": [_assistant(_result())]},
        r"messages\[0\]\.content\[0\]\.type: a 'tool_result' block in an? assistant",
    ),
    (
        "an empty system list",
        {"system": [], "messages": []},
        r"system: an empty list of blocks",
    ),
    (
        "base64 that does not decode to the same text",
        {
            "messages": [
                _user(
                    ImageBlockParam(
                        type="image",
                        source=Base64ImageSourceParam(
                            type="base64", media_type="image/png", data="iVBORx=="
                        ),
                    )
                )
            ]
        },
        r"messages\[0\]\.content\[0\]\.source\.data",
    ),
]


def _same(adapter: TypeAdapter[Any], value: Any) -> None:
    assert adapter.dump_python(adapter.validate_python(value), mode="json") == value


def _valid(request: dict[str, Any]) -> None:
    """Refuse an example the SDK's types do not describe (an unknown key too)."""
    for turn in request["messages"]:
        # The turn's own fields, its blocks checked one by one below.
        _same(_TURNS[turn["role"]], {**turn, "content": "-"})
        if isinstance(turn["content"], list):
            for block in turn["content"]:
                if block["type"] == "web_search_tool_result":
                    # pydantic loses the items of an Iterable that is one arm
                    # of a union (this content's), so they are checked apart.
                    for result in block["content"]:
                        _same(_SEARCH_RESULT_ITEM, result)
                    block = {**block, "content": []}
                _same(_BLOCK, block)
    if "system" in request:
        _same(_SYSTEM, request["system"])


@pytest.mark.parametrize("request_", [r for _, r in EXACT], ids=[n for n, _ in EXACT])
def test_the_sdk_request_comes_back_exactly(request_: dict[str, Any]) -> None:
    _valid(request_)
    messages = from_anthropic(request_)
    assert to_anthropic(messages) == request_
    assert from_anthropic(to_anthropic(messages)) == messages


@pytest.mark.parametrize(
    ("request_", "where"),
    [(r, w) for _, r, w in REFUSED],
    ids=[n for n, _, _ in REFUSED],
)
def test_what_cannot_come_back_is_refused_naming_the_place(
    request_: dict[str, Any], where: str
) -> None:
    _valid(request_)
    with pytest.raises(UnsupportedContentError, match=where):
        from_anthropic(request_)


def test_base64_data_given_as_a_file_is_refused_before_reading_it() -> None:
    data = io.BytesIO(b"%PDF")
    request = {
        "messages": [
            _user(
                DocumentBlockParam(
                    type="document",
                    source=Base64PDFSourceParam(
                        type="base64", media_type="application/pdf", data=data
                    ),
                )
            )
        ]
    }
    with pytest.raises(UnsupportedContentError, match=r"source\.data must be"):
        from_anthropic(request)
    assert data.tell() == 0


def test_a_response_s_blocks_passed_back_are_written_as_their_params() -> None:
    blocks = [
        ThinkingBlock(type="thinking", thinking="Hm.", signature="c2ln"),
        RedactedThinkingBlock(type="redacted_thinking", data="ZW5j"),
        ServerToolUseBlock(
            type="server_tool_use", id="s1", name="web_search", input={"q": "r"}
        ),
        WebSearchToolResultBlock(
            type="web_search_tool_result",
            tool_use_id="s1",
            content=[
                WebSearchResultBlock(
                    type="web_search_result",
                    url="https://example.invalid/r",
                    title="Rome",
                    encrypted_content="ZQ==",
                    page_age=None,
                )
            ],
        ),
        TextBlock(type="text", text="Found.", citations=None),
        ToolUseBlock(type="tool_use", id="t1", name="look", input={"x": 1}),
    ]
    request = {"messages": [{"role": "assistant", "content": blocks}]}
    written = to_anthropic(from_anthropic(request))
    params = [
        b.model_dump(by_alias=True, exclude_none=True, mode="json") for b in blocks
    ]
    assert written == {"messages": [{"role": "assistant", "content": params}]}
    _valid(written)


# --- Every block type the SDK names is one of the examples' ---------------------


def _type_of(typed_dict: Any) -> str:
    """The ``type`` literal of a TypedDict."""
    literal = typing.get_type_hints(typed_dict, include_extras=True)["type"]
    while typing.get_origin(literal) is not typing.Literal:
        literal = typing.get_args(literal)[0]  # Required[...]
    [kind] = typing.get_args(literal)
    assert isinstance(kind, str)
    return kind


def _block_types(union: Any) -> set[str]:
    """The ``type`` literal of each TypedDict in ``union``."""
    return {_type_of(member) for member in typing.get_args(union)}


def _walk(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, dict):
        yield value
        for inner in value.values():
            yield from _walk(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from _walk(inner)


def _turn_blocks(request: dict[str, Any]) -> set[str]:
    return {
        block["type"]
        for turn in request["messages"]
        if isinstance(turn["content"], list)
        for block in turn["content"]
    }


def _param_members(union: Any) -> Any:
    """The TypedDict members of a union that may also hold SDK response models."""
    members = [m for m in typing.get_args(union) if is_typeddict(m)]
    return typing.Union[tuple(members)]  # noqa: UP007 - built at run time


def test_every_turn_block_type_of_the_sdk_is_an_example() -> None:
    [_, iterable] = typing.get_args(MessageContentParam)
    [element] = typing.get_args(iterable)
    sdk = _block_types(_param_members(element))
    assert sdk == _block_types(ContentBlockParam)
    seen = set().union(*(_turn_blocks(r) for _, r in EXACT + [x[:2] for x in REFUSED]))
    assert sdk - seen == set(), "block types without an example: handle them"


def test_every_tool_result_block_type_of_the_sdk_is_an_example() -> None:
    sdk = _block_types(ToolResultContent)
    seen = {
        inner["type"]
        for _, request in EXACT
        for block in _walk(request["messages"])
        if block.get("type") == "tool_result" and isinstance(block.get("content"), list)
        for inner in block["content"]
    }
    assert sdk - seen == set(), "tool result blocks without an example: handle them"


def test_every_source_type_of_the_sdk_is_an_example() -> None:
    for block_type in (DocumentBlockParam, ImageBlockParam):
        source = typing.get_type_hints(block_type)["source"]
        sdk = _block_types(source)
        kind = _type_of(block_type)
        seen = {
            block["source"]["type"]
            for _, request in EXACT
            for block in _walk(request["messages"])
            if block.get("type") == kind
        }
        assert sdk - seen == set(), f"{block_type.__name__} sources without an example"


def test_the_roles_of_the_sdk_are_examples() -> None:
    roles = {
        typing.get_args(typing.get_type_hints(m, include_extras=True)["role"])[0]
        for m in typing.get_args(MessageParam)
    }
    roles = {typing.get_args(r)[0] if typing.get_args(r) else r for r in roles}
    seen = {turn["role"] for _, r in EXACT for turn in r["messages"]}
    assert roles == seen


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
    for index, (_, request) in enumerate(EXACT):
        messages = from_anthropic(request)
        repository.save_all(f"c{index}", messages)
        stored: list[Message] = repository.find_by_conversation_id(f"c{index}")
        assert stored == messages
        assert [m.id for m in stored] == [m.id for m in messages]
        assert to_anthropic(stored) == request
