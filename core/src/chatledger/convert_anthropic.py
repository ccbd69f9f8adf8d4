"""Messages as Anthropic Messages requests (``system`` and ``messages``), and back.

Use these through :mod:`chatledger.convert`, which documents what is kept in
``metadata["anthropic"]``.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any

from chatledger.codec import loads_value
from chatledger.convert_anthropic_reading import (
    ANTHROPIC_KEYS,
    CALL_FIELDS,
    MEDIA_FIELDS,
    RESULT_FIELDS,
    TEXT_FIELDS,
    default_layout,
    read_system,
    read_turn,
)
from chatledger.convert_extras import ANTHROPIC_KEY, Kept, joined
from chatledger.convert_shared import (
    Reader,
    UnsupportedContentError,
    item,
    malformed,
)
from chatledger.messages import Media, Message, Role

__all__ = ["from_anthropic", "to_anthropic"]

#: The entries of a layout that stand for a message's own blocks.
_OWN = ("text", "media", "call", "result")


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
        try:
            data = media.data.decode("utf-8", errors="strict")
        except UnicodeDecodeError as exc:
            raise UnsupportedContentError(
                f"a {media.mime_type} document is sent as UTF-8 text, and these "
                f"bytes are not UTF-8 ({exc.reason} at {exc.start})"
            ) from exc
        return {
            "type": "document",
            "source": {"type": "text", "media_type": "text/plain", "data": data},
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
    """``block`` with the fields ``names`` that ``kept`` holds, empty ones included."""
    if kept.fields:
        block.update(kept.copy(names))
        block.update(kept.empty(names))
    return block


def _text_fields(kept: Kept) -> bool:
    return bool(kept.fields) and any(name in kept for name in (*TEXT_FIELDS, "empty"))


def _text_block(message: Message, kept: Kept) -> list[dict[str, Any]]:
    """The message's text block (none for no text), with the fields it keeps."""
    if message.content is None:
        if _text_fields(kept):
            extras = [n for n in (*TEXT_FIELDS, "empty") if n in kept]
            raise UnsupportedContentError(
                f"{kept.where} keeps {' and '.join(extras)} for a text block, "
                "and the message has no text"
            )
        return []
    return [_with({"type": "text", "text": message.content}, kept, TEXT_FIELDS)]


def _result_block(message: Message, kept: Kept, index: int) -> dict[str, Any]:
    response = message.tool_responses[index]
    entry = kept.entry("outputs", index)
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": response.id}
    content = _result_content(response.data, entry)
    if "content" in entry.absent(["content"]):
        if response.data:
            raise UnsupportedContentError(
                f"{entry.where}['absent'] leaves out the content of a tool "
                "response that has text"
            )
    else:
        block["content"] = content
    is_error = entry.value("is_error")
    if is_error is not None and not isinstance(is_error, bool):
        raise UnsupportedContentError(
            f"{entry.where}['is_error'] must be a bool, not {type(is_error).__name__}"
        )
    return _with(block, entry, RESULT_FIELDS)


def _result_content(data: str, entry: Kept) -> Any:
    """A tool result's content: its text, or blocks as its kept layout says."""
    texts = entry.parts("text_parts", data)
    layout = entry.sequence("blocks")
    if layout is None:
        if texts is None:
            return data
        return [{"type": "text", "text": t} for t in texts]
    if texts is None:
        texts = [data] if data else []
    where = f"{entry.where}['blocks']"
    content: list[Any] = []
    remaining = list(texts)
    for position, block in enumerate(layout):
        if block == "text":
            if not remaining:
                raise UnsupportedContentError(
                    f"{where}[{position}]: more text blocks than text parts"
                )
            content.append({"type": "text", "text": remaining.pop(0)})
        elif isinstance(block, dict) and isinstance(block.get("type"), str):
            content.append(block)
        else:
            raise UnsupportedContentError(
                f"{where}[{position}] must be 'text' or a block (a dict with a type)"
            )
    if remaining:
        raise UnsupportedContentError(f"{where}: fewer text blocks than text parts")
    return content


def _own_blocks(message: Message, kept: Kept) -> dict[str, list[dict[str, Any]]]:
    """The message's own blocks, by the layout entry that stands for them."""
    return {
        "text": _text_block(message, kept),
        "media": [
            _with(_media_block(media), kept.entry("media", index), MEDIA_FIELDS)
            for index, media in enumerate(message.media)
        ],
        "call": [
            _with(
                {
                    "type": "tool_use",
                    "id": call.id,
                    "name": call.name,
                    "input": _tool_input(call.arguments, call.id),
                },
                kept.entry("calls", index),
                CALL_FIELDS,
            )
            for index, call in enumerate(message.tool_calls)
        ],
        "result": [
            _result_block(message, kept, index)
            for index in range(len(message.tool_responses))
        ],
    }


