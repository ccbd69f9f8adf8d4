"""Messages as Anthropic Messages requests (``system`` and ``messages``), and back.

Use these through :mod:`chatledger.convert`, which documents what is kept in
``metadata["anthropic"]``.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any

from chatledger.codec import loads_value
from chatledger.convert_extras import ANTHROPIC_KEY, Kept, KeptKeys, joined
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
from chatledger.messages import Media, Message, Role, ToolCall, ToolResponse, _shown

__all__ = ["from_anthropic", "to_anthropic"]

#: The fields of a block kept as they are: of any block, and of a text block.
_BLOCK_FIELDS = ("cache_control",)
_TEXT_FIELDS = ("cache_control", "citations")

#: What ``metadata["anthropic"]`` may hold: a text block's fields for the
#: message, and per media, tool call and tool result those of its block.
ANTHROPIC_KEYS = KeptKeys(
    message=set(_TEXT_FIELDS),
    media=set(_BLOCK_FIELDS),
    calls=set(_BLOCK_FIELDS),
    outputs={*_BLOCK_FIELDS, "is_error", "text_parts"},
)


# --- To the request shape -----------------------------------------------------


def _source(media: Media) -> dict[str, Any]:
    if isinstance(media.data, str):
        return {"type": "url", "url": media.data}
    return {
        "type": "base64",
        "media_type": media.mime_type,
        "data": base64.b64encode(media.data).decode("ascii"),
    }


def _media_block(media: Media) -> dict[str, Any]:
    mime = media.mime_type.lower()
    if mime.startswith("image/"):
        return {"type": "image", "source": _source(media)}
    if mime == "application/pdf":
        return {"type": "document", "source": _source(media)}
    if mime.startswith("text/") and isinstance(media.data, bytes):
        return {
            "type": "document",
            "source": {
                "type": "text",
                "media_type": "text/plain",
                "data": media.data.decode("utf-8", errors="strict"),
            },
        }
    raise UnsupportedContentError(
        f"Anthropic messages take images, PDF and text documents, not {media.mime_type}"
    )


def _tool_input(arguments: str, call_id: str) -> Any:
    try:
        value = loads_value(arguments) if arguments.strip() else {}
    except ValueError as exc:
        raise UnsupportedContentError(
            f"tool call {call_id} has arguments that are not JSON, and Anthropic "
            f"needs them as an object: {exc}"
        ) from exc
    if not isinstance(value, dict):
        raise UnsupportedContentError(
            f"tool call {call_id} has arguments that are not a JSON object"
        )
    return value


def _with(block: dict[str, Any], kept: Kept, names: Sequence[str]) -> dict[str, Any]:
    """``block`` with the fields ``names`` that ``kept`` holds."""
    if kept.fields:
        block.update(kept.copy(names))
    return block


def _text_block(message: Message, kept: Kept) -> dict[str, Any] | None:
    """The message's text block: for any text, or a kept ``cache_control``."""
    extras = [name for name in _TEXT_FIELDS if name in kept] if kept.fields else []
    if not message.content and not extras:
        return None
    if message.content is None:
        raise UnsupportedContentError(
            f"{kept.where} keeps {' and '.join(extras)} for a text block, and "
            "the message has no text"
        )
    return _with({"type": "text", "text": message.content}, kept, _TEXT_FIELDS)


def _result_block(message: Message, kept: Kept, index: int) -> dict[str, Any]:
    response = message.tool_responses[index]
    entry = kept.entry("outputs", index)
    texts = entry.parts("text_parts", response.data)
    content: Any = response.data
    if texts is not None:
        content = [{"type": "text", "text": t} for t in texts]
    block = {"type": "tool_result", "tool_use_id": response.id, "content": content}
    is_error = entry.value("is_error")
    if is_error is not None:
        if not isinstance(is_error, bool):
            raise UnsupportedContentError(
                f"{entry.where}['is_error'] must be a bool, not "
                f"{type(is_error).__name__}"
            )
        block["is_error"] = is_error
    return _with(block, entry, _BLOCK_FIELDS)


