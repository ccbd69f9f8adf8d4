"""Property tests of the window policy against a reference model written from the rules.

The reference model below is written from the rule text (Spring AI's
``MessageWindowChatMemory.process`` plus chatledger's four documented fixes),
not from :mod:`chatledger.window`, so the two can disagree.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from chatledger import Message, Role, ToolCall, ToolResponse
from chatledger.window import MessageWindow, TokenWindow, Window, apply_window

Size = Callable[[Message], int]


def reference_window(
    stored: Sequence[Message], new: Sequence[Message], limit: int, size: Size
) -> list[Message]:
    """Spring AI's window rules plus chatledger's fixes, written out plainly.

    1. If any new system message is not equal to a stored one, every stored
       system message goes. A system message equal to one already kept (stored
       or earlier in the batch) is not added again (fix 1).
    2. All other new messages are appended in order; nothing moves.
    3. If the total size fits the limit, that is the window.
    4. Otherwise drop the oldest non-system messages until the dropped size
       covers the excess (the raw cut), then move the cut forward to the next
       user message (turn snapping).
    5. If no user message follows the raw cut, keep the newest turn whole: cut
       at the last user message (fix 3); with no user message at all, the
       history is one turn in progress and nothing is cut.
    6. Whatever is left never starts, after the system messages, on a tool
       message: such leading tool messages go too (fix 4).
    System messages are never dropped by steps 4 to 6.
    """
    stored_system = [m for m in stored if m.role is Role.SYSTEM]
    replace = any(m.role is Role.SYSTEM and m not in stored_system for m in new)
    history = [m for m in stored if not (replace and m.role is Role.SYSTEM)]
    kept_system = [] if replace else list(stored_system)
    for message in new:
        if message.role is Role.SYSTEM:
            if message in kept_system:
                continue
            kept_system.append(message)
        history.append(message)

    total = sum(size(m) for m in history)
    others = [m for m in history if m.role is not Role.SYSTEM]
    leading = 0
    while leading < len(others) and others[leading].role is Role.TOOL:
        leading += 1
    if total <= limit:
        gone = {id(m) for m in others[:leading]}
        return [m for m in history if id(m) not in gone]
    excess = total - limit
    raw = 0
    dropped = 0
    while raw < len(others) and dropped < excess:
        dropped += size(others[raw])
        raw += 1
    later_users = [i for i in range(raw, len(others)) if others[i].role is Role.USER]
    if later_users:
        cut = later_users[0]
    else:
        users = [i for i, m in enumerate(others) if m.role is Role.USER]
        # No user at all: nothing to cut at, so only step 6 applies.
        cut = users[-1] if users else leading
    gone = {id(m) for m in others[:cut]}
    return [m for m in history if id(m) not in gone]


def _tokens(message: Message) -> int:
    """A deterministic size that is sometimes 0."""
    return len(message.content or "") + 2 * len(message.tool_calls)


_TEXT = st.sampled_from(["", "a", "bb", "ccc", "hello", "x" * 9])


@st.composite
def turns(draw: st.DrawFn) -> list[list[Message]]:
    """Random batches: turns with tool loops and system prompts, split at random."""
    batches: list[list[Message]] = []
    # An agent's conversation: no user message at all.
    agent = draw(st.integers(0, 3)) == 0
    for number in range(draw(st.integers(0, 12))):
        turn: list[Message] = []
        if draw(st.integers(0, 6)) == 0:
            turn.append(Message.system(draw(st.sampled_from(["S1", "S2", "S3"]))))
        if number == 0 and draw(st.integers(0, 2)) == 0:
            # A history that opens on a tool response whose call is not in it.
            turn.append(Message.tool(ToolResponse(id="gone", name="f", data="r")))
        if not agent and draw(st.integers(0, 9)) > 0:
            turn.append(Message.user(draw(_TEXT)))
        for step in range(draw(st.integers(0, 2))):
            call = ToolCall(id=f"c{number}.{step}", name="f", arguments="{}")
            turn.append(Message.assistant(draw(_TEXT) or None, tool_calls=[call]))
            turn.append(Message.tool(ToolResponse(id=call.id, name="f", data="r")))
        if draw(st.booleans()):
            turn.append(Message.assistant(draw(_TEXT)))
        if not turn:
            continue
        if draw(st.booleans()):
            batches.append(turn)
        else:
            batches.extend([m] for m in turn)
    return batches


windows = st.one_of(
    st.builds(MessageWindow, st.integers(1, 12)),
    st.builds(lambda n: TokenWindow(n, _tokens, "test"), st.integers(1, 40)),
)


def _ids(messages: Sequence[Message]) -> list[str]:
    return [m.id for m in messages]


def _walk(
    batches: list[list[Message]], window: Window
) -> list[tuple[list[Message], list[Message], list[Message]]]:
    """Apply every batch in turn; yield (stored before, batch, update.messages)."""
    steps = []
    stored: list[Message] = []
    for batch in batches:
        update = apply_window(stored, batch, window)
        steps.append((stored, batch, update.messages))
        stored = update.messages
    return steps


@settings(max_examples=300, deadline=None)
@given(turns(), windows)
def test_window_equals_the_reference_model(
    batches: list[list[Message]], window: Window
) -> None:
    stored: list[Message] = []
    for batch in batches:
        update = apply_window(stored, batch, window)
        expected = reference_window(stored, batch, window.limit, window.measure)
        assert _ids(update.messages) == _ids(expected)
        offered = {m.id for m in stored} | {m.id for m in update.appended}
        assert set(_ids(update.evicted)) == offered - set(_ids(update.messages))
        stored = update.messages


@settings(max_examples=300, deadline=None)
@given(turns(), windows)
def test_system_messages_leave_only_when_replaced(
    batches: list[list[Message]], window: Window
) -> None:
    for stored, batch, kept in _walk(batches, window):
        stored_system = [m for m in stored if m.role is Role.SYSTEM]
        replaced = any(m.role is Role.SYSTEM and m not in stored_system for m in batch)
        kept_ids = set(_ids(kept))
        if not replaced:
            assert all(m.id in kept_ids for m in stored_system)
        new_system = [m for m in batch if m.role is Role.SYSTEM]
        for message in new_system:
            assert message in [m for m in kept if m.role is Role.SYSTEM]
        system_kept = [m for m in kept if m.role is Role.SYSTEM]
        assert len(system_kept) == len(set(map(_value, system_kept)))


def _value(message: Message) -> tuple[object, ...]:
    return (message.role, message.content)


@settings(max_examples=300, deadline=None)
@given(turns(), windows)
def test_after_an_eviction_the_window_starts_on_a_user_turn(
    batches: list[list[Message]], window: Window
) -> None:
    for stored, batch, kept in _walk(batches, window):
        kept_ids = set(_ids(kept))
        everything = [m for m in stored + batch if m.role is not Role.SYSTEM]
        evicted = [m for m in everything if m.id not in kept_ids]
        others = [m for m in kept if m.role is not Role.SYSTEM]
        if others:
            assert others[0].role is not Role.TOOL
        # Evicting only orphaned tool responses (fix 4) is not an overflow.
        if others and any(m.role is not Role.TOOL for m in evicted):
            assert others[0].role is Role.USER


@settings(max_examples=300, deadline=None)
@given(turns(), windows)
def test_size_limit_holds_except_for_the_newest_turn(
    batches: list[list[Message]], window: Window
) -> None:
    for stored, batch, kept in _walk(batches, window):
        size = sum(window.measure(m) for m in kept)
        if size <= window.limit:
            continue
        # Documented exception (fix 3): only the newest turn, kept whole, or
        # nothing but system messages. With no user message, the newest turn
        # is the whole history less its leading tool messages (fix 4).
        everything = [m for m in stored + batch if m.role is not Role.SYSTEM]
        others = [m for m in kept if m.role is not Role.SYSTEM]
        if not others:
            continue
        users = [i for i, m in enumerate(everything) if m.role is Role.USER]
        start = users[-1] if users else 0
        while not users and everything[start].role is Role.TOOL:
            start += 1
        assert _ids(others) == _ids(everything[start:])


@settings(max_examples=300, deadline=None)
@given(turns(), windows)
def test_no_tool_response_without_its_call(
    batches: list[list[Message]], window: Window
) -> None:
    for _, _, kept in _walk(batches, window):
        calls: set[str] = set()
        for message in kept:
            calls.update(c.id for c in message.tool_calls)
            for response in message.tool_responses:
                assert response.id in calls


def test_a_history_without_a_user_message_keeps_no_orphan() -> None:
    # Kept whole (one turn in progress), so the response follows its call;
    # the orphan response at the head goes (fix 4).
    call = ToolCall(id="c", name="f", arguments="{}")
    window = MessageWindow(1)
    orphan = Message.tool(ToolResponse(id="gone", name="f", data="r"))
    first = [orphan, Message.assistant("thinking")]
    first.append(Message.assistant(None, tool_calls=[call]))
    stored = apply_window([], first, window)
    assert _ids(stored.evicted) == [orphan.id]
    response = Message.tool(ToolResponse(id="c", name="f", data="r"))
    kept = apply_window(stored.messages, [response], window).messages
    assert _ids(kept) == _ids([*first[1:], response])


@settings(max_examples=300, deadline=None)
@given(turns(), windows)
def test_the_window_depends_on_the_history_not_its_batches(
    batches: list[list[Message]], window: Window
) -> None:
    # The same messages added one at a time keep the same window, so a
    # window computed from the whole history can stand for it.
    in_batches: list[Message] = []
    one_by_one: list[Message] = []
    for batch in batches:
        in_batches = apply_window(in_batches, batch, window).messages
        for message in batch:
            one_by_one = apply_window(one_by_one, [message], window).messages
    assert _ids(in_batches) == _ids(one_by_one)
