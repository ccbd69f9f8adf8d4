"""Where the id index keeps a message id, and what a read of it tells.

Example:
    from chatledger_cassandra.id_index import SlotMap, home_slot

    slots = SlotMap()
    home_slot("m1")                 # the slot lane 3 keeps "m1" in, unless taken
    slots.unread(["m1"])            # [home_slot("m1")]: read it first
    slots.learn([home_slot("m1")], {})   # it was read, and it is free
    slots.place(["m1"])             # {"m1": home_slot("m1")}: index it there

A log append must skip every id the conversation holds or held, without
reading the conversation: its messages are keyed by sequence number, and a log
grows without bound. So lane 3 of the partition is an index of ids: one row per
id, clustered by a 64-bit slot, holding the id. An id's home slot is the first
eight bytes of its BLAKE2b digest (a signed big-endian ``bigint``); two ids of
one conversation sharing it are told apart by the id the row holds, and the
later one takes the next free slot (linear probing, wrapping at the end of the
``bigint`` range). Rows of the index are added, never moved, until a window
append or ``save_all`` drops the whole lane, so an id's slots stay where they
were found. A trim of a bounded log (:mod:`chatledger_cassandra.log_trims`)
removes the rows of ids that left the conversation's record of evicted ids,
but only a row whose next slot is free (or goes too): every id stored
further along a probe path then still finds an unbroken path to its row.
A row left for that reason keeps its id "held", so a retry of it stays a
no-op; it takes two ids of one conversation whose 64-bit home slots are
neighbours. A removal on request (:mod:`chatledger_cassandra.log_removals`)
must forget its ids: the rows it cannot remove so it leaves holding no id.

A read of some slots tells, for each id, whether it is held (a slot on its
probe path holds it), where it would go (the first free slot on its path), or
that a slot further along must be read first. Every row the append then adds
to the index is a condition of its batch (``IF NOT EXISTS``): a slot another
writer took meanwhile fails the batch, and the append reads again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence

__all__ = ["SlotMap", "home_slot", "next_slot"]

_LOWEST = -(2**63)
_HIGHEST = 2**63 - 1


def home_slot(message_id: str) -> int:
    """The slot lane 3 keeps ``message_id`` in when no other id took it first."""
    digest = hashlib.blake2b(message_id.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def next_slot(slot: int) -> int:
    """The slot after ``slot`` on a probe path, wrapping at the end of ``bigint``."""
    return _LOWEST if slot == _HIGHEST else slot + 1


class SlotMap:
    """What the reads of one attempt learned of the slots of the id index."""

    def __init__(self, *, whole: bool = False) -> None:
        """Know nothing yet: every slot is unread, or free if the index was
        read ``whole`` (then :meth:`learn` names every taken slot)."""
        # slot -> the id it holds, or None when it was read free
        self._known: dict[int, str | None] = {}
        self._whole = whole

    def learn(self, read: Iterable[int], found: Mapping[int, str]) -> None:
        """Take a read of the slots ``read``: ``found`` maps the taken ones to ids."""
        for slot in read:
            self._known[slot] = found.get(slot)

    def _walk(self, message_id: str, taken: set[int]) -> tuple[str, int]:
        """Follow the probe path of ``message_id`` as far as the reads tell.

        Returns ``("held", slot)``, ``("free", slot)`` or ``("unread", slot)``.
        ``taken`` holds slots already given to other ids of the same write.
        """
        slot = home_slot(message_id)
        while True:
            if slot in taken:
                slot = next_slot(slot)
                continue
            if slot not in self._known:
                return ("free" if self._whole else "unread"), slot
            holder = self._known[slot]
            if holder is None:
                return "free", slot
            if holder == message_id:
                return "held", slot
            slot = next_slot(slot)

    def unread(self, message_ids: Sequence[str]) -> list[int]:
        """The slots to read next before every id's place is known.

        The ids are followed as :meth:`place` gives them slots, in order, an
        unread slot taken as free for the ids after it: once it is read, the
        next call follows the paths again.
        """
        taken: set[int] = set()
        wanted: list[int] = []
        for message_id in message_ids:
            state, slot = self._walk(message_id, taken)
            if state == "held":
                continue
            taken.add(slot)
            if state == "unread" and slot not in wanted:
                wanted.append(slot)
        return wanted

    def held(self, message_ids: Iterable[str]) -> set[str]:
        """The ids the reads found in the index."""
        return {i for i in message_ids if self._walk(i, set())[0] == "held"}

    def held_at(self, message_ids: Iterable[str]) -> dict[str, int]:
        """The slot of each id the reads found in the index."""
        found: dict[str, int] = {}
        for message_id in message_ids:
            state, slot = self._walk(message_id, set())
            if state == "held":
                found[message_id] = slot
        return found

    def freed(self, message_ids: Iterable[str]) -> tuple[list[int], list[int]]:
        """The rows of ``message_ids`` that may leave the index, once known.

        Returns ``(slots to read first, slots whose rows go)``; the second
        is empty while the first is not. An id's row goes when the slot
        after it is free or goes too, so no probe path breaks; an id not in
        the index has no row to remove. The first read of an id asks for
        its home slot and the next together: one read settles it, unless
        another id took its home slot.
        """
        unread: set[int] = set()
        going: set[int] = set()
        for message_id in message_ids:
            state, slot = self._walk(message_id, set())
            if state == "unread":
                unread.update((slot, next_slot(slot)))
            elif state == "held":
                going.add(slot)
        freed: list[int] = []
        for slot in going:
            after = next_slot(slot)
            while after in going:
                after = next_slot(after)
            if after not in self._known and not self._whole:
                unread.add(after)
            elif self._known.get(after) is None:
                freed.append(slot)
        if unread:
            return sorted(unread - self._known.keys()), []
        return [], sorted(freed)

    def place(self, message_ids: Sequence[str]) -> dict[str, int]:
        """Give each id not found in the index a slot, in order.

        A slot nobody read is taken as free: the ``IF NOT EXISTS`` of its
        row checks it when the batch commits. Ids the reads found held get
        none.
        """
        taken: set[int] = set()
        placed: dict[str, int] = {}
        for message_id in message_ids:
            if message_id in placed:
                continue
            state, slot = self._walk(message_id, taken)
            if state == "held":
                continue
            placed[message_id] = slot
            taken.add(slot)
        return placed
