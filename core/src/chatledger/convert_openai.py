"""Messages as OpenAI Chat Completions ``messages``, and back.

Use these through :mod:`chatledger.convert`, which documents what is kept in
``metadata["openai"]``.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

from chatledger.convert_extras import OPENAI_KEY, Kept
from chatledger.convert_openai_reading import (
    CHAT_FIELDS,
    EITHER,
    EMPTY_FIELDS,
    OPENAI_KEYS,
    list_default,
    read_items,
)
from chatledger.convert_shared import Reader, UnsupportedContentError, data_url
from chatledger.messages import Media, Message, Role

__all__ = ["from_openai", "to_openai", "written_role"]

_AUDIO_FORMATS = {
    "audio/wav": "wav",
    "audio/x-wav": "wav",
    "audio/wave": "wav",
    "audio/mpeg": "mp3",
    "audio/mp3": "mp3",
}


#: Each role's name as a plain str (reading an enum's value costs more).
_ROLE_NAMES = {role: role.value for role in Role}
_BREAKPOINT = "prompt_cache_breakpoint"
#: The roles kept in metadata, and the role of the message that keeps each.
_KEPT_ROLES = {"developer": Role.SYSTEM, "function": Role.TOOL}


def written_role(message: Message, kept: Kept) -> str:
    """The role a message is written with: its own, or ``"developer"`` when kept.

    Raises:
        UnsupportedContentError: a role is kept on a message that is not a
            system message, or a role other than ``"developer"`` is kept.
    """
    role = kept.text("role")
    if role is None:
        return _ROLE_NAMES[message.role]
    if _KEPT_ROLES.get(role) is not message.role:
        raise UnsupportedContentError(
            f"{kept.where}['role'] is {role!r}: the roles kept are 'developer', "
            "on a system message, and 'function', on a tool message"
        )
    return role


def _media_part(media: Media, kept: Kept) -> dict[str, Any]:
    mime = media.mime_type.lower()
    if mime.startswith("image/"):
        image: dict[str, Any] = {"url": data_url(media)}
        detail = kept.text("detail")
        if detail is not None:
            image["detail"] = detail
        return {"type": "image_url", "image_url": image}
    if isinstance(media.data, bytes):
        if mime in _AUDIO_FORMATS:
            return {
                "type": "input_audio",
                "input_audio": {
                    "data": base64.b64encode(media.data).decode("ascii"),
                    "format": _AUDIO_FORMATS[mime],
                },
            }
        file: dict[str, Any] = {"file_data": data_url(media)}
        if media.name is not None:
            file["filename"] = media.name
        return {"type": "file", "file": file}
    raise UnsupportedContentError(
        f"OpenAI chat messages take images by URL, other files ({media.mime_type}) "
        "only as inline data; this media is the URL "
        f"{media.data[:80]!r}"
    )


def _media_part_kept(media: Media, kept: Kept) -> dict[str, Any]:
    """A media part with the ``prompt_cache_breakpoint`` it keeps."""
    part = _media_part(media, kept)
    part.update(kept.copy([_BREAKPOINT]))
    return part


def _content(message: Message, kept: Kept) -> Any:
    """The ``content``: the text, or parts when there are media or kept parts."""
    texts = kept.parts("text_parts", message.content)
    layout = kept.sequence("parts")
    if layout is not None:
        if texts is None:
            texts = [message.content] if message.content else []
        return _laid_out(message, kept, texts, layout)
    if texts is None:
        texts = list_default(
            message.role, message.content, len(message.media), kept.fields, chat=True
        )
    if texts is None:
        return message.content
    parts = _text_parts(texts, kept)
    parts.extend(
        _media_part_kept(media, kept.entry("media", index))
        for index, media in enumerate(message.media)
    )
    return parts


def _text_parts(texts: list[str], kept: Kept) -> list[dict[str, Any]]:
    """Text parts, each with the ``prompt_cache_breakpoint`` kept for it."""
    parts: list[dict[str, Any]] = [{"type": "text", "text": t} for t in texts]
    marks = kept.sequence(_BREAKPOINT) if kept.fields else None
    if marks is None:
        return parts
    if len(marks) != len(parts):
        raise UnsupportedContentError(
            f"{kept.where}[{_BREAKPOINT!r}] holds {len(marks)} entries for "
            f"{len(parts)} text parts; it must hold one each"
        )
    for part, mark in zip(parts, marks, strict=True):
        if mark is not None:
            part[_BREAKPOINT] = mark
    return parts


def _laid_out(
    message: Message, kept: Kept, texts: list[str], layout: list[Any]
) -> list[dict[str, Any]]:
    """The content parts in the order ``layout`` (kept under ``"parts"``) gives."""
    where = f"{kept.where}['parts']"
    own: dict[str, list[dict[str, Any]]] = {
        "text": _text_parts(texts, kept),
        "media": [
            _media_part_kept(media, kept.entry("media", index))
            for index, media in enumerate(message.media)
        ],
        "refusal": [],
    }
    refusal = kept.text("refusal")
    if refusal is not None:
        own["refusal"].append({"type": "refusal", "refusal": refusal})
    parts: list[dict[str, Any]] = []
    taken = dict.fromkeys(own, 0)
    for position, entry in enumerate(layout):
        if isinstance(entry, str) and entry in own:
            if taken[entry] >= len(own[entry]):
                raise UnsupportedContentError(
                    f"{where}[{position}] is {entry!r}, and the message has no "
                    f"{entry} part left to write there"
                )
            parts.append(own[entry][taken[entry]])
            taken[entry] += 1
        elif isinstance(entry, dict) and isinstance(entry.get("type"), str):
            parts.append(entry)
        else:
            raise UnsupportedContentError(
                f"{where}[{position}] must be 'text', 'media', 'refusal' or a "
                "part kept whole (a dict with a type)"
            )
    for name, written in own.items():
        if taken[name] < len(written) and name != "refusal":
            raise UnsupportedContentError(
                f"{where} places {taken[name]} of the message's {len(written)} "
                f"{name} parts; it must place each"
            )
    return parts


def _message(message: Message, kept: Kept) -> dict[str, Any]:
    if message.role is Role.ASSISTANT and message.media:
        raise UnsupportedContentError(
            "OpenAI chat messages cannot carry media on an assistant message "
            f"(message {message.id})"
        )
    converted: dict[str, Any] = {
        "role": written_role(message, kept),
        "content": _content(message, kept),
    }
    if not kept.fields:
        if message.tool_calls:
            converted["tool_calls"] = _tool_calls(message, kept)
        return converted
    if "content" in kept.absent(["content"]):
        if converted["content"] is not None:
            raise UnsupportedContentError(
                f"{kept.where}['absent'] leaves out the content of a message "
                "that has some"
            )
        del converted["content"]
    name = kept.text("name")
    if name is not None:
        converted["name"] = name
    refusal = kept.text("refusal")
    if refusal is not None:
        if message.role is not Role.ASSISTANT:
            raise UnsupportedContentError(
                f"{kept.where}['refusal']: only an assistant message refuses"
            )
        if "refusal" not in (kept.sequence("parts") or ()):
            converted["refusal"] = refusal
    for name in CHAT_FIELDS:
        value = kept.value(name)
        if value is None:
            continue
        if message.role is not Role.ASSISTANT or not isinstance(value, dict):
            raise UnsupportedContentError(
                f"{kept.where}[{name!r}] is kept whole, a dict, on an assistant message"
            )
        converted[name] = value
    if message.tool_calls:
        converted["tool_calls"] = _tool_calls(message, kept)
    converted.update(kept.empty(EMPTY_FIELDS))
    return converted


def _tool_calls(message: Message, kept: Kept) -> list[dict[str, Any]]:
    """The calls, each as it was spelled: a custom tool's input under ``custom``
    when it came so, else ``function`` as for any call."""
    calls = []
    for index, call in enumerate(message.tool_calls):
        spelled = kept.entry("calls", index).text("spelled")
        if spelled is not None and (spelled != "custom" or call.type != "custom"):
            raise UnsupportedContentError(
                f"{kept.where}['calls'][{index}]['spelled'] is {spelled!r}; it is "
                "kept only as 'custom', on a custom tool call"
            )
        if spelled is not None:
            body = {"custom": {"name": call.name, "input": call.arguments}}
        else:
            body = {"function": {"name": call.name, "arguments": call.arguments}}
        calls.append({"id": call.id, "type": call.type, **body})
    return calls


def _tool_messages(message: Message, kept: Kept) -> list[dict[str, Any]]:
    if written_role(message, kept) == "function":
        name = kept.text("name")
        if message.tool_responses or name is None:
            raise UnsupportedContentError(
                f"{kept.where}['role'] is 'function': a function message has a "
                "name kept and no tool response"
            )
        return [{"role": "function", "name": name, "content": message.content}]
    if not message.tool_responses:
        raise UnsupportedContentError(
            f"tool message {message.id} has no tool response, so it has no "
            "tool_call_id to send"
        )
    written_role(message, kept)
    if kept.text("name") is not None:
        raise UnsupportedContentError(
            f"{kept.where}['name']: a tool message has no participant name"
        )
    converted = []
    for index, response in enumerate(message.tool_responses):
        entry = kept.entry("outputs", index)
        texts = entry.parts("text_parts", response.data)
        content: Any = response.data
        if texts is not None:
            content = _text_parts(texts, entry)
        converted.append(
            {"role": "tool", "tool_call_id": response.id, "content": content}
        )
    return converted


def to_openai(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Convert messages to the OpenAI chat-completions ``messages`` list.

    A system message becomes ``{"role": "system", "content": ...}`` (or
    ``"developer"``, kept from :func:`from_openai`); a user message with media
    gets content parts (``image_url`` for images, by URL or as a ``data:``
    URL, with the ``detail`` kept; ``input_audio`` for WAV and MP3 bytes;
    ``file`` for other bytes); an assistant message keeps ``content`` (``None``
    included), its ``refusal`` and its ``tool_calls`` with the exact argument
    text; a tool message becomes one ``{"role": "tool", "tool_call_id": ...,
    "content": ...}`` per response, in order (a ``function`` message when it
    keeps that role). What ``metadata["openai"]`` keeps is written as it was
    read: a participant ``name``, text parts and the order of all parts,
    parts kept whole (a file by id), ``prompt_cache_breakpoint`` of each
    part, an assistant's ``audio`` and ``function_call``, a custom tool
    call's spelling, fields that came holding nothing and a content that
    did not come.

    Not sent: what only the Responses shape carries (reasoning items, item
    ids, ``status`` and ``phase``, annotations and logprobs, the fields of
    call and output items, a file's ``detail``), a tool message's own
    ``content``, and a media ``name`` (but a file's) or ``id``.

    Raises:
        UnsupportedContentError: for media the API cannot take (a non-image
            URL, media on an assistant message), a tool message without tool
            responses, and ``metadata["openai"]`` that does not fit the
            message (a key it does not hold, a value of the wrong type, text
            part lengths that do not cut its text), naming the message by its
            index.
    """
    converted: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        kept = Kept.of(message, OPENAI_KEY, OPENAI_KEYS, f"messages[{index}]")
        if message.role is Role.TOOL:
            converted.extend(_tool_messages(message, kept))
        else:
            converted.append(_message(message, kept))
    return converted


