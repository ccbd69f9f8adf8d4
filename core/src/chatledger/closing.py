"""``with repository:`` support shared by every adapter that owns a connection.

Example:
    from chatledger_sql import SqlChatMemoryRepository

    with SqlChatMemoryRepository.from_url("sqlite:///chat.db") as repository:
        repository.find_conversation_ids()
    # the engine from_url made is disposed here

A class that mixes in :class:`ClosingContext` defines ``close()``; leaving the
``with`` block calls it, whether or not an exception is propagating. Its async
twin, :class:`AsyncClosingContext`, does the same for ``async with`` and
``aclose()``.
"""

from __future__ import annotations

from typing import Self

__all__ = ["AsyncClosingContext", "ClosingContext"]


class ClosingContext:
    """Mixin: entering returns the object, leaving calls its ``close()``."""

    def close(self) -> None:
        """Release what the object owns; subclasses override this."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class AsyncClosingContext:
    """Mixin for async repositories: ``async with`` returns the object, then awaits
    its ``aclose()``, whether or not an exception is propagating."""

    async def aclose(self) -> None:
        """Release what the object owns; subclasses override this."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
