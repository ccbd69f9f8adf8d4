"""Turn stored messages into the request shapes of model APIs.

Example:
    from chatledger import Message
    from chatledger.convert import to_anthropic, to_openai

    history = [Message.system("Be brief."), Message.user("Weather in Rome?")]
    to_openai(history)     # for chat.completions.create(model=..., messages=...)
    to_anthropic(history)  # for messages.create(model=..., max_tokens=512, **...)

Both converters are pure and lossless for what the target API can carry. What
a target has no place for is said here, never dropped at random: ``id``,
``created_at`` and ``metadata`` are storage fields and are not sent; the
``content`` of a tool message that carries tool responses is not sent either
(the responses are what the model reads). Anything else the target cannot
carry raises :class:`UnsupportedContentError` instead of being dropped.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any

from chatledger.errors import ChatLedgerError
from chatledger.messages import Media, Message, Role

__all__ = ["UnsupportedContentError", "to_anthropic", "to_openai"]

_OPENAI_AUDIO = {
    "audio/wav": "wav",
    "audio/x-wav": "wav",
    "audio/wave": "wav",
    "audio/mpeg": "mp3",
    "audio/mp3": "mp3",
}


class UnsupportedContentError(ChatLedgerError, ValueError):
    """A message holds something the target API has no place for."""


def _data_url(media: Media) -> str:
    if isinstance(media.data, str):
        return media.data
    encoded = base64.b64encode(media.data).decode("ascii")
    return f"data:{media.mime_type};base64,{encoded}"


def _openai_part(media: Media) -> dict[str, Any]:
    mime = media.mime_type.lower()
    if mime.startswith("image/"):
        return {"type": "image_url", "image_url": {"url": _data_url(media)}}
    if isinstance(media.data, bytes):
        if mime in _OPENAI_AUDIO:
            return {
                "type": "input_audio",
                "input_audio": {
                    "data": base64.b64encode(media.data).decode("ascii"),
                    "format": _OPENAI_AUDIO[mime],
                },
            }
        file: dict[str, Any] = {"file_data": _data_url(media)}
        if media.name is not None:
            file["filename"] = media.name
        return {"type": "file", "file": file}
    raise UnsupportedContentError(
        f"OpenAI chat messages take images by URL, other files ({media.mime_type}) "
        "only as inline data; this media is the URL "
        f"{media.data[:80]!r}"
    )


def _openai_user(message: Message) -> dict[str, Any]:
    if not message.media:
        return {"role": "user", "content": message.content}
    parts: list[dict[str, Any]] = []
    if message.content:
        parts.append({"type": "text", "text": message.content})
    parts.extend(_openai_part(m) for m in message.media)
    return {"role": "user", "content": parts}


def _openai_assistant(message: Message) -> dict[str, Any]:
    if message.media:
        raise UnsupportedContentError(
            "OpenAI chat messages cannot carry media on an assistant message "
            f"(message {message.id})"
        )
    converted: dict[str, Any] = {"role": "assistant", "content": message.content}
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


def to_openai(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Convert messages to the OpenAI chat-completions ``messages`` list.

    A system message becomes ``{"role": "system", "content": ...}``; a user
    message with media gets content parts (``image_url`` for images, by URL or
    as a ``data:`` URL, ``input_audio`` for WAV and MP3 bytes, ``file`` for
    other bytes); an assistant message keeps ``content`` (``None`` included)
    and its ``tool_calls`` with the exact argument text; a tool message becomes
    one ``{"role": "tool", "tool_call_id": ..., "content": ...}`` per response,
    in order.

    Raises:
        UnsupportedContentError: for media the API cannot take (a non-image
            URL, media on an assistant message) and for a tool message without
            tool responses.
    """
    converted: list[dict[str, Any]] = []
    for message in messages:
        if message.role is Role.SYSTEM:
            converted.append({"role": "system", "content": message.content})
        elif message.role is Role.USER:
            converted.append(_openai_user(message))
        elif message.role is Role.ASSISTANT:
            converted.append(_openai_assistant(message))
        else:
            if not message.tool_responses:
                raise UnsupportedContentError(
                    f"tool message {message.id} has no tool response, so it has no "
                    "tool_call_id to send"
                )
            converted.extend(
                {"role": "tool", "tool_call_id": response.id, "content": response.data}
                for response in message.tool_responses
            )
    return converted


def _anthropic_source(media: Media) -> dict[str, Any]:
    if isinstance(media.data, str):
        return {"type": "url", "url": media.data}
    return {
        "type": "base64",
        "media_type": media.mime_type,
        "data": base64.b64encode(media.data).decode("ascii"),
    }


def _anthropic_media(media: Media) -> dict[str, Any]:
    mime = media.mime_type.lower()
    if mime.startswith("image/"):
        return {"type": "image", "source": _anthropic_source(media)}
    if mime == "application/pdf":
        return {"type": "document", "source": _anthropic_source(media)}
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
        value = json.loads(arguments) if arguments.strip() else {}
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


def _anthropic_blocks(message: Message) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if message.role is Role.TOOL:
        if not message.tool_responses:
            raise UnsupportedContentError(
                f"tool message {message.id} has no tool response to send"
            )
        return [
            {"type": "tool_result", "tool_use_id": r.id, "content": r.data}
            for r in message.tool_responses
        ]
    if message.content:
        blocks.append({"type": "text", "text": message.content})
    blocks.extend(_anthropic_media(m) for m in message.media)
    blocks.extend(
        {
            "type": "tool_use",
            "id": call.id,
            "name": call.name,
            "input": _tool_input(call.arguments, call.id),
        }
        for call in message.tool_calls
    )
    return blocks


def to_anthropic(messages: Sequence[Message]) -> dict[str, Any]:
    """Convert messages to the keyword arguments ``system`` and ``messages``.

    System messages are joined (blank line between them) into ``system``,
    which is left out when there is none. Tool responses become
    ``tool_result`` blocks of a user message, tool calls ``tool_use`` blocks
    with their arguments parsed into ``input``. Consecutive messages that land
    on the same role are merged into one message, as the API requires
    alternating roles; within a user message, tool results come first. An
    empty assistant message (no text, no call) is left out.

    Raises:
        UnsupportedContentError: for media the API cannot take, tool-call
            arguments that are not a JSON object, and a tool message without
            tool responses.
    """
    system: list[str] = []
    turns: list[dict[str, Any]] = []
    for message in messages:
        if message.role is Role.SYSTEM:
            assert message.content is not None  # the model guarantees it
            system.append(message.content)
            continue
        role = "assistant" if message.role is Role.ASSISTANT else "user"
        blocks = _anthropic_blocks(message)
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
    if system:
        request["system"] = "\n\n".join(system)
    return request
