"""Conformance tests of the window memories over a repository, and of atomic appends."""

from __future__ import annotations

import random
import threading
from typing import Any

import pytest

from chatledger.messages import Message, Role, ToolCall, ToolResponse
from chatledger.repository import SupportsLog, SupportsWindowAppend
from chatledger.testing.async_runner import window_memory
from chatledger.tokens import estimate_tokens
from chatledger.window import MessageWindow, TokenWindow, Window, apply_window

__all__ = ["WindowMemoryTests", "random_turns"]

_SYSTEM_METADATA: list[dict[str, object] | None] = [
    None,
    {"x": 1},
    {"x": 1.0},
    {"x": True},
    {"x": {"y": [1, 2.0]}},
    {"x": {"y": [True, 2]}},
]


def random_turns(
    rng: random.Random, turns: int, *, agent: bool = False
) -> list[list[Message]]:
    """Make ``turns`` random batches: user turns, tool loops and system prompts.

    With ``agent``, make an agent's conversation instead: no user message at
    all, and a first batch that opens on a tool response whose call is not in
    the history.
    """
    batches: list[list[Message]] = []
    for turn in range(turns):
        batch: list[Message] = []
        if rng.random() < 0.15:
            # Metadata that Python compares equal across types (1, 1.0, True)
            # must count as one system message on every backend (rule 1).
            metadata = rng.choice(_SYSTEM_METADATA)
            batch.append(
                Message.system(f"system {rng.randint(0, 2)}", metadata=metadata)
            )
        if agent:
            if turn == 0:
                orphan = ToolResponse(id="gone", name="f", data="ok")
                batch.append(Message.tool(orphan))
        elif rng.random() < 0.9:
            batch.append(Message.user(f"user {turn} " + "x" * rng.randint(0, 40)))
        for step in range(rng.choice([0, 0, 1, 2])):
            call = ToolCall(id=f"t{turn}-{step}", name="f", arguments="{}")
            batch.append(Message.assistant(None, tool_calls=[call]))
            batch.append(Message.tool(ToolResponse(id=call.id, name="f", data="ok")))
        if rng.random() < 0.9:
            batch.append(
                Message.assistant(f"answer {turn} " + "y" * rng.randint(0, 80))
            )
        if not batch:
            batch.append(
                Message.assistant(f"answer {turn}")
                if agent
                else Message.user(f"user {turn}")
            )
        if (agent and turn == 0) or rng.random() < 0.5:
            batches.append(batch)
        else:
            batches.extend([m] for m in batch)
    return batches


def _contents(messages: list[Message]) -> list[tuple[Role, str | None]]:
    return [(m.role, m.content) for m in messages]


