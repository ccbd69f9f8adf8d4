"""A message as a row of the messages table, and back; a conversation's record.

Example:
    from types import SimpleNamespace

    from chatledger import Message
    from chatledger_sql.rows import decode, encode

    message = Message.user("hi", metadata={"lang": "en"})
    row = encode("c1", 7, message, None)   # Statements.insert_messages values
    row["payload"]                         # '{"v":1,"metadata":{"lang":"en"}}'
    read_back = SimpleNamespace(**row)     # a row as the driver returns it
    assert decode(read_back) == message

One encoding for every SQL database and for the sync and async repositories:
the message's codec form (:mod:`chatledger.codec`) less the columns of its
own (id, role, text, ``created_at``) as compact JSON. The checks here refuse,
before any write, a message whose row a database would refuse. A
conversation's record is read from its row by :func:`conversation_info`.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from chatledger.adapters import (
    ConversationInfo,
    InvalidMessageError,
    Message,
    RequestLimit,
    codec,
)

__all__ = [
    "MAX_MESSAGE_ID_BYTES",
    "STATEMENT_OVERHEAD_BYTES",
    "check_ids",
    "check_sizes",
    "conversation_info",
    "decode",
    "decode_raw",
    "encode",
    "literal_bytes",
    "moment",
    "statement_limit",
]

#: The longest message id, in UTF-8 bytes, that fits the id column.
MAX_MESSAGE_ID_BYTES = 255
#: Room left in a statement for the SQL text and the other columns of a row.
STATEMENT_OVERHEAD_BYTES = 4096

#: Characters a client escapes with one extra byte when it inlines a string.
_ESCAPED = str.maketrans("", "", "\x00\n\r\\'\"\x1a")


def encode(
    conversation_id: str, seq: int, message: Message, weight: int | None
) -> dict[str, Any]:
    """The ``Statements.insert_messages`` values of ``message`` at ``seq``."""
    data = codec.to_dict(message)
    del data["id"], data["role"]
    created_at = message.created_at
    data.pop("created_at", None)
    content = data["content"]
    column: str | None = None
    # Text goes in its own column unless a database could not keep it there:
    # PostgreSQL text rejects NUL, Oracle stores '' as NULL. JSON escapes both.
    if isinstance(content, str) and content and "\x00" not in content:
        column = content
        del data["content"]
    return {
        "conversation_id": conversation_id,
        "seq": seq,
        "message_id": message.id,
        "role": message.role.value,
        "content": column,
        "payload": _dumps(data),
        "weight": weight,
        "created_at": created_at,
    }


def decode(row: Any) -> Message:
    """The message of a row read with its typed ``created_at``."""
    return decode_raw(
        row.message_id, row.role, row.content, row.payload, row.created_at
    )


def moment(value: Any) -> Any:
    """A driver's raw ``created_at`` as ``UtcDateTime`` reads it, but cheaper.

    SQLite gives the text SQLAlchemy stored (``2026-01-02 03:04:05.000006``,
    always with microseconds); the wall-clock columns a naive ``datetime`` in
    UTC; PostgreSQL an aware one, which the codec converts to UTC. ``None``
    (a row made of a message never stamped) stays ``None``.
    """
    if type(value) is str:
        # Parsing with the offset is several times cheaper than replace().
        return datetime.fromisoformat(value + "+00:00")
    if value is None:
        return None
    if value.tzinfo is None:
        # Exact, integer arithmetic, and several times cheaper than replace().
        return _UTC_EPOCH + (value - _NAIVE_EPOCH)
    return value


def decode_raw(
    message_id: str, role: str, content: str | None, payload: str, created: Any
) -> Message:
    """The message of a raw read row (``Statements.read``): ids, text, JSON, time."""
    # A message with text and nothing else is not parsed: its rest is known.
    rest = None if payload == _PLAIN_PAYLOAD else payload
    return _from_columns(message_id, role, content, moment(created), rest)


_dumps, _from_columns = codec.dumps, codec.from_columns
#: What :func:`encode` stores as the payload of a message with text alone.
_PLAIN_PAYLOAD = _dumps({"v": codec.CODEC_VERSION})
_NAIVE_EPOCH = datetime(1970, 1, 1)
_UTC_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def literal_bytes(text: str | None) -> int:
    """The size of ``text`` inlined as an escaped string literal, in bytes."""
    if not text:
        return 0
    return len(text.encode("utf-8")) + len(text) - len(text.translate(_ESCAPED))


def statement_limit(limit: int) -> RequestLimit:
    """The server's cap on one statement (``max_allowed_packet``), leaving room
    for the SQL text and a row's other columns."""
    return RequestLimit(
        limit, STATEMENT_OVERHEAD_BYTES, "MySQL/MariaDB max_allowed_packet"
    )


def check_sizes(batch: list[Message], limit: int) -> None:
    """Refuse a message whose row needs a statement past ``limit`` bytes.

    Each row fits a statement of its own, which is what the statements that
    write rows need at least: a driver's ``executemany`` joins rows into one
    statement only up to its own bound (about 1 MB), and sends a larger row
    alone.
    """
    packet = statement_limit(limit)
    for index, message in enumerate(batch):
        row = encode("", 0, message, None)
        size = literal_bytes(row["payload"]) + literal_bytes(row["content"])
        packet.check(size, f"messages[{index}]")


def check_ids(batch: list[Message]) -> None:
    """Refuse a message whose id does not fit the id column."""
    for index, message in enumerate(batch):
        if len(message.id.encode("utf-8")) > MAX_MESSAGE_ID_BYTES:
            raise InvalidMessageError(
                f"messages[{index}] has an id longer than {MAX_MESSAGE_ID_BYTES} "
                "bytes in UTF-8, the most the id column holds"
            )


def conversation_info(row: Any) -> ConversationInfo:
    """The record in a row of ``Statements.get_info`` (or another read of its
    columns): ``metadata`` is JSON text, ``NULL`` for none; a row without
    ``created_at`` (made by an earlier release's process after the upgrade
    filled the others) reads it as ``updated_at``."""
    updated_at = row.updated_at
    return ConversationInfo(
        id=row.conversation_id,
        created_at=row.created_at or updated_at,
        updated_at=updated_at,
        message_count=int(row.message_count),
        owner=row.owner,
        metadata={} if row.metadata is None else json.loads(row.metadata),
    )
