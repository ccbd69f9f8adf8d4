"""The stores a conversation can move in from, by the name ``import --from`` takes.

Example:
    from chatledger.move_in.formats import FORMATS

    spring = FORMATS["spring-ai-jdbc"]
    spring.summary    # one line for --help
    spring.source     # what SOURCE is: 'a SQLAlchemy URL'
    # spring.reader("postgresql+psycopg://app@db/app", None, UTC), no I/O yet

Each format's reader lives in a module of its own family, imported only when
the format is asked for: what it needs (SQLAlchemy, a framework bridge) is
then named by an install line if it is missing.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from datetime import tzinfo

from chatledger.move_in.conversation import SourceReader

__all__ = ["FORMATS", "SourceFormat"]


@dataclass(frozen=True)
class SourceFormat:
    """One kind of store to move in from.

    Attributes:
        name: What ``import --from`` takes.
        summary: One line for ``--help``.
        source: What ``SOURCE`` is for it.
        reader_path: ``module:Class`` of its reader.
    """

    name: str
    summary: str
    source: str
    reader_path: str

    def reader(self, source: str, table: str | None, zone: tzinfo) -> SourceReader:
        """A reader of ``source``, made without any I/O.

        Args:
            source: ``SOURCE`` as given.
            table: The table ``--table`` names, or ``None`` for the format's own.
            zone: The zone of naive times in the source.
        """
        module, _, name = self.reader_path.partition(":")
        reader: SourceReader = getattr(importlib.import_module(module), name)(
            source, table, zone
        )
        return reader


_URL = "a SQLAlchemy URL"

FORMATS = {
    f.name: f
    for f in [
        SourceFormat(
            "spring-ai-jdbc",
            "Spring AI's JdbcChatMemoryRepository table SPRING_AI_CHAT_MEMORY "
            "(PostgreSQL, MySQL, MariaDB, SQLite)",
            _URL,
            "chatledger.move_in.spring_ai:SpringAiJdbcReader",
        ),
        SourceFormat(
            "langchain-sql",
            "langchain-community's SQLChatMessageHistory table (message_store)",
            _URL,
            "chatledger.move_in.langchain:LangChainSqlReader",
        ),
        SourceFormat(
            "langchain-postgres",
            "langchain-postgres' PostgresChatMessageHistory table (--table required)",
            _URL,
            "chatledger.move_in.langchain:LangChainPostgresReader",
        ),
        SourceFormat(
            "agents-sqlite",
            "the OpenAI Agents SDK's SQLiteSession (agent_messages)",
            "a SQLite file or sqlite:/// URL",
            "chatledger.move_in.openai_agents:AgentsSqliteReader",
        ),
        SourceFormat(
            "agents-sqlalchemy",
            "the OpenAI Agents SDK's SQLAlchemySession (agent_messages)",
            _URL,
            "chatledger.move_in.openai_agents:AgentsSqlAlchemyReader",
        ),
        SourceFormat(
            "llama-index-simple",
            "LlamaIndex's SimpleChatStore, the JSON file persist() writes",
            "a JSON file",
            "chatledger.move_in.llama_index:SimpleChatStoreReader",
        ),
        SourceFormat(
            "llama-index-postgres",
            "llama-index-storage-chat-store-postgres' PostgresChatStore table "
            "(chatstore)",
            _URL,
            "chatledger.move_in.llama_index:PostgresChatStoreReader",
        ),
    ]
}
