"""Errors the Cassandra adapter raises for problems it detects itself.

Example (needs a Cassandra server):
    from chatledger import Message, MessageWindowChatMemory
    from chatledger_cassandra import CassandraChatMemoryRepository, ContentionError

    repository = CassandraChatMemoryRepository.from_url("cassandra://127.0.0.1/chat")
    memory = MessageWindowChatMemory(repository)

    try:
        memory.add("c1", Message.user("hi"))
    except ContentionError:
        ...  # every attempt lost its compare-and-set; nothing was written

Driver exceptions (``cassandra.*``) are never wrapped and propagate unchanged.
"""

from __future__ import annotations

from chatledger.adapters import (
    ContentionError,
    InvalidTTLError,
    InvalidUrlError,
)

__all__ = ["ContentionError", "InvalidTTLError", "InvalidURLError"]


class InvalidURLError(InvalidUrlError):
    """A ``cassandra://`` URL cannot be parsed or holds an unknown option.

    It is core's :class:`~chatledger.InvalidUrlError` (so a ``ChatLedgerError``
    and a ``ValueError``), as every adapter's refused URL is.
    """
