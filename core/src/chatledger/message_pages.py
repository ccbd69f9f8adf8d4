"""Pages of a conversation's log: the request check, the cursor, the page.

Example:
    from chatledger import Message
    from chatledger.message_pages import check_message_page, message_page

    after, limit = check_message_page(None, 2, newest_first=True)
    rows = [(3, Message.user("c")), (2, Message.user("b")), (1, Message.user("a"))]
    page = message_page(rows, limit, newest_first=True)  # read limit + 1 rows
    page.messages      # [c, b]
    page.next_cursor   # where the next page starts: after sequence 2

A cursor names the sequence number of the last message a page gave and the
direction it was read in, so paging continues exactly after it however many
messages are appended meanwhile: every message that existed when paging
began comes exactly once. Every repository with a log pages through it with
these functions; they do no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable

from chatledger.errors import InvalidPageError
from chatledger.messages import Message
from chatledger.results import MessagePage
from chatledger.validation import validate_page_request

__all__ = ["DEFAULT_MESSAGE_PAGE_SIZE", "check_message_page", "message_page"]

#: How many messages a page holds when the caller does not say.
DEFAULT_MESSAGE_PAGE_SIZE = 50

_NEWEST_FIRST, _OLDEST_FIRST = "n", "o"


def check_message_page(
    cursor: object, limit: object, *, newest_first: object
) -> tuple[int | None, int]:
    """Check a page request before any I/O; return the sequence to start after.

    Returns:
        ``(after, limit)``: ``after`` is ``None`` for the first page, else the
        sequence number the page starts after (below it when newest first).

    Raises:
        InvalidPageError: ``limit`` is not an int from 1 to
            :data:`chatledger.validation.MAX_PAGE_SIZE`, ``newest_first`` is
            not a bool, or ``cursor`` is not one a page read in the same
            direction gave.
    """
    text, checked = validate_page_request(cursor, limit)
    if not isinstance(newest_first, bool):
        raise InvalidPageError(
            f"newest_first must be a bool, not {type(newest_first).__name__}"
        )
    if text is None:
        return None, checked
    direction, _, number = text.partition(":")
    if direction not in (_NEWEST_FIRST, _OLDEST_FIRST) or not number.isdigit():
        raise InvalidPageError(f"{text!r} is not a cursor of a message page")
    if (direction == _NEWEST_FIRST) != newest_first:
        raise InvalidPageError(
            "the cursor comes from a page read in the other direction: "
            "pass the same newest_first as for the first page"
        )
    return int(number), checked


def message_page(
    rows: Iterable[tuple[int, Message]], limit: int, *, newest_first: bool
) -> MessagePage:
    """Make a page from up to ``limit + 1`` rows read in the page's order.

    Args:
        rows: ``(sequence, message)`` in the order of the page; one more row
            than ``limit`` tells that another page follows.
        limit: The page size the request asked for.
        newest_first: The direction the rows were read in.
    """
    taken: list[tuple[int, Message]] = []
    more = False
    for row in rows:
        if len(taken) == limit:
            more = True
            break
        taken.append(row)
    cursor = None
    if more:
        direction = _NEWEST_FIRST if newest_first else _OLDEST_FIRST
        cursor = f"{direction}:{taken[-1][0]}"
    return MessagePage([message for _, message in taken], cursor)
