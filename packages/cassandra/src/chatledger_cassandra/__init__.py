"""chatledger-cassandra: conversation memory in Apache Cassandra or ScyllaDB.

Example (needs a Cassandra server):
    from chatledger import Message, MessageWindowChatMemory
    from chatledger_cassandra import CassandraChatMemoryRepository

    repository = CassandraChatMemoryRepository.from_url(
        "cassandra://127.0.0.1:9042/chatledger?create_keyspace=true"
    )
    memory = MessageWindowChatMemory(repository, max_messages=20)
    memory.add("c1", Message.user("Hello"))

``chatledger.connect("cassandra://...")`` finds this adapter through its entry
point, and ``chatledger.connect_async("cassandra://...")`` finds its asyncio
twin, :class:`AsyncCassandraChatMemoryRepository`. The design (one partition
per conversation, every write a conditional single-partition batch, the
conversation kept whole as a log beside its window) is explained in
:mod:`chatledger_cassandra.repository`.
"""

from __future__ import annotations

from chatledger_cassandra.async_repository import AsyncCassandraChatMemoryRepository
from chatledger_cassandra.errors import (
    ContentionError,
    InvalidTTLError,
    InvalidURLError,
)
from chatledger_cassandra.repository import (
    MAX_TTL_SECONDS,
    CassandraChatMemoryRepository,
    ttl_seconds,
)
from chatledger_cassandra.url import CassandraURL, parse_url

__all__ = [
    "MAX_TTL_SECONDS",
    "AsyncCassandraChatMemoryRepository",
    "CassandraChatMemoryRepository",
    "CassandraURL",
    "ContentionError",
    "InvalidTTLError",
    "InvalidURLError",
    "parse_url",
    "ttl_seconds",
]
