"""MongoDB repository for chatledger.

Example (needs a MongoDB server):
    from chatledger import MessageWindowChatMemory
    from chatledger_mongodb import MongoDBChatMemoryRepository

    repository = MongoDBChatMemoryRepository.from_url("mongodb://localhost/app")
    memory = MessageWindowChatMemory(repository, max_messages=20)

``chatledger.connect("mongodb://...")`` finds this repository through the
``chatledger.repositories`` entry point, and ``chatledger.connect_async``
finds :class:`AsyncMongoDBChatMemoryRepository` (on pymongo's
``AsyncMongoClient``) through ``chatledger.async_repositories``.
"""

from __future__ import annotations

from chatledger_mongodb.async_repository import AsyncMongoDBChatMemoryRepository
from chatledger_mongodb.errors import ConcurrentUpdateError
from chatledger_mongodb.repository import (
    MAX_DOCUMENT_BYTES,
    MongoDBChatMemoryRepository,
)

__all__ = [
    "MAX_DOCUMENT_BYTES",
    "AsyncMongoDBChatMemoryRepository",
    "ConcurrentUpdateError",
    "MongoDBChatMemoryRepository",
]
