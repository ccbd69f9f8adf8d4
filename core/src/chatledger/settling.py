"""Settling a sent write before a cancellation returns, for async adapters.

Example:
    from chatledger.adapters import settled

    async def commit(connection):
        await settled(connection.commit())

A request that commits (a ``COMMIT``, a routine or a batch that commits on
its own), once sent, is carried out by the server whatever the client does:
closing the connection does not stop it. If the caller returned from its
cancellation at once, the write could land afterwards, when the caller may
already have read the old conversation. :func:`settled` waits for the answer
first, so when the cancellation returns, what is stored is what stays.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["settled"]

T = TypeVar("T")


async def settled(
    call: Awaitable[T], *, committing: Callable[[], bool] | None = None
) -> T:
    """Await ``call``; when cancelled meanwhile, let it finish, then re-raise.

    ``call`` runs as a task of its own that the cancellation does not reach.
    After a cancellation its error, if any, is dropped in favour of the
    cancellation (the caller asked to stop; the write landed or not, for
    good). A second cancellation stops waiting and cancels ``call`` too, as
    if it had not been settled.

    Args:
        call: The write, or only its request that commits.
        committing: For a ``call`` that does more than commit (a driver's
            managed transaction): whether its commit is under way. A
            cancellation that comes before it answers ``True`` cancels
            ``call`` at once, as if it had not been settled: nothing was
            committed, and the server rolls back what was not.
    """
    # The caller's wake-up reads the task's answer, an error included, before
    # its cancellation is raised in place of it: nothing is left unretrieved.
    answer: T = await _Settling(
        call if inspect.iscoroutine(call) else _awaited(call), committing
    )
    return answer


async def _awaited(call: Awaitable[T]) -> T:
    return await call


class _Settling(asyncio.Task[Any]):
    """The task :func:`settled` awaits, which its caller's first cancellation
    does not reach.

    A task cancelled while it awaits a future cancels that future; the future
    answering that it cannot be cancelled leaves the task to be cancelled when
    the future is done. That is the whole of it: the caller waits for the
    call, then its cancellation is raised. (``asyncio.shield`` would do the
    same with a future between the two, a turn of the event loop more.)
    """

    __slots__ = ("_committing", "_spared")

    def __init__(
        self, coroutine: Coroutine[Any, Any, Any], committing: Callable[[], bool] | None
    ) -> None:
        self._committing = committing
        self._spared = False
        super().__init__(coroutine)

    def cancel(self, msg: Any = None) -> bool:
        """Hold back the first cancellation (unless nothing is being
        committed yet); carry out any other."""
        if self.done():
            return False
        if not self._spared and (self._committing is None or self._committing()):
            self._spared = True
            return False
        return super().cancel(msg)
