"""Where a conversation's archived messages end: the boundary and its markers.

Example:
    from chatledger import Message
    from chatledger_llama_index.archive import Boundary, archive_conversation_id, marker

    archive_conversation_id("user-42")  # 'user-42#llama-index-archive'
    first = Message.user("Hi")
    mark = marker("user-42", Boundary.NONE, archived=[first.id], writer="w")
    Boundary.of([mark], "user-42").through == first.id  # True

LlamaIndex's ``Memory`` keeps a conversation as active messages, which the
model sees, and archived ones, which it flushed to its memory blocks. In
chatledger the conversation is one log, and archiving moves nothing: the
archived messages are the log up to a boundary, the newest archived message,
and the active ones are the rest. Each move of the boundary appends one
marker message to a companion conversation, the key followed by
:data:`ARCHIVE_SUFFIX`, naming the messages it archived; the newest marker is
the boundary in force. When the newest message it names has left the log
(removed meanwhile by a call racing the archive, or by another program), the
archive ends at the newest one still there, or else at the newest one of the
marker before: what was archived stays archived. Nothing here does
I/O: :mod:`chatledger_llama_index.async_split_log` reads and writes them.

A marker's id is derived from the marker it follows, so two writers that
read the same boundary write markers of the same id: the log stores the
first and skips the second (an append skips an id the log holds), and the
second sees that it lost and reads again. A random ``writer`` token in each
marker tells a writer whether a marker of its id is its own.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

from llama_index.core.storage.chat_store.base_db import MessageStatus

from chatledger import (
    InvalidConversationIdError,
    Message,
    Role,
    validate_conversation_id,
)
from chatledger_llama_index.convert import Part

__all__ = [
    "ARCHIVE_SUFFIX",
    "MARKER_IDS",
    "MARKER_KEY",
    "Boundary",
    "archive_conversation_id",
    "check_count",
    "check_status",
    "marker",
    "part_count",
    "whole_parts",
]

#: What the id of a conversation's companion, which holds its boundary, adds
#: to the key.
ARCHIVE_SUFFIX = "#llama-index-archive"
#: The metadata key of a marker's fields.
MARKER_KEY = "llama_index_archive"
#: How many of the ids a move archived its marker keeps, the newest.
MARKER_IDS = 64

# Marker ids are name-based UUIDs in this namespace.
_MARKERS = uuid.UUID("6f1c1b5e-52a4-4d8e-9a57-2d0b7e9c4a31")


def archive_conversation_id(key: object) -> str:
    """The id of the companion conversation of ``key``, checked before any I/O.

    Raises:
        InvalidConversationIdError: ``key`` is not a valid conversation id,
            ends with :data:`ARCHIVE_SUFFIX`, or is too long to have a
            companion.
    """
    checked = validate_conversation_id(key)
    if checked.endswith(ARCHIVE_SUFFIX):
        raise InvalidConversationIdError(
            f"conversation id {checked[:40]!r} ends with {ARCHIVE_SUFFIX!r}, which "
            "names where a key's archive boundary is kept: choose another key"
        )
    try:
        return validate_conversation_id(checked + ARCHIVE_SUFFIX)
    except InvalidConversationIdError as exc:
        raise InvalidConversationIdError(
            f"conversation id {checked[:40]!r} is too long here: its archive "
            f"boundary is kept under the key plus {ARCHIVE_SUFFIX!r}, and that "
            f"id is refused ({exc})"
        ) from None


@dataclass(frozen=True, slots=True)
class Boundary:
    """The boundary in force, as a companion conversation's markers record it.

    Attributes:
        marker_id: The id of the newest marker; ``None`` when there is none.
        writer: The token of the call that wrote it.
        moves: For the newest marker and those before it, newest first back
            to one that archived nothing, the ids of the messages each
            archived (the newest :data:`MARKER_IDS` of them), newest first.
    """

    NONE: ClassVar[Boundary]

    marker_id: str | None
    writer: str | None = None
    moves: tuple[tuple[str, ...], ...] = ()

    @property
    def through(self) -> str | None:
        """The id of the newest archived message, or ``None``."""
        return self.moves[0][0] if self.moves and self.moves[0] else None

    @classmethod
    def of(cls, markers: Sequence[Message], key: str) -> Boundary:
        """The boundary that a companion's markers, newest first, record.

        Raises:
            ValueError: a message that is not a marker this module wrote.
        """
        if not markers:
            return cls.NONE
        moves: list[tuple[str, ...]] = []
        writer = ""
        for mark in markers:
            archived, written_by = _fields(mark, key)
            writer = writer or written_by
            if not archived:
                break
            moves.append(archived)
        return cls(markers[0].id, writer, tuple(moves))

    def ends_in(self, messages: Sequence[Message]) -> bool:
        """Whether ``messages`` hold one the newest marker archived."""
        newest = set(self.moves[0]) if self.moves else set()
        return any(m.id in newest for m in messages)

    def archived_count(self, messages: Sequence[Message]) -> int:
        """How many of ``messages`` (a log's newest ones, oldest first) are archived.

        The archive ends at the newest message the newest marker archived
        that is still in the log; when every one of them has left it
        (removed by a call racing the archive, or by another program), at
        the newest one of the marker before, and so on; with none left,
        nothing is archived.
        """
        ranks: dict[str, tuple[int, int]] = {}
        for number, archived in enumerate(self.moves):
            for place, message_id in enumerate(archived):
                ranks.setdefault(message_id, (number, place))
        best: tuple[tuple[int, int], int] | None = None
        for index in range(len(messages) - 1, -1, -1):
            rank = ranks.get(messages[index].id)
            if rank is not None and (best is None or rank < best[0]):
                best = (rank, index)
                if rank[0] == 0:
                    break
        return 0 if best is None else best[1] + 1


def _fields(mark: Message, key: str) -> tuple[tuple[str, ...], str]:
    """The ids a marker archived, newest first, and its writer, checked."""
    fields = mark.metadata.get(MARKER_KEY)
    archived = fields.get("archived") if isinstance(fields, Mapping) else None
    writer = fields.get("writer") if isinstance(fields, Mapping) else None
    listed = (
        archived
        if isinstance(archived, Sequence) and not isinstance(archived, str)
        else None
    )
    ids = [i for i in listed or () if isinstance(i, str)]
    if listed is None or len(ids) != len(listed) or not isinstance(writer, str):
        raise ValueError(
            f"conversation {archive_conversation_id(key)!r} keeps the archive "
            f"boundary of {key!r}, but its message {mark.id!r} is not a boundary "
            f"marker: it has no metadata[{MARKER_KEY!r}] with 'archived' (a list "
            "of message ids) and 'writer'"
        )
    return tuple(reversed(ids)), writer


Boundary.NONE = Boundary(None)


def marker(
    key: str,
    after: Boundary,
    *,
    archived: Sequence[str],
    writer: str,
) -> Message:
    """The marker that moves the boundary from ``after`` to the end of ``archived``.

    Args:
        key: The conversation.
        after: The boundary the caller read.
        archived: The ids of the messages the move archives, oldest first
            (the newest :data:`MARKER_IDS` are kept); empty to archive
            nothing.
        writer: The token of the call writing it.
    """
    # The first marker of a companion has an id of its key: deleting the
    # companion (which forgets the ids it held) starts the chain again.
    basis = after.marker_id if after.marker_id is not None else f"{key}\x00first"
    marker_id = str(uuid.uuid5(_MARKERS, basis))
    kept = list(archived[-MARKER_IDS:])
    text = (
        f"archived: the log up to message {kept[-1]}" if kept else "nothing is archived"
    )
    return Message(
        Role.ASSISTANT,
        text,
        id=marker_id,
        metadata={MARKER_KEY: {"archived": kept, "writer": writer}},
    )


def part_count(messages: Sequence[Message]) -> int:
    """How many LlamaIndex messages ``messages`` are: one per tool response."""
    return sum(
        max(1, len(m.tool_responses)) if m.role is Role.TOOL else 1 for m in messages
    )


def whole_parts(parts: Sequence[Part], count: int) -> list[Part]:
    """The first ``count`` parts, and the rest of the stored message they end in.

    A stored tool message with several responses is several LlamaIndex
    messages; it is archived or removed whole.
    """
    taken = list(parts[:count])
    rest = parts[count:]
    while taken and rest and rest[0].source == taken[-1].source:
        taken.append(rest[0])
        rest = rest[1:]
    return taken


def check_status(status: object, *, optional: bool) -> MessageStatus | None:
    """``status`` as a ``MessageStatus`` (or ``None`` where allowed), else raise.

    Raises:
        ValueError: a ``str`` that names no status.
        TypeError: anything else.
    """
    if status is None and optional:
        return None
    if isinstance(status, str):
        try:
            return MessageStatus(status)
        except ValueError:
            raise ValueError(
                f"status must be 'active' or 'archived', not {status!r}"
            ) from None
    allowed = "a MessageStatus or None" if optional else "a MessageStatus"
    raise TypeError(f"status must be {allowed}, not {type(status).__name__}")


def check_count(value: object, name: str, *, optional: bool = False) -> int | None:
    """``value`` if it is an int of 0 or more (or ``None`` where allowed), else raise.

    Raises:
        TypeError: not an int (a bool is not one).
        ValueError: a negative int.
    """
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if value < 0:
        raise ValueError(f"{name} must be 0 or more, not {value}")
    return value
