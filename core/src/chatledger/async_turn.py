"""One model turn for asyncio: the ``async with`` twin of :mod:`chatledger.turn`.

Example:
    import asyncio

    from chatledger import AsyncMessageWindowChatMemory, Message
    from chatledger.convert import to_openai

    async def chat(messages):  # stands for an async model client's call
        return f"Sunny ({len(messages)} messages read)"

    async def main():
        memory = AsyncMessageWindowChatMemory(max_messages=20)  # in-memory
        async with memory.turn("c1", Message.user("Weather in Rome?")) as turn:
            reply = await chat(to_openai(turn.messages))  # history + prompt
            turn.reply(Message.assistant(reply))   # not awaited: it only collects
        await memory.get("c1")   # the prompt and the reply, stored together

    asyncio.run(main())

The rules are the sync turn's, in the same code (:class:`~chatledger.turn.TurnBlock`
and :class:`~chatledger.turn.Turn`): on a normal exit every new prompt message
and every reply is stored, in order, in one awaited ``memory.add``; when the
block raises, or its task is cancelled (``task.cancel()``, a timeout), nothing
is stored, or only the prompt with ``on_error="keep_prompt"``, and the
exception propagates. Only the read on entry and the write on exit are
awaited. A cancellation that lands during that write leaves the conversation
as it was or with the whole batch, never a part (the repository's append is
atomic).
"""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType
from typing import Protocol

from chatledger.messages import Message
from chatledger.turn import Turn, TurnBlock

__all__ = ["AsyncTurnContext", "AsyncTurnMemory"]


class AsyncTurnMemory(Protocol):
    """What an async turn needs of a memory: awaited ``get`` and ``add``."""

    async def get(self, conversation_id: str) -> list[Message]:
        """Return the stored messages, oldest first."""
        ...

    async def add(
        self, conversation_id: str, messages: Message | Sequence[Message]
    ) -> object:
        """Store a batch in one write."""
        ...


class AsyncTurnContext(TurnBlock[AsyncTurnMemory]):
    """The ``async with`` block of one turn: an awaited read, then one awaited write.

    Made by ``memory.turn(conversation_id, *prompt, on_error=...)`` of an
    async memory; that call is not awaited and checks its arguments before
    any I/O (see :class:`~chatledger.turn.TurnBlock`). ``turn.reply(...)``
    is a plain call inside the block.
    """

    async def __aenter__(self) -> Turn:
        conversation_id = self._enter()
        return self._open(await self._memory.get(conversation_id))

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        failed: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        # asyncio.CancelledError is a BaseException like any other here: the
        # turn is discarded (or keeps its prompt) and the cancellation goes on.
        batch = self._close(failed)
        if batch:
            self.result = await self._memory.add(self._conversation_id, batch)
