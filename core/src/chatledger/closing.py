"""``with repository:`` support shared by every adapter that owns a connection.

Example:
    from chatledger_sql import SqlChatMemoryRepository

    with SqlChatMemoryRepository.from_url("sqlite:///chat.db") as repository:
        repository.find_conversation_ids()
    # the engine from_url made is disposed here

A class that mixes in :class:`ClosingContext` defines ``close()``; leaving the
``with`` block calls it, whether or not an exception is propagating.
"""

from __future__ import annotations

from typing import Self

__all__ = ["ClosingContext"]


class ClosingContext:
    """Mixin: entering returns the object, leaving calls its ``close()``."""

    def close(self) -> None:
        """Release what the object owns; subclasses override this."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
