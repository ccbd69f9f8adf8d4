# sync twin: turn.py
"""One model turn: read the history, call the model, store prompt and replies together.

Example:
    from chatledger import AsyncMessageWindowChatMemory, Message
    from chatledger.convert import to_openai

    async def chat(messages):  # stands for a model client's call
        return f"Sunny ({len(messages)} messages read)"

    memory = AsyncMessageWindowChatMemory(max_messages=20)  # in-memory repository
    async with memory.turn("c1", Message.user("Weather in Rome?")) as turn:
        reply = await chat(to_openai(turn.messages))  # history + prompt, system first
        turn.reply(Message.assistant(reply))  # once per tool round
    await memory.get("c1")  # the prompt and the reply, stored together

On a normal exit every new prompt message and every reply is stored, in order,
in one ``memory.add`` (one atomic append on a repository that has it). When the
block raises (a failed or cancelled model call, a task cancelled by a timeout,
``KeyboardInterrupt``, a streaming generator closed early) nothing is stored,
or only the prompt with ``on_error="keep_prompt"``, and the exception
propagates. Only the read on entry and the write on exit reach the memory; an
interruption during that write leaves the conversation as it was or with the
whole batch, never a part (the repository's append is atomic).

The rules are :mod:`chatledger.turn_rules`' (:class:`Turn`, :class:`TurnBlock`),
one code path for the sync and the async memories; their names are importable
from here too.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType
from typing import Protocol

from chatledger.messages import Message
from chatledger.turn_rules import (
    OnError,
    StaleToolCallError,
    Turn,
    TurnBlock,
    TurnClosedError,
    open_turn,
    validate_on_error,
)

__all__ = ["AsyncTurnContext", "AsyncTurnMemory"]
# The rules every turn block runs, importable from here as from turn_rules.
__all__ += [
    "OnError",
    "StaleToolCallError",
    "Turn",
    "TurnBlock",
    "TurnClosedError",
    "open_turn",
    "validate_on_error",
]


class AsyncTurnMemory(Protocol):
    """What a turn needs of a memory: ``get`` and ``add`` of a conversation."""

    async def get(self, conversation_id: str) -> list[Message]:
        """Return the stored messages, oldest first."""
        ...

    async def add(
        self, conversation_id: str, messages: Message | Sequence[Message]
    ) -> object:
        """Store a batch in one write."""
        ...


class AsyncTurnContext(TurnBlock[AsyncTurnMemory]):
    """The ``async with`` block of one turn: reads on entry, stores once on exit.

    Made by ``memory.turn(conversation_id, *prompt, on_error=...)``, a plain
    call that checks its arguments before any I/O (see
    :class:`~chatledger.turn_rules.TurnBlock`); ``turn.reply(...)`` inside the
    block is a plain call too.
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
        # Any BaseException ends the turn alike, a task's cancellation included:
        # the turn is discarded (or keeps its prompt) and the exception goes on.
        batch = self._close(failed)
        if batch:
            # A write error raised here propagates; during an exception it
            # carries the block's exception as its __context__.
            self.result = await self._memory.add(self._conversation_id, batch)
