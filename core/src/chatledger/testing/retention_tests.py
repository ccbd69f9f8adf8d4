"""Conformance tests of a bounded log: ``Retention.last(n)`` trims, and only that.

A repository that takes ``retention=`` sets ``supports_retention`` and
overrides ``make_repository_with_retention``; others skip these cases. The
rules are those of :mod:`chatledger.retention`.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from typing import Any

import pytest

from chatledger.messages import Message, Role, ToolCall, ToolResponse
from chatledger.repository import SupportsCountMessages, SupportsLog
from chatledger.retention import Retention
from chatledger.testing.window_tests import random_turns
from chatledger.tokens import estimate_tokens
from chatledger.window import MessageWindow, TokenWindow, Window

__all__ = ["RetentionTests"]


def _ids(messages: list[Message]) -> list[str]:
    return [m.id for m in messages]


def _turn(n: int) -> list[Message]:
    return [Message.user(f"q{n}"), Message.assistant(f"a{n}")]


class RetentionTests:
    """A bounded log keeps its newest messages, its system ones and its view."""

    #: Set to True when the repository accepts ``retention=``.
    supports_retention: bool = False

    @pytest.fixture
    def make_repository_with_retention(self) -> Callable[[Retention], Any]:
        """Return a factory of empty repositories with a retention; override it."""
        raise NotImplementedError(
            "Override `make_repository_with_retention` when supports_retention"
        )

    def _bounded(self, request: pytest.FixtureRequest, retention: Retention) -> Any:
        if not self.supports_retention:
            pytest.skip("the repository takes no retention")
        repository = request.getfixturevalue("make_repository_with_retention")(
            retention
        )
        assert isinstance(repository, SupportsLog), "a retention bounds a log"
        return repository

    def test_a_bounded_log_keeps_its_newest_messages(
        self, request: pytest.FixtureRequest
    ) -> None:
        """After every append the log holds its newest n to n + slack messages."""
        log = self._bounded(request, Retention.last(6, slack=3))
        sent: list[Message] = []
        for n in range(20):
            batch = _turn(n)
            log.append_to_log("bounded", batch)
            sent += batch
            stored = log.find_by_conversation_id("bounded")
            assert _ids(stored) == _ids(sent)[-len(stored) :], "the newest, in order"
            assert stored[0].role is Role.USER, "cut where a turn starts"
            # The newest 6 start on an assistant message half the time.
            assert min(len(sent), 5) <= len(stored) <= 6 + 3 + 1
        assert len(stored) < len(sent), "nothing was trimmed"

    def test_a_trimmed_message_is_not_stored_again_by_a_retry(
        self, request: pytest.FixtureRequest
    ) -> None:
        """A retried append of trimmed messages is a no-op."""
        log = self._bounded(request, Retention.last(4, slack=2))
        first = _turn(0)
        log.append_to_log("retried", first)
        for n in range(1, 8):
            log.append_to_log("retried", _turn(n))
        before = _ids(log.find_by_conversation_id("retried"))
        assert first[0].id not in before
        assert log.append_to_log("retried", first).appended == []
        assert _ids(log.find_by_conversation_id("retried")) == before

    def test_the_system_messages_a_view_shows_are_kept(
        self, request: pytest.FixtureRequest
    ) -> None:
        """The current system message stays; one it superseded is trimmed."""
        log = self._bounded(request, Retention.last(4, slack=2))
        old, new = Message.system("be brief"), Message.system("be kind")
        log.append_to_log("system", [old, *_turn(0)])
        for n in range(1, 6):
            log.append_to_log("system", _turn(n))
        log.append_to_log("system", [new, *_turn(6)])
        for n in range(7, 14):
            last = _turn(n)
            log.append_to_log("system", last)
        stored = log.find_by_conversation_id("system")
        assert [m.id for m in stored if m.role is Role.SYSTEM] == [new.id]
        # The system message and the newest whole turn.
        assert _ids(log.find_window("system", MessageWindow(4))) == _ids([new, *last])

    def test_a_turn_the_view_shows_is_never_trimmed(
        self, request: pytest.FixtureRequest
    ) -> None:
        """A turn longer than the bound stays whole while the view shows it."""
        log = self._bounded(request, Retention.last(4, slack=2))
        window = MessageWindow(4)
        question = Message.user("plan the trip")
        log.append_to_log("agent", [question], window)
        steps: list[Message] = []
        for n in range(8):
            call = ToolCall(id=f"c{n}", name="search", arguments="{}")
            step = [
                Message.assistant(None, tool_calls=[call]),
                Message.tool(ToolResponse(id=call.id, name="search", data="found")),
            ]
            log.append_to_log("agent", step, window)
            steps += step
        view = log.find_window("agent", window)
        assert _ids(view) == _ids([question, *steps])

    @pytest.mark.parametrize("kind", ["messages", "tokens"])
    @pytest.mark.parametrize("seed", range(4))
    def test_the_view_of_a_bounded_log_is_the_unbounded_view(
        self, request: pytest.FixtureRequest, seed: int, kind: str
    ) -> None:
        """Given its window on every append, a bounded log shows the same view.

        Random histories (system prompts, tool rounds, turns larger than the
        window), replayed on a bounded and an unbounded log of the same
        repository kind: after every append the views are equal, while the
        bounded log holds fewer messages.
        """
        rng = random.Random(seed)
        window: Window
        if kind == "messages":
            keep = rng.randint(4, 10)
            window = MessageWindow(rng.randint(1, keep))
        else:
            keep = rng.randint(4, 10)
            window = TokenWindow(rng.randint(10, 80), estimate_tokens)
        bounded = self._bounded(request, Retention.last(keep, slack=2))
        whole = self._bounded(request, Retention.everything())
        agent = seed % 4 == 3
        shrunk, system_size = False, 0
        for batch in random_turns(rng, 40, agent=agent):
            bounded.append_to_log("random", batch, window)
            whole.append_to_log("random", batch, window)
            seen = whole.find_window("random", window)
            shown = bounded.find_window("random", window)
            size = sum(window.measure(m) for m in seen if m.role is Role.SYSTEM)
            # A smaller system prompt frees room that shows older turns
            # again: the bounded log may have trimmed them.
            shrunk, system_size = shrunk or size < system_size, size
            if not shrunk:
                assert _ids(shown) == _ids(seen)
                continue
            rest = [m.id for m in shown if m.role is not Role.SYSTEM]
            whole_rest = [m.id for m in seen if m.role is not Role.SYSTEM]
            assert whole_rest[len(whole_rest) - len(rest) :] == rest
            assert [m for m in shown if m.role is Role.SYSTEM] == [
                m for m in seen if m.role is Role.SYSTEM
            ]
        if not agent:  # an agent's log is one turn, shown whole: nothing goes
            assert len(bounded.find_by_conversation_id("random")) < len(
                whole.find_by_conversation_id("random")
            )

    def test_pages_walk_what_is_kept(self, request: pytest.FixtureRequest) -> None:
        """Pages of a trimmed log give each kept message once, in order."""
        log = self._bounded(request, Retention.last(5, slack=2))
        for n in range(10):
            log.append_to_log("paged", _turn(n))
        stored = _ids(log.find_by_conversation_id("paged"))
        walked: list[str] = []
        cursor = None
        while True:
            page = log.find_messages_page("paged", cursor, limit=2, newest_first=False)
            walked += _ids(page.messages)
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        assert walked == stored
        if isinstance(log, SupportsCountMessages):
            assert log.count_messages("paged") == len(stored)

    def test_trimming_concurrent_with_appends_loses_nothing_it_keeps(
        self, request: pytest.FixtureRequest
    ) -> None:
        """Writers racing trims: each one's messages stay in order, none twice.

        Every append that returned is stored unless a later trim removed it:
        the log is each writer's newest messages, and the newest n of all.
        """
        log = self._bounded(request, Retention.last(8, slack=3))
        writers, appends = 4, 15
        failures: list[BaseException] = []

        def write(writer: int) -> None:
            try:
                for n in range(appends):
                    log.append_to_log(
                        "raced", [Message.user(f"w{writer}-{n}", id=f"w{writer}-{n}")]
                    )
            except BaseException as error:  # reported below
                failures.append(error)

        threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert failures == []
        stored = _ids(log.find_by_conversation_id("raced"))
        assert len(stored) == len(set(stored))
        assert 8 <= len(stored) <= 8 + 3
        for writer in range(writers):
            mine = [int(i.split("-")[1]) for i in stored if i.startswith(f"w{writer}-")]
            # A writer's kept messages are its newest, in its order.
            assert mine == list(range(appends - len(mine), appends))
        # One more append makes a trim due at most slack appends away: after
        # slack more, the log is back within its bound.
        for n in range(3):
            log.append_to_log("raced", [Message.user(f"late{n}")])
        assert len(log.find_by_conversation_id("raced")) <= 8 + 3
