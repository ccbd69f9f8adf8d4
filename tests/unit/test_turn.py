"""The turn's rules without a database, and what happens when its write fails."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from chatledger import (
    AppendResult,
    InMemoryChatMemoryRepository,
    InvalidMessageError,
    Message,
    MessageWindowChatMemory,
    Role,
    StaleToolCallError,
    ToolCall,
    ToolResponse,
    TurnClosedError,
    Window,
)
from chatledger.turn import TurnContext, open_turn, validate_on_error


class _BrokenStore(InMemoryChatMemoryRepository):
    """Reads work; every write fails as a lost database connection would."""

    def append_to_log(
        self,
        conversation_id: str,
        messages: Sequence[Message],
        window: Window | None = None,
    ) -> AppendResult:
        raise ConnectionError("database went away")


class _PlainMemory:
    """A memory of the ``ChatMemory`` protocol that is not a window memory."""

    def __init__(self) -> None:
        self.stored: dict[str, list[Message]] = {}

    def get(self, conversation_id: str) -> list[Message]:
        return list(self.stored.get(conversation_id, []))

    def add(self, conversation_id: str, messages: Message | Sequence[Message]) -> None:
        batch = [messages] if isinstance(messages, Message) else list(messages)
        self.stored.setdefault(conversation_id, []).extend(batch)


def _round(call_id: str) -> tuple[Message, Message]:
    call = ToolCall(call_id, "f", "{}")
    return (
        Message.assistant(None, tool_calls=[call]),
        Message.tool(ToolResponse(call_id, "f", "ok")),
    )


def test_open_turn_keeps_only_new_prompt_messages() -> None:
    stored = [Message.system("S"), Message.user("U1")]
    prompt = [stored[1], Message.system("S"), Message.user("U2")]
    turn = open_turn("c", stored, prompt)
    assert turn.prompt == [prompt[2]]
    assert [m.content for m in turn.messages] == ["S", "U1", "U2"]


def test_stale_calls_across_rounds_of_one_turn_are_refused() -> None:
    turn = open_turn("c", [], [Message.user("U")])
    first = _round("t1")
    turn.reply(*first)
    second = _round("t2")
    turn.reply(*second)
    aggregated = Message.assistant(
        "done", tool_calls=[*first[0].tool_calls, *second[0].tool_calls]
    )
    with pytest.raises(StaleToolCallError, match="beside its text"):
        turn.reply(aggregated)
    assert turn.replies == [*first, *second]
    turn.reply(Message.assistant("done"))
    assert turn.to_store(None, "discard") == [*turn.prompt, *turn.replies]


def test_a_call_id_repeated_within_one_reply_is_refused() -> None:
    turn = open_turn("c", [], [])
    call, _ = _round("t1")
    again = Message.assistant(None, tool_calls=call.tool_calls)
    with pytest.raises(StaleToolCallError, match=f"message {call.id!r} of this reply"):
        turn.reply(call, again)
    assert turn.replies == []


def test_a_stale_call_of_an_earlier_turn_names_that_turn() -> None:
    # A stream aggregated across turns: the call of the last turn, still in
    # the window, comes back with this turn's answer.
    asked = Message.user("Weather in Rome?")
    call, response = _round("t1")
    history = [asked, call, response, Message.assistant("Sunny.")]
    turn = open_turn("c", history, [Message.user("And in Oslo?")])
    aggregated = Message.assistant("Rainy.", tool_calls=call.tool_calls)
    with pytest.raises(StaleToolCallError) as raised:
        turn.reply(aggregated)
    message = str(raised.value)
    assert "'t1'" in message
    assert f"requested by message {call.id!r} of an earlier turn" in message
    assert f"the turn of user message {asked.id!r}" in message
    assert "still in the window" in message
    assert "earlier round" not in message


def test_a_stale_call_of_an_earlier_round_names_that_round() -> None:
    turn = open_turn("c", [], [Message.user("U")])
    call, response = _round("t1")
    turn.reply(call, response)
    with pytest.raises(StaleToolCallError) as raised:
        turn.reply(Message.assistant("done", tool_calls=call.tool_calls))
    assert f"message {call.id!r} of an earlier round of this turn" in str(raised.value)


def test_to_store_by_outcome() -> None:
    prompt = [Message.user("U")]
    reply = Message.assistant("A")
    for failed, on_error, expected in [
        (None, "discard", [*prompt, reply]),
        (RuntimeError(), "discard", []),
        (RuntimeError(), "keep_prompt", prompt),
        (KeyboardInterrupt(), "keep_prompt", prompt),
    ]:
        turn = open_turn("c", [], prompt)
        turn.reply(reply)
        assert turn.to_store(failed, on_error) == expected  # type: ignore[arg-type]
        assert turn.closed


@pytest.mark.parametrize("value", ["discard", "keep_prompt"])
def test_on_error_values(value: str) -> None:
    assert validate_on_error(value) == value


def test_a_failed_write_on_exit_propagates() -> None:
    memory = MessageWindowChatMemory(_BrokenStore())
    with (
        pytest.raises(ConnectionError, match="went away"),
        memory.turn("c", Message.user("U")) as turn,
    ):
        turn.reply(Message.assistant("A"))


def test_a_failed_keep_prompt_write_raises_with_the_block_error_as_context() -> None:
    memory = MessageWindowChatMemory(_BrokenStore())

    def failing_turn() -> None:
        with memory.turn("c", Message.user("U"), on_error="keep_prompt"):
            raise TimeoutError("model timed out")

    with pytest.raises(ConnectionError) as caught:
        failing_turn()
    assert isinstance(caught.value.__context__, TimeoutError)


def test_a_discarded_turn_does_no_write_at_all() -> None:
    memory = MessageWindowChatMemory(_BrokenStore())

    def failing_turn() -> None:
        with memory.turn("c", Message.user("U")):
            raise TimeoutError("model timed out")

    with pytest.raises(TimeoutError):
        failing_turn()


def test_a_turn_context_is_entered_once() -> None:
    memory = MessageWindowChatMemory()
    context = memory.turn("c", Message.user("U"))
    with context:
        pass
    with pytest.raises(TurnClosedError), context:
        pass
    assert [m.content for m in memory.get("c")] == ["U"]


def test_a_block_whose_read_was_refused_is_not_entered_again() -> None:
    memory = _PlainMemory()
    stored = Message.user("U1")
    memory.stored["c"] = [stored]
    context = TurnContext(memory, "c", [Message.user("U9", id=stored.id)])
    with pytest.raises(InvalidMessageError, match="reuses the id"), context:
        pass
    with pytest.raises(TurnClosedError), context:
        pass
    assert memory.stored["c"] == [stored]


def test_any_chat_memory_takes_a_turn() -> None:
    memory = _PlainMemory()
    with TurnContext(memory, "c", [Message.user("U")]) as turn:
        turn.reply(Message.assistant("A"))
    assert [m.role for m in memory.get("c")] == [Role.USER, Role.ASSISTANT]


def test_the_result_is_what_add_returned() -> None:
    memory = MessageWindowChatMemory(max_messages=2)
    memory.add("c", [Message.user("old"), Message.assistant("old")])
    context = memory.turn("c", Message.user("U"))
    with context as turn:
        turn.reply(Message.assistant("A"))
    assert isinstance(context.result, AppendResult)
    assert [m.content for m in context.result.appended] == ["U", "A"]
