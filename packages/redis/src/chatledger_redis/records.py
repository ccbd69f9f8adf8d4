"""Conversation records on Redis: what their scripts send and answer, and the listing.

Example:
    from chatledger.adapters import check_find_conversations
    from chatledger_redis.keys import IndexKeys
    from chatledger_redis.records import RecordListing

    listing = RecordListing(check_find_conversations(owner="alice"), IndexKeys.of("p:"))
    key, high, low, count = listing.read()   # ZREVRANGEBYLEX key high low LIMIT 0 count
    # ids = listing.entries(members); then feed the INFO script's answer for each id
    # listing.feed(replies); ... listing.page(), listing.repairs

A record lives in its conversation's ``info`` hash
(:class:`chatledger_redis.keys.ConversationKeys`), written by the scripts
that write the messages; the listing index (:class:`~chatledger_redis.keys.IndexKeys`)
lives in a slot of its own. On plain Redis every script that writes a record
also writes the index (its keys follow the conversation's in ``KEYS``): one
atomic step, no round trip more. On Redis Cluster a script cannot reach
another slot, so it answers the index update (``<version>:<updated_at
ms>[:<owner>]``, or ``<version>:-`` for a record gone) and the repository
sends it to the index's node at once (:data:`chatledger_redis.scripts.INDEX`,
one round trip more); the index applies an update only when its version is
newer than what it holds, so updates arriving out of order leave the newest.

What a crash between the two (the client dies after the script's reply, on
Cluster) leaves: the record written, the index at its previous update. The
listing reads the records behind the entries it reads, so it never shows a
record that is gone (a delete, an expiry: the entry is dropped) nor another
owner's, and shows each record with what the record says. A record whose
entry lags is listed at its entry's place (its previous updated_at), once, and
the listing brings the entry up to the record (a repair), as the next write
to it would; a new conversation whose first update was lost is not listed
until either, or until the repository's ``repair_conversation_index`` brings
the index up to every record. The page's cursor carries the place of its
last entry in the index, so a walk through the pages is a walk through the
index: entries only move up (a write moves its conversation to the front),
so no entry comes twice
and every entry that did not move comes once.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from chatledger.adapters import (
    UNSET,
    ConversationInfo,
    ConversationInfoPage,
    ConversationInfoUpdate,
    ConversationQuery,
    encode_conversation_cursor,
)
from chatledger_redis.keys import ConversationKeys, IndexKeys

__all__ = [
    "LISTING_READ_MAX",
    "RecordListing",
    "index_update",
    "record_keys",
    "record_of",
    "record_update",
    "set_info_args",
]

#: The most index entries one read of a listing asks for: a metadata filter
#: that few records match reads on, in reads of up to this many.
LISTING_READ_MAX = 1024

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)


def _text(value: bytes | str) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else value


def _moment(ms: int) -> datetime:
    return _EPOCH + ms * _MS


def _ms(moment: datetime) -> int:
    """The milliseconds of an aware datetime, rounded up (``< moment`` in ms)."""
    micros = (moment - _EPOCH) // timedelta(microseconds=1)
    return -(-micros // 1000)


def _stamp(ms: int) -> str:
    # The index's members start with updated_at in 15 digits, so their byte
    # order is the order of the times (until the year 33658).
    return f"{ms:015d}"


def set_info_args(update: ConversationInfoUpdate, ttl_ms: int) -> list[Any]:
    """The SET_INFO script's ARGV for a checked update."""
    if update.owner is UNSET:
        owner_mode, owner = "k", ""
    elif update.owner is None:
        owner_mode, owner = "c", ""
    else:
        owner_mode, owner = "s", update.owner
    if update.metadata_json is UNSET:
        metadata_mode, metadata = "k", ""
    else:
        metadata_mode, metadata = "s", update.metadata_json
    return [ttl_ms, owner_mode, owner, metadata_mode, metadata]


def record_of(
    conversation_id: str,
    created: Any,
    updated: Any,
    owner: Any,
    metadata: Any,
    count: Any,
) -> ConversationInfo:
    """The record a script answered: times in ms, owner and metadata or nil."""
    return ConversationInfo(
        conversation_id,
        _moment(int(created)),
        _moment(int(updated)),
        int(count),
        None if owner is None else _text(owner),
        {} if metadata is None else json.loads(_text(metadata)),
    )


def record_update(conversation_id: str, reply: Sequence[Any]) -> list[str]:
    """The INDEX script's ARGV that brings the index up to a record INFO read."""
    _, updated, version, owner, _, _ = reply
    update = f"{int(version)}:{int(updated)}"
    if owner is not None:
        update += f":{_text(owner)}"
    return [conversation_id, "w", update]


def index_update(conversation_id: str, op: Any) -> list[str] | None:
    """The INDEX script's ARGV for the update a write answered, or ``None``.

    ``None`` when there is none to send: the script updated the index itself
    (plain Redis), or wrote no record.
    """
    update = _text(op) if op is not None else ""
    return [conversation_id, "w", update] if update else None


