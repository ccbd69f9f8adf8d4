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
    "ContentionError",
    "InvalidConversationIdError",
    "InvalidConversationInfoError",
    "InvalidMessageError",
    "InvalidNameError",
    "InvalidOptionError",
    "InvalidPageError",
    "InvalidRetentionError",
    "InvalidTTLError",
    "InvalidUrlError",
    "MessageTooLargeError",
    "MissingDriverError",
    "StoreNotFoundError",
    "UnknownBackendError",
]


class ChatLedgerError(Exception):
    """Base class of every error chatledger raises itself."""


class ContentionError(ChatLedgerError, RuntimeError):
    """A write gave up after its bounded retries: other writers kept winning.

    Nothing of the write was stored; the caller may try it again. The message
    names the conversation and how many attempts were made.

    Attributes:
        conversation_id: The conversation written to.
        attempts: How many times the write was tried.
    """

    def __init__(self, conversation_id: str, attempts: int, detail: str = "") -> None:
        """Say which conversation gave up after how many attempts, and why."""
        self.conversation_id = conversation_id
        self.attempts = attempts
        message = (
            f"conversation {conversation_id!r}: gave up after {attempts} "
            "attempts under contention; nothing was written, the write may be "
            "retried"
        )
        super().__init__(f"{message} ({detail})" if detail else message)

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.conversation_id, self.attempts))


class InvalidConversationIdError(ChatLedgerError, ValueError, TypeError):
    """A conversation id is not a valid id (wrong type, blank, too long, ...).

    It is both a ``ValueError`` and a ``TypeError`` so that callers may catch
    whichever builtin fits their code.
    """


class InvalidConversationInfoError(ChatLedgerError, ValueError, TypeError):
    """A conversation's owner or metadata, or a filter on them, is not valid.

    Raised before any I/O by ``set_conversation_info`` and
    ``find_conversations`` (:class:`chatledger.SupportsConversationInfo`); the
    message says what is wrong. It is both a ``ValueError`` and a
    ``TypeError``, like the other ``Invalid...Error``.
    """


class InvalidMessageError(ChatLedgerError, ValueError, TypeError):
    """A message, or a list of messages, cannot be stored as given."""


class InvalidNameError(ChatLedgerError, ValueError):
    """A table, schema, key prefix, collection or label name is not allowed."""


class InvalidPageError(ChatLedgerError, ValueError, TypeError):
    """A page request's ``limit`` or ``cursor`` is not valid."""


class InvalidOptionError(ChatLedgerError, TypeError):
    """An adapter was given an option it does not take; the message lists those it does.

    It is a ``TypeError``, like any call with an unexpected keyword argument.
    """


class InvalidRetentionError(ChatLedgerError, ValueError, TypeError):
    """A ``retention`` is neither everything nor a positive bound, or a window
    does not fit in the bound.

    Like :class:`InvalidTTLError`, it is both a ``ValueError`` and a
    ``TypeError``.
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
