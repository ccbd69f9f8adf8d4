"""What a repository remembers of the logs it read or wrote last.

Example:
    from chatledger_cassandra.log_states import LogState, LogStates

    states = LogStates(capacity=64)
    state = LogState(version=12, system_batch=3, indexed=True, system=None)
    states.remember("c1", state)
    states.recall("c1")     # the state, to try the next append on it
    states.forget("c1")     # after a write whose outcome is unknown

A log append numbers its messages from the conversation's version
(``next_seq``) and compares its system messages with the current ones, so it
must know both; reading them costs a round trip. After its own commit, or a
window view's read, a repository knows them, so the next append of that
conversation sends its conditional batch at once, on the state remembered: if
nobody wrote since, the batch commits in one round trip; if someone did, its
condition (``IF next_seq = <version>``) fails and the append reads the
conversation and tries again. A remembered state is never trusted beyond
that condition, so a stale one costs a failed round, never a wrong write.

A view may also take the system messages remembered, without reading them,
when its own read shows the same ``system_batch``: every write that changes
the current system messages moves it (a log append that stores new ones, a
window append that replaces them, ``save_all``), and batches are sequence
numbers, never reused within a conversation's life, whose numbers start at
random (:func:`chatledger_cassandra.snapshots.first_sequence_number`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from chatledger.adapters import Message, Role
from chatledger_cassandra.steps import StoredRow

__all__ = ["LogState", "LogStates"]


@dataclass(frozen=True, slots=True)
class LogState:
    """A conversation's log as known at one version.

    Attributes:
        version: ``next_seq``, ``None`` for a conversation not stored.
        system_batch: Where the current system messages start in lane 0.
        indexed: Whether lane 3 holds the id of every stored row.
        system: The current system rows, oldest first, with their payloads,
            or ``None`` when they were not read.
    """

    version: int | None
    system_batch: int | None
    indexed: bool
    system: tuple[StoredRow, ...] | None

    def suffices(self, batch: Sequence[Message]) -> bool:
        """Whether an append of ``batch`` may be sent on this state alone.

        The conversation must be indexed (else its ids must be read) and the
        current system messages known when the batch has one.
        """
        if not self.indexed or self.version is None:
            return False
        return self.system is not None or all(m.role is not Role.SYSTEM for m in batch)


class LogStates:
    """The last known state of up to ``capacity`` logs, most recent kept."""

    def __init__(self, capacity: int) -> None:
        """Remember at most ``capacity`` conversations (``0`` remembers none)."""
        self._capacity = capacity
        self._guard = threading.Lock()
        self._states: OrderedDict[str, LogState] = OrderedDict()

    def remember(self, conversation_id: str, state: LogState) -> None:
        """Keep ``state`` as what the conversation holds now."""
        if self._capacity == 0 or state.version is None:
            self.forget(conversation_id)
            return
        with self._guard:
            self._states[conversation_id] = state
            self._states.move_to_end(conversation_id)
            while len(self._states) > self._capacity:
                self._states.popitem(last=False)

    def recall(self, conversation_id: str) -> LogState | None:
        """Return the kept state of the conversation, if any."""
        with self._guard:
            state = self._states.get(conversation_id)
            if state is not None:
                self._states.move_to_end(conversation_id)
            return state

    def forget(self, conversation_id: str) -> None:
        """Drop what is kept of the conversation."""
        with self._guard:
            self._states.pop(conversation_id, None)
