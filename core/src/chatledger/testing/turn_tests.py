"""Conformance tests of ``memory.turn``: one turn, stored whole or not at all.

The ``test_spring_*`` cases each reproduce one defect of Spring AI's memory
advisor and check that a turn does not have it.

The cases are written once, with ``with memory.turn(...)``. On a sync
repository ``memory`` is a :class:`~chatledger.MessageWindowChatMemory` (or
a token window one); under :class:`~chatledger.testing.AsyncChatMemoryRepositoryTests`
it is the async twin behind a :class:`~chatledger.testing.async_runner.MemoryFacade`,
whose ``turn`` awaits ``async with``'s enter and exit on the test's loop.
"""

from __future__ import annotations

import threading
from collections.abc import Generator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

import pytest

from chatledger.async_memory import (
    AsyncMessageWindowChatMemory,
    AsyncTokenWindowChatMemory,
)
from chatledger.errors import InvalidConversationIdError, InvalidMessageError
from chatledger.memory import MessageWindowChatMemory, TokenWindowChatMemory
from chatledger.messages import Message, Role, ToolCall, ToolResponse
from chatledger.repository import AppendResult
from chatledger.testing.async_runner import memory_over
from chatledger.turn import StaleToolCallError, Turn, TurnClosedError

__all__ = ["TurnTests"]


class _TurnMemory(Protocol):
    """A memory as the cases drive it: sync, or an async one behind a facade."""

    def get(self, conversation_id: str) -> list[Message]: ...

    def add(
        self, conversation_id: str, messages: Message | Sequence[Message]
    ) -> object: ...

    def turn(
        self, conversation_id: str, *prompt: Message, on_error: Any = ...
    ) -> AbstractContextManager[Turn]: ...


@dataclass
class _Counts:
    """The reads and writes a memory made."""

    reads: int = 0
    writes: list[list[Message]] = field(default_factory=list)

    def wrote(self, messages: Message | Sequence[Message]) -> None:
        self.writes.append(
            [messages] if isinstance(messages, Message) else list(messages)
        )


class _CountingMemory(MessageWindowChatMemory):
    """A window memory that counts its reads and writes."""

    def __init__(self, repository: Any, max_messages: int, counts: _Counts) -> None:
        super().__init__(repository, max_messages)
        self.counts = counts

    def get(self, conversation_id: str) -> list[Message]:
        self.counts.reads += 1
        return super().get(conversation_id)

    def add(
        self, conversation_id: str, messages: Message | Sequence[Message]
    ) -> AppendResult:
        self.counts.wrote(messages)
        return super().add(conversation_id, messages)


class _AsyncCountingMemory(AsyncMessageWindowChatMemory):
    """The async twin of :class:`_CountingMemory`."""

    def __init__(self, repository: Any, max_messages: int, counts: _Counts) -> None:
        super().__init__(repository, max_messages)
        self.counts = counts

    async def get(self, conversation_id: str) -> list[Message]:
        self.counts.reads += 1
        return await super().get(conversation_id)

    async def add(
        self, conversation_id: str, messages: Message | Sequence[Message]
    ) -> AppendResult:
        self.counts.wrote(messages)
        return await super().add(conversation_id, messages)


class _ModelFailed(Exception):
    """What a failing model call raises in these tests."""


def _shape(messages: Sequence[Message]) -> list[tuple[Role, str | None]]:
    return [(m.role, m.content) for m in messages]


def _ids(messages: Sequence[Message]) -> list[str]:
    return [m.id for m in messages]


def _fail_in_turn(
    memory: _TurnMemory,
    prompt: Sequence[Message],
    replies: Sequence[Message],
    failure: BaseException,
    on_error: Any = "discard",
) -> None:
    """Run a turn that replies and then fails with ``failure``."""
    with memory.turn("c", *prompt, on_error=on_error) as turn:
        turn.reply(*replies)
        raise failure


def _tool_round(call_id: str) -> tuple[Message, Message]:
    call = ToolCall(call_id, "weather", '{"city": "Rome"}')
    return (
        Message.assistant(None, tool_calls=[call]),
        Message.tool(ToolResponse(call_id, "weather", '{"c": 24}')),
    )