def _blocks(message: Message, kept: Kept) -> list[dict[str, Any]]:
    """The message's blocks: in its kept layout's order, else the usual one."""
    if message.role is Role.TOOL and not message.tool_responses:
        raise UnsupportedContentError(
            f"tool message {message.id} has no tool response to send"
        )
    own = _own_blocks(message, kept)
    layout = kept.sequence("blocks") if kept.fields else None
    if layout is None:
        if message.role is Role.TOOL:
            return own["result"]
        text_fields = _text_fields(kept)
        order = default_layout(
            message.role,
            message.content,
            text_fields,
            len(message.media),
            len(message.tool_calls),
        )
        written = own["media"] + own["call"]
        return own["text"][: order.count("text")] + written
    where = f"{kept.where}['blocks']"
    blocks: list[dict[str, Any]] = []
    taken = dict.fromkeys(_OWN, 0)
    for position, entry in enumerate(layout):
        if isinstance(entry, str) and entry in own:
            if taken[entry] >= len(own[entry]):
                raise UnsupportedContentError(
                    f"{where}[{position}] is {entry!r}, and the message has no "
                    f"{entry} left to write there"
                )
            blocks.append(own[entry][taken[entry]])
            taken[entry] += 1
        elif isinstance(entry, dict) and isinstance(entry.get("type"), str):
            blocks.append(entry)
        else:
            raise UnsupportedContentError(
                f"{where}[{position}] must be one of {', '.join(map(repr, _OWN))} "
                "or a block kept whole (a dict with a type)"
            )
    for name, written in own.items():
        if taken[name] < len(written) and (name != "text" or message.content):
            raise UnsupportedContentError(
                f"{where} places {taken[name]} of the message's {len(written)} "
                f"{name} blocks; it must place each"
            )
    return blocks


def _system_block(message: Message, kept: Kept) -> dict[str, Any]:
    layout = kept.sequence("blocks") if kept.fields else None
    if layout is not None and layout != ["text"]:
        raise UnsupportedContentError(
            f"{kept.where}['blocks'] of a system message is ['text'], when kept"
        )
    assert message.content is not None  # the model guarantees it
    return _with({"type": "text", "text": message.content}, kept, TEXT_FIELDS)


def _as_str(message: Message, kept: Kept, blocks: list[dict[str, Any]]) -> str | None:
    """The text a turn of this message alone is written as, or ``None`` for blocks.

    A message that keeps ``string`` is written as its text (an empty one
    included); one whose only block is a text block without fields, unless
    it keeps a layout, too.
    """
    if kept.fields and kept.flag("string"):
        if (
            message.content is None
            or message.media
            or message.tool_calls
            or message.tool_responses
            or "blocks" in kept
        ):
            raise UnsupportedContentError(
                f"{kept.where}['string'] writes the message as its text alone, "
                "and it holds more than a text"
            )
        return message.content
    if kept.fields and "blocks" in kept:
        return None
    if len(blocks) == 1 and blocks[0].keys() == {"type", "text"}:
        only_text: str = blocks[0]["text"]
        return only_text
    return None


