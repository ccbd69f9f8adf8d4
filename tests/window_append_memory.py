"""Memories that store only the window, through ``append_to_window``.

The built-in memories append to the log on every built-in adapter; the
adapters' window append (what release 0.2's memories called, and what a store
of windows alone still offers) is driven through these in its own tests.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from chatledger import AppendResult, Message
from chatledger.validation import validate_messages
from chatledger.window import MessageWindow, Window


def _window(size: int | Window) -> Window:
    return MessageWindow(size) if isinstance(size, int) else size


class WindowAppendMemory:
    """``add`` is ``append_to_window``; ``get`` reads what is stored."""

    def __init__(self, repository: Any, max_messages: int | Window = 20) -> None:
        self.repository = repository
        self.window: Window = _window(max_messages)

    def add(self, cid: str, messages: Message | Sequence[Message]) -> AppendResult:
        batch = validate_messages(messages)
        if not batch:
            return AppendResult()
        result: AppendResult = self.repository.append_to_window(cid, batch, self.window)
        return result

    def get(self, cid: str) -> list[Message]:
        stored: list[Message] = self.repository.find_by_conversation_id(cid)
        return stored

    def clear(self, cid: str) -> None:
        self.repository.delete_by_conversation_id(cid)


class AsyncWindowAppendMemory:
    """The async twin of :class:`WindowAppendMemory`."""

    def __init__(self, repository: Any, max_messages: int | Window = 20) -> None:
        self.repository = repository
        self.window: Window = _window(max_messages)

    async def add(
        self, cid: str, messages: Message | Sequence[Message]
    ) -> AppendResult:
        batch = validate_messages(messages)
        if not batch:
            return AppendResult()
        result: AppendResult = await self.repository.append_to_window(
            cid, batch, self.window
        )
        return result

    async def get(self, cid: str) -> list[Message]:
        stored: list[Message] = await self.repository.find_by_conversation_id(cid)
        return stored

    async def clear(self, cid: str) -> None:
        await self.repository.delete_by_conversation_id(cid)