class TurnTests:
    """``memory.turn`` on this repository: one atomic store, nothing on failure."""

    def _memory(
        self,
        repository: Any,
        max_messages: int = 100,
        counts: _Counts | None = None,
    ) -> _TurnMemory:
        """A message window memory over ``repository``, the async one if it is."""
        made = _Counts() if counts is None else counts
        return memory_over(
            repository,
            lambda sync: _CountingMemory(sync, max_messages, made),
            lambda async_: _AsyncCountingMemory(async_, max_messages, made),
        )

    def test_turn_stores_prompt_and_replies_in_one_append(
        self, repository: Any
    ) -> None:
        """Prompt and every reply are stored in order by one ``add``."""
        counts = _Counts()
        memory = self._memory(repository, counts=counts)
        prompt = [Message.system("S"), Message.user("Weather in Rome?")]
        call, response = _tool_round("t1")
        answer = Message.assistant("24 °C.")
        with memory.turn("c", *prompt) as turn:
            turn.reply(call, response)
            turn.reply(answer)
        assert len(counts.writes) == 1
        stored = memory.get("c")
        assert _ids(stored) == _ids([*prompt, call, response, answer])
        assert stored == [*prompt, call, response, answer]

    def test_turn_messages_are_history_then_prompt_system_first(
        self, repository: Any
    ) -> None:
        """``turn.messages`` is the stored history, the prompt and the replies."""
        memory = self._memory(repository)
        memory.add("c", [Message.user("U1"), Message.assistant("A1")])
        memory.add("c", Message.system("S"))
        with memory.turn("c", Message.user("U2")) as turn:
            assert _shape(turn.messages) == [
                (Role.SYSTEM, "S"),
                (Role.USER, "U1"),
                (Role.ASSISTANT, "A1"),
                (Role.USER, "U2"),
            ]
            call, response = _tool_round("t1")
            turn.reply(call, response)
            assert turn.messages[-2:] == [call, response]

    def test_turn_shows_a_new_system_message_as_it_will_be_stored(
        self, repository: Any
    ) -> None:
        """A new system message replaces the stored one; an equal one shows once."""
        memory = self._memory(repository)
        memory.add("c", [Message.system("S1"), Message.user("U1")])
        with memory.turn("c", Message.system("S1"), Message.user("U2")) as turn:
            assert _shape(turn.messages) == [
                (Role.SYSTEM, "S1"),
                (Role.USER, "U1"),
                (Role.USER, "U2"),
            ]
        with memory.turn("c", Message.user("U3"), Message.system("S2")) as turn:
            assert _shape(turn.messages)[0] == (Role.SYSTEM, "S2")
            assert (Role.SYSTEM, "S1") not in _shape(turn.messages)
            seen = turn.messages
        assert _shape(memory.get("c")) == [
            (Role.USER, "U1"),
            (Role.USER, "U2"),
            (Role.USER, "U3"),
            (Role.SYSTEM, "S2"),
        ]
        assert sorted(_ids(memory.get("c"))) == sorted(_ids(seen))

    def test_spring_orphan_user_message_when_the_call_fails(
        self, repository: Any
    ) -> None:
        """Spring stores the user message before a call that then fails; here not."""
        memory = self._memory(repository)
        memory.add("c", [Message.user("U1"), Message.assistant("A1")])
        before = memory.get("c")
        with pytest.raises(_ModelFailed):
            _fail_in_turn(
                memory,
                [Message.user("U2")],
                [Message.assistant("partial")],
                _ModelFailed("the model call failed"),
            )
        assert memory.get("c") == before
        assert _ids(memory.get("c")) == _ids(before)

    def test_spring_orphan_user_message_when_the_stream_is_closed(
        self, repository: Any
    ) -> None:
        """A streaming generator closed before its end stores nothing."""
        memory = self._memory(repository)

        def stream() -> Generator[str, None, None]:
            with memory.turn("c", Message.user("Tell a story")) as turn:
                text = ""
                for chunk in ["Once", " upon", " a time"]:
                    text += chunk
                    yield chunk
                turn.reply(Message.assistant(text))

        chunks = stream()
        assert next(chunks) == "Once"
        chunks.close()  # the consumer went away: GeneratorExit inside the turn
        assert memory.get("c") == []
        assert "".join(stream()) == "Once upon a time"
        assert _shape(memory.get("c")) == [
            (Role.USER, "Tell a story"),
            (Role.ASSISTANT, "Once upon a time"),
        ]

    def test_turn_stores_nothing_on_keyboard_interrupt(self, repository: Any) -> None:
        """A ``BaseException`` such as ``KeyboardInterrupt`` discards the turn."""
        counts = _Counts()
        memory = self._memory(repository, counts=counts)
        with pytest.raises(KeyboardInterrupt), memory.turn("c", Message.user("U")):
            raise KeyboardInterrupt
        assert memory.get("c") == []
        assert counts.writes == []

    def test_turn_keep_prompt_stores_the_prompt_alone(self, repository: Any) -> None:
        """With ``on_error="keep_prompt"`` a failed turn stores its prompt only."""
        memory = self._memory(repository)
        prompt = [Message.user("U1"), Message.user("U2")]
        with pytest.raises(_ModelFailed):
            _fail_in_turn(
                memory,
                prompt,
                [Message.assistant("partial")],
                _ModelFailed(),
                on_error="keep_prompt",
            )
        assert _ids(memory.get("c")) == _ids(prompt)
        with (
            pytest.raises(KeyboardInterrupt),
            memory.turn("c", Message.user("U3"), on_error="keep_prompt"),
        ):
            raise KeyboardInterrupt
        assert _shape(memory.get("c"))[-1] == (Role.USER, "U3")

    def test_spring_only_the_last_user_message_is_stored(self, repository: Any) -> None:
        """Every new prompt message is stored, not only the last user message."""
        memory = self._memory(repository)
        call, response = _tool_round("t0")
        memory.add("c", [Message.user("U0"), call])
        prompt = [response, Message.user("U1"), Message.user("U2")]
        with memory.turn("c", *prompt) as turn:
            turn.reply(Message.assistant("A"))
        assert _ids(memory.get("c"))[2:5] == _ids(prompt)
        assert len(memory.get("c")) == 6

    def test_spring_synthetic_empty_user_message(self, repository: Any) -> None:
        """A turn without a user message stores none, empty or otherwise."""
        memory = self._memory(repository)
        memory.add("c", Message.user("U"))
        with memory.turn("c") as turn:
            turn.reply(Message.assistant("A"))
        assert _shape(memory.get("c")) == [(Role.USER, "U"), (Role.ASSISTANT, "A")]
        with memory.turn("empty"):
            pass
        assert memory.get("empty") == []
        assert "empty" not in repository.find_conversation_ids()

    def test_spring_text_merged_with_stale_tool_calls(self, repository: Any) -> None:
        """A reply with text and the tool calls of an earlier round is refused."""
        memory = self._memory(repository)
        call, response = _tool_round("t1")
        merged = Message.assistant("24 °C.", tool_calls=call.tool_calls)
        with (
            pytest.raises(StaleToolCallError, match="t1"),
            memory.turn("c", Message.user("Weather?")) as turn,
        ):
            turn.reply(call, response, merged)
        assert memory.get("c") == []
        memory.add("d", [Message.user("Weather?"), call, response])
        with memory.turn("d") as turn:
            with pytest.raises(StaleToolCallError):
                turn.reply(Message.assistant("24 °C.", tool_calls=call.tool_calls))
            turn.reply(Message.assistant("24 °C."))
        assert _shape(memory.get("d"))[-1] == (Role.ASSISTANT, "24 °C.")

    def test_spring_dedup_by_equals_instead_of_id(self, repository: Any) -> None:
        """Stored means same id: equal new messages are stored, re-sent ones not."""
        memory = self._memory(repository)
        with memory.turn("c", Message.user("yes")) as turn:
            turn.reply(Message.assistant("Sure?"))
        with memory.turn("c", Message.user("yes")) as turn:
            turn.reply(Message.assistant("Done."))
        assert _shape(memory.get("c")) == [
            (Role.USER, "yes"),
            (Role.ASSISTANT, "Sure?"),
            (Role.USER, "yes"),
            (Role.ASSISTANT, "Done."),
        ]
        history = memory.get("c")  # read back: created_at set, ids kept
        question = Message.user("and now?")
        with memory.turn("c", *history, question) as turn:
            assert turn.prompt == [question]
            assert turn.messages == [*history, question]
            turn.reply(Message.assistant("Now."))
        assert len(memory.get("c")) == 6

    def test_turn_reply_is_all_or_nothing_and_checked(self, repository: Any) -> None:
        """A refused reply collects nothing; a repeated reply is a retry."""
        memory = self._memory(repository)
        answer = Message.assistant("A")
        with memory.turn("c", Message.user("U")) as turn:
            with pytest.raises(InvalidMessageError):
                turn.reply(Message.assistant("ok"), Message.user("not a reply"))
            with pytest.raises(InvalidMessageError):
                turn.reply(Message.system("not a reply"))
            with pytest.raises(InvalidMessageError):
                turn.reply("text")  # type: ignore[arg-type]
            turn.reply(answer)
            turn.reply(answer)
            with pytest.raises(InvalidMessageError, match="reuses the id"):
                turn.reply(Message.assistant("other", id=answer.id))
            assert turn.replies == [answer]
        with pytest.raises(TurnClosedError):
            turn.reply(Message.assistant("late"))
        assert _shape(memory.get("c")) == [(Role.USER, "U"), (Role.ASSISTANT, "A")]

    @pytest.mark.parametrize(
        ("conversation_id", "prompt", "on_error", "error"),
        [
            ("c", [Message.user("U")], "keep", ValueError),
            ("c", [Message.user("U")], None, ValueError),
            (" c", [Message.user("U")], "discard", InvalidConversationIdError),
            ("c", ["U"], "discard", InvalidMessageError),
            ("c", [Message.user("U", id="x"), Message.user("V", id="x")], "discard",
             InvalidMessageError),
        ],
    )  # fmt: skip
    def test_turn_arguments_are_checked_before_any_io(
        self,
        repository: Any,
        conversation_id: Any,
        prompt: list[Any],
        on_error: Any,
        error: type[Exception],
    ) -> None:
        """A bad id, prompt or ``on_error`` raises before the history is read."""
        counts = _Counts()
        memory = self._memory(repository, counts=counts)
        with pytest.raises(error):
            memory.turn(conversation_id, *prompt, on_error=on_error)
        assert counts.reads == 0
        assert counts.writes == []
        assert repository.find_conversation_ids() == []

    def test_turn_prompt_reusing_a_stored_id_is_refused(self, repository: Any) -> None:
        """A prompt message with a stored id but other content is refused whole."""
        memory = self._memory(repository)
        stored = Message.user("U1")
        memory.add("c", stored)
        context = memory.turn(
            "c", Message.user("new"), Message.user("U9", id=stored.id)
        )
        with pytest.raises(InvalidMessageError, match="reuses the id"), context:
            pass
        assert _shape(memory.get("c")) == [(Role.USER, "U1")]

    def test_turn_on_a_token_window(self, repository: Any) -> None:
        """A token window memory takes a turn the same way."""
        memory: _TurnMemory = memory_over(
            repository,
            lambda sync: TokenWindowChatMemory(sync, 10_000),
            lambda async_: AsyncTokenWindowChatMemory(async_, 10_000),
        )
        with memory.turn("c", Message.user("U")) as turn:
            turn.reply(Message.assistant("A"))
        assert _shape(memory.get("c")) == [(Role.USER, "U"), (Role.ASSISTANT, "A")]

    def test_concurrent_turns_each_stay_whole(self, repository: Any) -> None:
        """Turns racing on one conversation lose nothing and never interleave."""
        if not getattr(self, "supports_atomic_append", False):
            pytest.skip("read-modify-write through save_all is not concurrency-safe")
        memory = self._memory(repository, max_messages=10_000)
        writers, turns = 8, 4
        errors: list[BaseException] = []

        def write(writer: int) -> None:
            try:
                for number in range(turns):
                    name = f"w{writer}-{number}"
                    with memory.turn("race", Message.user(name)) as turn:
                        call, response = _tool_round(name)
                        turn.reply(call, response)
                        turn.reply(Message.assistant(name))
            except BaseException as exc:  # re-raised in the test's thread
                errors.append(exc)

        threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        stored = memory.get("race")
        assert len(stored) == writers * turns * 4
        for start in range(0, len(stored), 4):
            user, call, response, answer = stored[start : start + 4]
            assert user.role is Role.USER
            assert call.tool_calls[0].id == user.content
            assert response.tool_responses[0].id == user.content
            assert answer.content == user.content
