"""Errors the Cassandra adapter raises for problems it detects itself.

Example (needs a Cassandra server):
    from chatledger import Message, MessageWindowChatMemory
    from chatledger_cassandra import CassandraChatMemoryRepository, ContentionError

    repository = CassandraChatMemoryRepository.from_url("cassandra://127.0.0.1/chat")
    memory = MessageWindowChatMemory(repository)

    try:
        memory.add("c1", Message.user("hi"))
    except ContentionError:
        ...  # too many writers raced on one conversation; try again later

Driver exceptions (``cassandra.*``) are never wrapped and propagate unchanged.
"""

from __future__ import annotations

from chatledger.errors import ChatLedgerError, InvalidTTLError

__all__ = ["ContentionError", "InvalidTTLError", "InvalidURLError"]


class InvalidURLError(ChatLedgerError, ValueError):
    """A ``cassandra://`` URL cannot be parsed or holds an unknown option."""


class ContentionError(ChatLedgerError, RuntimeError):
    """A write lost its compare-and-set every time it was tried.

    Every write of a conversation is a lightweight transaction that checks the
    conversation's version; when other writers keep changing it, the write is
    retried up to ``max_attempts`` times and then gives up with this error,
    having changed nothing.
    """
