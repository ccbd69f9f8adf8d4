"""Errors the MongoDB repository raises for problems it detects itself.

Example (needs a MongoDB server):
    from chatledger import Message, MessageWindowChatMemory
    from chatledger_mongodb import MongoDBChatMemoryRepository
    from chatledger_mongodb.errors import ConcurrentUpdateError

    repository = MongoDBChatMemoryRepository.from_url("mongodb://localhost/app")
    memory = MessageWindowChatMemory(repository)

    try:
        memory.add("c1", Message.user("hi"))
    except ConcurrentUpdateError:
        ...  # retry later

Driver exceptions (``pymongo.errors.*``) are never wrapped and propagate as
they are; the one exception is the server's "document too large" refusal, which
surfaces as :class:`chatledger.MessageTooLargeError` chained to it.
"""

from __future__ import annotations

from chatledger.errors import ChatLedgerError

__all__ = ["ConcurrentUpdateError"]


class ConcurrentUpdateError(ChatLedgerError, RuntimeError):
    """A bounded retry loop gave up because other writers kept changing the document.

    Only the rare size back-fill (a token window meeting messages whose sizes
    were stored under another counter) retries; nothing was lost when this is
    raised, and the append may simply be tried again.
    """
