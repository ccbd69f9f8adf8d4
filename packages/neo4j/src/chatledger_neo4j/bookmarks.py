"""The bookmarks that the drivers of every event loop share, for read-your-writes.

Example:
    from chatledger_neo4j.bookmarks import SharedBookmarks

    bookmarks = SharedBookmarks()  # driver.session(bookmark_manager=bookmarks)
    await bookmarks.update_bookmarks([], ["FB:kcwQ"])  # a session's commit
    assert set(await bookmarks.get_bookmarks()) == {"FB:kcwQ"}

A session given a bookmark manager starts from its bookmarks and hands it
the one its last transaction committed, so each transaction sees what every
earlier one committed, on whichever cluster member it runs. The async
repository that :meth:`from_url` made holds a driver per event loop, and a
driver's own manager knows only that driver's sessions: a write in one
``asyncio.run`` and a read in the next would not be chained. One
:class:`SharedBookmarks` serves the drivers of every loop instead. Those
loops may run in threads at once, and the driver's default manager guards
its set with a lock meant for one loop's tasks only (it raises when another
thread holds it), so this one takes a thread lock, held for a set update
with nothing awaited inside.
"""

from __future__ import annotations

import threading
from collections.abc import Collection

from neo4j.api import AsyncBookmarkManager

__all__ = ["SharedBookmarks"]


class SharedBookmarks(AsyncBookmarkManager):
    """A bookmark manager that sessions of any event loop or thread can share."""

    def __init__(self) -> None:
        """Start with no bookmarks: the first transaction waits for nothing."""
        self._bookmarks: set[str] = set()
        self._lock = threading.Lock()

    async def update_bookmarks(
        self, previous_bookmarks: Collection[str], new_bookmarks: Collection[str]
    ) -> None:
        """Replace the bookmarks a session started from by the one it ended with."""
        if not new_bookmarks:
            return
        with self._lock:
            self._bookmarks.difference_update(previous_bookmarks)
            self._bookmarks.update(new_bookmarks)

    async def get_bookmarks(self) -> Collection[str]:
        """The bookmarks a new session waits for."""
        with self._lock:
            return set(self._bookmarks)
