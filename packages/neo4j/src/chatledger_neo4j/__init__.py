"""chatledger-neo4j: chatledger conversation memory stored in Neo4j 5.

Example (needs a Neo4j server):
    from chatledger import MessageWindowChatMemory
    from chatledger_neo4j import Neo4jChatMemoryRepository

    repository = Neo4jChatMemoryRepository.from_url("neo4j://neo4j:secret@localhost")
    memory = MessageWindowChatMemory(repository, max_messages=20)

``chatledger.connect("neo4j://...")`` and ``connect("bolt://...")`` find this
adapter through its entry points; ``chatledger.connect_async`` finds
:class:`AsyncNeo4jChatMemoryRepository`, its asyncio twin, the same way.
"""

from __future__ import annotations

from chatledger_neo4j.async_repository import AsyncNeo4jChatMemoryRepository
from chatledger_neo4j.cypher import Statements, validate_label
from chatledger_neo4j.repository import Neo4jChatMemoryRepository
from chatledger_neo4j.url import Neo4jSettings, parse_url

__all__ = [
    "AsyncNeo4jChatMemoryRepository",
    "Neo4jChatMemoryRepository",
    "Neo4jSettings",
    "Statements",
    "parse_url",
    "validate_label",
]
