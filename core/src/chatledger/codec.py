"""The one versioned JSON codec every adapter stores messages through.

Example:
    from chatledger import codec

    text = codec.to_json(message)
    assert codec.from_json(text) == message

``to_dict`` gives a dict of plain JSON values; an adapter that keeps some fields
in columns of their own (``role``, ``content``, ``id``, ``created_at``) pops them
from the dict before storing the rest, and puts them back before ``from_dict``.
Round trips are exact: bytes media (base64), integers beyond 2**53, floats,
``None`` versus ``""`` content, and any unicode including NUL (JSON escapes it,
so the stored text never holds a raw NUL).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from chatledger.errors import InvalidMessageError
from chatledger.messages import JsonValue, Media, Message, Role, ToolCall, ToolResponse

__all__ = ["CODEC_VERSION", "from_dict", "from_json", "thaw", "to_dict", "to_json"]

#: Written as ``"v"`` into every encoded message; bumped on any format change.
CODEC_VERSION = 1

# One encoder for every call: ``json.dumps`` with options builds a new one each time.
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def thaw(value: JsonValue) -> Any:
    """Turn frozen metadata back into plain ``dict`` and ``list`` values."""
    if isinstance(value, Mapping):
        return {key: thaw(item) for key, item in value.items()}
    if isinstance(value, tuple):
        return [thaw(item) for item in value]
    return value


def _media_to_dict(media: Media) -> dict[str, Any]:
    encoded: dict[str, Any] = {"mime_type": media.mime_type}
    if isinstance(media.data, bytes):
        encoded["data_b64"] = base64.b64encode(media.data).decode("ascii")
    else:
        encoded["url"] = media.data
    if media.name is not None:
        encoded["name"] = media.name
    if media.id is not None:
        encoded["id"] = media.id
    return encoded


def to_dict(message: Message) -> dict[str, Any]:
    """Encode ``message`` as a dict of JSON values (empty fields are left out)."""
    encoded: dict[str, Any] = {
        "v": CODEC_VERSION,
        "id": message.id,
        "role": message.role.value,
        "content": message.content,
    }
    if message.tool_calls:
        encoded["tool_calls"] = [
            {"id": c.id, "type": c.type, "name": c.name, "arguments": c.arguments}
            for c in message.tool_calls
        ]
    if message.tool_responses:
        encoded["tool_responses"] = [
            {"id": r.id, "name": r.name, "data": r.data} for r in message.tool_responses
        ]
    if message.media:
        encoded["media"] = [_media_to_dict(m) for m in message.media]
    if message.metadata:
        encoded["metadata"] = thaw(message.metadata)
    if message.created_at is not None:
        encoded["created_at"] = message.created_at.isoformat()
    return encoded


def _media_from_dict(data: Mapping[str, Any]) -> Media:
    if "data_b64" in data:
        try:
            payload: bytes | str = base64.b64decode(data["data_b64"], validate=True)
        except (binascii.Error, TypeError) as exc:
            raise InvalidMessageError(f"media data is not valid base64: {exc}") from exc
    else:
        payload = data["url"]
    return Media(
        mime_type=data["mime_type"],
        data=payload,
        name=data.get("name"),
        id=data.get("id"),
    )


def from_dict(data: Mapping[str, Any]) -> Message:
    """Decode a dict made by :func:`to_dict` (or read back from storage).

    Raises:
        InvalidMessageError: if the dict is not a message of a known version.
    """
    if type(data) is not dict and not isinstance(data, Mapping):
        raise InvalidMessageError(
            f"an encoded message is a dict, not {type(data).__name__}"
        )
    version = data.get("v")
    if version != CODEC_VERSION:
        raise InvalidMessageError(
            f"encoded message has codec version {version!r}; this chatledger reads "
            f"version {CODEC_VERSION}"
        )
    try:
        created = data.get("created_at")
        # Most messages have no calls, responses or media: skip building lists.
        return Message(
            role=Role(data["role"]),
            content=data["content"],
            tool_calls=[
                ToolCall(
                    id=c["id"], name=c["name"], arguments=c["arguments"], type=c["type"]
                )
                for c in data["tool_calls"]
            ]
            if "tool_calls" in data
            else (),
            tool_responses=[
                ToolResponse(id=r["id"], name=r["name"], data=r["data"])
                for r in data["tool_responses"]
            ]
            if "tool_responses" in data
            else (),
            media=[_media_from_dict(m) for m in data["media"]]
            if "media" in data
            else (),
            metadata=data.get("metadata", {}),
            id=data["id"],
            created_at=None if created is None else datetime.fromisoformat(created),
        )
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, InvalidMessageError):
            raise
        raise InvalidMessageError(f"malformed encoded message: {exc!r}") from exc


def to_json(message: Message) -> str:
    """Encode ``message`` as compact JSON text."""
    return _ENCODER.encode(to_dict(message))


def from_json(text: str | bytes) -> Message:
    """Decode JSON text made by :func:`to_json`."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise InvalidMessageError(f"encoded message is not valid JSON: {exc}") from exc
    return from_dict(data)
