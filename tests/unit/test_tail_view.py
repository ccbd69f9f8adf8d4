"""``TailView.feed``: rows in any batches, read no further than needed, and an
iterable that fails midway leaves the view as if the rows had come in two
batches."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chatledger import Message, Role
from chatledger.window import MessageWindow, TokenWindow, Window
from chatledger.window_view import LogRow, TailView


def _chars(message: Message) -> int:
    return len(message.content or "")


_WINDOWS: list[Window] = [
    MessageWindow(3),
    MessageWindow(7),
    TokenWindow(12, _chars, counter_id="chars"),
]

_messages = st.builds(
    lambda role, text: (
        Message.user(text) if role is Role.USER else Message.assistant(text)
    ),
    st.sampled_from([Role.USER, Role.ASSISTANT]),
    st.text("abc", min_size=1, max_size=6),
)


def _rows(log: Sequence[Message]) -> list[LogRow]:
    """The log's rows, newest first, as a repository feeds them."""
    return [LogRow(n, m) for n, m in reversed(list(enumerate(log, 1)))]


def _windows_and_logs(test: Callable[..., None]) -> Callable[..., None]:
    """Run ``test(window, log, data)`` for each window, on random logs."""
    test = given(log=st.lists(_messages, max_size=25), data=st.data())(test)
    test = settings(max_examples=60, deadline=None)(test)
    parametrized: Callable[..., None] = pytest.mark.parametrize(
        "window", _WINDOWS, ids=repr
    )(test)
    return parametrized


def _view(window: Window, batches: Sequence[Sequence[LogRow]]) -> list[Message]:
    view = TailView(window, [])
    for batch in batches:
        if view.feed(batch):
            break
    return view.messages()


class _Failing:
    """Yields rows until the one at ``fail_at``, then raises instead of it."""

    def __init__(self, rows: Sequence[LogRow], fail_at: int) -> None:
        self.rows, self.fail_at, self.pulled = rows, fail_at, 0

    def __iter__(self) -> Iterator[LogRow]:
        for index, row in enumerate(self.rows):
            if index == self.fail_at:
                raise OSError("the connection dropped")
            self.pulled += 1
            yield row


@_windows_and_logs
def test_any_split_of_the_rows_shows_the_same_view(
    window: Window, log: list[Message], data: st.DataObject
) -> None:
    rows = _rows(log)
    cut = data.draw(st.integers(0, len(rows)))
    assert _view(window, [rows[:cut], rows[cut:]]) == _view(window, [rows])


@_windows_and_logs
def test_a_failing_iterable_leaves_the_view_as_two_batches_would(
    window: Window, log: list[Message], data: st.DataObject
) -> None:
    rows = _rows(log)
    fail_at = data.draw(st.integers(0, len(rows)))
    view = TailView(window, [])
    failing = _Failing(rows, fail_at)
    try:
        view.feed(failing)
    except OSError:
        # The rows taken before the failure are fed again from the failing one.
        assert failing.pulled == fail_at
        view.feed(rows[fail_at:])
    assert view.messages() == _view(window, [rows])


def test_feeding_stops_at_the_row_that_settles_the_view() -> None:
    log = [
        Message.user(f"q{n}") if n % 2 == 0 else Message.assistant("a")
        for n in range(12)
    ]
    rows = _rows(log)
    pulled: list[LogRow] = []

    def lazily() -> Iterator[LogRow]:
        for row in rows:
            pulled.append(row)
            yield row

    view = TailView(MessageWindow(4), [])
    assert view.feed(lazily())
    # Four rows fit; the fifth settles the view; none after it is taken.
    assert len(pulled) == 5
    assert [m.content for m in view.messages()] == ["q8", "a", "q10", "a"]
    assert view.feed(rows)  # done: nothing more is read
