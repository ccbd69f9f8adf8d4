"""What one atomic window append writes and deletes, from the few rows it reads.

Example:
    from chatledger import Message, MessageWindow, Role
    from chatledger.append_plan import StoredEntry, plan_append

    oldest_first = [
        StoredEntry("m1", Role.USER, 1),
        StoredEntry("m2", Role.ASSISTANT, 1),
        StoredEntry("m3", Role.USER, 1),
    ]
    plan = plan_append(
        stored_system=[],
        stored_count=3,
        stored_total=3,
        stored_entries=iter(oldest_first),
        fresh=[Message.user("next")],
        window=MessageWindow(3),
    )
    plan.insert        # the new messages to write
    plan.delete_ids    # the stored messages to delete

Adapters that implement :class:`chatledger.SupportsWindowAppend` read, inside
their atomic unit, the stored system messages, the non-system count and size
total (kept beside the conversation) and a lazy iterator over the oldest
non-system entries, then apply the plan. Nothing here does I/O, and nothing
here is a window rule: the rules are
:func:`chatledger.window.merge_system` and
:func:`chatledger.window.count_evictions`, fed with the stored system messages,
the stored non-system total and the stored non-system entries oldest first.
``stored_entries`` is read lazily, so the repository pages through the oldest
messages only as far as ``count_evictions`` asks.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from chatledger.messages import Message, Role
from chatledger.window import Window, count_evictions, merge_system

__all__ = ["AppendPlan", "StoredEntry", "plan_append"]


@dataclass(frozen=True, slots=True)
class StoredEntry:
    """A stored non-system message as the window sees it.

    Attributes:
        id: The message id.
        role: Its role (never ``system``).
        size: Its size in the window's measure.
    """

    id: str
    role: Role
    size: int


@dataclass(frozen=True, slots=True)
class AppendPlan:
    """The writes of one window append.

    Attributes:
        appended: The new messages the append adds (redundant system messages
            left out), as :class:`chatledger.AppendResult` reports them.
        insert: The new messages to write, in order (``appended`` less the new
            messages the window drops at once).
        insert_sizes: The window size of each message of ``insert``.
        delete_ids: The stored messages to delete: replaced system messages,
            then evicted ones, oldest first.
        evicted_ids: ``delete_ids`` followed by the ids of the new messages the
            window drops at once.
        message_count: How many non-system messages are stored afterwards.
        size_total: Their total size in the window's measure.
        empty: Nothing at all is stored afterwards.
    """

    appended: list[Message]
    insert: list[Message]
    insert_sizes: list[int]
    delete_ids: list[str]
    evicted_ids: list[str]
    message_count: int
    size_total: int
    empty: bool


def plan_append(
    *,
    stored_system: Sequence[Message],
    stored_count: int,
    stored_total: int,
    stored_entries: Iterable[StoredEntry],
    fresh: Sequence[Message],
    window: Window,
) -> AppendPlan:
    """Decide what appending ``fresh`` to a stored conversation writes and deletes.

    Args:
        stored_system: The stored system messages, oldest first.
        stored_count: How many non-system messages are stored.
        stored_total: Their total size in the window's measure.
        stored_entries: The stored non-system messages, oldest first; read
            only as far as the eviction count needs.
        fresh: The new messages, none of them already stored, stamped.
        window: The window to keep.
    """
    merge = merge_system(stored_system, fresh)
    kept_system = [] if merge.replace_stored else list(stored_system)
    sized_new = [(m, window.measure(m)) for m in merge.new]
    new_others = [(m, size) for m, size in sized_new if m.role is not Role.SYSTEM]
    system_size = sum(window.measure(m) for m in kept_system) + sum(
        size for m, size in sized_new if m.role is Role.SYSTEM
    )
    total_size = stored_total + sum(size for _, size in new_others)

    # Filled while count_evictions reads, so the first `cut` are known after it.
    seen: list[tuple[str, int, bool]] = []

    def entries() -> Iterator[tuple[Role, int]]:
        for entry in stored_entries:
            seen.append((entry.id, entry.size, True))
            yield entry.role, entry.size
        for message, size in new_others:
            seen.append((message.id, size, False))
            yield message.role, size

    cut = count_evictions(window.limit, system_size, total_size, entries())
    dropped = seen[:cut]
    dropped_stored = [(i, size) for i, size, stored in dropped if stored]
    dropped_new = {i for i, _, stored in dropped if not stored}
    replaced = [m.id for m in stored_system] if merge.replace_stored else []
    delete_ids = replaced + [i for i, _ in dropped_stored]
    insert = [(m, s) for m, s in sized_new if m.id not in dropped_new]
    kept_new_others = [(m, s) for m, s in insert if m.role is not Role.SYSTEM]
    message_count = stored_count - len(dropped_stored) + len(kept_new_others)
    size_total = (
        stored_total
        - sum(size for _, size in dropped_stored)
        + sum(size for _, size in kept_new_others)
    )
    new_system = any(m.role is Role.SYSTEM for m, _ in insert)
    return AppendPlan(
        appended=list(merge.new),
        insert=[m for m, _ in insert],
        insert_sizes=[s for _, s in insert],
        delete_ids=delete_ids,
        evicted_ids=delete_ids + [i for i, _, stored in dropped if not stored],
        message_count=message_count,
        size_total=size_total,
        empty=message_count == 0 and not kept_system and not new_system,
    )
