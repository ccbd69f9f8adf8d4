"""Conversation id validation, batch validation and token counting."""

from __future__ import annotations

import sys

import pytest

from chatledger import (
    InMemoryChatMemoryRepository,
    InvalidConversationIdError,
    InvalidMessageError,
    Media,
    Message,
    TokenWindowChatMemory,
    ToolCall,
)
from chatledger.testing.samples import BAD_CONVERSATION_IDS, ODD_CONVERSATION_IDS
from chatledger.tokens import (
    MEDIA_TOKENS,
    MESSAGE_OVERHEAD_TOKENS,
    TokenCounterUnavailableError,
    counter_name,
    estimate_tokens,
    tiktoken_counter,
)
from chatledger.validation import validate_conversation_id, validate_messages


@pytest.mark.parametrize("good", ODD_CONVERSATION_IDS)
def test_odd_ids_are_valid(good: str) -> None:
    assert validate_conversation_id(good) is good


@pytest.mark.parametrize("bad", BAD_CONVERSATION_IDS, ids=repr)
def test_bad_ids_are_rejected_as_value_and_type_errors(bad: object) -> None:
    with pytest.raises(InvalidConversationIdError) as caught:
        validate_conversation_id(bad)
    assert isinstance(caught.value, ValueError)
    assert isinstance(caught.value, TypeError)


def test_id_length_counts_utf8_bytes() -> None:
    validate_conversation_id("😀" * 63)  # 252 bytes
    with pytest.raises(InvalidConversationIdError, match="256 bytes"):
        validate_conversation_id("😀" * 64)


def test_single_message_is_wrapped() -> None:
    message = Message.user("x")
    assert validate_messages(message) == [message]


def test_generator_is_accepted_once() -> None:
    batch = validate_messages(Message.user(str(i)) for i in range(3))
    assert [m.content for m in batch] == ["0", "1", "2"]


def test_dict_is_not_a_batch() -> None:
    with pytest.raises(InvalidMessageError):
        validate_messages({"role": "user"})


def test_estimate_counts_text_tool_calls_and_media() -> None:
    assert estimate_tokens(Message.user("abcd" * 10)) == 10 + MESSAGE_OVERHEAD_TOKENS
    call = Message.assistant(
        None, tool_calls=[ToolCall(id="1", name="fn", arguments="{}")]
    )
    assert estimate_tokens(call) > MESSAGE_OVERHEAD_TOKENS
    with_media = Message.user("", media=[Media("image/png", b"x")])
    assert estimate_tokens(with_media) == MESSAGE_OVERHEAD_TOKENS + MEDIA_TOKENS


def test_message_larger_than_budget_is_kept_as_newest_turn() -> None:
    """One message larger than the whole budget is kept: it is the newest turn."""
    memory = TokenWindowChatMemory(repository=_repo(), max_tokens=50)
    memory.add("c", [Message.user("short"), Message.assistant("ok")])
    huge = Message.user("x" * 1000)
    memory.add("c", huge)
    assert memory.get("c") == [huge]


def test_oversized_reply_keeps_its_whole_turn() -> None:
    """A reply that overflows the budget keeps its question: the turn stays whole."""
    memory = TokenWindowChatMemory(repository=_repo(), max_tokens=50)
    memory.add("c", [Message.user("q1"), Message.assistant("a1")])
    memory.add("c", [Message.user("q2"), Message.assistant("y" * 1000)])
    assert memory.get("c")[0].content == "q2"


def test_counter_must_return_non_negative_int() -> None:
    memory = TokenWindowChatMemory(_repo(), 10, token_counter=lambda m: -1)
    with pytest.raises(ValueError, match="token_counter"):
        memory.add("c", Message.user("x"))


def test_tiktoken_missing_fails_clearly(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without tiktoken installed the counter names the extra to install."""
    monkeypatch.setitem(sys.modules, "tiktoken", None)
    with pytest.raises(TokenCounterUnavailableError, match=r"chatledger\[tiktoken\]"):
        tiktoken_counter()


def test_tiktoken_unknown_encoding_fails_clearly() -> None:
    pytest.importorskip("tiktoken")
    with pytest.raises(TokenCounterUnavailableError, match="no-such-encoding") as e:
        tiktoken_counter("no-such-encoding")
    # The name is wrong, not the network: say what it takes.
    message = str(e.value)
    assert "neither an encoding" in message
    assert "o200k_base" in message
    assert "gpt-4o" in message
    assert "TIKTOKEN_CACHE_DIR" not in message
    assert "download" not in message


def test_tiktoken_takes_a_model_name() -> None:
    pytest.importorskip("tiktoken")
    failure: str | None = None
    try:
        counter = tiktoken_counter("gpt-4o")
    except TokenCounterUnavailableError as exc:
        failure = str(exc)
    if failure is not None:
        # Offline the model's encoding cannot be fetched: the error says which.
        assert "the encoding 'o200k_base' of the model 'gpt-4o'" in failure
        assert "TIKTOKEN_CACHE_DIR" in failure
    else:
        # Sizes are shared with every counter of the same encoding.
        assert counter_name(counter) == "tiktoken_o200k_base"
        assert counter(Message.user("hi")) > 0


def _repo() -> InMemoryChatMemoryRepository:
    return InMemoryChatMemoryRepository()
