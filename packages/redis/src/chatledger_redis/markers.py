"""The compact per-message markers the window script reads instead of the JSON.

Example:
    from chatledger import Message
    from chatledger_redis.markers import system_marker, turn_marker

    turn_marker(Message.user("hi", id="m1"), size=3, seq=7)     # 'u:3:7:m1'
    system_marker(Message.system("Be brief."), size=4, seq=0)   # '4:0:36:<id><key>'

A non-system marker is ``<role>:<size>:<seq>:<id>``: the id comes last, so it
may hold any character. A system marker is
``<size>:<seq>:<id bytes>:<id><system key>``: the length prefix separates the
id from the :func:`chatledger.window.system_key` text, which the script
compares to decide whether a new system message equals a stored one. The
script never decodes JSON.
"""

from __future__ import annotations

from chatledger.adapters import (
    Message,
    Role,
    system_key,
)

__all__ = ["ROLE_CODES", "system_marker", "turn_marker"]

#: One letter per role; the script only tells ``u`` (a turn starts) apart.
ROLE_CODES: dict[Role, str] = {
    Role.SYSTEM: "s",
    Role.USER: "u",
    Role.ASSISTANT: "a",
    Role.TOOL: "t",
}


def turn_marker(message: Message, size: int, seq: int) -> str:
    """Return the marker of a non-system message."""
    return f"{ROLE_CODES[message.role]}:{size}:{seq}:{message.id}"


def system_marker(message: Message, size: int, seq: int) -> str:
    """Return the marker of a system message, with its :func:`system_key` text."""
    id_bytes = len(message.id.encode("utf-8"))
    return f"{size}:{seq}:{id_bytes}:{message.id}{system_key(message)}"
