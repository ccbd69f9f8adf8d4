"""A first-use step that runs once, for callers on many event loops or threads at once.

Example:
    from chatledger_sql.once import BlockingOnce, Once

    async def create_tables():
        ...

    prepared = Once(create_tables)
    await prepared()  # on any loop, in any thread: the step runs once

    ready = BlockingOnce(lambda: None)
    ready()  # the sync repository's gate: callers in other threads block

An async repository prepares itself on its first call (detects the dialect,
creates the tables). When that first call comes from several event loops at
once (threads each running ``asyncio.run``), one loop runs the step and the
others wait for it. An ``asyncio.Lock`` cannot be that gate: it belongs to the
first loop that waits on it, and a waiter on any other loop fails ("bound to a
different event loop") or is never woken. A thread lock would block the
waiting loops whole. So each waiter waits on a future of its own loop, and
the runner wakes it through that loop, thread-safely.

Running the step alone matters beyond the work it saves: an engine's first
connection initializes its dialect under SQLAlchemy's own asyncio lock, which
fails the same way when first connections race from several loops (an engine
with a ``NullPool`` shared by loops).

A step that fails (or whose caller is cancelled) leaves the gate open: the
waiters wake and the next one runs the step again, so a failure is each
caller's to see, as it would be without the gate.

The sync repository prepares itself on its first call too, so that making it
does no I/O; :class:`BlockingOnce` is its gate, a thread lock: the threads
that call at once wait for the one running the step, and a failure leaves
the gate open likewise.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["BlockingOnce", "Once"]


class Once:
    """Run ``step`` until it succeeds once, one caller at a time, on any loop.

    Args:
        step: The coroutine function to run; it must not call this gate.
    """

    def __init__(self, step: Callable[[], Awaitable[None]]) -> None:
        """Hold ``step``; nothing runs yet."""
        self._step = step
        self._guard = threading.Lock()
        self._running = False
        self._waiters: list[asyncio.Future[None]] = []
        self.done = False

    async def __call__(self) -> None:
        """Return once ``step`` has succeeded, running it if no one is."""
        while not self.done:
            with self._guard:
                if self.done:
                    return
                runs_here = not self._running
                if runs_here:
                    self._running = True
                else:
                    woken = asyncio.get_running_loop().create_future()
                    self._waiters.append(woken)
            if runs_here:
                try:
                    await self._step()
                    self.done = True
                finally:
                    self._wake_all()
            else:
                await woken

    def _wake_all(self) -> None:
        with self._guard:
            self._running = False
            waiters, self._waiters = self._waiters, []
        for woken in waiters:
            # A loop that has closed has no one waiting there.
            with contextlib.suppress(RuntimeError):
                woken.get_loop().call_soon_threadsafe(_wake, woken)


def _wake(woken: asyncio.Future[None]) -> None:
    if not woken.done():  # a cancelled waiter is not woken
        woken.set_result(None)


class BlockingOnce:
    """Run ``step`` until it succeeds once, one thread at a time.

    Args:
        step: The function to run; it must not call this gate.
    """

    def __init__(self, step: Callable[[], Any]) -> None:
        """Hold ``step``; nothing runs yet."""
        self._step = step
        self._guard = threading.Lock()
        self.done = False

    def __call__(self) -> None:
        """Return once ``step`` has succeeded, running it if it has not."""
        if self.done:
            return
        with self._guard:
            if not self.done:
                self._step()
                self.done = True
