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
import contextlib
from collections.abc import Awaitable, Callable
from typing import TypeVar

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
    task = asyncio.ensure_future(call)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        if committing is not None and not committing():
            task.cancel()
        with contextlib.suppress(Exception):
            await task
        raise
