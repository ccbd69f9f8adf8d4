"""Named points inside a write where tests inject faults.

Example (in a test, a fault that fails the write after its insert):
    import pytest
    from chatledger import Message, MessageWindowChatMemory
    from chatledger_sql import SqlChatMemoryRepository

    repository = SqlChatMemoryRepository.from_url("sqlite:///chat.db")
    memory = MessageWindowChatMemory(repository)

    def kill(point: str) -> None:
        raise ConnectionError(f"connection lost {point}")

    repository.fault_points.on("after_insert", kill)
    with pytest.raises(ConnectionError):
        memory.add("c1", Message.user("hi"))
    repository.fault_points.clear()
    assert memory.get("c1") == []   # rolled back

Every adapter owns a :class:`FaultPoints` and calls :meth:`FaultPoints.reach`
at the same named steps, so one fault-injection test covers every backend. In
production no handler is set and ``reach`` is a dictionary lookup.

The names, in the order a write reaches them:

- ``after_lock``: the conversation is locked (or the atomic unit has begun).
- ``after_delete``: ``save_all`` removed the old messages.
- ``after_insert``: the new messages are written.
- ``after_evict``: the evicted messages are deleted.
- ``before_commit``: everything is written, nothing is committed yet.
- ``after_commit``: committed, not yet acknowledged to the caller.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["FAULT_POINTS", "FaultPoints"]

FAULT_POINTS = (
    "after_lock",
    "after_delete",
    "after_insert",
    "after_evict",
    "before_commit",
    "after_commit",
)


class FaultPoints:
    """A registry of test-only handlers, called at named steps of a write."""

    __slots__ = ("_handlers",)

    def __init__(self) -> None:
        """Start with no handler."""
        self._handlers: dict[str, Callable[[str], object]] = {}

    def on(self, point: str, handler: Callable[[str], object]) -> None:
        """Call ``handler(point)`` whenever a write reaches ``point``."""
        if point not in FAULT_POINTS:
            raise ValueError(f"unknown fault point {point!r}; known: {FAULT_POINTS}")
        self._handlers[point] = handler

    @property
    def armed(self) -> bool:
        """Some handler is set: a write must pass every named step.

        An adapter with a faster write that has no such steps (one server-side
        statement) takes its stepped write while this is true.
        """
        return bool(self._handlers)

    def clear(self) -> None:
        """Remove every handler."""
        self._handlers.clear()

    def reach(self, point: str) -> None:
        """Mark that a write reached ``point``; runs its handler if one is set."""
        handler = self._handlers.get(point)
        if handler is not None:
            handler(point)