def _blocks(message: Message, kept: Kept) -> list[dict[str, Any]]:
    if message.role is Role.TOOL:
        if not message.tool_responses:
            raise UnsupportedContentError(
                f"tool message {message.id} has no tool response to send"
            )
        return [
            _result_block(message, kept, index)
            for index in range(len(message.tool_responses))
        ]
    blocks: list[dict[str, Any]] = []
    text_block = _text_block(message, kept)
    if text_block is not None:
        blocks.append(text_block)
    blocks.extend(
        _with(_media_block(media), kept.entry("media", index), _BLOCK_FIELDS)
        for index, media in enumerate(message.media)
    )
    blocks.extend(
        _with(
            {
                "type": "tool_use",
                "id": call.id,
                "name": call.name,
                "input": _tool_input(call.arguments, call.id),
            },
            kept.entry("calls", index),
            _BLOCK_FIELDS,
        )
        for index, call in enumerate(message.tool_calls)
    )
    return blocks


def to_anthropic(messages: Sequence[Message]) -> dict[str, Any]:
    """Convert messages to the keyword arguments ``system`` and ``messages``.

    System messages are joined (blank line between them) into ``system``,
    which is left out when there is none; when one keeps a ``cache_control``
    or ``citations``, ``system`` is a list of text blocks instead, one per
    system message. Tool responses become ``tool_result`` blocks of a user
    message, tool calls ``tool_use`` blocks with their arguments parsed into
    ``input``. Consecutive messages that land on the same role are merged
    into one message, as the API requires alternating roles; within a user
    message, tool results come first. An empty assistant message (no text,
    no call) is left out. What ``metadata["anthropic"]`` keeps is written
    back on its block: ``cache_control``, a text's ``citations``, a tool
    result's ``is_error`` and text blocks.

    Not sent: ``metadata["openai"]`` (a developer role is sent as the system
    message it is), a tool message's own ``content``, and a media ``name`` or
    ``id``.

    Raises:
        UnsupportedContentError: for media the API cannot take, tool-call
            arguments that are not a JSON object (or nest deeper than
            :data:`~chatledger.messages.MAX_METADATA_DEPTH` levels, measured
            before parsing), a tool message without tool responses, and
            ``metadata["anthropic"]`` that does not fit the message, naming
            the message by its index.
    """
    system: list[dict[str, Any]] = []
    turns: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        kept = Kept.of(message, ANTHROPIC_KEY, ANTHROPIC_KEYS, f"messages[{index}]")
        if message.role is Role.SYSTEM:
            assert message.content is not None  # the model guarantees it
            block = _with({"type": "text", "text": message.content}, kept, _TEXT_FIELDS)
            system.append(block)
            continue
        role = "assistant" if message.role is Role.ASSISTANT else "user"
        blocks = _blocks(message, kept)
        if not blocks:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    for turn in turns:
        if turn["role"] == "user":
            results = [b for b in turn["content"] if b["type"] == "tool_result"]
            others = [b for b in turn["content"] if b["type"] != "tool_result"]
            turn["content"] = results + others
    request: dict[str, Any] = {"messages": turns}
    if any(block.keys() != {"type", "text"} for block in system):
        request["system"] = system
    elif system:
        request["system"] = joined([block["text"] for block in system])
    return request


# --- From the request shape ---------------------------------------------------


def _kept(
    block: Mapping[str, Any], names: Sequence[str], where: str, level: int
) -> dict[str, Any]:
    """The fields ``names`` of ``block`` that hold something, checked as kept JSON."""
    return {
        name: carried(block[name], f"{where}.{name}", level)
        for name in names
        if not is_empty(block.get(name))
    }


