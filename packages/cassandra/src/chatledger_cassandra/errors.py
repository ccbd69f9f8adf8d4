"""Errors the Cassandra adapter raises for problems it detects itself.

Example:
    from chatledger_cassandra import ContentionError

    try:
        memory.add("c1", Message.user("hi"))
    except ContentionError:
        ...  # too many writers raced on one conversation; try again later

Driver exceptions (``cassandra.*``) are never wrapped and propagate unchanged.
"""

from __future__ import annotations

from chatledger.errors import ChatLedgerError

__all__ = ["ContentionError", "InvalidTTLError", "InvalidURLError"]


class InvalidURLError(ChatLedgerError, ValueError):
    """A ``cassandra://`` URL cannot be parsed or holds an unknown option."""


class InvalidTTLError(ChatLedgerError, ValueError):
    """A TTL is not a positive duration Cassandra can store (1 s to 20 years)."""


class ContentionError(ChatLedgerError, RuntimeError):
    """A write lost its compare-and-set every time it was tried.

    Every write of a conversation is a lightweight transaction that checks the
    conversation's version; when other writers keep changing it, the write is
    retried up to ``max_attempts`` times and then gives up with this error,
    having changed nothing.
    """
