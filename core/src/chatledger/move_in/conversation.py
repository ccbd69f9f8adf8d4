"""What a source reader hands over: one conversation, read whole, and what it left out.

Example:
    from chatledger import Message
    from chatledger.move_in.conversation import (
        SourceConversation,
        Uncarriable,
        stable_id,
    )

    conversation = SourceConversation("c1")
    conversation.add(Message.user("Hi", id=stable_id("demo", "c1", 0)), "row 1")
    conversation.refuse("row 2", "type 'FUNCTION' is none of USER, ASSISTANT, SYSTEM")
    conversation.messages        # the message of row 1
    conversation.uncarriable     # [Uncarriable('row 2', "type 'FUNCTION' ...")]

A reader turns each row (or each item of a file) into one message, or into an
:class:`Uncarriable` that says why it cannot be one; nothing is left out
without a word. The ids of the messages are made by :func:`stable_id` from
what identifies the row in its source, so reading the same source twice gives
the same ids, and a log append of the second reading adds nothing.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from chatledger.errors import ChatLedgerError
from chatledger.messages import Message

__all__ = [
    "SourceConversation",
    "SourceError",
    "SourceReader",
    "Uncarriable",
    "stable_id",
]

#: The namespace of every message id a move-in derives (a uuid5 namespace).
_ID_NAMESPACE = uuid.UUID("fc2f6711-ea20-430a-8d4b-af1971004843")


def stable_id(*parts: str | int | None) -> str:
    """A message id derived from ``parts``: the same parts give the same id.

    The parts are what identifies a row in its source (the format, the table,
    the row's key), encoded as JSON so that no two lists of parts share a text.
    """
    text = json.dumps(parts, ensure_ascii=False, separators=(",", ":"))
    return str(uuid.uuid5(_ID_NAMESPACE, text))


class SourceError(ChatLedgerError):
    """The source cannot be read as the format says: a table or column is missing."""


@dataclass(frozen=True)
class Uncarriable:
    """A row of the source that no message can carry, and why.

    Attributes:
        row: Where it is in the source, such as ``row 3 (id 17)``.
        reason: What has no place in a message, such as an unknown type.
    """

    row: str
    reason: str

    def __str__(self) -> str:
        return f"{self.row}: {self.reason}"


@dataclass
class SourceConversation:
    """One conversation of a source, in the source's order.

    Attributes:
        conversation_id: Its id in the source (checked only when it is written).
        messages: One message per row that can be carried, in order.
        rows: Where each message comes from (``row 3``), in the same order.
        uncarriable: The rows that cannot be carried, in order.
    """

    conversation_id: str
    messages: list[Message] = field(default_factory=list)
    rows: list[str] = field(default_factory=list)
    uncarriable: list[Uncarriable] = field(default_factory=list)

    def add(self, message: Message, row: str) -> None:
        """Append the message read from ``row``."""
        self.messages.append(message)
        self.rows.append(row)

    def refuse(self, row: str, reason: str) -> None:
        """Record that ``row`` cannot be carried, saying why."""
        self.uncarriable.append(Uncarriable(row, reason))


class SourceReader(Protocol):
    """Reads the conversations of one source, a conversation at a time.

    Making a reader checks its arguments and imports what it needs, without
    any I/O; the source is opened by the first call.
    """

    #: The source as messages name it: ``SPRING_AI_CHAT_MEMORY in sqlite:///x.db``.
    where: str

    def conversation_ids(self) -> Sequence[str]:
        """The id of every conversation of the source, in a stable order."""
        ...

    def read(self, conversation_id: str) -> SourceConversation:
        """The conversation ``conversation_id``, read whole."""
        ...

    def close(self) -> None:
        """Release the source's connections."""
        ...