def _media_of(block: Mapping[str, Any], where: str, fallback: str) -> Media:
    source = item(block.get("source"), f"{where}.source")
    kind = source.get("type")
    where = f"{where}.source"
    if kind == "base64":
        only(source, where, {"type", "media_type", "data"})
        data = b64(source.get("data"), f"{where}.data")
        return Media(text(source, "media_type", where), data)
    if kind == "url":
        only(source, where, {"type", "url"})
        url = text(source, "url", where)
        return Media(guess_mime(url, fallback), url)
    if kind == "text" and block.get("type") == "document":
        only(source, where, {"type", "media_type", "data"})
        return Media("text/plain", text(source, "data", where).encode("utf-8"))
    raise no_place(f"{where}.type", f"a {_shown(kind)} source")


def _result(block: Mapping[str, Any], where: str) -> tuple[str, dict[str, Any]]:
    """A ``tool_result``'s text and what its response keeps."""
    only(block, where, {"type", "tool_use_id", "content", "is_error", "cache_control"})
    extras = _kept(block, _BLOCK_FIELDS, where, 5)
    is_error = block.get("is_error")
    if is_error is not None and not isinstance(is_error, bool):
        raise malformed(f"{where}.is_error", "a bool", is_error)
    if is_error:
        extras["is_error"] = True
    content = block.get("content", "")
    if isinstance(content, str):
        return content, extras
    if not isinstance(content, list):
        raise malformed(f"{where}.content", "a str or a list of blocks", content)
    texts = []
    for index, raw in enumerate(content):
        inner_where = f"{where}.content[{index}]"
        inner = item(raw, inner_where)
        if inner.get("type") != "text":
            raise no_place(
                f"{inner_where}.type", f"a {_shown(inner.get('type'))} block"
            )
        only(inner, inner_where, {"type", "text"})
        texts.append(text(inner, "text", inner_where))
    extras["text_parts"] = [len(t) for t in texts]
    return joined(texts) or "", extras


def _turn(fields: Mapping[str, Any], where: str, reader: Reader) -> None:
    only(fields, where, {"role", "content"})
    role_name = fields.get("role")
    if role_name not in ("user", "assistant"):
        raise no_place(f"{where}.role", f"the role {_shown(role_name)}")
    role = Role.USER if role_name == "user" else Role.ASSISTANT
    content = fields.get("content")
    if isinstance(content, str):
        reader.add(Draft(role, content))
        return
    if not isinstance(content, list):
        raise malformed(f"{where}.content", "a str or a list of blocks", content)
    # Each message of to_anthropic's merged turn starts with its text block,
    # so a text block starts a message and other blocks join the current one.
    current: Draft | None = None
    for index, raw in enumerate(content):
        block_where = f"{where}.content[{index}]"
        block = item(raw, block_where)
        kind = block.get("type")
        if kind == "text":
            only(block, block_where, {"type", *_TEXT_FIELDS, "text"})
            current = reader.add(Draft(role, text(block, "text", block_where)))
            # metadata > "anthropic" > the field
            current.extras.fields.update(_kept(block, _TEXT_FIELDS, block_where, 3))
        elif kind in ("image", "document"):
            only(block, block_where, {"type", "source", *_BLOCK_FIELDS})
            fallback = "image/*" if kind == "image" else "application/pdf"
            media = _media_of(block, block_where, fallback)
            if current is None or current.role is not role:
                current = reader.add(Draft(role))
            # metadata > "anthropic" > "media" > the entry > the field
            current.add_media(media, _kept(block, _BLOCK_FIELDS, block_where, 5))
        elif kind == "tool_use" and role is Role.ASSISTANT:
            only(block, block_where, {"type", "id", "name", "input", *_BLOCK_FIELDS})
            arguments = json_text(block.get("input", {}), f"{block_where}.input")
            call = ToolCall(
                text(block, "id", block_where),
                text(block, "name", block_where),
                arguments,
            )
            if current is None:
                current = reader.add(Draft(role))
            current.add_call(call, _kept(block, _BLOCK_FIELDS, block_where, 5))
            reader.calls[call.id] = call
        elif kind == "tool_result" and role is Role.USER:
            data, extras = _result(block, block_where)
            call_id = text(block, "tool_use_id", block_where)
            reader.response(
                ToolResponse(call_id, reader.name_of(call_id), data), extras
            )
            current = None
        else:
            raise no_place(
                f"{block_where}.type", f"a {_shown(kind)} block in a {role} turn"
            )


