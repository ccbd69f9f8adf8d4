"""One ``redis.asyncio`` client per event loop, so an async repository serves any loop.

Example:
    from chatledger_redis.async_clients import async_redis_client
    from chatledger_redis.loop_clients import LoopClients

    def make():
        return async_redis_client("redis://localhost:6379/0", cluster=False, options={})

    clients = LoopClients(make(), make)
    client = clients.current()   # inside a coroutine: the running loop's client

A ``redis.asyncio`` client's connections belong to the loop that opened them:
used from another loop, or after that loop closed (``asyncio.run`` twice, a
``Runner.run_sync`` in a fresh thread), they fail with "Event loop is closed"
or "attached to a different loop". So each loop gets a client (a connection
pool) of its own, made on its first call; the first loop takes the client the
repository was made with. A closed loop's client is dropped when a new loop
arrives or the repository closes: its sockets can no longer be closed through
that loop, and go with the garbage. Closing closes the calling loop's client
only; another loop's client may be in use there.

A lookup is one dict read keyed by the running loop, so one loop costs no
more than a single client did. A client the caller gave (``make`` is
``None``) serves every loop as given: its connections are the caller's.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

__all__ = ["LoopClients"]

Client = TypeVar("Client", bound=Any)


class LoopClients(Generic[Client]):
    """The client of each running event loop.

    Args:
        first: The client the first loop to call uses (made without I/O).
        make: Makes another client like ``first``, for each later loop;
            ``None`` when ``first`` serves every loop.
    """

    def __init__(self, first: Client, make: Callable[[], Client] | None) -> None:
        """Hold ``first`` until a loop takes it; nothing is connected."""
        self.first = first
        self._make = make
        self._by_loop: dict[asyncio.AbstractEventLoop, Client] = {}
        self._first_taken = False
        self._lock = threading.Lock()

    def current(self) -> Client:
        """The running loop's client, made on its first call (``first`` outside one)."""
        if self._make is None:
            return self.first
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return self.first
        client = self._by_loop.get(loop)
        return client if client is not None else self._add(loop)

    def _add(self, loop: asyncio.AbstractEventLoop) -> Client:
        assert self._make is not None
        with self._lock:
            for closed in [other for other in self._by_loop if other.is_closed()]:
                del self._by_loop[closed]
            if loop not in self._by_loop:
                if self._first_taken:
                    self._by_loop[loop] = self._make()
                else:
                    self._by_loop[loop] = self.first
                    self._first_taken = True
            return self._by_loop[loop]

    async def aclose(self) -> None:
        """Close the running loop's client, and drop those of closed loops.

        The client of another loop that is still open stays: calls may be
        running on it, and only that loop can close it (its own ``aclose``).
        """
        if self._make is None:
            await self.first.aclose()
            return
        loop = asyncio.get_running_loop()
        with self._lock:
            for closed in [other for other in self._by_loop if other.is_closed()]:
                del self._by_loop[closed]
            mine = self._by_loop.pop(loop, None)
            untouched = not self._first_taken
        if mine is not None:
            await mine.aclose()
        elif untouched:
            await self.first.aclose()
