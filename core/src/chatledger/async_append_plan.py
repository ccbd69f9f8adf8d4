"""The append planner for adapters whose reads are awaited.

Example:
    import asyncio

    from chatledger import Message, MessageWindow, Role
    from chatledger.adapters import AsyncStoredWindow, StoredEntry, plan_append_async

    rows = [
        StoredEntry("m1", Role.USER, 1, position=0),
        StoredEntry("m2", Role.ASSISTANT, 1, position=1),
        StoredEntry("m3", Role.USER, 1, position=2),
    ]

    async def oldest_rows(expected):  # an adapter awaits its pages of rows here
        for row in rows:
            yield row

    async def main():
        stored = AsyncStoredWindow(
            system_count=0,
            system_size=0,
            count=3,
            total=3,
            read_oldest=oldest_rows,  # (expected) -> async iterator of StoredEntry
        )
        fresh = [Message.user("next")]
        plan = await plan_append_async(stored, fresh, MessageWindow(3))
        plan.insert         # the new message
        plan.evicted_ids    # ['m1', 'm2']: the oldest whole turn

    asyncio.run(main())

:func:`chatledger.append_plan.plan_append` pulls the oldest stored entries
lazily, through a plain iterator, and stops as soon as it knows the eviction
count; an async adapter cannot serve that iterator, since each further page
of rows is awaited. :func:`plan_append_async` runs the same planner on the
entries read so far; when the planner asks past them, it awaits more from the
adapter's async iterator (the planner's own hint first, then twice as many as
read) and plans again. The planner is pure, so a rerun costs only CPU, and the
plan is the one ``plan_append`` makes: the adapter's code stays I/O only.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass

from chatledger.append_plan import AppendPlan, StoredEntry, StoredWindow, plan_append
from chatledger.messages import Message
from chatledger.window import Window

__all__ = ["AsyncStoredWindow", "plan_append_async"]


@dataclass(frozen=True, slots=True)
class AsyncStoredWindow:
    """What an async adapter read of one stored conversation, inside its atomic unit.

    The fields are :class:`~chatledger.append_plan.StoredWindow`'s, except
    ``read_oldest``: called at most once, with the planner's hint of how many
    entries it expects to read, it returns an async iterator of the stored
    non-system entries, oldest first, read only as far as the planner asks.
    """

    system_count: int
    system_size: int
    count: int
    total: int
    read_oldest: Callable[[int], AsyncIterator[StoredEntry]]
    system: Sequence[Message] | None = None


class _ReadPast(Exception):
    """The planner asked for an entry past those read so far."""


async def plan_append_async(
    stored: AsyncStoredWindow, fresh: Sequence[Message], window: Window
) -> AppendPlan:
    """Decide what appending ``fresh`` writes and deletes, awaiting stored entries.

    Same arguments, result and errors as
    :func:`chatledger.append_plan.plan_append`.
    """
    read: list[StoredEntry] = []
    source: AsyncIterator[StoredEntry] | None = None
    exhausted = False
    hint = 1

    def entries_so_far(expected: int) -> Iterator[StoredEntry]:
        nonlocal hint
        hint = max(1, expected)
        yield from read
        if not exhausted:
            raise _ReadPast

    known = StoredWindow(
        system_count=stored.system_count,
        system_size=stored.system_size,
        count=stored.count,
        total=stored.total,
        read_oldest=entries_so_far,
        system=stored.system,
    )
    try:
        while True:
            try:
                return plan_append(known, fresh, window)
            except _ReadPast:
                pass
            if source is None:
                source = stored.read_oldest(hint)
                target = hint
            else:
                target = 2 * len(read)
            while len(read) < target:
                try:
                    read.append(await anext(source))
                except StopAsyncIteration:
                    exhausted = True
                    break
    finally:
        close = getattr(source, "aclose", None)
        if close is not None and not exhausted:
            await close()