def from_anthropic(request: Mapping[str, Any] | Sequence[Any]) -> list[Message]:
    """Read an Anthropic Messages request: ``{"system": ..., "messages": [...]}``.

    ``request`` is the keyword arguments of ``messages.create`` (only
    ``system`` and ``messages`` are read) or the ``messages`` list alone.
    ``system`` becomes one system message (one per block when it is a list of
    text blocks), first. In a turn, a text block starts a new message and
    image, document and ``tool_use`` blocks join the message being read;
    ``tool_result`` blocks become one tool message, each response named after
    the ``tool_use`` it answers, the text blocks of a result joined by a
    blank line. ``tool_use`` input becomes compact JSON argument text. A URL
    image or document gets the MIME type its extension names, else
    ``image/*`` or ``application/pdf``.

    Kept in ``metadata["anthropic"]``, so :func:`to_anthropic` writes them
    back on their blocks: each block's ``cache_control``, a text block's
    ``citations``, a tool result's ``is_error`` and the lengths of its text
    blocks when its content is a list.

    The round trip ``from_anthropic(to_anthropic(history)) == history`` holds
    for every history ``to_anthropic`` takes that has at most one system
    message, first (or whose system messages keep a ``cache_control``);
    whose user and assistant messages have text (an assistant message with
    tool calls may have ``None``), no assistant media and metadata that
    holds at most what ``from_anthropic`` keeps; whose tool messages have no
    content, follow the assistant message that called them and are not next
    to another tool message; whose tool calls have compact JSON object
    arguments and type ``function``; whose tool responses are named after
    their calls; and whose media are images (base64, or a URL naming their
    MIME type), PDFs and ``text/plain`` UTF-8 bytes, without ``name`` or
    ``id``.

    Raises:
        UnsupportedContentError: naming the item and field that is malformed
            or that a message has no place for: thinking and server tool
            blocks, a tool result holding an image or a text block with
            fields of its own, a file source, a document's title or context;
            a ``tool_use`` input or kept field that is not JSON (a set,
            bytes, a non-str key, ``NaN``, an object) or nests deeper than
            :data:`~chatledger.messages.MAX_METADATA_DEPTH` levels; and any
            value of the wrong type, however large or deeply nested.
    """
    system: object = None
    messages: object = request
    if isinstance(request, Mapping):
        system = request.get("system")
        messages = request.get("messages")
    if isinstance(messages, str | bytes | Mapping) or not isinstance(
        messages, Sequence
    ):
        raise malformed("messages", "a list", messages)
    reader = Reader(ANTHROPIC_KEY)
    if isinstance(system, str):
        reader.add(Draft(Role.SYSTEM, system))
    elif isinstance(system, list):
        for index, raw in enumerate(system):
            where = f"system[{index}]"
            block = item(raw, where)
            if block.get("type") != "text":
                raise no_place(f"{where}.type", f"a {_shown(block.get('type'))} block")
            only(block, where, {"type", "text", *_TEXT_FIELDS})
            draft = reader.add(Draft(Role.SYSTEM, text(block, "text", where)))
            draft.extras.fields.update(_kept(block, _TEXT_FIELDS, where, 3))
    elif system is not None:
        raise malformed("system", "a str or a list of text blocks", system)
    for index, raw in enumerate(messages):
        _turn(item(raw, f"messages[{index}]"), f"messages[{index}]", reader)
    return reader.messages()
