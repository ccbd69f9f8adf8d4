"""The compact per-message markers the window script reads instead of the JSON.

Example:
    from chatledger import Message
    from chatledger_redis.markers import system_marker, turn_marker

    turn_marker(Message.user("hi", id="m1"), size=3, seq=7)     # 'u:3:7:m1'
    system_marker(Message.system("Be brief."), size=4, seq=0)   # '4:0:36:<id><canon>'

A non-system marker is ``<role>:<size>:<seq>:<id>``: the id comes last, so it
may hold any character. A system marker is
``<size>:<seq>:<id bytes>:<id><canonical text>``: the length prefix separates
the id from the canonical text, which the script compares to decide whether a
new system message equals a stored one. The script never decodes JSON.
"""

from __future__ import annotations

import json
from typing import Any

from chatledger import codec
from chatledger.messages import Message, Role

__all__ = ["ROLE_CODES", "canonical_text", "system_marker", "turn_marker"]

#: One letter per role; the script only tells ``u`` (a turn starts) apart.
ROLE_CODES: dict[Role, str] = {
    Role.SYSTEM: "s",
    Role.USER: "u",
    Role.ASSISTANT: "a",
    Role.TOOL: "t",
}


def _normalise(value: Any) -> Any:
    # Python equality says True == 1 == 1.0; JSON text does not. Integral
    # numbers are written as ints so equal messages get equal text.
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: _normalise(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_normalise(item) for item in value]
    return value


def canonical_text(message: Message) -> str:
    """Return a text that two messages share exactly when they are equal.

    It is the codec's encoding without the fields that take no part in
    equality (``id``, ``created_at``) nor the codec version, with sorted keys
    and numbers normalised the way Python compares them.
    """
    encoded = codec.to_dict(message)
    for field in ("v", "id", "created_at"):
        encoded.pop(field, None)
    return json.dumps(
        _normalise(encoded), ensure_ascii=False, separators=(",", ":"), sort_keys=True
    )


def turn_marker(message: Message, size: int, seq: int) -> str:
    """Return the marker of a non-system message."""
    return f"{ROLE_CODES[message.role]}:{size}:{seq}:{message.id}"


def system_marker(message: Message, size: int, seq: int) -> str:
    """Return the marker of a system message, with its canonical text."""
    id_bytes = len(message.id.encode("utf-8"))
    return f"{size}:{seq}:{id_bytes}:{message.id}{canonical_text(message)}"
