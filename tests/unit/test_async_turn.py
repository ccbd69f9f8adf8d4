"""The async turn block without a database: timeouts, failed writes, entering once.

The rules it shares with the sync block run in the conformance suite (the
turn cases of every ``AsyncChatMemoryRepositoryTests`` subclass); these are
what only ``async with`` has, and what happens when its write fails.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from chatledger import (
    AppendResult,
    AsyncInMemoryChatMemoryRepository,
    AsyncMessageWindowChatMemory,
    AsyncTurnContext,
    InvalidMessageError,
    Message,
    Role,
    TurnClosedError,
    Window,
)
from chatledger.turn import OnError


class _BrokenStore(AsyncInMemoryChatMemoryRepository):
    """Reads work; every write fails as a lost database connection would."""

    async def append_to_log(
        self,
        conversation_id: str,
        messages: Sequence[Message],
        window: Window | None = None,
    ) -> AppendResult:
        raise ConnectionError("database went away")


class _PlainMemory:
    """An async memory of ``get`` and ``add`` alone, not a window memory."""

    def __init__(self) -> None:
        self.stored: dict[str, list[Message]] = {}

    async def get(self, conversation_id: str) -> list[Message]:
        await asyncio.sleep(0)
        return list(self.stored.get(conversation_id, []))

    async def add(
        self, conversation_id: str, messages: Message | Sequence[Message]
    ) -> None:
        await asyncio.sleep(0)
        batch = [messages] if isinstance(messages, Message) else list(messages)
        self.stored.setdefault(conversation_id, []).extend(batch)


@pytest.mark.parametrize(
    ("on_error", "kept"), [("discard", []), ("keep_prompt", ["U"])]
)
def test_a_timed_out_turn_stores_nothing_or_its_prompt(
    on_error: OnError, kept: list[str]
) -> None:
    memory = AsyncMessageWindowChatMemory()

    async def take_turn() -> None:
        async with memory.turn("c", Message.user("U"), on_error=on_error) as turn:
            turn.reply(Message.assistant("partial"))
            await asyncio.sleep(3600)  # a model call that never answers

    async def main() -> list[str | None]:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.05):
                await take_turn()
        return [m.content for m in await memory.get("c")]

    assert asyncio.run(main()) == kept


def test_a_failed_write_on_exit_propagates() -> None:
    memory = AsyncMessageWindowChatMemory(_BrokenStore())

    async def main() -> None:
        async with memory.turn("c", Message.user("U")) as turn:
            turn.reply(Message.assistant("A"))

    with pytest.raises(ConnectionError, match="went away"):
        asyncio.run(main())


def test_a_failed_keep_prompt_write_raises_with_the_block_error_as_context() -> None:
    memory = AsyncMessageWindowChatMemory(_BrokenStore())

    async def main() -> None:
        async with memory.turn("c", Message.user("U"), on_error="keep_prompt"):
            raise TimeoutError("model timed out")

    with pytest.raises(ConnectionError) as caught:
        asyncio.run(main())
    assert isinstance(caught.value.__context__, TimeoutError)


def test_a_discarded_turn_does_no_write_at_all() -> None:
    memory = AsyncMessageWindowChatMemory(_BrokenStore())

    async def main() -> None:
        async with memory.turn("c", Message.user("U")):
            raise TimeoutError("model timed out")

    with pytest.raises(TimeoutError):
        asyncio.run(main())


def test_a_turn_block_is_entered_once() -> None:
    memory = AsyncMessageWindowChatMemory()

    async def main() -> list[str | None]:
        context = memory.turn("c", Message.user("U"))
        async with context:
            pass
        with pytest.raises(TurnClosedError):
            async with context:
                pass
        return [m.content for m in await memory.get("c")]

    assert asyncio.run(main()) == ["U"]


def test_two_tasks_entering_one_block_at_once_store_it_once() -> None:
    memory = _PlainMemory()
    context = AsyncTurnContext(memory, "c", [Message.user("U")])

    async def take_turn() -> None:
        async with context as turn:
            turn.reply(Message.assistant("A"))

    async def main() -> list[BaseException | None]:
        results = await asyncio.gather(take_turn(), take_turn(), return_exceptions=True)
        return [r if isinstance(r, BaseException) else None for r in results]

    first, second = asyncio.run(main())
    assert first is None
    assert isinstance(second, TurnClosedError)
    assert [m.role for m in memory.stored["c"]] == [Role.USER, Role.ASSISTANT]


def test_a_block_whose_read_was_refused_is_not_entered_again() -> None:
    memory = _PlainMemory()
    stored = Message.user("U1")
    memory.stored["c"] = [stored]
    context = AsyncTurnContext(memory, "c", [Message.user("U9", id=stored.id)])

    async def main() -> None:
        with pytest.raises(InvalidMessageError, match="reuses the id"):
            async with context:
                pass
        with pytest.raises(TurnClosedError):
            async with context:
                pass

    asyncio.run(main())
    assert memory.stored["c"] == [stored]


def test_any_async_memory_takes_a_turn() -> None:
    memory = _PlainMemory()

    async def main() -> None:
        async with AsyncTurnContext(memory, "c", [Message.user("U")]) as turn:
            turn.reply(Message.assistant("A"))

    asyncio.run(main())
    assert [m.role for m in memory.stored["c"]] == [Role.USER, Role.ASSISTANT]


def test_the_result_is_what_add_returned() -> None:
    memory = AsyncMessageWindowChatMemory(max_messages=2)

    async def main() -> AsyncTurnContext:
        await memory.add("c", [Message.user("old"), Message.assistant("old")])
        context = memory.turn("c", Message.user("U"))
        async with context as turn:
            turn.reply(Message.assistant("A"))
        return context

    context = asyncio.run(main())
    assert isinstance(context.result, AppendResult)
    assert [m.content for m in context.result.appended] == ["U", "A"]


def test_an_async_turn_is_not_a_sync_with_block() -> None:
    memory = AsyncMessageWindowChatMemory()
    with pytest.raises(TypeError), memory.turn("c", Message.user("U")):  # type: ignore[attr-defined]
        pass
