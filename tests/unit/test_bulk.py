"""save_conversations: batches where the store can, one conversation elsewhere."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from chatledger import InMemoryChatMemoryRepository, Message, SupportsSaveMany
from chatledger.bulk import (
    MAX_BATCH_CONVERSATIONS,
    MAX_BATCH_MESSAGES,
    BulkSaveError,
    save_conversations,
)


class _Batching(InMemoryChatMemoryRepository):
    """An in-memory store with save_many, recording each call."""

    def __init__(self, fail_on: str | None = None) -> None:
        super().__init__()
        self.calls: list[list[str]] = []
        self.fail_on = fail_on

    def save_many(self, conversations: Mapping[str, Sequence[Message]]) -> None:
        if self.fail_on in conversations:
            raise OSError(f"disk full at {self.fail_on}")
        self.calls.append(list(conversations))
        for conversation_id, messages in conversations.items():
            self.save_all(conversation_id, messages)


def _many(count: int, length: int = 1) -> list[tuple[str, list[Message]]]:
    return [
        (f"c{i:05d}", [Message.user(f"m{j}") for j in range(length)])
        for i in range(count)
    ]


def test_batches_are_bounded_by_conversations_and_messages() -> None:
    target = _Batching()
    assert isinstance(target, SupportsSaveMany)
    count = MAX_BATCH_CONVERSATIONS * 2 + 1
    assert save_conversations(target, _many(count)) == count
    assert [len(call) for call in target.calls] == [
        MAX_BATCH_CONVERSATIONS,
        MAX_BATCH_CONVERSATIONS,
        1,
    ]
    long = _Batching()
    length = MAX_BATCH_MESSAGES // 2
    save_conversations(long, _many(5, length))
    assert [len(call) for call in long.calls] == [2, 2, 1]
    assert len(long.find_by_conversation_id("c00004")) == length


def test_a_store_without_save_many_gets_one_conversation_at_a_time() -> None:
    target = InMemoryChatMemoryRepository()
    seen: list[int] = []
    assert save_conversations(target, _many(3), on_saved=seen.append) == 3
    assert seen == [1, 2, 3]
    assert sorted(target.find_conversation_ids()) == ["c00000", "c00001", "c00002"]


def test_a_failed_batch_names_its_conversations_and_what_was_written() -> None:
    target = _Batching(fail_on=f"c{MAX_BATCH_CONVERSATIONS + 3:05d}")
    with pytest.raises(BulkSaveError) as raised:
        save_conversations(target, _many(MAX_BATCH_CONVERSATIONS * 2))
    error = raised.value
    assert error.saved == MAX_BATCH_CONVERSATIONS
    assert error.conversation_ids[0] == f"c{MAX_BATCH_CONVERSATIONS:05d}"
    assert len(error.conversation_ids) == MAX_BATCH_CONVERSATIONS
    assert str(error) == f"OSError: disk full at {target.fail_on}"
    assert isinstance(error.__cause__, OSError)
    assert len(target.find_conversation_ids()) == MAX_BATCH_CONVERSATIONS
