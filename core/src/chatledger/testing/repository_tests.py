"""Conformance tests of the four repository operations.

Every adapter runs these unchanged, through
:class:`chatledger.testing.ChatMemoryRepositoryTests`.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, timedelta
from typing import Any

import pytest

from chatledger.errors import InvalidConversationIdError, InvalidMessageError
from chatledger.messages import Message
from chatledger.repository import ChatMemoryRepository
from chatledger.testing.samples import (
    BAD_CONVERSATION_IDS,
    ODD_CONVERSATION_IDS,
    UNICODE_CORPUS,
    every_kind,
)

__all__ = ["RepositoryContractTests"]


def _conversation(length: int) -> list[Message]:
    return [
        Message.user(f"u{i}") if i % 2 == 0 else Message.assistant(f"a{i}")
        for i in range(length)
    ]


def _assert_same(found: list[Message], expected: list[Message]) -> None:
    assert found == expected
    assert [m.id for m in found] == [m.id for m in expected]


class RepositoryContractTests:
    """Round trips, order, replace and delete semantics, ids and validation."""

    @pytest.fixture
    def repository(self) -> Iterator[ChatMemoryRepository]:
        """Yield an EMPTY repository; override it in your subclass."""
        raise NotImplementedError(
            "Override the `repository` fixture to yield an empty ChatMemoryRepository"
        )

    def test_empty_repository_lists_no_conversation(self, repository: Any) -> None:
        """A new repository lists no conversation ids."""
        assert repository.find_conversation_ids() == []

    def test_unknown_conversation_reads_empty(self, repository: Any) -> None:
        """Reading an unknown conversation returns an empty list."""
        assert repository.find_by_conversation_id("nobody") == []

    def test_every_message_kind_round_trips(self, repository: Any) -> None:
        """Every kind of message comes back equal, with its id, in order."""
        messages = every_kind()
        repository.save_all("kinds", messages)
        _assert_same(repository.find_by_conversation_id("kinds"), messages)

    def test_tool_calls_keep_order_and_exact_arguments(self, repository: Any) -> None:
        """Tool calls and tool responses keep their order and exact argument text."""
        messages = every_kind()
        repository.save_all("tools", messages)
        found = repository.find_by_conversation_id("tools")
        assert [c.id for c in found[2].tool_calls] == ["call_1", "call_2", "call_3"]
        assert found[2].tool_calls[1].arguments == '{ "city" : "Rome 🇮🇹" }'
        assert found[2].content is None
        assert [r.id for r in found[3].tool_responses] == ["call_2", "call_1", "call_3"]

    def test_media_round_trips_bytes_and_urls(self, repository: Any) -> None:
        """Bytes media come back byte-identical and URL media as the same string."""
        messages = every_kind()
        repository.save_all("media", messages)
        media = repository.find_by_conversation_id("media")[5].media
        assert media == messages[5].media
        assert isinstance(media[0].data, bytes)
        assert isinstance(media[1].data, str)

    def test_metadata_keeps_json_types(self, repository: Any) -> None:
        """Metadata keeps its JSON types (big ints stay ints) and its exact keys."""
        messages = every_kind()
        repository.save_all("meta", messages)
        metadata = repository.find_by_conversation_id("meta")[-1].metadata
        assert metadata == messages[-1].metadata
        assert type(metadata["int"]) is int
        assert metadata["int"] == 2**63 + 1
        assert type(metadata["float"]) is float
        assert metadata["bool"] is True
        assert {"$set", "a.b", ""} <= set(metadata)

    def test_none_and_empty_content_stay_distinct(self, repository: Any) -> None:
        """``None`` content comes back as ``None`` and ``""`` as ``""``."""
        messages = [Message.assistant(None), Message.assistant(""), Message.tool([])]
        repository.save_all("none", messages)
        found = repository.find_by_conversation_id("none")
        assert [m.content for m in found] == [None, "", None]

    @pytest.mark.parametrize("text", UNICODE_CORPUS)
    def test_unicode_round_trips_exactly(self, repository: Any, text: str) -> None:
        """Unicode text, NUL included, comes back identical."""
        repository.save_all("unicode", [Message.user(text), Message.assistant(text)])
        found = repository.find_by_conversation_id("unicode")
        assert [m.content for m in found] == [text, text]

    def test_one_megabyte_content_round_trips(self, repository: Any) -> None:
        """A 1 MB message comes back identical, never truncated."""
        text = ("0123456789abcdef" * 65536) + "é😀"
        repository.save_all("big", [Message.user(text)])
        assert repository.find_by_conversation_id("big")[0].content == text

    @pytest.mark.parametrize("length", [1, 2, 10, 1000, 10000])
    def test_order_is_list_order(self, repository: Any, length: int) -> None:
        """Messages come back in the order they were saved, at any length."""
        messages = _conversation(length)
        repository.save_all("order", messages)
        _assert_same(repository.find_by_conversation_id("order"), messages)

    def test_save_all_replaces_previous_messages(self, repository: Any) -> None:
        """A second ``save_all`` replaces the first one entirely."""
        repository.save_all("c", _conversation(5))
        replacement = [Message.user("only")]
        repository.save_all("c", replacement)
        _assert_same(repository.find_by_conversation_id("c"), replacement)

    def test_save_all_empty_removes_the_conversation(self, repository: Any) -> None:
        """``save_all(id, [])`` removes the id from the listing, like a delete."""
        repository.save_all("gone", _conversation(3))
        repository.save_all("kept", _conversation(1))
        repository.save_all("gone", [])
        assert repository.find_by_conversation_id("gone") == []
        assert sorted(repository.find_conversation_ids()) == ["kept"]

    def test_delete_removes_the_conversation(self, repository: Any) -> None:
        """Deleting a conversation removes its messages and its id only."""
        repository.save_all("gone", _conversation(30))
        repository.save_all("kept", _conversation(2))
        repository.delete_by_conversation_id("gone")
        assert repository.find_by_conversation_id("gone") == []
        assert sorted(repository.find_conversation_ids()) == ["kept"]
        assert len(repository.find_by_conversation_id("kept")) == 2

    def test_delete_missing_conversation_is_noop(self, repository: Any) -> None:
        """Deleting an unknown id does not raise."""
        repository.delete_by_conversation_id("never-saved")
        assert repository.find_conversation_ids() == []

    def test_conversation_listing_is_complete(self, repository: Any) -> None:
        """Every saved conversation is listed, with no cap."""
        ids = [f"conv-{i}" for i in range(1200)]
        for conversation_id in ids:
            repository.save_all(conversation_id, [Message.user(conversation_id)])
        assert sorted(repository.find_conversation_ids()) == sorted(ids)

    def test_odd_ids_stay_isolated(self, repository: Any) -> None:
        """Ids with metacharacters, injection lookalikes and unicode never collide."""
        for conversation_id in ODD_CONVERSATION_IDS:
            repository.save_all(conversation_id, [Message.user(conversation_id)])
        assert sorted(repository.find_conversation_ids()) == sorted(
            ODD_CONVERSATION_IDS
        )
        for conversation_id in ODD_CONVERSATION_IDS:
            found = repository.find_by_conversation_id(conversation_id)
            assert [m.content for m in found] == [conversation_id]
        repository.delete_by_conversation_id("a*")
        remaining = set(ODD_CONVERSATION_IDS) - {"a*"}
        assert set(repository.find_conversation_ids()) == remaining

    @pytest.mark.parametrize("bad_id", BAD_CONVERSATION_IDS, ids=repr)
    def test_bad_ids_are_rejected_and_change_nothing(
        self, repository: Any, bad_id: Any
    ) -> None:
        """Every operation rejects a bad id with a clear error and writes nothing."""
        repository.save_all("existing", [Message.user("x")])
        with pytest.raises(InvalidConversationIdError):
            repository.save_all(bad_id, [Message.user("y")])
        with pytest.raises(InvalidConversationIdError):
            repository.find_by_conversation_id(bad_id)
        with pytest.raises(InvalidConversationIdError):
            repository.delete_by_conversation_id(bad_id)
        assert repository.find_conversation_ids() == ["existing"]

    @pytest.mark.parametrize(
        "bad_batch",
        [None, "text", [None], [Message.user("a"), None], [Message.user("a"), "b"], 42],
        # Stable names: a message's repr holds its random id, and parallel
        # runners must collect the same test ids.
        ids=[
            "none",
            "text",
            "list-of-none",
            "message-then-none",
            "message-then-str",
            "int",
        ],
    )
    def test_bad_messages_are_rejected_and_change_nothing(
        self, repository: Any, bad_batch: Any
    ) -> None:
        """A bad batch raises before any write and leaves the conversation as it was."""
        before = _conversation(3)
        repository.save_all("c", before)
        with pytest.raises(InvalidMessageError):
            repository.save_all("c", bad_batch)
        _assert_same(repository.find_by_conversation_id("c"), before)

    def test_batch_repeating_a_message_id_is_rejected(self, repository: Any) -> None:
        """A batch in which two messages share an id is rejected whole."""
        message = Message.user("twice")
        with pytest.raises(InvalidMessageError):
            repository.save_all("dup", [message, message])
        assert repository.find_conversation_ids() == []

    def test_created_at_is_set_once_utc_and_kept(self, repository: Any) -> None:
        """``created_at`` is set on first store, UTC-aware, and kept on re-save."""
        repository.save_all("t", [Message.user("first")])
        first = repository.find_by_conversation_id("t")[0]
        assert first.created_at is not None
        assert first.created_at.utcoffset() == timedelta(0)
        assert first.created_at.tzinfo is not None
        repository.save_all("t", [first, Message.assistant("second")])
        again = repository.find_by_conversation_id("t")
        assert again[0].created_at == first.created_at
        assert again[1].created_at is not None
        assert again[1].created_at >= first.created_at.astimezone(UTC) - timedelta(
            seconds=1
        )

    def test_returned_lists_are_copies(self, repository: Any) -> None:
        """Changing a list passed in or read back changes nothing stored."""
        messages = _conversation(2)
        repository.save_all("copy", messages)
        messages.append(Message.user("later"))
        found = repository.find_by_conversation_id("copy")
        found.clear()
        assert len(repository.find_by_conversation_id("copy")) == 2

    def test_message_ids_are_kept(self, repository: Any) -> None:
        """Caller-given message ids come back unchanged."""
        given = Message.user("hi", id=f"client-{uuid.uuid4()}")
        repository.save_all("ids", [given])
        assert repository.find_by_conversation_id("ids")[0].id == given.id