def to_anthropic(messages: Sequence[Message]) -> dict[str, Any]:
    """Convert messages to the keyword arguments ``system`` and ``messages``.

    System messages are joined (blank line between them) into ``system``,
    which is left out when there is none; when one keeps a ``cache_control``
    or ``citations`` (or was read from a list), ``system`` is a list of text
    blocks instead, one per system message. A system message read from a
    ``system`` turn of ``messages`` is written back there. Tool responses
    become ``tool_result`` blocks of a user message, tool calls ``tool_use``
    blocks with their arguments parsed into ``input``. Consecutive messages
    that land on the same role are merged into one turn, as the API requires
    alternating roles (but for a message that keeps ``new_turn``); within a
    user turn, tool results come first. A turn of one plain text is written
    as a str. A message that writes no block (no text, media or call) is
    left out. What ``metadata["anthropic"]`` keeps is written back on its
    block: ``cache_control``, a text's ``citations``, a document's
    ``title``, ``context`` and ``citations``, a tool call's ``caller``, a
    tool result's ``is_error`` and blocks, fields that came holding nothing,
    and the blocks kept whole (thinking, server tools, search results) in
    the order the message keeps.

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
    system_listed = False
    turns: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        kept = Kept.of(message, ANTHROPIC_KEY, ANTHROPIC_KEYS, f"messages[{index}]")
        in_messages = bool(kept.fields) and kept.flag("in_messages")
        if message.role is Role.SYSTEM and not in_messages:
            system.append(_system_block(message, kept))
            system_listed = system_listed or "blocks" in kept
            continue
        if in_messages and message.role is not Role.SYSTEM:
            raise UnsupportedContentError(
                f"{kept.where}['in_messages'] is kept on a system message only"
            )
        if message.role is Role.SYSTEM:
            role = "system"
            blocks = [_system_block(message, kept)]
        else:
            role = "assistant" if message.role is Role.ASSISTANT else "user"
            blocks = _blocks(message, kept)
        text = _as_str(message, kept, blocks)
        if not blocks and text is None and "blocks" not in kept:
            continue
        new_turn = bool(kept.fields) and kept.flag("new_turn")
        if turns and turns[-1]["role"] == role and not new_turn:
            turns[-1]["content"].extend(blocks)
            turns[-1]["text"] = None
        else:
            turns.append({"role": role, "content": blocks, "text": text})
    written: list[dict[str, Any]] = []
    for turn in turns:
        content: Any = turn["content"]
        if turn["text"] is not None:
            content = turn["text"]
        elif turn["role"] == "user":
            results = [b for b in content if b["type"] == "tool_result"]
            others = [b for b in content if b["type"] != "tool_result"]
            content = results + others
        written.append({"role": turn["role"], "content": content})
    request: dict[str, Any] = {"messages": written}
    if system_listed or any(block.keys() != {"type", "text"} for block in system):
        request["system"] = system
    elif system:
        request["system"] = joined([block["text"] for block in system])
    return request


def from_anthropic(request: Mapping[str, Any] | Sequence[Any]) -> list[Message]:
    """Read an Anthropic Messages request: ``{"system": ..., "messages": [...]}``.

    ``request`` is the keyword arguments of ``messages.create`` (only
    ``system`` and ``messages`` are read) or the ``messages`` list alone.
    ``system`` becomes one system message (one per block when it is a list of
    text blocks), first; a ``system`` turn of ``messages`` becomes system
    messages where it stands. In a turn, a text block starts a new message
    (but for one that so far holds only blocks kept whole, which it joins);
    image, document and ``tool_use`` blocks join the message being read; the
    ``tool_result`` blocks, first in a user turn, become one tool message,
    each response named after the ``tool_use`` it answers, the text blocks of
    a result joined by a blank line. ``tool_use`` input becomes compact JSON
    argument text. An image or PDF (base64 or URL) and a plain text document
    become media: a URL image gets the MIME type its extension names when it
    is an image's, else ``image/*``; a URL document is ``application/pdf``.

    Kept in ``metadata["anthropic"]``, so that
    ``to_anthropic(from_anthropic(request)) == request`` for every request
    the SDK's types describe that this reads (as plain dicts and lists; an
    SDK object is read by its fields that hold something):

    - the fields of each block: ``cache_control``, a text's ``citations``, a
      document's ``title``, ``context`` and ``citations``, an image's
      ``transformations``, a tool call's ``caller`` and ``toolset_name``, a
      tool result's ``is_error`` and ``toolset_name``; fields given holding
      nothing under ``empty``, and a tool result given without content
      (``absent``);
    - the blocks a message has no field for, kept whole where they stand
      (``blocks``): thinking and redacted thinking, server tool use and the
      server tools' results, search results, container uploads, images and
      documents by file id, documents of content blocks;
    - the lengths of a tool result's text blocks (``text_parts``), and its
      other blocks whole (``blocks``);
    - how the turns were written: a message that starts a turn after one of
      the same role (``new_turn``), a turn of blocks that would be written
      as a str (``blocks``), an empty str (``string``), a system message of
      a ``system`` turn (``in_messages``) or of a ``system`` list.

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
            or that a message has no place for: a block type it does not
            know, a ``tool_use`` in a user turn or a ``tool_result`` in an
            assistant turn or after another block, an empty ``system`` list,
            base64 that does not decode to the same text; a ``tool_use``
            input or kept field that is not JSON (a set, bytes, a non-str
            key, ``NaN``, an object) or nests deeper than
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
    read_system(system, reader)
    previous: str | None = None
    for index, raw in enumerate(messages):
        where = f"messages[{index}]"
        previous = read_turn(item(raw, where), where, reader, previous)
    return reader.messages()
