"""Spring AI's JDBC chat memory: the table ``SPRING_AI_CHAT_MEMORY``.

Example (needs a Spring AI database):
    from datetime import UTC

    from chatledger.move_in.spring_ai import SpringAiJdbcReader

    reader = SpringAiJdbcReader("postgresql+psycopg://app@db/app", None, UTC)
    for conversation_id in reader.conversation_ids():
        reader.read(conversation_id).messages

``JdbcChatMemoryRepository`` keeps one row per message: ``conversation_id``,
``content``, ``type`` (``USER``, ``ASSISTANT``, ``SYSTEM`` or ``TOOL``),
``timestamp`` and, since Spring AI 2.0, ``sequence_id``, the message's place
in its conversation. The same five columns on PostgreSQL, MySQL, MariaDB and
SQLite (where ``timestamp`` is an integer, milliseconds since the epoch).
Spring reads a conversation ``ORDER BY sequence_id``; a 1.x table, which has
no ``sequence_id``, by ``timestamp``. The reader does the same, then breaks
ties by ``timestamp`` and the order the rows are stored in (SQLite's rowid,
PostgreSQL's ctid), so two readings of one table agree.

Each row is a message of its type, its content the text and its
``timestamp`` the message's ``created_at``. A ``TOOL`` row cannot be carried:
Spring's JDBC store keeps no tool response in it, only its text, and Spring
itself drops such rows when it reads. Neither can a type Spring does not
have, nor a ``NULL`` content of a user or system row.

Message ids: the table has no row id, so each id is derived from the
conversation id, the row's position in Spring's order, its type and its
content. A re-run on an unchanged table derives the same ids and adds
nothing. After the application added turns, a re-run adds the new rows
after those it moved before. After Spring's window dropped the oldest rows
(or any row was changed), the positions move and the ids with them: the
conversation is then not written and is reported, since its messages would
follow those of the earlier run again.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import tzinfo
from typing import Any

from chatledger.messages import Message, Role
from chatledger.move_in.conversation import SourceConversation, stable_id
from chatledger.move_in.tables import TableReader

__all__ = ["DEFAULT_TABLE", "SpringAiJdbcReader"]

#: The table every Spring AI JDBC dialect writes.
DEFAULT_TABLE = "SPRING_AI_CHAT_MEMORY"

_ROLES = {"USER": Role.USER, "ASSISTANT": Role.ASSISTANT, "SYSTEM": Role.SYSTEM}


class SpringAiJdbcReader(TableReader):
    """The conversations of a Spring AI ``JdbcChatMemoryRepository`` table.

    Args:
        source: The SQLAlchemy URL of the database.
        table: The table (default :data:`DEFAULT_TABLE`).
        zone: The zone of the naive ``timestamp`` values: the Java virtual
            machine's that wrote them (a MySQL or MariaDB ``TIMESTAMP`` is
            read in UTC whatever it is).
    """

    family = "spring-ai-jdbc"
    conversation_column = "conversation_id"
    columns = ("conversation_id", "content", "type", "timestamp")
    optional_columns = ("sequence_id",)

    def __init__(self, source: str, table: str | None, zone: tzinfo) -> None:
        """Check the arguments, without any I/O."""
        super().__init__(source, table or DEFAULT_TABLE, zone)

    def order(self, table: Any) -> list[Any]:
        """``sequence_id`` (Spring AI 2.0), then ``timestamp`` (1.x)."""
        order = [self.column("timestamp")]
        sequence = self.column("sequence_id")
        return order if sequence is None else [sequence, *order]

    def convert(self, conversation: SourceConversation, rows: Sequence[Any]) -> None:
        """One message per row; a ``TOOL`` row or an unknown type is refused."""
        table = self.found_name.lower()
        for position, row in enumerate(rows):
            where = f"row {position + 1}"
            if row.get("sequence_id") is not None:
                where += f" (sequence_id {row['sequence_id']})"
            kind, content = row["type"], row["content"]
            role = _ROLES.get(kind)
            if kind == "TOOL":
                conversation.refuse(
                    where,
                    "a TOOL row: Spring's JDBC store keeps no tool response, only "
                    "its text (Spring drops such rows when it reads them)",
                )
                continue
            if role is None:
                conversation.refuse(
                    where, f"type {kind!r} is none of USER, ASSISTANT, SYSTEM"
                )
                continue
            if content is None and role is not Role.ASSISTANT:
                conversation.refuse(where, f"a {kind} row without content")
                continue
            key = (conversation.conversation_id, position, kind, content)
            derived = stable_id(self.family, table, *key)
            message = Message(
                role=role,
                content=content,
                id=derived,
                created_at=self.created_at(conversation, where, row, "timestamp"),
            )
            conversation.add(message, where)
            for field in self.extra_fields(row):
                conversation.refuse(where, f"{field} has no place in a message")
