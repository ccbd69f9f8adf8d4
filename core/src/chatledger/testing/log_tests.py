"""Conformance tests of the log: appends keep everything, windows are views.

A repository with :class:`chatledger.SupportsLog` must pass them; others skip
them. The central case replays random histories (system prompts, tool
rounds, turns larger than the window, token windows with mixed sizes) and
compares the repository's window view, after every append, with the window
a write-time memory keeps (:func:`chatledger.window.apply_window`, applied
append by append).
"""

from __future__ import annotations

import random
import threading
from typing import Any

import pytest

from chatledger.errors import (
    InvalidConversationIdError,
    InvalidMessageError,
    InvalidPageError,
)
from chatledger.messages import Message, Role, ToolCall, ToolResponse
from chatledger.repository import SupportsLog
from chatledger.testing.window_tests import random_turns
from chatledger.tokens import estimate_tokens
from chatledger.window import MessageWindow, TokenWindow, Window, apply_window

__all__ = ["LogTests"]


def _log(repository: Any) -> Any:
    if not isinstance(repository, SupportsLog):
        pytest.skip("the repository keeps no log (SupportsLog)")
    return repository


def _ids(messages: list[Message]) -> list[str]:
    return [m.id for m in messages]


def _system_size(messages: list[Message], window: Window) -> int:
    return sum(window.measure(m) for m in messages if m.role is Role.SYSTEM)


def _all_pages(repository: Any, conversation_id: str, **request: Any) -> list[str]:
    ids: list[str] = []
    cursor = None
    for _ in range(100_000):
        page = repository.find_messages_page(conversation_id, cursor, **request)
        ids += _ids(page.messages)
        if page.next_cursor is None:
            return ids
        assert page.messages, "a page with a next cursor must hold messages"
        cursor = page.next_cursor
    raise AssertionError("paging did not end")


class _CountingCounter:
    """A token counter that counts its calls, named so sizes can be stored."""

    counter_id = "conformance-counting"

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, message: Message) -> int:
        self.calls += 1
        return estimate_tokens(message)


