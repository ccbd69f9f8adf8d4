"""Conformance tests of ``save_many``, for repositories that have it.

A repository with :class:`chatledger.SupportsSaveMany` must give, for each
conversation of a call, what ``save_all`` gives, and write either all of the
call or none of it. Others skip these tests.
"""

from __future__ import annotations

from typing import Any

import pytest

from chatledger.errors import InvalidConversationIdError, InvalidMessageError
from chatledger.memory import MessageWindowChatMemory
from chatledger.messages import Message
from chatledger.repository import SupportsSaveMany
from chatledger.testing.samples import every_kind

__all__ = ["SaveManyTests"]


def _turns(tag: str, count: int) -> list[Message]:
    return [
        Message.user(f"{tag}-u{i}") if i % 2 == 0 else Message.assistant(f"{tag}-a{i}")
        for i in range(count)
    ]


def _saving_many(repository: Any) -> SupportsSaveMany:
    if not isinstance(repository, SupportsSaveMany):
        pytest.skip("the repository has no save_many")
    return repository


class SaveManyTests:
    """Several conversations replaced in one atomic step."""

    def test_save_many_gives_what_save_all_gives(self, repository: Any) -> None:
        """Each conversation comes back whole, ids and kinds kept, others untouched."""
        bulk = _saving_many(repository)
        repository.save_all("untouched", _turns("x", 2))
        conversations = {f"c{i}": _turns(f"c{i}", i + 1) for i in range(30)}
        conversations["kinds"] = every_kind()
        bulk.save_many(conversations)
        for conversation_id, messages in conversations.items():
            found = repository.find_by_conversation_id(conversation_id)
            assert found == messages
            assert [m.id for m in found] == [m.id for m in messages]
            assert all(m.created_at is not None for m in found)
        assert sorted(repository.find_conversation_ids()) == sorted(
            [*conversations, "untouched"]
        )

    def test_save_many_replaces_and_empty_removes(self, repository: Any) -> None:
        """A stored conversation is replaced whole; ``[]`` removes it."""
        bulk = _saving_many(repository)
        repository.save_all("replaced", _turns("old", 7))
        repository.save_all("removed", _turns("gone", 3))
        replacement = _turns("new", 2)
        added = _turns("a", 1)
        bulk.save_many({"replaced": replacement, "removed": [], "added": added})
        assert repository.find_by_conversation_id("replaced") == replacement
        assert repository.find_by_conversation_id("removed") == []
        assert sorted(repository.find_conversation_ids()) == ["added", "replaced"]

    def test_save_many_again_keeps_created_at(self, repository: Any) -> None:
        """Saving what was read back changes nothing: a re-run copy is a no-op."""
        bulk = _saving_many(repository)
        bulk.save_many({"a": _turns("a", 3), "b": _turns("b", 2)})
        stored = {c: repository.find_by_conversation_id(c) for c in ("a", "b")}
        bulk.save_many(stored)
        for conversation_id, messages in stored.items():
            found = repository.find_by_conversation_id(conversation_id)
            assert [m.created_at for m in found] == [m.created_at for m in messages]
            assert found == messages

    @pytest.mark.parametrize(
        "bad",
        [
            {"": [Message.user("x")]},
            {"ok": [Message.user("x")], "bad": [None]},
            {"ok": [Message.user("x")], "bad": "text"},
        ],
        ids=["bad id", "bad message", "not a list"],
    )
    def test_a_bad_conversation_writes_none_of_the_call(
        self, repository: Any, bad: dict[str, Any]
    ) -> None:
        """Every id and batch is checked before any I/O: nothing is written."""
        bulk = _saving_many(repository)
        repository.save_all("kept", _turns("k", 2))
        with pytest.raises((InvalidConversationIdError, InvalidMessageError)):
            bulk.save_many({"kept": [], **bad})
        assert repository.find_conversation_ids() == ["kept"]
        assert len(repository.find_by_conversation_id("kept")) == 2

    def test_a_repeated_message_id_writes_none_of_the_call(
        self, repository: Any
    ) -> None:
        """A conversation repeating a message id fails the call before any write."""
        bulk = _saving_many(repository)
        twice = Message.user("twice")
        with pytest.raises(InvalidMessageError, match="'dup'"):
            bulk.save_many({"fine": _turns("f", 2), "dup": [twice, twice]})
        assert repository.find_conversation_ids() == []

    def test_the_window_goes_on_after_save_many(self, repository: Any) -> None:
        """A memory appends to, and trims, conversations that save_many wrote."""
        bulk = _saving_many(repository)
        system = Message.system("be brief")
        bulk.save_many({"w": [system, *_turns("w", 4)], "v": _turns("v", 1)})
        memory = MessageWindowChatMemory(repository, max_messages=3)
        memory.add("w", [Message.user("next"), Message.assistant("reply")])
        assert [m.content for m in memory.get("w")] == ["be brief", "next", "reply"]
        memory.add("v", Message.assistant("second"))
        assert [m.content for m in memory.get("v")] == ["v-u0", "second"]

    def test_save_many_of_nothing_does_nothing(self, repository: Any) -> None:
        """An empty call touches nothing."""
        bulk = _saving_many(repository)
        repository.save_all("kept", _turns("k", 1))
        bulk.save_many({})
        assert repository.find_conversation_ids() == ["kept"]