class WindowMemoryTests:
    """The window rules hold over the repository, and atomic appends lose nothing."""

    #: Set to True when the repository implements ``SupportsWindowAppend``.
    supports_atomic_append: bool = False
    #: Set to False only for an adapter that keeps no record of evicted ids
    #: (``chatledger.evicted_ids``): its late retries are stored again.
    remembers_evicted_ids: bool = True
    #: Threads that append at once in the concurrency test.
    concurrent_writers: int = 8
    #: Appends each of those threads makes.
    appends_per_writer: int = 50

    def _require_evicted_record(self) -> None:
        if not self.supports_atomic_append:
            pytest.skip("the repository has no atomic window append")
        if not self.remembers_evicted_ids:
            pytest.skip("the repository keeps no record of evicted ids")

    def test_atomic_append_flag_matches_capability(self, repository: Any) -> None:
        """``supports_atomic_append`` is True exactly when the capability is there."""
        assert (
            isinstance(repository, SupportsWindowAppend) == self.supports_atomic_append
        )

    def test_window_keeps_spring_turn_snapping(self, repository: Any) -> None:
        """max=2 with [U1,A1,U2,A2,U3] keeps [U3]: the cut snaps to the next user."""
        memory = window_memory(repository, MessageWindow(2))
        memory.add(
            "snap",
            [
                Message.user("U1"),
                Message.assistant("A1"),
                Message.user("U2"),
                Message.assistant("A2"),
                Message.user("U3"),
            ],
        )
        assert [m.content for m in memory.get("snap")] == ["U3"]

    def test_window_never_evicts_system_messages(self, repository: Any) -> None:
        """System messages stay while older turns are evicted one by one."""
        memory = window_memory(repository, MessageWindow(3))
        memory.add(
            "sys", [Message.system("S"), Message.user("U1"), Message.assistant("A1")]
        )
        memory.add("sys", [Message.user("U2"), Message.assistant("A2")])
        assert [m.content for m in memory.get("sys")] == ["S", "U2", "A2"]

    def test_equal_system_message_is_not_stored_twice(self, repository: Any) -> None:
        """Adding a system message equal to the stored one keeps a single copy."""
        memory = window_memory(repository, MessageWindow(10))
        memory.add("s", [Message.system("S"), Message.user("U1")])
        memory.add("s", [Message.system("S"), Message.user("U2")])
        assert [m.content for m in memory.get("s")] == ["S", "U1", "U2"]

    def test_new_system_message_replaces_old_ones(self, repository: Any) -> None:
        """A different system message replaces every stored one and goes at the end."""
        memory = window_memory(repository, MessageWindow(10))
        memory.add("s", [Message.system("S1"), Message.user("U1")])
        memory.add("s", [Message.system("S2")])
        assert [m.content for m in memory.get("s")] == ["U1", "S2"]

    def test_append_with_known_message_id_is_a_noop(self, repository: Any) -> None:
        """Re-adding a message with an id already stored (a retry) stores nothing."""
        memory = window_memory(repository, MessageWindow(10))
        message = Message.user("once")
        memory.add("retry", message)
        memory.add("retry", message)
        memory.add("retry", [message, Message.assistant("reply")])
        assert [m.content for m in memory.get("retry")] == ["once", "reply"]

    def test_empty_add_is_a_noop(self, repository: Any) -> None:
        """Adding an empty batch writes nothing and creates no conversation."""
        memory = window_memory(repository, MessageWindow(10))
        memory.add("empty", [])
        assert repository.find_conversation_ids() == []

    def test_clear_removes_the_conversation(self, repository: Any) -> None:
        """``clear`` removes the conversation, and a later add starts afresh."""
        memory = window_memory(repository, MessageWindow(10))
        memory.add("c", [Message.user("U1")])
        memory.clear("c")
        assert memory.get("c") == []
        assert repository.find_conversation_ids() == []
        memory.add("c", [Message.user("U2")])
        assert [m.content for m in memory.get("c")] == ["U2"]

    def test_window_append_keeps_created_at(self, repository: Any) -> None:
        """Appends and evictions never change ``created_at`` of surviving messages."""
        memory = window_memory(repository, MessageWindow(4))
        memory.add("t", [Message.user("U1"), Message.assistant("A1")])
        before = {m.id: m.created_at for m in memory.get("t")}
        memory.add("t", [Message.user("U2"), Message.assistant("A2")])
        after = memory.get("t")
        assert all(before[m.id] == m.created_at for m in after if m.id in before)
        assert all(m.created_at is not None for m in after)

    @pytest.mark.parametrize("seed", range(12))
    @pytest.mark.parametrize("kind", ["messages", "tokens"])
    def test_window_matches_the_pure_policy(
        self, repository: Any, seed: int, kind: str
    ) -> None:
        """On random histories the stored window equals ``apply_window``'s result.

        Every third seed makes an agent's conversation, with no user message:
        it overflows and is kept whole but for its leading tool response.
        """
        rng = random.Random(seed)
        window: Window
        if kind == "messages":
            memory: Any = window_memory(repository, MessageWindow(rng.randint(1, 12)))
        else:
            memory = window_memory(
                repository, TokenWindow(rng.randint(10, 120), estimate_tokens)
            )
        window = memory.window
        expected: list[Message] = []
        for batch in random_turns(rng, 25, agent=seed % 3 == 2):
            memory.add("random", batch)
            fresh = [m for m in batch if m.id not in {e.id for e in expected}]
            if fresh:
                expected = apply_window(expected, fresh, window).messages
            assert _contents(memory.get("random")) == _contents(expected)
        assert [m.id for m in memory.get("random")] == [m.id for m in expected]

    def test_a_tool_response_never_opens_the_window(self, repository: Any) -> None:
        """A tool response whose call is not in the window is never shown (rule 4)."""
        memory = window_memory(repository, MessageWindow(1))
        memory.add("orphan", [Message.tool(ToolResponse(id="c", name="f", data="r"))])
        assert memory.get("orphan") == []  # even with room for it
        keeps_logs = isinstance(repository, SupportsLog)
        if keeps_logs:
            # The log keeps it (history); no view shows it.
            assert len(repository.find_by_conversation_id("orphan")) == 1
        else:
            assert "orphan" not in repository.find_conversation_ids()
        # Overflowing with no user message, the rest is kept (rule 3), the
        # response at its head is not.
        call = ToolCall(id="d", name="f", arguments="{}")
        memory.add(
            "orphan",
            [
                Message.tool(ToolResponse(id="c", name="f", data="r2")),
                Message.assistant(None, tool_calls=[call]),
                Message.tool(ToolResponse(id="d", name="f", data="r3")),
            ],
        )
        assert _contents(memory.get("orphan")) == [
            (Role.ASSISTANT, None),
            (Role.TOOL, None),
        ]

    def test_a_history_without_user_messages_is_kept_whole(
        self, repository: Any
    ) -> None:
        """With no user message, an overflowing history is one turn, kept whole.

        Only its leading tool responses go (rule 4), stored ones included; so
        the window is the same whichever batches the history came in.
        """
        window = MessageWindow(2)
        memory = window_memory(repository, window)
        memory.add("agent", [Message.assistant("A1"), Message.assistant("A2")])
        memory.add("agent", [Message.assistant("A3")])
        memory.add("agent", [Message.assistant("A4"), Message.assistant("A5")])
        assert [m.content for m in memory.get("agent")] == [
            "A1",
            "A2",
            "A3",
            "A4",
            "A5",
        ]
        response = Message.tool(ToolResponse(id="c", name="f", data="r"))
        repository.save_all(
            "lead", [Message.system("S"), response, Message.assistant("A1")]
        )
        memory.add("lead", [Message.assistant("A2")])
        assert _contents(memory.get("lead")) == [
            (Role.SYSTEM, "S"),
            (Role.ASSISTANT, "A1"),
            (Role.ASSISTANT, "A2"),
        ]
        if self.supports_atomic_append:
            repository.save_all("record", [response, Message.assistant("A1")])
            result = repository.append_to_window(
                "record", [Message.assistant("A2")], window
            )
            assert result.evicted_ids == [response.id]
        # A user message ends the turn in progress: the window snaps to it.
        memory.add("agent", [Message.user("U")])
        assert [m.content for m in memory.get("agent")] == ["U"]

    def test_a_stored_leading_tool_response_goes_on_the_next_add(
        self, repository: Any
    ) -> None:
        """A window saved with a tool response first is repaired by the next add."""
        response = Message.tool(ToolResponse(id="c", name="f", data="r"))
        kept = [Message.user("U1"), Message.assistant("A1")]
        repository.save_all("lead", [Message.system("S"), response, *kept])
        memory = window_memory(repository, MessageWindow(20))
        memory.add("lead", [Message.user("U2")])
        assert _contents(memory.get("lead")) == [
            (Role.SYSTEM, "S"),
            (Role.USER, "U1"),
            (Role.ASSISTANT, "A1"),
            (Role.USER, "U2"),
        ]
        if self.supports_atomic_append:
            result = repository.append_to_window(
                "alone", [response, Message.user("U")], MessageWindow(20)
            )
            assert result.evicted_ids == [response.id]
            assert [m.id for m in result.appended] == [
                response.id,
                result.appended[1].id,
            ]
            assert _contents(repository.find_by_conversation_id("alone")) == [
                (Role.USER, "U")
            ]

    def test_token_window_keeps_the_budget(self, repository: Any) -> None:
        """A token window evicts whole old turns to stay within its budget."""
        window = TokenWindow(60, estimate_tokens, "estimate_tokens")
        memory = window_memory(repository, TokenWindow(60, estimate_tokens))
        for turn in range(10):
            memory.add(
                "tok", [Message.user(f"question {turn}"), Message.assistant("x" * 40)]
            )
        kept = memory.get("tok")
        assert kept[0].role is Role.USER
        assert sum(window.measure(m) for m in kept) <= 60

    def test_two_token_counters_never_share_stored_sizes(self, repository: Any) -> None:
        """Sizes cached for one counter are not reused for another of the same name."""
        small = window_memory(repository, TokenWindow(100, lambda m: 1))
        for turn in range(10):
            small.add("two", [Message.user(f"u{turn}"), Message.assistant(f"a{turn}")])
        assert len(small.get("two")) == 20
        large = window_memory(repository, TokenWindow(100, lambda m: 30))
        assert large.window.counter_id != small.window.counter_id
        large.add("two", Message.user("last"))
        kept = large.get("two")
        assert sum(large.window.measure(m) for m in kept) <= 100
        assert [m.content for m in kept][-1] == "last"

    def test_concurrent_appends_lose_and_duplicate_nothing(
        self, repository: Any
    ) -> None:
        """Threads appending to one conversation at once lose and duplicate nothing."""
        if not self.supports_atomic_append:
            pytest.skip("the repository has no atomic window append")
        total = self.concurrent_writers * self.appends_per_writer
        memory = window_memory(repository, MessageWindow(total + 10))
        errors: list[BaseException] = []
        start = threading.Barrier(self.concurrent_writers)

        def write(writer: int) -> None:
            try:
                start.wait()
                for counter in range(self.appends_per_writer):
                    memory.add("race", Message.user(f"{writer}:{counter}"))
            except BaseException as exc:  # reported below, with the thread's error
                errors.append(exc)

        threads = [
            threading.Thread(target=write, args=(w,))
            for w in range(self.concurrent_writers)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        stored = [m.content for m in memory.get("race")]
        assert len(stored) == total
        assert len(set(stored)) == total
        for writer in range(self.concurrent_writers):
            mine = [c for c in stored if c is not None and c.startswith(f"{writer}:")]
            assert mine == [f"{writer}:{i}" for i in range(self.appends_per_writer)]

    def test_direct_window_append_reports_what_it_did(self, repository: Any) -> None:
        """``append_to_window`` returns the appended messages and the evicted ids."""
        if not self.supports_atomic_append:
            pytest.skip("the repository has no atomic window append")
        first = [Message.user("U1"), Message.assistant("A1")]
        repository.append_to_window("direct", first, MessageWindow(2))
        second = [Message.user("U2"), Message.assistant("A2")]
        result = repository.append_to_window("direct", second, MessageWindow(2))
        assert [m.id for m in result.appended] == [m.id for m in second]
        assert all(m.created_at is not None for m in result.appended)
        assert sorted(result.evicted_ids) == sorted(m.id for m in first)
        assert repository.find_by_conversation_id("direct") == second

    def test_retry_after_eviction_is_a_noop(self, repository: Any) -> None:
        """A retried append whose messages the window already evicted stores nothing."""
        self._require_evicted_record()
        window = MessageWindow(2)
        first = [Message.user("U1"), Message.assistant("A1")]
        second = [Message.user("U2"), Message.assistant("A2")]
        repository.append_to_window("late", first, window)
        repository.append_to_window("late", second, window)
        retried = repository.append_to_window("late", first, window)
        assert retried.appended == []
        assert retried.evicted_ids == []
        assert repository.find_by_conversation_id("late") == second
        # New messages in the retried batch still go in, alone.
        third = Message.user("U3")
        result = repository.append_to_window("late", [first[1], third], window)
        assert [m.id for m in result.appended] == [third.id]
        # The window starts on a whole turn: U2 and A2 make room for U3.
        assert [m.id for m in repository.find_by_conversation_id("late")] == [third.id]

    def test_retry_after_system_replacement_is_a_noop(self, repository: Any) -> None:
        """A retried append does not bring back a system message replaced since."""
        self._require_evicted_record()
        window = MessageWindow(10)
        first = [Message.system("S1"), Message.user("U1")]
        repository.append_to_window("resys", first, window)
        replacement = Message.system("S2")
        repository.append_to_window("resys", [replacement], window)
        retried = repository.append_to_window("resys", first, window)
        assert retried.appended == []
        assert [m.id for m in repository.find_by_conversation_id("resys")] == [
            first[1].id,
            replacement.id,
        ]

    def test_save_all_and_delete_forget_evicted_ids(self, repository: Any) -> None:
        """Rewriting or deleting a conversation clears its evicted ids too."""
        if not self.supports_atomic_append:
            pytest.skip("the repository has no atomic window append")
        window = MessageWindow(2)
        first = [Message.user("U1"), Message.assistant("A1")]
        second = [Message.user("U2"), Message.assistant("A2")]
        for rewrite in (True, False):
            repository.append_to_window("forget", first, window)
            repository.append_to_window("forget", second, window)
            if rewrite:
                repository.save_all("forget", [])
            else:
                repository.delete_by_conversation_id("forget")
            result = repository.append_to_window("forget", first, window)
            assert [m.id for m in result.appended] == [m.id for m in first]
            assert repository.find_by_conversation_id("forget") == first
            repository.delete_by_conversation_id("forget")
