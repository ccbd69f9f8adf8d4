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
    EITHER,
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


def written_role(message: Message, kept: Kept) -> str:
    """The role a message is written with: its own, or ``"developer"`` when kept.

    Raises:
        UnsupportedContentError: a role is kept on a message that is not a
            system message, or a role other than ``"developer"`` is kept.
    """
    role = kept.text("role")
    if role is None:
        return _ROLE_NAMES[message.role]
    if message.role is not Role.SYSTEM or role != "developer":
        raise UnsupportedContentError(
            f"{kept.where}['role'] is {role!r}: the only role kept is "
            "'developer', on a system message"
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


def _content(message: Message, kept: Kept) -> Any:
    """The ``content``: the text, or parts when there are media or kept parts."""
    texts = kept.parts("text_parts", message.content)
    if texts is None:
        texts = list_default(
            message.role, message.content, len(message.media), kept.fields, chat=True
        )
    if texts is None:
        return message.content
    parts: list[dict[str, Any]] = [{"type": "text", "text": t} for t in texts]
    parts.extend(
        _media_part(media, kept.entry("media", index))
        for index, media in enumerate(message.media)
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
    name = kept.text("name")
    if name is not None:
        converted["name"] = name
    refusal = kept.text("refusal")
    if refusal is not None:
        if message.role is not Role.ASSISTANT:
            raise UnsupportedContentError(
                f"{kept.where}['refusal']: only an assistant message refuses"
            )
        converted["refusal"] = refusal
    if message.tool_calls:
        converted["tool_calls"] = [
            {
                "id": call.id,
                "type": call.type,
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in message.tool_calls
        ]
    return converted


def _tool_messages(message: Message, kept: Kept) -> list[dict[str, Any]]:
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
        texts = kept.entry("outputs", index).parts("text_parts", response.data)
        content: Any = response.data
        if texts is not None:
            content = [{"type": "text", "text": t} for t in texts]
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
    "content": ...}`` per response, in order. A participant ``name`` and text
    parts kept in ``metadata["openai"]`` are written as they were read.

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
    rules too), a participant ``name``, an assistant's ``refusal``, each
    image's ``detail``, and the lengths of the text parts of a content that
    came as a list (of a tool message's content too) unless they are what
    ``to_openai`` writes by itself.

    The round trip ``to_openai(from_openai(messages)) == messages`` holds for
    Chat Completions messages written as ``to_openai`` writes them: without
    ``None`` fields, tool calls of type ``function`` or ``custom`` spelled
    ``{"id", "type", "function"}``, a user message's text parts before its
    media, a URL image named by the extension of its URL, and a refusal as
    the ``refusal`` field. The round trip
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
            call, output and reasoning items; the old ``function`` role and
            ``function_call``; an assistant's ``audio``; a file by
            ``file_id``; other audio formats; media in a tool output or in a
            system or assistant message; ``prompt_cache_breakpoint``; and any
            value of the wrong type, however large or deeply nested.
        InvalidMessageError: a message made of the items breaks a rule of
            :class:`~chatledger.Message` (an ``id`` that is not a printable
            str, say).
    """
    reader = Reader(OPENAI_KEY)
    read_items(messages, "messages", reader, EITHER)
    return reader.messages()
