"""The OpenAI Agents SDK's SQL sessions: ``SQLiteSession`` and ``SQLAlchemySession``.

Example (needs an Agents SDK session of your own):
    from datetime import UTC

    from chatledger.move_in.openai_agents import AgentsSqliteReader

    reader = AgentsSqliteReader("conversations.db", None, UTC)
    for session_id in reader.conversation_ids():
        reader.read(session_id).messages

Both sessions keep one row per item in ``agent_messages`` (``id``,
``session_id``, ``message_data``, the item as JSON, and ``created_at``);
``agent_sessions`` holds nothing a message has a place for. ``SQLiteSession``
reads a session ``ORDER BY id``, ``SQLAlchemySession`` ``ORDER BY
created_at, id``; each reader does as its session does. ``created_at`` is a
naive time: UTC for ``SQLiteSession`` (SQLite's ``CURRENT_TIMESTAMP``), the
database session's zone for ``SQLAlchemySession``.

Each item becomes one message as chatledger's Agents SDK bridge
(``chatledger_openai_agents``) stores it: the exact item in the message's
metadata under ``"openai_agents_item"``, so ``ChatLedgerSession`` gives the
items back as the SDK session gave them, and beside it a readable copy made
by :func:`chatledger.convert.from_openai` (a user or assistant message with
its text, a function call as a tool call, its output as a tool response,
anything else an assistant message without content). The bridge's module
imports the SDK, which a move-in does not need, so the mapping is made here
with core's converters and a test holds it to the bridge's. The id of each
message is derived from the table and the row's ``id``: a re-run adds
nothing, and a re-run after new turns adds those. A row whose
``message_data`` is not a JSON object cannot be carried (the SDK skips it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import tzinfo
from pathlib import Path
from typing import Any

from chatledger.convert import from_openai, loads_value
from chatledger.errors import ChatLedgerError, InvalidMessageError
from chatledger.messages import Message, Role
from chatledger.move_in.conversation import SourceConversation, stable_id
from chatledger.move_in.tables import TableReader

__all__ = ["ITEM_KEY", "AgentsSqlAlchemyReader", "AgentsSqliteReader", "item_messages"]

#: The metadata key under which chatledger's Agents SDK bridge keeps each item.
ITEM_KEY = "openai_agents_item"

#: The family of both readers' ids: one table read either way gives one id.
_FAMILY = "openai-agents"

_TEXT_PARTS = ("input_text", "output_text", "text")


def _last_read(items: list[Mapping[str, Any]]) -> Message | None:
    """The last message ``from_openai`` makes of ``items``; ``None`` if it refuses."""
    try:
        return from_openai(items)[-1]
    except ChatLedgerError:
        return None


def _text_parts_only(item: Mapping[str, Any]) -> Message | None:
    """A user or assistant message item, its content cut down to its text parts."""
    role = item.get("role")
    if item.get("type") not in (None, "message") or role not in ("user", "assistant"):
        return None
    content = item.get("content")
    if not isinstance(content, str):
        parts = content if isinstance(content, list) else []
        content = [
            {"type": part["type"], "text": part["text"]}
            for part in parts
            if isinstance(part, Mapping)
            and part.get("type") in _TEXT_PARTS
            and isinstance(part.get("text"), str)
        ]
    return _last_read([{"role": role, "content": content}])


def _readable_copy(
    item: Mapping[str, Any],
    calls: Mapping[str, Mapping[str, Any]],
    after_other_role: bool,
) -> Message:
    """Role, content, tool calls and responses of ``item``, as the bridge makes them."""
    call_id = item.get("call_id")
    call = calls.get(call_id) if isinstance(call_id, str) else None
    read: Message | None = None
    if item.get("type") == "function_call_output" and call is not None:
        read = _last_read([call, item])
    if read is None:
        read = _last_read([item])
    # No system message (the log keeps one of equal ones) and no tool message
    # opening the conversation (a window evicts it): the bridge's two rules.
    if (
        read is None
        or read.role is Role.SYSTEM
        or (read.role is Role.TOOL and not after_other_role)
    ):
        read = _text_parts_only(item)
    return Message.assistant() if read is None else read


def _each_item(items: Sequence[Mapping[str, Any]]) -> list[Message | str]:
    """A message per item, or the reason metadata cannot hold the item."""
    made: list[Message | str] = []
    calls: dict[str, Mapping[str, Any]] = {}
    after_other_role = False
    for item in items:
        copy = _readable_copy(item, calls, after_other_role)
        after_other_role = after_other_role or copy.role is not Role.TOOL
        call_id = item.get("call_id")
        if item.get("type") == "function_call" and isinstance(call_id, str):
            calls[call_id] = item
        try:
            made.append(
                Message(
                    role=copy.role,
                    content=copy.content,
                    tool_calls=copy.tool_calls,
                    tool_responses=copy.tool_responses,
                    media=copy.media,
                    metadata={ITEM_KEY: item},
                )
            )
        except ChatLedgerError as exc:
            made.append(str(exc))
    return made


def item_messages(items: Sequence[Mapping[str, Any]]) -> list[Message]:
    """The messages chatledger's Agents SDK bridge stores for ``items``, in order.

    Each keeps its item under :data:`ITEM_KEY`; the ids are new.

    Raises:
        InvalidMessageError: an item holds what metadata cannot (nesting too
            deep, say); the error names it by its index.
    """
    messages = []
    for index, made in enumerate(_each_item(items)):
        if isinstance(made, str):
            raise InvalidMessageError(f"items[{index}]: {made}")
        messages.append(made)
    return messages


class _AgentsTable(TableReader):
    family = _FAMILY
    conversation_column = "session_id"
    columns = ("id", "session_id", "message_data", "created_at")

    def __init__(self, source: str, table: str | None, zone: tzinfo) -> None:
        super().__init__(source, table or "agent_messages", zone)

    def convert(self, conversation: SourceConversation, rows: Sequence[Any]) -> None:
        """One message per item, each made as the bridge makes it."""
        table = self.found_name.lower()
        items: list[Mapping[str, Any]] = []
        kept: list[Any] = []
        for row in rows:
            where = f"row id {row['id']}"
            try:
                item = loads_value(row["message_data"])
            except (ChatLedgerError, TypeError) as exc:
                conversation.refuse(
                    where, f"message_data is not JSON (the SDK skips it): {exc}"
                )
                continue
            if not isinstance(item, dict):
                conversation.refuse(
                    where, f"message_data is a JSON {type(item).__name__}, not an item"
                )
                continue
            items.append(item)
            kept.append(row)
        # The whole conversation at once: an output is named after its call.
        for row, message in zip(kept, _each_item(items), strict=True):
            where = f"row id {row['id']}"
            if isinstance(message, str):
                conversation.refuse(where, message)
                continue
            message = Message(
                role=message.role,
                content=message.content,
                tool_calls=message.tool_calls,
                tool_responses=message.tool_responses,
                media=message.media,
                metadata=message.metadata,
                id=stable_id(_FAMILY, table, row["id"]),
                created_at=self.created_at(conversation, where, row, "created_at"),
            )
            conversation.add(message, where)
            for field in self.extra_fields(row):
                conversation.refuse(where, f"{field} has no place in a message")


class AgentsSqliteReader(_AgentsTable):
    """The Agents SDK ``SQLiteSession``'s ``agent_messages`` table.

    Args:
        source: The database file the session was given, or its
            ``sqlite:///`` URL.
        table: The ``messages_table`` it was given (default ``agent_messages``).
        zone: The zone of ``created_at`` (SQLite writes UTC).
    """

    def __init__(self, source: str, table: str | None, zone: tzinfo) -> None:
        """Check the arguments, without any I/O."""
        if "://" not in source:
            source = f"sqlite:///{Path(source)}"
        super().__init__(source, table, zone)

    def order(self, table: Any) -> list[Any]:
        """``id``, as ``SQLiteSession`` reads a session."""
        return [self.column("id")]


class AgentsSqlAlchemyReader(_AgentsTable):
    """The Agents SDK ``SQLAlchemySession``'s ``agent_messages`` table.

    Args:
        source: The SQLAlchemy URL of the database, with a sync driver
            (``postgresql+psycopg://`` where the session had ``+asyncpg``).
        table: The ``messages_table`` it was given (default ``agent_messages``).
        zone: The zone of ``created_at``: the database session's when the
            rows were written.
    """

    def order(self, table: Any) -> list[Any]:
        """``created_at``, then ``id``, as ``SQLAlchemySession`` reads a session."""
        return [self.column("created_at"), self.column("id")]
