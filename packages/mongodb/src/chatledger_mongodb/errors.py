"""Errors the MongoDB repository raises for problems it detects itself.

Example (needs a MongoDB server):
    from chatledger import ContentionError, Message, MessageWindowChatMemory
    from chatledger_mongodb import MongoDBChatMemoryRepository

    repository = MongoDBChatMemoryRepository.from_url("mongodb://localhost/app")
    memory = MessageWindowChatMemory(repository)

    try:
        memory.add("c1", Message.user("hi"))
    except ContentionError:
        ...  # retry later

Driver exceptions (``pymongo.errors.*``) are never wrapped and propagate as
they are; the one exception is the server's "document too large" refusal, which
surfaces as :class:`chatledger.MessageTooLargeError` chained to it.
"""

from __future__ import annotations

from chatledger.adapters import (
    ContentionError,
)

__all__ = ["ConcurrentUpdateError"]

#: The name this package used before :class:`chatledger.ContentionError`;
#: the same class.
ConcurrentUpdateError = ContentionError
