"""Messages as OpenAI Responses input items, and back.

Use these through :mod:`chatledger.convert`, which documents what is kept in
``metadata["openai"]``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from chatledger.convert_extras import OPENAI_KEY, Kept
from chatledger.convert_openai import written_role
from chatledger.convert_openai_reading import (
    CALL_FIELDS,
    CHAT_FIELDS,
    DEFAULT_IMAGE_DETAIL,
    OPENAI_KEYS,
    OUTPUT_FIELDS,
    RESPONSES,
    list_default,
    output_kind,
    read_items,
)
from chatledger.convert_shared import Reader, UnsupportedContentError, data_url
from chatledger.messages import Media, Message, Role, ToolCall

__all__ = ["from_openai_responses", "to_openai_responses"]

_OUTPUT_KINDS = ("function_call_output", "custom_tool_call_output")
#: What makes an assistant message write a message item though it has no text.
_MESSAGE_ITEM_KEPT = ("id", "status", "phase", "refusal", "annotations", "logprobs")


def _media_part(media: Media, kept: Kept) -> dict[str, Any]:
    """``input_image`` (the ``detail`` kept, else ``"auto"``) or ``input_file``."""
    detail = kept.text("detail")
    if media.mime_type.lower().startswith("image/"):
        return {
            "type": "input_image",
            "image_url": data_url(media),
            "detail": DEFAULT_IMAGE_DETAIL if detail is None else detail,
        }
    part: dict[str, Any] = {"type": "input_file"}
    if isinstance(media.data, bytes):
        part["file_data"] = data_url(media)
    else:
        part["file_url"] = media.data
    if media.name is not None:
        part["filename"] = media.name
    if detail is not None:
        part["detail"] = detail
    return part


def _texts(message: Message, kept: Kept) -> list[str] | None:
    """The text parts to write, or ``None`` to write the text as a str."""
    texts = kept.parts("text_parts", message.content)
    if texts is not None:
        return texts
    return list_default(
        message.role, message.content, len(message.media), kept.fields, chat=False
    )


def _item(role: str, content: Any, kept: Kept) -> dict[str, Any]:
    """A message item: typed, with its id and status, when it keeps them."""
    converted: dict[str, Any] = {}
    if "id" in kept or "status" in kept:
        converted["type"] = "message"
    converted.update(kept.copy(["id"]))
    converted["role"] = role
    converted["content"] = content
    converted.update(kept.copy(["status", "phase"]))
    return converted


def _input_message(message: Message, kept: Kept) -> dict[str, Any]:
    if kept.text("refusal") is not None:
        raise UnsupportedContentError(
            f"{kept.where}['refusal']: only an assistant message refuses"
        )
    role = written_role(message, kept)
    texts = _texts(message, kept)
    content: Any = message.content
    if texts is not None:
        content = [{"type": "input_text", "text": t} for t in texts]
        content.extend(
            _media_part(media, kept.entry("media", index))
            for index, media in enumerate(message.media)
        )
    return _item(role, content, kept)


def _per_part(kept: Kept, name: str, count: int) -> list[Any]:
    values = kept.sequence(name)
    if values is None:
        return [None] * count
    if len(values) != count:
        raise UnsupportedContentError(
            f"{kept.where}[{name!r}] holds {len(values)} entries for {count} "
            "text parts; it must hold one each"
        )
    return values


def _assistant_items(message: Message, kept: Kept, where: str) -> list[dict[str, Any]]:
    if message.media:
        raise UnsupportedContentError(
            f"{where}.media: a Responses assistant message carries no media"
        )
    written_role(message, kept)
    reasoning = kept.sequence("reasoning") or []
    for index, entry in enumerate(reasoning):
        if not isinstance(entry, Mapping) or entry.get("type") != "reasoning":
            raise UnsupportedContentError(
                f"{kept.where}['reasoning'][{index}] must be a reasoning item, "
                "a dict with type 'reasoning'"
            )
    items: list[dict[str, Any]] = list(reasoning)
    if message.content is not None or any(n in kept for n in _MESSAGE_ITEM_KEPT):
        texts = _texts(message, kept)
        content: Any = message.content
        if texts is not None:
            annotations = _per_part(kept, "annotations", len(texts))
            logprobs = _per_part(kept, "logprobs", len(texts))
            content = []
            for text, notes, probs in zip(texts, annotations, logprobs, strict=True):
                part: dict[str, Any] = {
                    "type": "output_text",
                    "text": text,
                    "annotations": notes or [],
                }
                if probs is not None:
                    part["logprobs"] = probs
                content.append(part)
            refusal = kept.text("refusal")
            if refusal is not None:
                content.append({"type": "refusal", "refusal": refusal})
        items.append(_item("assistant", content, kept))
    for index, call in enumerate(message.tool_calls):
        items.append(_call_item(call, kept.entry("calls", index), where, index))
    return items


def _call_item(call: ToolCall, kept: Kept, where: str, index: int) -> dict[str, Any]:
    if call.type == "function":
        converted = {
            "type": "function_call",
            "call_id": call.id,
            "name": call.name,
            "arguments": call.arguments,
        }
    elif call.type == "custom":
        converted = {
            "type": "custom_tool_call",
            "call_id": call.id,
            "name": call.name,
            "input": call.arguments,
        }
    else:
        raise UnsupportedContentError(
            f"{where}.tool_calls[{index}]: a tool call of type {call.type!r} has "
            "no Responses item (function and custom calls have)"
        )
    converted.update(kept.copy(CALL_FIELDS))
    return converted


def _output_items(
    message: Message, kept: Kept, where: str, calls: Mapping[str, ToolCall]
) -> list[dict[str, Any]]:
    if not message.tool_responses:
        raise UnsupportedContentError(
            f"{where}: a tool message without tool responses has no call_id to send"
        )
    written_role(message, kept)
    items = []
    for index, response in enumerate(message.tool_responses):
        entry = kept.entry("outputs", index)
        kind = entry.text("type") or output_kind(calls.get(response.id))
        if kind not in _OUTPUT_KINDS:
            raise UnsupportedContentError(
                f"{entry.where}['type'] is {kind!r}, not an output item type "
                f"({' or '.join(_OUTPUT_KINDS)})"
            )
        texts = entry.parts("text_parts", response.data)
        output: Any = response.data
        if texts is not None:
            output = [{"type": "input_text", "text": t} for t in texts]
        converted = {"type": kind, "call_id": response.id, "output": output}
        converted.update(entry.copy(OUTPUT_FIELDS))
        items.append(converted)
    return items


def _refuse_chat_only(kept: Kept) -> None:
    """Refuse what only a Chat Completions message carries and would be lost.

    How its content was spelled (the order of its parts, fields given
    holding nothing) is not sent, as the Responses shape spells its own.
    """
    if not kept.fields:
        return
    for name in CHAT_FIELDS:
        if name in kept:
            raise UnsupportedContentError(
                f"{kept.where}[{name!r}]: the Responses API has no place for a "
                f"Chat Completions {name} (Chat Completions has)"
            )
    for index, part in enumerate(kept.sequence("parts") or ()):
        if isinstance(part, Mapping):
            raise UnsupportedContentError(
                f"{kept.where}['parts'][{index}]: the Responses API has no place "
                "for a Chat Completions part kept whole (a file by id, say)"
            )


def to_openai_responses(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Convert messages to the OpenAI Responses ``input`` item list.

    A system or user message becomes ``{"role": ..., "content": ...}`` (role
    ``system``, or ``developer`` when kept so), its text a str, or
    ``input_text``, ``input_image`` and ``input_file`` parts when it has
    media; it is a typed ``{"type": "message", ...}`` item with its ``id``
    and ``status`` when it keeps them. An assistant message becomes the
    reasoning items it keeps, then a message item (an output message, with
    ``output_text`` parts and a ``refusal`` part, when it keeps an ``id``,
    a refusal, annotations or logprobs), then one ``function_call`` or
    ``custom_tool_call`` item per tool call, with the fields each call keeps
    (``id``, ``status``...). A tool message becomes one
    ``function_call_output`` item per response (``custom_tool_call_output``
    when it answers a custom call of the messages before it). An image gets
    the ``detail`` it keeps, else ``"auto"``, which the API requires.

    Left out: an assistant message with no text, no tool call and nothing
    kept (an empty answer), a tool message's own ``content``, and a media
    ``name`` (but a file's) or ``id``.

    Raises:
        UnsupportedContentError: naming the message by its index, for what
            the shape has no place for: a participant ``name``, media on an
            assistant message, a tool call whose type is neither
            ``function`` nor ``custom``, a tool message without responses;
            and ``metadata["openai"]`` that does not fit the message.
    """
    items: list[dict[str, Any]] = []
    calls: dict[str, ToolCall] = {}
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        kept = Kept.of(message, OPENAI_KEY, OPENAI_KEYS, where)
        if kept.text("name") is not None:
            raise UnsupportedContentError(
                f"{kept.where}['name']: the Responses API has no participant "
                "name (Chat Completions has)"
            )
        _refuse_chat_only(kept)
        if message.role is Role.ASSISTANT:
            items.extend(_assistant_items(message, kept, where))
            calls.update((call.id, call) for call in message.tool_calls)
        elif message.role is Role.TOOL:
            items.extend(_output_items(message, kept, where, calls))
        else:
            items.append(_input_message(message, kept))
    return items


