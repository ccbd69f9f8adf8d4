"""The ``AsyncDriver`` of each event loop, so one async repository serves any loop.

Example:
    from neo4j import AsyncGraphDatabase
    from chatledger_neo4j.loop_drivers import LoopDrivers

    def make():
        return AsyncGraphDatabase.driver("bolt://localhost:7687")

    drivers = LoopDrivers(make(), make)   # made here: one driver per loop
    driver = drivers.current()            # inside a coroutine
    await drivers.aclose()

An ``AsyncDriver`` belongs to the event loop it was first used on: its
connections' transports and its pool's locks are that loop's. From another
loop it fails ("attached to a different loop") or waits forever; after that
loop closed (``asyncio.run`` twice) it fails with "Event loop is closed".

So the drivers made here (``make`` given) are one per loop
(:class:`chatledger.adapters.LoopLocal`), each made on its loop's first call,
the first loop taking the one made beforehand. Each is closed on its own
loop: when the loop shuts down (``asyncio.run`` and ``asyncio.Runner`` do
that), or by :meth:`LoopDrivers.aclose`. A loop closed without shutting down
its async generators leaves its driver unclosed, and it is dropped with a
``LoopClosedFirstWarning``: its sockets close when it is garbage-collected.
Their sessions share one :class:`~chatledger_neo4j.bookmarks.SharedBookmarks`,
so a read sees the writes of every loop before it.

A driver the caller gave (``make`` is ``None``) keeps the driver's rule: it
serves one event loop, the first to use it through these drivers. A call on
any other loop raises ``RuntimeError`` at once, where the driver would fail
or hang; it costs one comparison per call.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Callable

from neo4j import AsyncDriver
from neo4j.api import AsyncBookmarkManager
from neo4j.exceptions import DriverError

from chatledger.adapters import LoopLocal
from chatledger_neo4j.bookmarks import SharedBookmarks

__all__ = ["LoopDrivers"]


class LoopDrivers:
    """The driver of each running event loop, and the bookmarks they share.

    Args:
        first: The driver the first loop uses (made without I/O).
        make: Makes a driver like ``first`` for each later loop; ``None``
            when ``first`` is the caller's, which serves one loop only.

    Attributes:
        bookmarks: The bookmark manager of every session: one shared by the
            drivers made here, or the given driver's own
            (``execute_query_bookmark_manager``).
    """

    def __init__(
        self, first: AsyncDriver, make: Callable[[], AsyncDriver] | None
    ) -> None:
        """Hold ``first``; nothing is connected."""
        # A made driver is held by its loop's entry only, so one its loop
        # could not close is garbage once dropped, and its sockets with it.
        self._given = first if make is None else None
        self._made = (
            None
            if make is None
            else LoopLocal(make, close=AsyncDriver.close, first=first)
        )
        self.bookmarks: AsyncBookmarkManager = (
            first.execute_query_bookmark_manager if make is None else SharedBookmarks()
        )
        self._home: weakref.ref[asyncio.AbstractEventLoop] | None = None
        self._home_lock = threading.Lock()
        self._closed = False

    def current(self) -> AsyncDriver:
        """The running loop's driver, made on its first call.

        Raises:
            RuntimeError: no event loop is running, or the driver is the
                caller's and serves another loop.
            neo4j.exceptions.DriverError: :meth:`aclose` closed the drivers.
        """
        if self._made is None:
            return self._given_here()
        if self._closed:
            raise DriverError("the repository is closed, and so are its drivers")
        return self._made.get()

    def shown(self) -> AsyncDriver:
        """The given driver, or the running loop's (made on its first call).

        Raises:
            RuntimeError: the drivers are made here, one per loop, and no
                event loop is running.
            neo4j.exceptions.DriverError: :meth:`aclose` closed the drivers.
        """
        if self._given is not None:
            return self._given
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            raise RuntimeError(
                "a repository that from_url made has a driver for each event "
                "loop: ask for it inside a coroutine"
            ) from None
        return self.current()

    def _given_here(self) -> AsyncDriver:
        assert self._given is not None
        loop = asyncio.get_running_loop()
        home = self._home
        if home is None:
            with self._home_lock:
                if self._home is None:
                    self._home = weakref.ref(loop)
                home = self._home
        if home() is not loop:
            raise RuntimeError(
                "this repository was given a neo4j.AsyncDriver, and an "
                "AsyncDriver serves one event loop: the first that used it "
                "through the repository. This call runs on another loop "
                "(asyncio.run again, or another thread's loop), where the "
                "driver would fail or hang. Open the repository with from_url, "
                "which makes a driver for each event loop, or give each loop a "
                "repository with a driver of its own."
            )
        return self._given

    async def aclose(self) -> None:
        """Close every driver made here (idempotent); a given driver stays open.

        The running loop's driver is closed before this returns; another open
        loop's is closed on that loop, on its next turn. Later calls raise
        ``neo4j.exceptions.DriverError``.
        """
        if self._made is None or self._closed:
            return
        self._closed = True
        await self._made.aclose()
