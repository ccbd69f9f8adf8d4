"""The compact per-message markers the window script reads instead of the JSON.

Example:
    from chatledger import Message
    from chatledger_redis.markers import system_batch, system_marker, turn_marker

    turn_marker(Message.user("hi", id="m1"), size=3, seq=7)     # 'u:3:7:m1'
    marker = system_marker(Message.system("Be brief."), size=4, seq=5, batch=3)
    # '4:5:36:<id><key>\\n3'
    system_batch(marker)                                        # 3

A non-system marker is ``<role>:<size>:<seq>:<id>``: the id comes last, so it
may hold any character. A system marker is
``<size>:<seq>:<id bytes>:<id><system key>[\\n<batch>]``: the length prefix
separates the id from the :func:`chatledger.window.system_key` text, which the
script compares to decide whether a new system message equals a stored one.
The batch is the sequence number of the first message of the append that
stored it (:func:`chatledger.window_view.current_system`): a removal that
takes the whole current system set reads it from the newest system marker
left to find the set that is current again. It comes last, after a newline
(a system key is JSON text, which holds none), so what precedes it reads as
before; a marker without it (``save_all``, release 0.2) is of batch 0. The
script never decodes JSON.
"""

from __future__ import annotations

from chatledger.adapters import (
    Message,
    Role,
    system_key,
)

__all__ = ["ROLE_CODES", "system_batch", "system_marker", "turn_marker"]

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


def system_marker(
    message: Message, size: int, seq: int, batch: int | None = None
) -> str:
    """Return the marker of a system message, with its :func:`system_key` text.

    ``batch`` (``None`` for none: batch 0) is the number of the first message
    of the append that stored it.
    """
    id_bytes = len(message.id.encode("utf-8"))
    tag = "" if batch is None else f"\n{batch}"
    return f"{size}:{seq}:{id_bytes}:{message.id}{system_key(message)}{tag}"


def system_batch(marker: str) -> int | None:
    """The batch a system marker records, ``None`` when it records none."""
    _, newline, batch = marker.rpartition("\n")
    return int(batch) if newline else None
