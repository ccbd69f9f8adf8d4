"""What one atomic window append writes and deletes, from the little it reads.

Example:
    from chatledger import Message, MessageWindow, Role
    from chatledger.append_plan import StoredEntry, StoredWindow, plan_append

    oldest_first = [
        StoredEntry("m1", Role.USER, 1, position=0),
        StoredEntry("m2", Role.ASSISTANT, 1, position=1),
        StoredEntry("m3", Role.USER, 1, position=2),
    ]
    stored = StoredWindow(
        system_count=0,
        system_size=0,
        count=3,
        total=3,
        read_oldest=lambda expected: iter(oldest_first),
    )
    plan = plan_append(stored, [Message.user("next")], MessageWindow(3))
    plan.insert        # the new messages to write, in order
    plan.evicted       # the stored entries to delete, oldest first

Every adapter that plans in Python (SQL, Cassandra, Neo4j, in memory) reads,
inside its atomic unit, what :class:`StoredWindow` names, calls
:func:`plan_append`, then writes the plan: its own code is only I/O. Nothing
here does I/O, and nothing here is a window rule: the rules are
:func:`chatledger.window.merge_system` and
:func:`chatledger.window.count_evictions`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from chatledger.messages import Message, Role
from chatledger.window import Window, count_evictions, merge_system

__all__ = [
    "AppendPlan",
    "StoredEntry",
    "StoredWindow",
    "needs_stored_system",
    "plan_append",
    "rows_to_peek",
]

#: Rows read past the excess in the first read of a message window: the cut
#: snaps forward to the next user message, usually within a short turn.
TURN_SLACK = 8
#: Rows read first when sizes are tokens and the excess says little about rows.
TOKEN_WINDOW_FIRST_READ = 32


@dataclass(frozen=True, slots=True)
class StoredEntry:
    """A stored non-system message as the window sees it.

    Attributes:
        id: The message id.
        role: Its role (never ``system``).
        size: Its size in the window's measure (1 in a message window).
        position: The adapter's own handle on the stored message (a sequence
            number, a clustering key); the planner only hands it back.
    """

    id: str
    role: Role
    size: int
    position: Any = None


@dataclass(frozen=True, slots=True)
class StoredWindow:
    """What an adapter read of one stored conversation, inside its atomic unit.

    Attributes:
        system_count: How many system messages are stored.
        system_size: Their total size in the window's measure.
        count: How many non-system messages are stored.
        total: Their total size in the window's measure.
        read_oldest: Returns the stored non-system entries, oldest first, as a
            lazy iterable; called at most once, with how many entries the
            planner expects to read (a hint for the first page), and read only
            as far as the eviction count needs.
        system: The stored system messages, oldest first. Needed only when the
            batch holds a system message (:func:`needs_stored_system`).
    """

    system_count: int
    system_size: int
    count: int
    total: int
    read_oldest: Callable[[int], Iterable[StoredEntry]]
    system: Sequence[Message] | None = None


@dataclass(frozen=True, slots=True)
class AppendPlan:
    """The writes of one window append.

    Attributes:
        appended: The new messages the append adds (redundant system messages
            left out), as :class:`chatledger.AppendResult` reports them.
        insert: The new messages to write, in order (``appended`` less the new
            messages the window drops at once).
        insert_sizes: The window size of each message of ``insert``.
        replace_system: Every stored system message is to be deleted.
        evicted: The stored non-system entries to delete, oldest first.
        delete_ids: The ids of every stored message to delete: the replaced
            system messages, then ``evicted``.
        evicted_ids: ``delete_ids`` followed by the ids of the new messages the
            window drops at once.
        system_count: How many system messages are stored afterwards.
        system_size: Their total size.
        message_count: How many non-system messages are stored afterwards.
        size_total: Their total size.
        empty: Nothing at all is stored afterwards.
    """

    appended: list[Message]
    insert: list[Message]
    insert_sizes: list[int]
    replace_system: bool
    evicted: list[StoredEntry]
    delete_ids: list[str]
    evicted_ids: list[str]
    system_count: int
    system_size: int
    message_count: int
    size_total: int

    @property
    def empty(self) -> bool:
        """Nothing at all is stored afterwards."""
        return self.message_count == 0 and self.system_count == 0


def needs_stored_system(batch: Sequence[Message]) -> bool:
    """Whether the planner needs the stored system messages for ``batch``."""
    return any(m.role is Role.SYSTEM for m in batch)


def rows_to_peek(window: Window, batch_size: int) -> int:
    """How many of the oldest rows a steady-state append of ``batch_size`` evicts.

    An adapter that can read the oldest rows in the same round trip as its
    lock reads this many, so the planner rarely asks for more.
    """
    if window.counter_id is None:
        return batch_size + TURN_SLACK
    return TOKEN_WINDOW_FIRST_READ


def _first_read(window: Window, excess: int) -> int:
    if excess <= 0:
        # Only the head's role is asked for: is it a tool response (rule 4)?
        return 1
    if window.counter_id is None:
        return excess + TURN_SLACK
    return TOKEN_WINDOW_FIRST_READ


def plan_append(
    stored: StoredWindow, fresh: Sequence[Message], window: Window
) -> AppendPlan:
    """Decide what appending ``fresh`` to a stored conversation writes and deletes.

    Args:
        stored: What the adapter read of the stored conversation.
        fresh: The new messages, none of them already stored, stamped.
        window: The window to keep.

    Raises:
        ValueError: ``fresh`` holds a system message and ``stored.system`` was
            not read.
    """
    if stored.system is None:
        if needs_stored_system(fresh):
            raise ValueError("the batch holds a system message: read stored.system")
        stored_system: Sequence[Message] = ()
    else:
        stored_system = stored.system
    merge = merge_system(stored_system, fresh)
    sized_new = [(m, window.measure(m)) for m in merge.new]
    new_others = [(m, size) for m, size in sized_new if m.role is not Role.SYSTEM]
    new_system = [size for m, size in sized_new if m.role is Role.SYSTEM]
    system_count = len(new_system)
    system_size = sum(new_system)
    if not merge.replace_stored:
        system_count += stored.system_count
        system_size += stored.system_size
    total = stored.total + sum(size for _, size in new_others)

    read: list[StoredEntry] = []

    def entries() -> Iterator[tuple[Role, int]]:
        if stored.count > 0:
            excess = system_size + total - window.limit
            for entry in stored.read_oldest(_first_read(window, excess)):
                read.append(entry)
                yield entry.role, entry.size
        for message, size in new_others:
            yield message.role, size

    cut = count_evictions(window.limit, system_size, total, entries())
    evicted = read[:cut]
    dropped_new = {m.id for m, _ in new_others[: max(0, cut - len(read))]}
    insert = [(m, size) for m, size in sized_new if m.id not in dropped_new]
    kept_others = [size for m, size in insert if m.role is not Role.SYSTEM]
    replaced = [m.id for m in stored_system] if merge.replace_stored else []
    delete_ids = replaced + [entry.id for entry in evicted]
    return AppendPlan(
        appended=list(merge.new),
        insert=[m for m, _ in insert],
        insert_sizes=[size for _, size in insert],
        replace_system=merge.replace_stored,
        evicted=evicted,
        delete_ids=delete_ids,
        evicted_ids=delete_ids + [m.id for m, _ in new_others if m.id in dropped_new],
        system_count=system_count,
        system_size=system_size,
        message_count=stored.count - len(evicted) + len(kept_others),
        size_total=stored.total - sum(e.size for e in evicted) + sum(kept_others),
    )