class LogTests:
    """The log keeps every message once, in order; windows are views of it."""

    def test_the_log_keeps_every_message_in_order(self, repository: Any) -> None:
        """Appends never evict: the whole log reads back, oldest first."""
        log = _log(repository)
        window = MessageWindow(2)
        sent: list[Message] = []
        for n in range(10):
            batch = [Message.user(f"u{n}"), Message.assistant(f"a{n}")]
            result = log.append_to_log("whole", batch, window)
            assert _ids(result.appended) == _ids(batch)
            assert result.evicted_ids == []
            sent += batch
        stored = log.find_by_conversation_id("whole")
        assert _ids(stored) == _ids(sent)
        assert [m.content for m in stored] == [m.content for m in sent]
        assert all(m.created_at is not None for m in stored)
        assert _ids(log.find_window("whole", window)) == _ids(sent[-2:])

    def test_a_retried_append_is_a_no_op(self, repository: Any) -> None:
        """A message whose id the log holds is never stored again."""
        log = _log(repository)
        batch = [Message.user("q"), Message.assistant("a")]
        log.append_to_log("retry", batch)
        again = log.append_to_log("retry", [*batch, Message.user("q2")])
        assert [m.content for m in again.appended] == ["q2"]
        assert log.append_to_log("retry", batch).appended == []
        assert [m.content for m in log.find_by_conversation_id("retry")] == [
            "q",
            "a",
            "q2",
        ]

    def test_system_messages_are_superseded_in_the_view_and_kept_in_the_log(
        self, repository: Any
    ) -> None:
        """Rule 1 on a log: an equal prompt is not stored twice, a new one wins."""
        log = _log(repository)
        window = MessageWindow(10)
        log.append_to_log("sys", [Message.system("one"), Message.user("u1")])
        repeated = log.append_to_log("sys", [Message.system("one"), Message.user("u2")])
        assert [m.content for m in repeated.appended] == ["u2"]
        log.append_to_log("sys", [Message.system("two"), Message.system("three")])
        assert [m.content for m in log.find_window("sys", window)] == [
            "u1",
            "u2",
            "two",
            "three",
        ]
        assert [m.content for m in log.find_by_conversation_id("sys")] == [
            "one",
            "u1",
            "u2",
            "two",
            "three",
        ]

    @pytest.mark.parametrize("kind", ["messages", "tokens"])
    @pytest.mark.parametrize("seed", range(6))
    def test_window_view_matches_the_write_time_window(
        self, repository: Any, seed: int, kind: str
    ) -> None:
        """After every append, the view equals the window a write-time memory keeps.

        Where a system prompt was replaced by a smaller one, the view may show
        older turns again, which a write-time window had deleted: then its
        messages after the system ones must end with the write-time window's.
        Every third seed makes an agent's conversation, with no user message.
        """
        log = _log(repository)
        rng = random.Random(seed)
        window: Window
        if kind == "messages":
            window = MessageWindow(rng.randint(1, 12))
        else:
            window = TokenWindow(rng.randint(10, 120), estimate_tokens)
        expected: list[Message] = []
        shrunk = False
        for batch in random_turns(rng, 30, agent=seed % 3 == 2):
            before = _system_size(expected, window)
            log.append_to_log("random", batch, window)
            fresh = [m for m in batch if m.id not in {e.id for e in expected}]
            if fresh:
                expected = apply_window(expected, fresh, window).messages
            shrunk = shrunk or _system_size(expected, window) < before
            view = log.find_window("random", window)
            if not shrunk:
                assert _ids(view) == _ids(expected)
                continue
            rest = [m.id for m in view if m.role is not Role.SYSTEM]
            kept = [m.id for m in expected if m.role is not Role.SYSTEM]
            assert rest[len(rest) - len(kept) :] == kept
            assert [m for m in view if m.role is Role.SYSTEM] == [
                m for m in expected if m.role is Role.SYSTEM
            ]

    def test_a_log_without_a_user_message_is_one_turn(self, repository: Any) -> None:
        """No user message to cut at: the view shows the turn in progress whole."""
        log = _log(repository)
        call = ToolCall(id="t", name="f", arguments="{}")
        orphan = Message.tool(ToolResponse(id="t0", name="f", data="r0"))
        steps = [
            Message.assistant(None, tool_calls=[call]),
            Message.tool(ToolResponse(id="t", name="f", data="r")),
            Message.assistant("done"),
        ]
        log.append_to_log("agent", [orphan, *steps])
        assert _ids(log.find_window("agent", MessageWindow(1))) == _ids(steps)

    def test_a_stored_size_is_not_measured_again(self, repository: Any) -> None:
        """A token window reads sizes stored by appends under its counter."""
        log = _log(repository)
        counter = _CountingCounter()
        window = TokenWindow(50, counter)
        log.append_to_log("sized", [Message.user("hello there")], window)
        log.append_to_log("sized", [Message.assistant("general kenobi")], window)
        assert counter.calls <= 2
        counter.calls = 0
        assert len(log.find_window("sized", window)) == 2
        assert counter.calls == 0

    def test_pages_walk_the_log_in_both_directions(self, repository: Any) -> None:
        """Pages give every message once, newest or oldest first."""
        log = _log(repository)
        sent = [Message.user(f"m{n}") for n in range(23)]
        for n in range(0, 23, 5):
            log.append_to_log("paged", sent[n : n + 5])
        ids = _ids(sent)
        assert _all_pages(log, "paged", limit=4) == ids[::-1]
        assert _all_pages(log, "paged", limit=4, newest_first=False) == ids
        assert _all_pages(log, "paged", limit=23) == ids[::-1]
        empty = log.find_messages_page("nobody")
        assert (empty.messages, empty.next_cursor) == ([], None)

    def test_paging_is_exact_while_appends_go_on(self, repository: Any) -> None:
        """Concurrent appends never make a page repeat or skip a stored message."""
        log = _log(repository)
        first = [Message.user(f"old{n}") for n in range(30)]
        log.append_to_log("busy", first)
        stop = threading.Event()
        failures: list[BaseException] = []

        def append() -> None:
            n = 0
            try:
                while not stop.is_set() and n < 200:
                    log.append_to_log("busy", [Message.user(f"new{n}")])
                    n += 1
            except BaseException as error:  # reported below
                failures.append(error)

        writer = threading.Thread(target=append)
        writer.start()
        try:
            newest = _all_pages(log, "busy", limit=3)
            oldest = _all_pages(log, "busy", limit=3, newest_first=False)
        finally:
            stop.set()
            writer.join()
        assert failures == []
        assert [i for i in newest if i in set(_ids(first))] == _ids(first)[::-1]
        assert len(newest) == len(set(newest))
        assert oldest[:30] == _ids(first)
        assert len(oldest) == len(set(oldest))
        stored = _ids(log.find_by_conversation_id("busy"))
        assert oldest == stored[: len(oldest)]

    def test_bad_requests_fail_before_any_io(self, repository: Any) -> None:
        """Bad ids, batches, windows and cursors raise and store nothing."""
        log = _log(repository)
        with pytest.raises(InvalidConversationIdError):
            log.append_to_log(" bad", [Message.user("x")])
        with pytest.raises(InvalidMessageError):
            log.append_to_log("ok", ["not a message"])  # type: ignore[list-item]
        with pytest.raises(TypeError):
            log.find_window("ok", 20)
        with pytest.raises(InvalidPageError):
            log.find_messages_page("ok", limit=0)
        with pytest.raises(InvalidPageError):
            log.find_messages_page("ok", cursor="not a cursor")
        log.append_to_log("ok", [Message.user(f"m{n}") for n in range(3)])
        cursor = log.find_messages_page("ok", limit=1).next_cursor
        with pytest.raises(InvalidPageError):
            log.find_messages_page("ok", cursor, limit=1, newest_first=False)
        assert log.find_conversation_ids() == ["ok"]
        assert log.append_to_log("ok", []).appended == []
