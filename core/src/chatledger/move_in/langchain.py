"""LangChain's SQL chat histories: langchain-community's and langchain-postgres'.

Example (needs a LangChain history of your own):
    from datetime import UTC

    from chatledger.move_in.langchain import LangChainSqlReader

    reader = LangChainSqlReader("sqlite:///chat.db", None, UTC)
    for conversation_id in reader.conversation_ids():
        reader.read(conversation_id).messages

Both keep one row per message, the message as the JSON of LangChain's
``message_to_dict`` (``{"type": "human", "data": {...}}``), and read a
session ``ORDER BY id``:

- langchain-community's ``SQLChatMessageHistory``: table ``message_store``
  by default, columns ``id``, ``session_id`` (text) and ``message`` (text);
- langchain-postgres' ``PostgresChatMessageHistory``: the table its
  ``create_tables`` made (it has no default name), columns ``id``,
  ``session_id`` (a UUID), ``message`` (JSONB) and ``created_at``, which
  becomes the message's ``created_at``.

Each row is read back into a LangChain message (``messages_from_dict``) and
converted by chatledger's LangChain bridge (:mod:`chatledger_langchain`), so
the moved-in conversation reads back through the bridge as LangChain wrote
it; this needs ``pip install chatledger-langchain``. A message keeps its
LangChain ``id`` as its chatledger id; one without gets an id derived from
the format, the table and the row's ``id``, so a re-run adds nothing and,
the rows being append-only, a re-run after new turns adds those. What the
bridge refuses (a ``ChatMessage`` or ``FunctionMessage``, which have no
chatledger role), a row that is not such JSON, and a message id repeated
within a session cannot be carried.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from datetime import tzinfo
from typing import Any, ClassVar

from chatledger.errors import ChatLedgerError, InvalidNameError
from chatledger.messages import Message
from chatledger.move_in.conversation import SourceConversation, stable_id
from chatledger.move_in.tables import MissingLibraryError, TableReader

__all__ = ["LangChainPostgresReader", "LangChainSqlReader"]


def _bridge(family: str) -> tuple[Callable[..., Any], Callable[..., list[Message]]]:
    """LangChain's ``messages_from_dict`` and the bridge's ``from_langchain``."""
    try:
        from langchain_core.messages import messages_from_dict

        from chatledger_langchain import from_langchain
    except ImportError as exc:
        raise MissingLibraryError(
            f"--from {family} converts LangChain messages with chatledger's "
            f"LangChain bridge: pip install chatledger-langchain ({exc})"
        ) from None
    return messages_from_dict, from_langchain


class _LangChainTable(TableReader):
    conversation_column = "session_id"
    columns: ClassVar[tuple[str, ...]] = ("id", "session_id", "message")

    def __init__(self, source: str, table: str, zone: tzinfo) -> None:
        self._from_dict, self._from_langchain = _bridge(self.family)
        super().__init__(source, table, zone)

    def order(self, table: Any) -> list[Any]:
        """``id``, as LangChain reads a session."""
        return [self.column("id")]

    def _langchain(
        self, conversation: SourceConversation, where: str, raw: object
    ) -> Any:
        """The LangChain message a row holds; ``None`` (reported) if none."""
        try:
            data = json.loads(raw) if isinstance(raw, str | bytes) else raw
        except ValueError as exc:
            conversation.refuse(where, f"message is not JSON: {exc}")
            return None
        try:
            [message] = self._from_dict([data])
        except (KeyError, TypeError, ValueError) as exc:
            text = " ".join(str(exc).split())[:200]
            conversation.refuse(where, f"message is not a LangChain message: {text}")
            return None
        return message

    def convert(self, conversation: SourceConversation, rows: Sequence[Any]) -> None:
        """One message per row, through the LangChain bridge."""
        table = self.found_name.lower()
        rows_of: dict[str, str] = {}
        for row in rows:
            where = f"row id {row['id']}"
            langchain = self._langchain(conversation, where, row["message"])
            if langchain is None:
                continue
            if not langchain.id:
                derived = stable_id(self.family, table, row["id"])
                langchain = langchain.model_copy(update={"id": derived})
            try:
                [message] = self._from_langchain([langchain])
            except ChatLedgerError as exc:
                conversation.refuse(where, str(exc).replace("messages[0]", "message"))
                continue
            if message.id in rows_of:
                conversation.refuse(
                    where,
                    f"repeats the message id {message.id!r} of {rows_of[message.id]}",
                )
                continue
            rows_of[message.id] = where
            if "created_at" in self.columns:
                created = self.created_at(conversation, where, row, "created_at")
                message = dataclasses.replace(message, created_at=created)
            conversation.add(message, where)
            for field in self.extra_fields(row):
                conversation.refuse(where, f"{field} has no place in a message")


class LangChainSqlReader(_LangChainTable):
    """langchain-community's ``SQLChatMessageHistory`` table.

    Args:
        source: The SQLAlchemy URL of the database.
        table: The ``table_name`` the history was given (default
            ``message_store``).
        zone: Unused: the table keeps no time.
    """

    family = "langchain-sql"

    def __init__(self, source: str, table: str | None, zone: tzinfo) -> None:
        """Check the arguments and import the bridge, without any I/O."""
        super().__init__(source, table or "message_store", zone)


class LangChainPostgresReader(_LangChainTable):
    """langchain-postgres' ``PostgresChatMessageHistory`` table.

    Args:
        source: The SQLAlchemy URL of the PostgreSQL database.
        table: The ``table_name`` the history was given (required: it has
            no default).
        zone: Unused: ``created_at`` is a ``TIMESTAMPTZ``.
    """

    family = "langchain-postgres"
    columns: ClassVar[tuple[str, ...]] = ("id", "session_id", "message", "created_at")

    def __init__(self, source: str, table: str | None, zone: tzinfo) -> None:
        """Check the arguments and import the bridge, without any I/O."""
        if table is None:
            raise InvalidNameError(
                "--from langchain-postgres needs --table: the table_name given to "
                "PostgresChatMessageHistory (it has no default)"
            )
        super().__init__(source, table, zone)