@dataclass(frozen=True, slots=True)
class _Entry:
    """An index entry read: the id and the updated_at (ms) it is listed at."""

    conversation_id: str
    at: int


class RecordListing:
    """One page of ``find_conversations``, read from the listing index.

    Each :meth:`read` is one ``ZREVRANGEBYLEX`` of the index (the owner's
    range of :attr:`IndexKeys.owners` when the query names an owner, else
    :attr:`IndexKeys.updated`), from the cursor's place (or
    ``updated_before``) down, of as many entries as the page still needs
    plus one; :meth:`entries` turns the members into the ids whose records
    (the INFO script) are to be read, and :meth:`feed` takes those records.
    A record missing (deleted, expired), of another owner, or whose place
    differs from its entry's, adds a repair (:attr:`repairs`, the INDEX
    script's ARGV) for the repository to send after the page is made.
    """

    def __init__(self, query: ConversationQuery, index: IndexKeys) -> None:
        """Start the listing of ``query`` on ``index``."""
        self.query = query
        # What the records must match; the cursor is a place in the index.
        self._filter = replace(query, after=None)
        self.repairs: list[list[str]] = []
        self._items: list[tuple[ConversationInfo, _Entry]] = []
        self._pending: list[_Entry] = []
        self._asked = 0
        self._reads = 0
        self.done = False
        if query.owner is None:
            self._key = index.updated
            self._head = b""
            low = b"-"
            high = b"+"
        else:
            self._key = index.owners
            self._head = query.owner.encode("utf-8") + b"\x00"
            low = b"(" + self._head
            high = b"(" + query.owner.encode("utf-8") + b"\x01"
        bounds = []
        if query.updated_before is not None:
            bounds.append(self._head + _stamp(_ms(query.updated_before)).encode())
        if query.after is not None:
            at, conversation_id = query.after
            bounds.append(
                self._head
                + _stamp(_ms(at)).encode()
                + b"\x00"
                + conversation_id.encode("utf-8")
            )
        if bounds:
            high = b"(" + min(bounds)
        self._high = high
        self._low = low

    def read(self) -> tuple[str, bytes, bytes, int]:
        """The next read: key, max and min of ``ZREVRANGEBYLEX``, and how many."""
        wanted = self.query.limit + 1 - len(self._items)
        if self.query.metadata and self._reads:
            # A filter may skip many: each further read asks twice as many.
            wanted = max(wanted, 16 << min(self._reads, 6))
        self._reads += 1
        self._asked = min(LISTING_READ_MAX, wanted)
        return self._key, self._high, self._low, self._asked

    def entries(self, members: Sequence[bytes | str]) -> list[str]:
        """The ids of the members a read gave, whose records come next."""
        head = len(self._head)
        self._pending = []
        for member in members:
            raw = member.encode("utf-8") if isinstance(member, str) else member
            stamp, _, conversation_id = raw[head:].partition(b"\x00")
            self._pending.append(_Entry(conversation_id.decode("utf-8"), int(stamp)))
        if len(members) < self._asked:
            self.done = True
        if members:
            last = members[-1]
            raw = last.encode("utf-8") if isinstance(last, str) else last
            self._high = b"(" + raw
        return [entry.conversation_id for entry in self._pending]

    def feed(self, records: Sequence[Any]) -> None:
        """Take the INFO answers of the ids :meth:`entries` gave, in order."""
        for entry, reply in zip(self._pending, records, strict=True):
            self._take(entry, reply)
            if len(self._items) > self.query.limit:
                self.done = True
                break
        self._pending = []

    def _take(self, entry: _Entry, reply: Any) -> None:
        cid = entry.conversation_id
        if not reply:
            # no record: deleted or expired; the entry goes unless a newer
            # write moved it meanwhile
            self.repairs.append([cid, "x", str(entry.at)])
            return
        created, updated, _, owner, metadata, count = reply
        info = record_of(cid, created, updated, owner, metadata, count)
        if int(updated) != entry.at or (
            self.query.owner is not None and info.owner != self.query.owner
        ):
            self.repairs.append(record_update(cid, reply))
        if self._filter.matches(info):
            self._items.append((info, entry))

    def page(self) -> ConversationInfoPage:
        """The page: up to ``limit`` records in index order, and its cursor."""
        limit = self.query.limit
        items = [info for info, _ in self._items[:limit]]
        cursor = None
        if len(self._items) > limit:
            _, entry = self._items[limit - 1]
            cursor = encode_conversation_cursor(
                _moment(entry.at), entry.conversation_id, self.query.fingerprint
            )
        return ConversationInfoPage(items, cursor)


def record_keys(keys: ConversationKeys) -> list[str]:
    """The keys the INFO script reads: the record and the messages."""
    return [keys.info, keys.msgs]