def from_openai(messages: Sequence[Any]) -> list[Message]:
    """Read OpenAI messages: Chat Completions ``messages`` or Responses ``input``.

    Chat Completions messages (``system``, ``developer``, ``user``,
    ``assistant`` with ``tool_calls``, ``tool``) and the Responses items that
    :func:`from_openai_responses` reads may come mixed, as dicts or as SDK
    objects. Text parts are joined by a blank line into ``content``; images
    (URL or ``data:`` URL, which gives bytes), WAV and MP3 audio and inline
    files become media, text first; a URL image gets the MIME type its
    extension names, else ``image/*``. Consecutive tool messages become one
    tool message, each response named after the call it answers. A message
    ``id`` (Responses) becomes the message's id.

    Kept in ``metadata["openai"]`` (so :func:`to_openai` writes them back):
    a ``developer`` role (the message is a system message, for the window's
    rules too), a participant ``name``, an assistant's ``refusal``, ``audio``
    and ``function_call``, each image's ``detail``, each part's
    ``prompt_cache_breakpoint``, the lengths of the text parts of a content
    that came as a list (of a tool message's content too) unless they are
    what ``to_openai`` writes by itself, the order of the parts when it is
    not text then media, a ``file`` part that is not inline data (a file by
    id) whole in its place, a custom tool call spelled with ``custom``,
    fields given holding nothing (``"empty"``) and an assistant's content
    not given (``"absent"``). A deprecated ``function`` message becomes a
    tool message without tool responses, its content the message's, keeping
    its role and name.

    The round trip ``to_openai(from_openai(messages)) == messages`` holds for
    every Chat Completions message list the SDK's types describe, given as
    dicts and lists (an SDK object is read by its fields that hold
    something), but for what is refused below. The round trip
    ``from_openai(to_openai(history)) == history`` holds for every history
    ``to_openai`` takes whose messages' metadata holds at most what
    ``from_openai`` keeps (nothing that only the Responses shape carries),
    whose tool messages have no content and no tool message next to them,
    whose tool responses are named after their calls, and whose media are
    images (by URL with a MIME type its extension names), ``audio/wav`` and
    ``audio/mpeg`` bytes, or other bytes, without ``name`` or ``id`` but for
    the ``name`` of a file.

    Raises:
        UnsupportedContentError: naming the item and field (e.g.
            ``messages[2].content[0].image_url.file_id``) that is malformed or
            that a message has no place for: item types other than message,
            call, output and reasoning items; audio formats but WAV and MP3;
            base64 that does not encode back to the same text; media in a
            tool output or in a system or assistant message; and any value of
            the wrong type, however large or deeply nested.
        InvalidMessageError: a message made of the items breaks a rule of
            :class:`~chatledger.Message` (an ``id`` that is not a printable
            str, say).
    """
    reader = Reader(OPENAI_KEY)
    read_items(messages, "messages", reader, EITHER)
    return reader.messages()
