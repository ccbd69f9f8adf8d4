"""Checks every layer runs before any I/O: conversation ids and message batches.

Example:
    from chatledger import Message
    from chatledger.validation import validate_conversation_id, validate_messages

    conversation_id = validate_conversation_id("user-42")
    batch = validate_messages([Message.user("hi")])

Adapters call these instead of writing their own, so a bad input gets the same
clear error on every backend and nothing is written.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

from chatledger.errors import (
    InvalidConversationIdError,
    InvalidMessageError,
    InvalidPageError,
)
from chatledger.messages import Message

__all__ = [
    "MAX_CONVERSATION_ID_BYTES",
    "MAX_PAGE_SIZE",
    "stamp_messages",
    "utc_now",
    "validate_conversation_id",
    "validate_message_ids",
    "validate_messages",
    "validate_page_request",
    "validate_removal_count",
]

#: The most ids one page of conversation ids holds.
MAX_PAGE_SIZE = 10_000

#: The longest conversation id, in UTF-8 bytes, that every backend stores.
MAX_CONVERSATION_ID_BYTES = 255

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def validate_conversation_id(conversation_id: object) -> str:
    """Return ``conversation_id`` if it is a valid id, else raise.

    A valid id is a non-empty ``str`` without leading or trailing whitespace,
    without control characters, and at most 255 bytes in UTF-8. Ids are never
    normalised: ``"a"`` and ``"a "`` are not the same id, and the second one is
    rejected.

    Raises:
        InvalidConversationIdError: with a message that says what is wrong.
    """
    if not isinstance(conversation_id, str):
        raise InvalidConversationIdError(
            f"conversation id must be a str, not {type(conversation_id).__name__}"
        )
    if not conversation_id:
        raise InvalidConversationIdError("conversation id must not be empty")
    if conversation_id != conversation_id.strip():
        raise InvalidConversationIdError(
            f"conversation id {conversation_id!r} has leading or trailing whitespace"
        )
    match = _CONTROL.search(conversation_id)
    if match:
        raise InvalidConversationIdError(
            f"conversation id {conversation_id[:40]!r} contains the control "
            f"character {match.group()!r}"
        )
    try:
        size = len(conversation_id.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidConversationIdError(
            "conversation id cannot be encoded as UTF-8 (lone surrogate)"
        ) from None
    if size > MAX_CONVERSATION_ID_BYTES:
        raise InvalidConversationIdError(
            f"conversation id is {size} bytes in UTF-8; the limit is "
            f"{MAX_CONVERSATION_ID_BYTES}"
        )
    return conversation_id


def validate_messages(messages: object) -> list[Message]:
    """Return ``messages`` as a new list if every element is a :class:`Message`.

    A single message is accepted and wrapped in a list. ``None``, a ``str`` or a
    list holding anything but messages is rejected, as is a batch in which two
    messages share an id (one of them would be lost as a duplicate).

    Raises:
        InvalidMessageError: with the position of the offending element.
    """
    if isinstance(messages, Message):
        return [messages]
    if messages is None:
        raise InvalidMessageError("messages must be a list of Message, not None")
    if isinstance(messages, str | bytes | dict) or not isinstance(messages, Iterable):
        raise InvalidMessageError(
            f"messages must be a list of Message, not {type(messages).__name__}"
        )
    batch = list(messages)
    seen: set[str] = set()
    for index, message in enumerate(batch):
        if not isinstance(message, Message):
            raise InvalidMessageError(
                f"messages[{index}] must be a Message, not {type(message).__name__}"
            )
        if message.id in seen:
            raise InvalidMessageError(
                f"messages[{index}] repeats the message id {message.id!r} of an "
                "earlier message in the same batch"
            )
        seen.add(message.id)
    return batch


def utc_now() -> datetime:
    """Return the current time as a timezone-aware UTC datetime."""
    return datetime.now(UTC)


def stamp_messages(
    messages: Iterable[Message], now: datetime | None = None
) -> list[Message]:
    """Give every message without ``created_at`` the time ``now``.

    Messages that already carry a ``created_at`` keep it, so re-saving a history
    never changes when its messages were first stored.
    """
    moment = utc_now() if now is None else now
    return [message.stamped(moment) for message in messages]


def validate_removal_count(count: object) -> int:
    """Check how many messages a removal takes, before any I/O.

    Raises:
        InvalidPageError: ``count`` is not an int from 1 to :data:`MAX_PAGE_SIZE`.
    """
    if isinstance(count, bool) or not isinstance(count, int):
        raise InvalidPageError(f"count must be an int, not {type(count).__name__}")
    if not 1 <= count <= MAX_PAGE_SIZE:
        raise InvalidPageError(f"count must be from 1 to {MAX_PAGE_SIZE}, not {count}")
    return count


def validate_message_ids(message_ids: object) -> list[str]:
    """Check the ids a removal names, before any I/O.

    Raises:
        InvalidMessageError: ``message_ids`` is a str, not a sequence, or
            holds something other than a non-empty str, or more than
            :data:`MAX_PAGE_SIZE` ids.
    """
    if isinstance(message_ids, str | bytes) or not isinstance(
        message_ids, Sequence | set | frozenset
    ):
        raise InvalidMessageError(
            "message_ids must be a list of str, not " + type(message_ids).__name__
        )
    ids = list(message_ids)
    if len(ids) > MAX_PAGE_SIZE:
        raise InvalidMessageError(
            f"at most {MAX_PAGE_SIZE} message ids at once, not {len(ids)}"
        )
    for message_id in ids:
        if not isinstance(message_id, str) or not message_id:
            raise InvalidMessageError(
                f"a message id must be a non-empty str, not {message_id!r}"
            )
    return ids


def validate_page_request(cursor: object, limit: object) -> tuple[str | None, int]:
    """Check a page request before any I/O: ``cursor`` text or ``None``, ``limit``.

    Raises:
        InvalidPageError: ``limit`` is not an int from 1 to
            :data:`MAX_PAGE_SIZE`, or ``cursor`` is neither ``None`` nor a
            non-empty str.
    """
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise InvalidPageError(f"limit must be an int, not {type(limit).__name__}")
    if not 1 <= limit <= MAX_PAGE_SIZE:
        raise InvalidPageError(f"limit must be from 1 to {MAX_PAGE_SIZE}, not {limit}")
    if cursor is not None and (not isinstance(cursor, str) or not cursor):
        raise InvalidPageError(
            f"cursor must be None or the next_cursor of a page, not {cursor!r}"
        )
    return cursor, limit
