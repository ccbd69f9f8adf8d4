"""Errors chatledger raises for problems it detects itself.

Driver exceptions are never wrapped: they propagate unchanged. Every error here
subclasses :class:`ChatLedgerError` and the fitting builtin, so callers can catch
either.

Example:
    try:
        memory.add("  ", Message.user("hi"))
    except InvalidConversationIdError as exc:
        print(exc)
"""

from __future__ import annotations

__all__ = [
    "ChatLedgerError",
    "InvalidConversationIdError",
    "InvalidMessageError",
    "InvalidNameError",
    "InvalidTTLError",
    "MessageTooLargeError",
    "UnknownBackendError",
]


class ChatLedgerError(Exception):
    """Base class of every error chatledger raises itself."""


class InvalidConversationIdError(ChatLedgerError, ValueError, TypeError):
    """A conversation id is not a valid id (wrong type, blank, too long, ...).

    It is both a ``ValueError`` and a ``TypeError`` so that callers may catch
    whichever builtin fits their code.
    """


class InvalidMessageError(ChatLedgerError, ValueError, TypeError):
    """A message, or a list of messages, cannot be stored as given."""


class InvalidNameError(ChatLedgerError, ValueError):
    """A table, schema, key prefix, collection or label name is not allowed."""


class InvalidTTLError(ChatLedgerError, ValueError, TypeError):
    """A ``ttl`` is not a positive duration (a ``timedelta`` or seconds).

    It is both a ``ValueError`` and a ``TypeError`` so that callers may catch
    whichever builtin fits their code.
    """


class MessageTooLargeError(ChatLedgerError, ValueError):
    """A write would exceed a documented size limit of the backend."""


class UnknownBackendError(ChatLedgerError, LookupError):
    """No installed adapter handles the URL scheme given to ``connect``."""
