"""LlamaIndex's chat stores: ``SimpleChatStore``'s file, ``PostgresChatStore``'s table.

Example (needs a file SimpleChatStore.persist wrote):
    from chatledger.move_in.llama_index import SimpleChatStoreReader

    reader = SimpleChatStoreReader("chat_store.json")   # what persist() wrote
    for key in reader.conversation_ids():
        reader.read(key).messages

Both keep each key's messages as one list of LlamaIndex ``ChatMessage``
dumps (``role``, ``additional_kwargs``, ``blocks``), in order:

- ``SimpleChatStore.persist(path)`` writes ``{"store": {key: [...]}}`` to a
  JSON file (older versions wrote that JSON as one JSON string);
- ``PostgresChatStore`` (llama-index-storage-chat-store-postgres) keeps one
  row per key in the table ``chatstore`` by default (``data_chatstore`` in
  older versions; ``--table`` names another, ``schema.table`` outside
  ``public``): ``id``, ``key`` and ``value``, an array of JSON.

Each key is a conversation. Each message is validated as a ``ChatMessage``
and converted by chatledger's LlamaIndex bridge
(:func:`chatledger_llama_index.read_chat_message`, a tool result named after
its call earlier in the conversation), so the moved-in conversation reads
back through the bridge as LlamaIndex kept it; this needs ``pip install
chatledger-llama-index``. Neither store keeps an id or a time: each
message's id is derived from the format, the key, its position and its JSON,
so a re-run on an unchanged store adds nothing and one after new messages
adds those; after a message was changed or removed (``delete_message``) the
ids from there on change, and the conversation is reported and not written.
What the bridge refuses (an audio or document block, a role other than the
four) cannot be carried.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from datetime import tzinfo
from pathlib import Path
from typing import Any

from chatledger.errors import ChatLedgerError, InvalidUrlError
from chatledger.messages import Message
from chatledger.move_in.conversation import (
    SourceConversation,
    SourceError,
    stable_id,
)
from chatledger.move_in.tables import MissingLibraryError, TableReader

__all__ = ["PostgresChatStoreReader", "SimpleChatStoreReader"]


def _bridge(family: str) -> tuple[Any, Callable[..., Message]]:
    """LlamaIndex's ``ChatMessage`` and the bridge's ``read_chat_message``."""
    try:
        from llama_index.core.base.llms.types import ChatMessage

        from chatledger_llama_index.convert import read_chat_message
    except ImportError as exc:
        raise MissingLibraryError(
            f"--from {family} converts LlamaIndex messages with chatledger's "
            f"LlamaIndex bridge: pip install chatledger-llama-index ({exc})"
        ) from None
    return ChatMessage, read_chat_message


class _ChatMessages:
    """Turns one key's list of ``ChatMessage`` dumps into a conversation."""

    def __init__(self, family: str) -> None:
        self.family = family
        self._chat_message, self._read = _bridge(family)

    def convert(self, conversation: SourceConversation, dumps: Sequence[Any]) -> None:
        call_names: dict[str, str] = {}
        for position, dump in enumerate(dumps):
            where = f"message {position + 1}"
            try:
                data = json.loads(dump) if isinstance(dump, str | bytes) else dump
                chat = self._chat_message.model_validate(data)
            except ValueError as exc:
                text = " ".join(str(exc).split())[:200]
                conversation.refuse(where, f"not a LlamaIndex ChatMessage: {text}")
                continue
            try:
                message = self._read(chat, "message", call_names)
            except ChatLedgerError as exc:
                conversation.refuse(where, str(exc))
                continue
            for call in message.tool_calls:
                call_names[call.id] = call.name
            text = json.dumps(data, sort_keys=True, ensure_ascii=False)
            derived = stable_id(
                self.family, conversation.conversation_id, position, text
            )
            conversation.add(dataclasses.replace(message, id=derived), where)


class SimpleChatStoreReader:
    """The JSON file ``SimpleChatStore.persist`` writes.

    Args:
        source: The file's path.

    Raises:
        MissingLibraryError: the LlamaIndex bridge is not installed.
        InvalidUrlError: ``source`` is not a file that can be read.
    """

    family = "llama-index-simple"

    def __init__(self, source: str, table: str | None, zone: tzinfo) -> None:
        """Check the arguments and import the bridge; the file is read on first use."""
        self._messages = _ChatMessages(self.family)
        self.path = Path(source)
        if table is not None:
            raise InvalidUrlError("--table names a table; a SimpleChatStore is a file")
        if not self.path.is_file():
            raise InvalidUrlError(f"no file {source!r} to read")
        self.where = source
        self._store: dict[str, Any] | None = None

    def _read_store(self) -> dict[str, Any]:
        if self._store is not None:
            return self._store
        try:
            data: Any = json.loads(self.path.read_text(encoding="utf-8"))
            if isinstance(data, str):  # a JSON string holding the JSON
                data = json.loads(data)
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise SourceError(
                f"{self.where}: not a SimpleChatStore file: {exc}"
            ) from None
        store = data.get("store") if isinstance(data, Mapping) else None
        if not isinstance(store, Mapping) or not all(
            isinstance(v, list) for v in store.values()
        ):
            raise SourceError(
                f"{self.where}: not a SimpleChatStore file: expected "
                '{"store": {key: [messages]}}'
            )
        self._store = dict(store)
        return self._store

    def conversation_ids(self) -> list[str]:
        """Every key of the store, sorted."""
        return sorted(self._read_store())

    def read(self, conversation_id: str) -> SourceConversation:
        """The messages of one key."""
        conversation = SourceConversation(conversation_id)
        self._messages.convert(conversation, self._read_store()[conversation_id])
        return conversation

    def close(self) -> None:
        """Nothing to release: the file was read whole."""


class PostgresChatStoreReader(TableReader):
    """The table of llama-index-storage-chat-store-postgres' ``PostgresChatStore``.

    Args:
        source: The SQLAlchemy URL of the PostgreSQL database.
        table: The ``table_name`` the store was given (default ``chatstore``),
            ``schema.table`` for a ``schema_name`` other than ``public``.
        zone: Unused: the table keeps no time.
    """

    family = "llama-index-postgres"
    conversation_column = "key"
    columns = ("id", "key", "value")

    def __init__(self, source: str, table: str | None, zone: tzinfo) -> None:
        """Check the arguments and import the bridge, without any I/O."""
        self._messages = _ChatMessages(self.family)
        super().__init__(source, table or "chatstore", zone)

    def table_candidates(self) -> list[str]:
        """``data_NAME`` first, as the store reads it when it exists, then ``NAME``."""
        return [f"data_{self.table_name}", self.table_name]

    def order(self, table: Any) -> list[Any]:
        """One row per key: any order."""
        return [self.column("id")]

    def convert(self, conversation: SourceConversation, rows: Sequence[Any]) -> None:
        """The messages of the key's row (a key is unique)."""
        for row in rows:
            self._messages.convert(conversation, row["value"] or [])
            for field in self.extra_fields(row):
                conversation.refuse(
                    f"row id {row['id']}", f"{field} has no place in a message"
                )
