"""Reading Anthropic Messages requests into messages.

A turn's blocks are split into messages: a text block starts a message (but
for one that holds only blocks kept whole, such as the thinking before an
answer, which it joins), media and ``tool_use`` blocks join the message being
read, and the ``tool_result`` blocks, which come first in a user turn, make a
tool message. What a message has no field for is kept under
``metadata["anthropic"]`` (see :mod:`chatledger.convert_extras`): the fields of
each block, the blocks kept whole (thinking, server tools, search results),
the order of a message's blocks and how its turn was written, when they are
not what :func:`~chatledger.convert.to_anthropic` writes by itself. Use these
names through :mod:`chatledger.convert`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Any

from chatledger.convert_extras import KeptKeys
from chatledger.convert_shared import (
    Draft,
    Reader,
    UnsupportedContentError,
    b64,
    carried,
    guess_mime,
    is_empty,
    item,
    json_text,
    malformed,
    no_place,
    only,
    text,
)
from chatledger.messages import Media, Role, ToolCall, ToolResponse, _shown

__all__ = [
    "ANTHROPIC_KEYS",
    "CALL_FIELDS",
    "KEPT_WHOLE",
    "MEDIA_FIELDS",
    "RESULT_BLOCKS",
    "RESULT_FIELDS",
    "TEXT_FIELDS",
    "default_layout",
    "read_system",
    "read_turn",
    "text_block_written",
]

#: The fields kept of a text block (the message's own), of a media block, of
#: a ``tool_use`` block and of a ``tool_result`` block.
TEXT_FIELDS = ("cache_control", "citations")
MEDIA_FIELDS = ("cache_control", "citations", "title", "context", "transformations")
CALL_FIELDS = ("cache_control", "caller", "toolset_name")
RESULT_FIELDS = ("cache_control", "toolset_name", "is_error")

#: Blocks a message has no field for, kept whole where they stand.
KEPT_WHOLE = frozenset(
    {
        "thinking",
        "redacted_thinking",
        "server_tool_use",
        "web_search_tool_result",
        "web_fetch_tool_result",
        "code_execution_tool_result",
        "bash_code_execution_tool_result",
        "text_editor_code_execution_tool_result",
        "tool_search_tool_result",
        "container_upload",
        "search_result",
    }
)
#: The blocks a ``tool_result``'s content may hold besides plain text blocks,
#: kept whole (a tool response holds text only).
RESULT_BLOCKS = frozenset(
    {"text", "image", "document", "search_result", "tool_reference", "browser_state"}
)

#: What ``metadata["anthropic"]`` may hold: the fields of the message's text
#: block and how its blocks and turn were written; per media, tool call and
#: tool result the fields of its block.
ANTHROPIC_KEYS = KeptKeys(
    message={*TEXT_FIELDS, "empty", "blocks", "string", "new_turn", "in_messages"},
    media={*MEDIA_FIELDS, "empty"},
    calls={*CALL_FIELDS, "empty"},
    outputs={*RESULT_FIELDS, "empty", "text_parts", "blocks", "absent"},
)

_BLOCK_FIELDS = {
    "image": ("cache_control", "transformations"),
    "document": ("cache_control", "citations", "title", "context"),
}
_ROLES = {"user": Role.USER, "assistant": Role.ASSISTANT, "system": Role.SYSTEM}


def text_block_written(content: str | None, text_fields: bool) -> bool:
    """Whether a message's text is written as a block when no layout is kept.

    It is for any text, and for an empty text whose block keeps fields.
    """
    return content is not None and (content != "" or text_fields)


def default_layout(
    role: Role, content: str | None, text_fields: bool, media: int, calls: int
) -> list[str]:
    """The blocks ``to_anthropic`` writes for a message that keeps no layout."""
    if role is Role.TOOL:
        return []  # one "result" per response, counted by the caller
    layout = ["text"] if text_block_written(content, text_fields) else []
    return layout + ["media"] * media + ["call"] * calls


def _fields(
    block: Mapping[str, Any],
    names: Sequence[str],
    where: str,
    level: int,
    exact: bool,
) -> dict[str, Any]:
    """The fields ``names`` of ``block`` to keep, checked as kept JSON.

    Those that hold something are kept as they are; those given holding
    nothing (``None``, ``""``, ``[]``, ``{}``) under ``"empty"``, so they are
    written back too. ``exact`` is false for an SDK object, whose fields that
    hold nothing are its defaults rather than something written.
    """
    kept: dict[str, Any] = {}
    empty: dict[str, Any] = {}
    for name in names:
        if name not in block:
            continue
        value = block[name]
        if is_empty(value):
            if exact:
                empty[name] = value
        else:
            kept[name] = carried(value, f"{where}.{name}", level)
    if empty:
        kept["empty"] = empty
    return kept


def _media(block: Mapping[str, Any], kind: str, where: str) -> Media | None:
    """An image or document block as media, or ``None`` to keep it whole.

    Images by base64 or URL, PDF documents by base64 or URL and plain text
    documents are media; a file by id and a document of content blocks are
    not, and are kept whole.
    """
    source_where = f"{where}.source"
    source = item(block.get("source"), source_where)
    source_kind = source.get("type")
    if source_kind == "base64":
        only(source, source_where, {"type", "media_type", "data"})
        data = b64(source.get("data"), f"{source_where}.data")
        return Media(text(source, "media_type", source_where), data)
    if source_kind == "url":
        only(source, source_where, {"type", "url"})
        url = text(source, "url", source_where)
        if kind == "document":
            return Media("application/pdf", url)  # a URL source is a PDF's
        guessed = guess_mime(url, "image/*")
        # The MIME type says which block it is written back as.
        return Media(guessed if guessed.startswith("image/") else "image/*", url)
    if source_kind == "text" and kind == "document":
        only(source, source_where, {"type", "media_type", "data"})
        if source.get("media_type") != "text/plain":
            raise malformed(
                f"{source_where}.media_type", "'text/plain'", source.get("media_type")
            )
        plain = text(source, "data", source_where)
        try:
            encoded = plain.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise no_place(f"{source_where}.data", "text that is not UTF-8") from exc
        return Media("text/plain", encoded)
    if source_kind == "file" or (source_kind == "content" and kind == "document"):
        return None
    raise no_place(f"{source_where}.type", f"a {_shown(source_kind)} source")


def _whole(raw: object, block: Mapping[str, Any], where: str, level: int) -> Any:
    """A block kept whole, checked as kept JSON at ``level``.

    As given when it is a dict; an SDK object (a response's block passed
    back) by its fields that hold something, as its params are written.
    """
    if not isinstance(raw, Mapping):
        dump = getattr(raw, "model_dump", None)
        # A model_dump without pydantic's keywords keeps the fields read.
        with contextlib.suppress(TypeError):
            if callable(dump):
                block = dump(by_alias=True, exclude_none=True, mode="json")
    return carried(dict(block), where, level)


class _Turn:
    """Reads the blocks of one turn into the reader's messages."""

    def __init__(self, reader: Reader, role: Role, where: str) -> None:
        self.reader = reader
        self.role = role
        self.where = where
        self.start = len(reader.drafts)
        self.current: Draft | None = None
        self.layouts: dict[int, list[Any]] = {}
        self.tools: Draft | None = None
        self.other_seen = False

    def _layout(self, draft: Draft) -> list[Any]:
        return self.layouts.setdefault(id(draft), [])

    def _joinable(self) -> Draft:
        """The message a media, call or kept block joins: the current, or a new one."""
        if self.current is None:
            self.current = self.reader.add(Draft(self.role))
        return self.current

    def block(self, raw: object, where: str) -> None:
        block = item(raw, where)
        exact = isinstance(raw, Mapping)
        kind = block.get("type")
        if not isinstance(kind, str):
            raise malformed(f"{where}.type", "a str", kind)
        if self.role is Role.SYSTEM and kind != "text":
            raise no_place(f"{where}.type", f"a {_shown(kind)} block in a system turn")
        if kind == "tool_result" and self.role is Role.USER:
            self._result(block, where, exact)
            return
        self.other_seen = True
        if kind == "text":
            self._text(block, where, exact)
        elif kind == "tool_use" and self.role is Role.ASSISTANT:
            self._call(block, where, exact)
        elif kind in ("image", "document"):
            only(block, where, {"type", "source", *_BLOCK_FIELDS[kind]})
            media = _media(block, kind, where)
            draft = self._joinable()
            if media is None:
                self._layout(draft).append(_whole(raw, block, where, 4))
                return
            # metadata > "anthropic" > "media" > the entry > the field
            draft.add_media(media, _fields(block, MEDIA_FIELDS, where, 5, exact))
            self._layout(draft).append("media")
        elif kind in KEPT_WHOLE:
            # metadata > "anthropic" > "blocks" > the block
            self._layout(self._joinable()).append(_whole(raw, block, where, 4))
        else:
            role = self.role.value
            raise no_place(f"{where}.type", f"a {_shown(kind)} block in a {role} turn")

    def _text(self, block: Mapping[str, Any], where: str, exact: bool) -> None:
        only(block, where, {"type", "text", *TEXT_FIELDS})
        value = text(block, "text", where)
        draft = self.current
        layout = [] if draft is None else self._layout(draft)
        # Blocks kept whole before a text (thinking, say) belong to its message.
        joins = (
            draft is not None
            and draft.content is None
            and not draft.media
            and not draft.tool_calls
            and all(not isinstance(entry, str) for entry in layout)
        )
        if not joins or draft is None:
            draft = self.current = self.reader.add(Draft(self.role))
        draft.content = value
        # metadata > "anthropic" > the field
        draft.extras.fields.update(_fields(block, TEXT_FIELDS, where, 3, exact))
        self._layout(draft).append("text")

    def _call(self, block: Mapping[str, Any], where: str, exact: bool) -> None:
        only(block, where, {"type", "id", "name", "input", *CALL_FIELDS})
        if not isinstance(block.get("input"), Mapping):
            raise malformed(f"{where}.input", "a dict", block.get("input"))
        call = ToolCall(
            text(block, "id", where),
            text(block, "name", where),
            json_text(block["input"], f"{where}.input"),
        )
        draft = self._joinable()
        # metadata > "anthropic" > "calls" > the entry > the field
        draft.add_call(call, _fields(block, CALL_FIELDS, where, 5, exact))
        self._layout(draft).append("call")
        self.reader.calls[call.id] = call

    def _result(self, block: Mapping[str, Any], where: str, exact: bool) -> None:
        if self.other_seen:
            raise UnsupportedContentError(
                f"{where}: a tool_result after another block; the API takes a "
                "user turn's tool results first, and to_anthropic writes them "
                "first, so it would not be written back where it stands"
            )
        only(block, where, {"type", "tool_use_id", "content", *RESULT_FIELDS})
        is_error = block.get("is_error")
        if is_error is not None and not isinstance(is_error, bool):
            raise malformed(f"{where}.is_error", "a bool", is_error)
        extras = _fields(block, RESULT_FIELDS, where, 5, exact)
        data = _result_content(block, where, extras, exact)
        call_id = text(block, "tool_use_id", where)
        if self.tools is None:
            self.tools = self.reader.add(Draft(Role.TOOL))
        response = ToolResponse(call_id, self.reader.name_of(call_id), data)
        self.tools.add_response(response, extras)
        self.current = None

    def finish(self, new_turn: bool, in_messages: bool) -> None:
        """Keep what the writer needs to write this turn back as it came."""
        drafts = self.reader.drafts[self.start :]
        if not drafts:  # an empty list of blocks
            drafts = [self.reader.add(Draft(self.role))]
            self.layouts[id(drafts[0])] = []
        for draft in drafts:
            layout = self.layouts.get(id(draft))
            if layout is None:  # a tool message: its results in order
                continue
            fields = draft.extras.fields
            text_fields = any(name in fields for name in (*TEXT_FIELDS, "empty"))
            content = draft.content
            if content is None and self.role is not Role.ASSISTANT:
                content = ""  # what Draft.build gives it
            default = default_layout(
                self.role, content, text_fields, len(draft.media), len(draft.tool_calls)
            )
            # A turn of one plain text block is written as a str.
            as_str = len(drafts) == 1 and layout == ["text"] and not text_fields
            if layout != default or as_str or not layout:
                fields["blocks"] = layout
        if new_turn:
            drafts[0].extras.fields["new_turn"] = True
        if in_messages:
            for draft in drafts:
                draft.extras.fields["in_messages"] = True


