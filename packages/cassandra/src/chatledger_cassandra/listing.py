"""Which partitions are conversations, and how a page of them is gathered.

Example:
    from chatledger_cassandra.listing import PageGathering, listed

    listed([("c1", None), ("c2", True), ("c3", False)])   # ['c1', 'c3']

    gathering = PageGathering.start(None, 2)
    gathering.query()        # ('first_ids_page', (3,)): a statement and its values
    gathering.add([("c1", -5, None), ("c2", 7, True), ("c3", 9, None)])
    # None: one of the three was no conversation, so read on from token 9
    gathering.query()        # ('ids_page_after', (9, 3))

A partition is a conversation unless its static ``emptied`` is true: then a
window has taken every message out and the partition only keeps the record of
evicted ids (:mod:`chatledger_cassandra.steps`). Listing reads the partition
keys with that column and leaves such partitions out; a page therefore reads
on past them until it holds ``limit`` conversations and one more (which says
that another page follows), or the ring ends.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from chatledger.adapters import (
    ConversationPage,
    InvalidPageError,
    validate_page_request,
)

__all__ = ["PageGathering", "listed"]


def listed(rows: Iterable[tuple[str, bool | None]]) -> list[str]:
    """The conversation ids of ``(conversation_id, emptied)`` rows."""
    return [conversation_id for conversation_id, emptied in rows if not emptied]


@dataclass
class PageGathering:
    """One page of conversation ids, gathered over as many reads as it takes.

    Attributes:
        limit: The page size asked for.
        after: The token the next read starts after, ``None`` at the start.
        found: The conversations found so far, with their tokens.
    """

    limit: int
    after: int | None
    found: list[tuple[str, int]] = field(default_factory=list)

    @classmethod
    def start(cls, cursor: str | None, limit: int) -> PageGathering:
        """Check ``cursor`` and ``limit`` (before any I/O) and start a page.

        Raises:
            InvalidPageError: as the protocol says, and for a cursor that is
                not a token a page gave.
        """
        after, limit = validate_page_request(cursor, limit)
        if after is None:
            return cls(limit, None)
        try:
            return cls(limit, int(after))
        except ValueError:
            raise InvalidPageError(
                f"cursor {after!r} is not one find_conversation_ids_page gave"
            ) from None

    def query(self) -> tuple[str, tuple[object, ...]]:
        """The statement to read next and its values."""
        if self.after is None:
            return "first_ids_page", (self.limit + 1,)
        return "ids_page_after", (self.after, self.limit + 1)

    def add(
        self, rows: Sequence[tuple[str, int, bool | None]]
    ) -> ConversationPage | None:
        """Take the rows of one read; return the page once it is complete.

        Args:
            rows: ``(conversation_id, token, emptied)`` in token order, as
                many as :meth:`query` asked for at most.
        """
        for conversation_id, token, emptied in rows:
            if not emptied:
                self.found.append((conversation_id, token))
            if len(self.found) > self.limit:
                ids = [conversation_id for conversation_id, _ in self.found]
                return ConversationPage(
                    ids[: self.limit], str(self.found[self.limit - 1][1])
                )
        if len(rows) <= self.limit:
            return ConversationPage([c for c, _ in self.found], None)
        self.after = rows[-1][1]
        return None
