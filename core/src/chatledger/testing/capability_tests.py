"""Conformance tests of the optional capabilities: counting and paging.

A repository without a capability skips its tests; one that has it (by the
protocols :class:`chatledger.SupportsCountMessages` and
:class:`chatledger.SupportsConversationPages`) must pass them.
"""

from __future__ import annotations

from typing import Any

import pytest

from chatledger.errors import InvalidConversationIdError, InvalidPageError
from chatledger.messages import Message
from chatledger.repository import SupportsConversationPages, SupportsCountMessages
from chatledger.testing.async_runner import window_memory
from chatledger.window import MessageWindow

__all__ = ["CapabilityTests"]


def _counting(repository: Any) -> Any:
    if not isinstance(repository, SupportsCountMessages):
        pytest.skip("the repository cannot count messages (count_messages)")
    return repository


def _paging(repository: Any) -> Any:
    if not isinstance(repository, SupportsConversationPages):
        pytest.skip("the repository cannot page (find_conversation_ids_page)")
    return repository


def _all_pages(repository: Any, limit: int) -> list[str]:
    ids: list[str] = []
    cursor = None
    for _ in range(1_000_000):
        page = repository.find_conversation_ids_page(cursor, limit)
        assert len(page.ids) <= limit
        ids += page.ids
        if page.next_cursor is None:
            return ids
        assert page.ids, "a page with a next cursor must hold ids"
        cursor = page.next_cursor
    raise AssertionError("paging did not end")


class CapabilityTests:
    """``count_messages`` and ``find_conversation_ids_page``, where offered."""

    #: How many conversations the paging test stores. A backend that pages
    #: internally (a driver's fetch size, a SCAN batch) sets it past that
    #: boundary (10,000 or more), so the test crosses it.
    many_conversations = 250

    def test_count_messages_counts_what_is_stored(self, repository: Any) -> None:
        """count_messages equals the length of what a read returns."""
        counting = _counting(repository)
        assert counting.count_messages("nobody") == 0
        counting.save_all("c", [Message.system("S"), Message.user("U")])
        assert counting.count_messages("c") == 2
        memory = window_memory(counting, MessageWindow(4))
        for turn in range(5):
            memory.add("c", [Message.user(f"u{turn}"), Message.assistant(f"a{turn}")])
            stored = counting.find_by_conversation_id("c")
            assert counting.count_messages("c") == len(stored)
        counting.delete_by_conversation_id("c")
        assert counting.count_messages("c") == 0
        with pytest.raises(InvalidConversationIdError):
            counting.count_messages("  ")

    def test_pages_list_every_conversation_exactly_once(self, repository: Any) -> None:
        """Paging through every page yields each stored conversation once."""
        paging = _paging(repository)
        first = paging.find_conversation_ids_page()
        assert (first.ids, first.next_cursor) == ([], None)
        expected = {f"conv-{n:06d}" for n in range(self.many_conversations)}
        for conversation_id in sorted(expected):
            paging.save_all(conversation_id, [Message.user("hi")])
        # Pages of an odd size, about a dozen of them, and pages of 1,000.
        for limit in (1_000, max(97, len(expected) // 12 + 1)):
            found = _all_pages(paging, limit)
            assert len(found) == len(set(found)), "an id came twice"
            assert set(found) == expected
        exact = _all_pages(paging, len(expected))
        assert sorted(exact) == sorted(expected)

    def test_paging_while_others_write(self, repository: Any) -> None:
        """Conversations that exist throughout come once while others come and go."""
        paging = _paging(repository)
        throughout = {f"keep-{n:04d}" for n in range(120)}
        doomed = [f"gone-{n:04d}" for n in range(60)]
        for conversation_id in sorted(throughout) + doomed:
            paging.save_all(conversation_id, [Message.user("hi")])
        seen: list[str] = []
        cursor = None
        step = 0
        while True:
            page = paging.find_conversation_ids_page(cursor, 10)
            seen += page.ids
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
            if step < len(doomed):
                paging.delete_by_conversation_id(doomed[step])
            paging.save_all(f"new-{step:04d}", [Message.user("hi")])
            step += 1
        kept = [i for i in seen if i in throughout]
        assert sorted(kept) == sorted(throughout)
        assert len(seen) == len(set(seen)), "an id came twice"

    @pytest.mark.parametrize("limit", [0, -1, 10_001, 2.5, "10", True])
    def test_a_bad_page_limit_is_refused(self, repository: Any, limit: Any) -> None:
        """A limit outside 1..10,000 (or not an int) is refused before any I/O."""
        paging = _paging(repository)
        with pytest.raises(InvalidPageError):
            paging.find_conversation_ids_page(None, limit)

    @pytest.mark.parametrize("cursor", ["", 5, b"x"])
    def test_a_bad_cursor_is_refused(self, repository: Any, cursor: Any) -> None:
        """A cursor that is not a page's next_cursor text is refused."""
        paging = _paging(repository)
        with pytest.raises(InvalidPageError):
            paging.find_conversation_ids_page(cursor, 10)