def _result_content(
    block: Mapping[str, Any], where: str, extras: dict[str, Any], exact: bool
) -> str:
    """A ``tool_result``'s text; the layout of a list content goes in ``extras``."""
    if "content" not in block:
        if exact:
            extras["absent"] = ["content"]
        return ""
    content = block["content"]
    if isinstance(content, str):
        return content
    if isinstance(content, str | bytes | Mapping) or not isinstance(content, Sequence):
        raise malformed(f"{where}.content", "a str or a list of blocks", content)
    texts: list[str] = []
    layout: list[Any] = []
    for index, raw in enumerate(content):
        inner_where = f"{where}.content[{index}]"
        inner = item(raw, inner_where)
        kind = inner.get("type")
        if not isinstance(kind, str) or kind not in RESULT_BLOCKS:
            raise no_place(f"{inner_where}.type", f"a {_shown(kind)} block")
        plain = kind == "text" and all(
            key in ("type", "text") or (is_empty(value) and not exact)
            for key, value in inner.items()
        )
        if plain:
            texts.append(text(inner, "text", inner_where))
            layout.append("text")
        else:
            # metadata > "anthropic" > "outputs" > the entry > "blocks" > the block
            layout.append(_whole(raw, inner, inner_where, 6))
    extras["text_parts"] = [len(t) for t in texts]
    if any(not isinstance(entry, str) for entry in layout):
        extras["blocks"] = layout
    return "\n\n".join(texts)


