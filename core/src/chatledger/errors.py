"""Errors chatledger raises for problems it detects itself.

Driver exceptions are never wrapped: they propagate unchanged. Every error here
subclasses :class:`ChatLedgerError` and the fitting builtin, so callers can catch
either.

Example:
    from chatledger import InMemoryChatMemoryRepository, Message
    from chatledger import InvalidConversationIdError, MessageWindowChatMemory

    memory = MessageWindowChatMemory(InMemoryChatMemoryRepository())
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
    "InvalidOptionError",
    "InvalidTTLError",
    "InvalidUrlError",
    "MessageTooLargeError",
    "MissingDriverError",
    "StoreNotFoundError",
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


class InvalidOptionError(ChatLedgerError, TypeError):
    """An adapter was given an option it does not take; the message lists those it does.

    It is a ``TypeError``, like any call with an unexpected keyword argument.
    """


class InvalidTTLError(ChatLedgerError, ValueError, TypeError):
    """A ``ttl`` is not a positive duration (a ``timedelta`` or seconds).

    It is both a ``ValueError`` and a ``TypeError`` so that callers may catch
    whichever builtin fits their code.
    """


class InvalidUrlError(ChatLedgerError, ValueError):
    """A URL has the right scheme but cannot name a store as written."""


class MessageTooLargeError(ChatLedgerError, ValueError):
    """A write would exceed a documented size limit of the backend."""


class UnknownBackendError(ChatLedgerError, LookupError):
    """No installed adapter handles the URL scheme given to ``connect``."""


class MissingDriverError(UnknownBackendError):
    """The adapter is installed but the database driver its URL needs is not.

    The message names the ``pip install`` line that adds it. It is an
    :class:`UnknownBackendError`: the backend cannot be used as installed.
    """


class StoreNotFoundError(ChatLedgerError, LookupError):
    """The database file, folder or table a repository was opened on is missing.

    Raised by reads of a repository told not to create its storage, which
    therefore never create a file, a table or a key.
    """