def from_openai_responses(items: Sequence[Any]) -> list[Message]:
    """Read an OpenAI Responses ``input`` list (or a response's ``output``).

    Items may be dicts or SDK objects. A message item (``type: "message"``
    or none) of role ``system``, ``developer``, ``user`` or ``assistant``
    becomes a message of that role (``developer`` a system message, for the
    window's rules too); its ``input_text`` and ``output_text`` parts are
    joined by a blank line into ``content``; ``input_image`` and
    ``input_file`` parts (a URL or a ``data:`` URL, which gives bytes) become
    media of a user message, after the text. A ``reasoning`` item, a
    ``message`` item of the assistant and the ``function_call`` and
    ``custom_tool_call`` items after it make one assistant message, in that
    order; consecutive ``function_call_output`` and
    ``custom_tool_call_output`` items make one tool message, each response
    named after the call it answers (or the ``name`` the item gives).

    Kept in ``metadata["openai"]``, so :func:`to_openai_responses` writes
    them back: a ``developer`` role; an item's ``id`` (also the message's
    id), ``status`` and ``phase``; a ``refusal`` part; the annotations and
    logprobs of ``output_text`` parts; each image's ``detail`` but
    ``"auto"``, each file's; the lengths of the text parts when they are not
    what ``to_openai_responses`` writes by itself (of an output too); the
    reasoning items, whole; and per call and output item its other fields
    (``id``, ``status``, ``namespace``, ``caller``...). Fields that hold
    ``None`` or nothing are not kept.

    The round trip ``to_openai_responses(from_openai_responses(items)) ==
    items`` holds for items written as ``to_openai_responses`` writes them:
    without fields that hold ``None`` or nothing (but an ``output_text``'s
    ``annotations``), text parts before media, an image's ``detail`` given,
    a URL image named by the extension of its URL, a ``refusal`` part after
    the text, the ``type`` of an input message given exactly when it has an
    ``id`` or ``status``, and an assistant's items in the order reasoning,
    message, calls. The round trip ``from_openai_responses(
    to_openai_responses(history)) == history`` holds for every history it
    takes whose messages' metadata holds at most what this function keeps
    (no participant ``name``); whose assistant messages have text, a tool
    call or something kept, and, when they are tool calls alone (no text,
    no reasoning, no item fields), do not follow another assistant message,
    whose calls they would join; whose tool messages have no content and no
    tool message next to them; whose tool responses are named after their
    calls; and whose media are images or files (bytes, or a URL naming their
    MIME type by its extension, ``application/octet-stream`` for a file),
    without ``name`` or ``id`` but for the ``name`` of a file.

    Raises:
        UnsupportedContentError: naming the item by its index and the key
            (e.g. ``items[3].content[1].file_id``) that is malformed or that a
            message has no place for: other item types (hosted tool calls,
            item references, compaction items...); Chat Completions fields
            and parts (``name``, ``tool_calls``, the ``tool`` role,
            ``image_url`` parts); a file or image by ``file_id``; media in a
            tool output or outside a user message; ``prompt_cache_breakpoint``;
            a value that is not JSON where JSON is kept; and any value of the
            wrong type, however large or deeply nested.
        InvalidMessageError: a message made of the items breaks a rule of
            :class:`~chatledger.Message` (an ``id`` that is not a printable
            str, say).
    """
    reader = Reader(OPENAI_KEY)
    read_items(items, "items", reader, RESPONSES)
    return reader.messages()