def read_turn(
    fields: Mapping[str, Any], where: str, reader: Reader, previous: str | None
) -> str:
    """Read one turn into ``reader``; ``previous`` is the role of the turn before.

    Returns the turn's role.
    """
    only(fields, where, {"role", "content"})
    role_name = fields.get("role")
    if not isinstance(role_name, str) or role_name not in _ROLES:
        raise no_place(f"{where}.role", f"the role {_shown(role_name)}")
    role = _ROLES[role_name]
    turn = _Turn(reader, role, where)
    content = fields.get("content")
    if isinstance(content, str):
        draft = reader.add(Draft(role, content))
        if not content:  # written as no block at all otherwise
            draft.extras.fields["string"] = True
    elif isinstance(content, str | bytes | Mapping) or not isinstance(
        content, Sequence
    ):
        raise malformed(f"{where}.content", "a str or a list of blocks", content)
    else:
        for index, raw in enumerate(content):
            turn.block(raw, f"{where}.content[{index}]")
    turn.finish(new_turn=role_name == previous, in_messages=role is Role.SYSTEM)
    return role_name


def read_system(system: object, reader: Reader) -> None:
    """Read the request's ``system``, a str or a list of text blocks."""
    if system is None:
        return
    if isinstance(system, str):
        reader.add(Draft(Role.SYSTEM, system))
        return
    if isinstance(system, str | bytes | Mapping) or not isinstance(system, Sequence):
        raise malformed("system", "a str or a list of text blocks", system)
    if not system:
        raise no_place("system", "an empty list of blocks, which no message holds")
    start = len(reader.drafts)
    for index, raw in enumerate(system):
        where = f"system[{index}]"
        block = item(raw, where)
        if block.get("type") != "text":
            raise no_place(f"{where}.type", f"a {_shown(block.get('type'))} block")
        only(block, where, {"type", "text", *TEXT_FIELDS})
        draft = reader.add(Draft(Role.SYSTEM, text(block, "text", where)))
        fields = _fields(block, TEXT_FIELDS, where, 3, isinstance(raw, Mapping))
        draft.extras.fields.update(fields)
    drafts = reader.drafts[start:]
    if not any(draft.extras.fields for draft in drafts):
        # Written joined into a str unless a system message says otherwise.
        drafts[0].extras.fields["blocks"] = ["text"]
