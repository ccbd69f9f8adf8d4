"""chatledger-redis: chatledger conversation memory in Redis 6.2+ or Valkey.

Example (needs a Redis server):
    from chatledger import Message, MessageWindowChatMemory
    from chatledger_redis import RedisChatMemoryRepository

    repository = RedisChatMemoryRepository.from_url("redis://localhost:6379/0")
    memory = MessageWindowChatMemory(repository, max_messages=20)
    memory.add("c1", Message.user("Hello"))

With asyncio: ``AsyncRedisChatMemoryRepository`` (``redis.asyncio``), the same
keys and scripts.
"""

from __future__ import annotations

from chatledger_redis.async_repository import AsyncRedisChatMemoryRepository
from chatledger_redis.keys import KEY_PREFIX_PATTERN
from chatledger_redis.repository import RedisChatMemoryRepository

__all__ = [
    "KEY_PREFIX_PATTERN",
    "AsyncRedisChatMemoryRepository",
    "RedisChatMemoryRepository",
]
