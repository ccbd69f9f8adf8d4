"""One value per running event loop, made on the loop's first use, closed on that loop.

Example:
    import asyncio
    from chatledger.adapters import LoopLocal

    class Client:  # stands for a client whose sockets belong to one loop
        async def aclose(self):
            print("closed on its own loop")

    clients = LoopLocal(Client, close=Client.aclose)
    locks = LoopLocal(asyncio.Lock)

    async def call():
        async with locks.get():  # the running loop's lock
            return clients.get()  # the running loop's client

    first = asyncio.run(call())  # closed as this loop shuts down
    second = asyncio.run(call())  # another loop, another client
    assert first is not second

An asyncio client (a driver's connection pool, a lock once waited on) belongs
to the event loop it was first used on: its sockets' transports and its
futures are that loop's. From another loop, or once that loop has closed
(``asyncio.run`` twice, threads each running ``asyncio.run``), it fails with
"attached to a different loop" or "Event loop is closed", or waits forever.
So an object that serves any loop keeps a value per loop: a lookup is one
dictionary read keyed by the running loop, and a loop's first call makes its
value, under a thread lock since loops run in threads. A closed loop's value
is forgotten when the loop shuts down or the next loop arrives; loops are
weak keys besides, so a value that does not refer to its loop (a lock never
waited on) goes with it.

A value that has a ``close`` is closed on its own loop, since only that loop
can do its I/O:

- when the loop shuts down. :func:`asyncio.run` and :class:`asyncio.Runner`
  (and anything that awaits ``loop.shutdown_asyncgens()`` before
  ``loop.close()``) close the async generators begun on the loop, and each
  value is held by one, whose ``finally`` awaits ``close``. A failure goes to
  the loop's exception handler, which logs it;
- by :meth:`LoopLocal.aclose`: the calling loop's value before it returns;
  another open loop's is handed to that loop, which closes it on its next
  turn (``aclose`` does not wait for it: that loop may be busy, or waiting on
  this one);
- a loop closed without shutting down its async generators cannot close its
  value any more. The next loop to arrive, or ``aclose``, drops it with a
  :class:`LoopClosedFirstWarning`; its sockets close when it is
  garbage-collected, and asyncio says so (``ResourceWarning: unclosed
  transport``).
"""

from __future__ import annotations

import asyncio
import threading
import warnings
import weakref
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Generic, TypeVar

__all__ = ["LoopClosedFirstWarning", "LoopLocal"]

T = TypeVar("T")


class LoopClosedFirstWarning(RuntimeWarning):
    """A value of :class:`LoopLocal` was left unclosed: its event loop closed first."""


class _Entry(Generic[T]):
    """One loop's value, and the async generator that closes it at shutdown."""

    def __init__(
        self, value: T, close: Callable[[T], Awaitable[object]] | None
    ) -> None:
        self.value = value
        self.guard: AsyncGenerator[None, None] | None = None
        self._close = close
        self._closing = False

    @property
    def unclosed(self) -> bool:
        """Whether the value has a close that has not begun."""
        return self._close is not None and not self._closing

    async def close(self) -> None:
        """Close the value on its own loop, once, whichever closer comes first."""
        if self._close is None or self._closing:
            return
        self._closing = True
        await self._close(self.value)


