"""The bounded record of evicted message ids that keeps a late retry a no-op.

Example:
    from chatledger.evicted_ids import EvictedIds

    record = EvictedIds(keep=3)
    record.add(["m1", "m2", "m3", "m4"])
    "m1" in record      # False: only the newest three are kept
    "m4" in record      # True
    list(record)        # ['m2', 'm3', 'm4'], oldest first

An append is safe to retry because a message id already stored makes the
second write of it a no-op. A window deletes messages, though: a retry that
arrives after the window evicted its messages (the driver resent the append,
or the caller retried after a timeout while other appends went on) would
store them again, out of place. So every adapter keeps, per conversation, the
ids of the newest :data:`EVICTED_IDS_KEPT` messages an append took out of the
window (evicted, replaced system messages, and new messages the window
dropped at once: :attr:`chatledger.append_plan.AppendPlan.evicted_ids`), and
treats an id found there as already stored. The record goes with its
conversation: ``save_all`` (which states the whole conversation) and
``delete_by_conversation_id`` clear it, and it expires with the conversation.

A retry is recognised as long as fewer than :data:`EVICTED_IDS_KEPT` messages
left the window between the first write and the retry: at 36-character ids
the record costs about 40 KB per conversation at most.

How each adapter keeps it:

- in memory: :class:`EvictedIds` beside the conversation;
- a store of rows numbered by the conversation's sequence (SQL, Cassandra):
  one row per evicted id, numbered by the evicted message's sequence number,
  trimmed to the numbers above :func:`trim_below` whenever :func:`trim_due`;
- a store that keeps a list on the conversation and rewrites it on every
  append (MongoDB, Neo4j): the list as :func:`kept_newest` makes it;
- a store that pushes onto a list and pays a command per trim (Redis): the
  oldest :func:`list_trim_count` ids leave after each push, so it trims
  about once per :data:`EVICTED_IDS_TRIM_STEP` evictions, like the row stores.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

__all__ = [
    "EVICTED_IDS_KEPT",
    "EVICTED_IDS_TRIM_STEP",
    "EvictedIds",
    "kept_newest",
    "list_trim_count",
    "trim_below",
    "trim_due",
]

#: How many of the newest evicted ids each conversation remembers.
EVICTED_IDS_KEPT = 1000
#: Row stores trim their record when the evicted sequence numbers cross a
#: multiple of this, so the record holds at most KEPT + STEP rows.
EVICTED_IDS_TRIM_STEP = 250


def kept_newest(
    record: Sequence[str], evicted: Iterable[str], keep: int = EVICTED_IDS_KEPT
) -> list[str]:
    """The record (oldest first) with ``evicted`` added: its newest ``keep`` ids."""
    combined = [*record, *evicted]
    return combined[-keep:] if len(combined) > keep else combined


def list_trim_count(
    length: int, keep: int = EVICTED_IDS_KEPT, step: int = EVICTED_IDS_TRIM_STEP
) -> int:
    """How many of its oldest ids a pushed-to list record drops at ``length``.

    None until the list holds more than ``keep + step`` ids, then all but the
    newest ``keep``: the list holds at most ``keep + step`` ids and always
    the newest ``keep``.

    Translated into Redis's APPEND script (``forget_oldest`` in
    ``chatledger_redis.scripts``); ``tests/redis/test_storage.py`` checks the
    stored list against this rule across a trim.
    """
    return length - keep if length > keep + step else 0


def trim_due(first: int, last: int, step: int = EVICTED_IDS_TRIM_STEP) -> bool:
    """Whether an append that evicted sequence numbers ``first..last`` trims the record.

    True when the range reaches a multiple of ``step``: a row store trims
    about once per ``step`` evictions, not on every append.
    """
    return first <= last and (first // step != last // step or first % step == 0)


def trim_below(last: int, keep: int = EVICTED_IDS_KEPT) -> int:
    """Rows numbered at or below this go, once evicting reached ``last``."""
    return last - keep


class EvictedIds:
    """An insertion-ordered set of ids that keeps only the newest ``keep``."""

    __slots__ = ("_ids", "_keep")

    def __init__(self, keep: int = EVICTED_IDS_KEPT) -> None:
        self._keep = keep
        self._ids: dict[str, None] = {}

    def __repr__(self) -> str:
        return f"EvictedIds({len(self._ids)} of {self._keep})"

    def __contains__(self, message_id: object) -> bool:
        return message_id in self._ids

    def __iter__(self) -> Iterator[str]:
        return iter(self._ids)

    def __len__(self) -> int:
        return len(self._ids)

    def add(self, message_ids: Iterable[str]) -> None:
        """Remember ``message_ids`` as the newest evicted ids."""
        for message_id in message_ids:
            self._ids.pop(message_id, None)
            self._ids[message_id] = None
        while len(self._ids) > self._keep:
            del self._ids[next(iter(self._ids))]
