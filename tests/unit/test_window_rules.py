"""Spring AI's MessageWindowChatMemory edge cases, one named test per table row.

Each test names the row of Spring AI's behaviour it reproduces. Where chatledger
deliberately differs (the documented fixes in ``chatledger.window``), the test
says what Spring AI does and asserts what chatledger does.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from chatledger import (
    InvalidConversationIdError,
    InvalidMessageError,
    Message,
    MessageWindowChatMemory,
    Role,
    ToolCall,
    ToolResponse,
)
from chatledger.window import MessageWindow, apply_window, count_evictions, merge_system


def U(text: str) -> Message:
    return Message.user(text)


def A(text: str) -> Message:
    return Message.assistant(text)


def S(text: str) -> Message:
    return Message.system(text)


def call(text: str) -> Message:
    return Message.assistant(
        text, tool_calls=[ToolCall(id=text, name="f", arguments="{}")]
    )


def result(text: str) -> Message:
    return Message.tool(ToolResponse(id=text, name="f", data=text))


def window_of(max_messages: int, *batches: list[Message]) -> list[str | None]:
    memory = MessageWindowChatMemory(max_messages=max_messages)
    for batch in batches:
        memory.add("c", batch)
    return [m.content for m in memory.get("c")]


def test_custom_max_messages_snaps_to_next_user() -> None:
    """max=2, [U1,A1,U2,A2,U3]: the raw cut lands on A2 and snaps to U3 (Spring)."""
    assert window_of(2, [U("U1"), A("A1"), U("U2"), A("A2"), U("U3")]) == ["U3"]


def test_snapping_keeps_fewer_than_max() -> None:
    """max=3, [U1,A1,U2,A2,U3,A3] keeps [U3,A3]: max is an upper bound (Spring)."""
    batch = [U("U1"), A("A1"), U("U2"), A("A2"), U("U3"), A("A3")]
    assert window_of(3, batch) == ["U3", "A3"]


def test_snapping_evicts_whole_multi_step_turn() -> None:
    """max=4, [U1,A,A,A,U2,A2] keeps [U2,A2]: the whole first turn goes (Spring)."""
    batch = [U("U1"), A("a"), A("b"), A("c"), U("U2"), A("A2")]
    assert window_of(4, batch) == ["U2", "A2"]


def test_no_snap_when_raw_cut_lands_on_user() -> None:
    """max=4, cut lands on a user message: exactly four are kept (Spring)."""
    batch = [U("U1"), A("A1"), U("U2"), A("A2"), U("U3"), A("A3")]
    assert window_of(4, batch) == ["U2", "A2", "U3", "A3"]


def test_system_message_preserved_during_eviction() -> None:
    """max=3, [S,U1,A1] then [U2,A2] keeps [S,U2,A2] (Spring)."""
    assert window_of(3, [S("S"), U("U1"), A("A1")], [U("U2"), A("A2")]) == [
        "S",
        "U2",
        "A2",
    ]


def test_several_system_messages_preserved_during_eviction() -> None:
    """max=4, [S1,S2,U1,A1] then [U2,A2] keeps both system messages and [U2,A2]."""
    assert window_of(4, [S("S1"), S("S2"), U("U1"), A("A1")], [U("U2"), A("A2")]) == [
        "S1",
        "S2",
        "U2",
        "A2",
    ]


def test_one_free_slot_keeps_newest_turn_whole() -> None:
    """max=3, [S1,S2,U1,A1] + [U2,A2]: Spring keeps [S1,S2]; chatledger keeps U2's turn.

    One free slot cannot hold a whole turn. Spring AI then evicts every
    non-system message; chatledger keeps the newest turn whole (fix 3).
    """
    assert window_of(3, [S("S1"), S("S2"), U("U1"), A("A1")], [U("U2"), A("A2")]) == [
        "S1",
        "S2",
        "U2",
        "A2",
    ]


def test_system_messages_exceeding_max_never_raise() -> None:
    """max=2, [S1,S2] + [U,A,U']: Spring keeps [S1,S2]; chatledger adds U''s turn.

    The clamp that prevents Spring's exception is kept: system messages alone
    exceed the limit, they all stay, and no error is raised.
    """
    assert window_of(2, [S("S1"), S("S2")], [U("U"), A("A"), U("U'")]) == [
        "S1",
        "S2",
        "U'",
    ]


def test_mixed_messages_with_limit_equal_to_system_count() -> None:
    """max=2, [S1,S2,U1,A1]: Spring keeps [S1,S2]; chatledger keeps the only turn.

    The system messages fill the window; the single turn is the newest one and
    is kept whole (fix 3).
    """
    assert window_of(2, [S("S1"), S("S2"), U("U1"), A("A1")]) == [
        "S1",
        "S2",
        "U1",
        "A1",
    ]


def test_no_user_after_cut_keeps_the_turn_in_progress() -> None:
    """[U, A(tool call), T, A], max=3: Spring empties the memory; chatledger keeps it.

    The documented choice (fix 3): when no user message follows the cut, the
    newest turn is kept whole rather than losing the turn in progress.
    """
    batch = [U("U"), call("c"), result("c"), A("done")]
    assert window_of(3, batch) == ["U", "c", None, "done"]


def test_no_orphan_tool_response_after_eviction() -> None:
    """Spring can leave a lone tool response at the head; chatledger never does.

    Spring empties the memory in the case above, then stores the next tool
    response alone. Here the turn is kept, so the response follows its call.
    """
    memory = MessageWindowChatMemory(max_messages=3)
    memory.add("c", [U("U"), call("c1"), result("c1"), call("c2")])
    memory.add("c", [result("c2")])
    kept = memory.get("c")
    assert kept[0].content == "U"
    for index, message in enumerate(kept):
        if message.tool_responses:
            ids = {c.id for m in kept[:index] for c in m.tool_calls}
            assert {r.id for r in message.tool_responses} <= ids


def test_window_never_starts_with_assistant_after_trimming() -> None:
    """After any eviction the first non-system message is a user message."""
    memory = MessageWindowChatMemory(max_messages=5)
    for turn in range(20):
        memory.add("c", [U(f"U{turn}"), call(f"c{turn}"), result(f"c{turn}"), A("a")])
        assert memory.get("c")[0].role == "user"


def test_history_without_user_messages_is_kept_whole_on_overflow() -> None:
    """max=2, [A1,A2,A3]: Spring empties the memory; chatledger keeps all three.

    A history with no user message is one turn in progress, kept whole as fix 3
    keeps the newest turn, so the window depends on the history alone and not
    on the batches it arrived in (Spring's drop made it depend on both).
    """
    assert window_of(2, [A("A1"), A("A2"), A("A3")]) == ["A1", "A2", "A3"]
    assert window_of(2, [A("A1")], [A("A2")], [A("A3")]) == ["A1", "A2", "A3"]


def test_history_without_user_messages_loses_its_leading_tool_responses() -> None:
    """max=2, [T,A1,c,T(c)]: kept whole but for the orphan response at its head."""
    assert window_of(2, [result("x"), A("A1"), call("c"), result("c")]) == [
        "A1",
        "c",
        None,
    ]


def test_history_without_user_messages_keeps_its_system_messages() -> None:
    """max=1, [S,A1,A2]: system messages stay beside the kept turn in progress."""
    assert window_of(1, [S("S"), A("A1"), A("A2")]) == ["S", "A1", "A2"]


def test_equal_system_message_is_not_duplicated() -> None:
    """Spring appends an equal system message again; chatledger keeps one copy."""
    assert window_of(10, [S("S"), U("U1")], [S("S"), U("U2")]) == ["S", "U1", "U2"]


def test_equal_system_messages_in_one_batch_are_stored_once() -> None:
    """Two equal system messages in one batch are stored once."""
    assert window_of(10, [S("S"), S("S"), U("U1")]) == ["S", "U1"]


def test_old_system_messages_removed_when_new_one_added() -> None:
    """A different system message replaces the old ones and sits at the end (Spring)."""
    assert window_of(10, [S("S1"), U("U1"), A("A1")], [S("S2")]) == ["U1", "A1", "S2"]


def test_several_new_system_messages_in_a_batch_are_all_kept() -> None:
    """Several different new system messages in one batch are all appended (Spring)."""
    assert window_of(10, [S("S0")], [S("S1"), S("S2")]) == ["S1", "S2"]


def test_get_unknown_conversation_is_empty() -> None:
    """Reading an unknown conversation returns an empty list (Spring)."""
    assert MessageWindowChatMemory().get("unknown") == []


def test_default_max_messages_is_twenty() -> None:
    """The default window holds 20 messages (Spring's DEFAULT_MAX_MESSAGES)."""
    assert MessageWindowChatMemory().max_messages == 20


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, None])
def test_max_messages_must_be_positive(bad: object) -> None:
    """max_messages <= 0 (or not an int) is rejected (Spring: "greater than 0")."""
    with pytest.raises(ValueError, match="max_messages"):
        MessageWindowChatMemory(max_messages=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad_id", [None, "", "  "])
def test_bad_conversation_id_rejected_on_every_operation(bad_id: object) -> None:
    """A null or empty id is rejected by add, get and clear (Spring)."""
    memory = MessageWindowChatMemory()
    with pytest.raises(InvalidConversationIdError):
        memory.add(bad_id, U("x"))  # type: ignore[arg-type]
    with pytest.raises(InvalidConversationIdError):
        memory.get(bad_id)  # type: ignore[arg-type]
    with pytest.raises(InvalidConversationIdError):
        memory.clear(bad_id)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [None, [None], [U("a"), None]])
def test_null_messages_rejected(bad: object) -> None:
    """A null list, a null message or a null element is rejected (Spring)."""
    memory = MessageWindowChatMemory()
    with pytest.raises(InvalidMessageError):
        memory.add("c", bad)  # type: ignore[arg-type]
    assert memory.get("c") == []


def test_add_single_and_multiple_then_clear() -> None:
    """add one message, add a list, get them in order, clear empties (Spring)."""
    memory = MessageWindowChatMemory()
    memory.add("c", U("one"))
    memory.add("c", [A("two"), U("three")])
    assert [m.content for m in memory.get("c")] == ["one", "two", "three"]
    memory.clear("c")
    assert memory.get("c") == []


def test_count_evictions_reads_entries_lazily() -> None:
    """The policy stops reading as soon as it knows the cut."""
    consumed = []

    def entries() -> Iterator[tuple[Role, int]]:
        for index in range(10_000):
            consumed.append(index)
            yield (Role.USER if index % 2 == 0 else Role.ASSISTANT, 1)

    assert count_evictions(9_999, 0, 10_000, entries()) == 2
    assert len(consumed) == 3


def test_apply_window_reports_appended_and_evicted() -> None:
    """apply_window returns the new window, what was appended and what was evicted."""
    stored = [S("S"), U("U1"), A("A1")]
    update = apply_window(stored, [S("S"), U("U2"), A("A2")], MessageWindow(3))
    assert [m.content for m in update.messages] == ["S", "U2", "A2"]
    assert [m.content for m in update.appended] == ["U2", "A2"]
    assert [m.content for m in update.evicted] == ["U1", "A1"]


def test_merge_system_without_system_messages_changes_nothing() -> None:
    """A batch without system messages neither replaces nor filters anything."""
    batch = [U("U")]
    merge = merge_system([S("S")], batch)
    assert merge.replace_stored is False
    assert merge.new == batch