class LoopLocal(Generic[T]):
    """The value of each running event loop.

    Args:
        make: Makes the value of a loop, in that loop, on its first call
            (without awaiting: it should do no I/O).
        close: Closes a value, on its own loop; ``None`` when there is
            nothing to close (a lock).
        first: A value made beforehand, for the first loop to call.
    """

    def __init__(
        self,
        make: Callable[[], T],
        *,
        close: Callable[[T], Awaitable[object]] | None = None,
        first: T | None = None,
    ) -> None:
        """Hold ``first`` until a loop takes it; nothing is made yet."""
        self._make = make
        self._close = close
        self._first = first
        self._by_loop: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, _Entry[T]
        ] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def get(self) -> T:
        """The running loop's value, made on its first call.

        Raises:
            RuntimeError: no event loop is running in this thread.
        """
        loop = asyncio.get_running_loop()
        entry = self._by_loop.get(loop)
        if entry is None:
            entry = self._add(loop)
        return entry.value

    def _add(self, loop: asyncio.AbstractEventLoop) -> _Entry[T]:
        with self._lock:
            abandoned = self._drop_closed_loops()
            entry = self._by_loop.get(loop)
            if entry is None:
                first, self._first = self._first, None
                value = self._make() if first is None else first
                entry = _Entry(value, self._close)
                if self._close is not None:
                    # Held by the entry: the loop holds its generators weakly.
                    entry.guard = self._closer(loop, entry)
                    _begin(entry.guard)
                self._by_loop[loop] = entry
        _warn_unclosed(abandoned)
        return entry

    def _drop_closed_loops(self) -> list[_Entry[T]]:
        """Forget the loops that have closed; return the values left unclosed."""
        closed = [
            (loop, entry) for loop, entry in self._by_loop.items() if loop.is_closed()
        ]
        for loop, _ in closed:
            del self._by_loop[loop]
        return [entry for _, entry in closed if entry.unclosed]

    async def _closer(
        self, loop: asyncio.AbstractEventLoop, entry: _Entry[T]
    ) -> AsyncGenerator[None, None]:
        """Begun on ``loop``: wait until the loop closes it at shutdown, then close."""
        try:
            yield
        finally:
            with self._lock:
                if self._by_loop.get(loop) is entry:
                    del self._by_loop[loop]
            await entry.close()

    async def aclose(self) -> None:
        """Close every value, and forget them: a later call makes new ones.

        The running loop's value is closed before this returns; another open
        loop's is closed on that loop, on its next turn; a closed loop's that
        its shutdown did not close is dropped with a
        :class:`LoopClosedFirstWarning`. An error closing the running loop's
        value propagates.
        """
        running = asyncio.get_running_loop()
        with self._lock:
            entries = list(self._by_loop.items())
            self._by_loop.clear()
            first, self._first = self._first, None
        own: _Entry[T] | None = None
        abandoned = []
        for loop, entry in entries:
            if loop is running:
                own = entry
            elif not _hand_over(loop, entry):
                abandoned.append(entry)
        _warn_unclosed(abandoned)
        if first is not None:
            await _Entry(first, self._close).close()
        if own is not None:
            await own.close()


def _begin(guard: AsyncGenerator[None, None]) -> None:
    """Run ``guard`` to its ``yield``, now, on the running loop.

    Its first step registers it with the loop, as every async generator's
    does, so the loop's shutdown closes it. That step awaits nothing, so it
    runs here without awaiting.
    """
    step = guard.asend(None)
    try:
        step.send(None)
    except StopIteration:
        return
    step.close()
    raise AssertionError("a closer awaited before its yield")


def _hand_over(loop: asyncio.AbstractEventLoop, entry: _Entry[T]) -> bool:
    """Have ``loop`` close ``entry`` on its next turn; ``False`` if it closed."""
    if not entry.unclosed:
        return True
    try:
        loop.call_soon_threadsafe(_close_here, entry)
    except RuntimeError:  # the loop closed meanwhile
        return not entry.unclosed
    return True


#: The closings handed to a loop: held here until done, since a loop keeps
#: only weak references to its tasks.
_handed_over: set[asyncio.Task[None]] = set()


def _close_here(entry: _Entry[T]) -> None:
    task = asyncio.get_running_loop().create_task(_close_reported(entry))
    _handed_over.add(task)
    task.add_done_callback(_handed_over.discard)


async def _close_reported(entry: _Entry[T]) -> None:
    """Close ``entry``'s value; a failure goes to the loop's exception handler.

    No caller waits for this closing, so its error is reported as asyncio
    reports one while closing a generator at shutdown.
    """
    try:
        await entry.close()
    except Exception as error:
        asyncio.get_running_loop().call_exception_handler(
            {"message": "closing a LoopLocal value failed", "exception": error}
        )


def _warn_unclosed(entries: list[_Entry[T]]) -> None:
    for entry in entries:
        warnings.warn(
            f"{entry.value!r} was left unclosed: its event loop was closed "
            "without shutting down its async generators (asyncio.run and "
            "asyncio.Runner do; otherwise await loop.shutdown_asyncgens() "
            "before loop.close()). Its connections close when it is "
            "garbage-collected.",
            LoopClosedFirstWarning,
            stacklevel=3,
        )
