"""Conversation records: where they are kept, how a listing finds them, in pure Python.

Example:
    from chatledger_cassandra.records import bucket_scope, owner_scope, scopes_of

    owner_scope("alice")         # 'o:alice': the partition of alice's listing
    bucket_scope("c1")           # 'a:<n>': one of the buckets every record is in
    scopes_of("c1", "alice")     # both: where a write lists the record

The record itself (owner, metadata as JSON text, ``created_at``,
``updated_at``) is four static columns of the conversation's partition,
written by the same conditional batch as the messages, so it is as atomic as
they are; ``message_count`` is counted by the server when a record is read
(``COUNT`` over the conversation's message rows).

The listing is a table beside it, ``<table>_records``: one partition per
*scope*, its rows ``(updated_at, conversation_id)`` newest first. A record is
listed in the scope of its owner (``o:<owner>``) and in one of
:data:`BUCKETS` scopes (``a:<n>``, by a hash of its id) that together list
every record, so that no one partition takes every write. An owner's listing
reads that owner's partition only; a listing of every record reads the
buckets and merges them.

The listing cannot join the conversation's conditional batch (a lightweight
transaction is one partition), so a write sends its listing rows beside the
batch, in the same round trip, and never deletes one: a row only says where
a record may be. A row is *current* when the record read with it has the
row's ``updated_at`` (and, in an owner's scope, that owner): the listing
keeps those and skips the others (:func:`judge`). So a row is never missing
(the rows of every committed write were written), and a row left behind (the
record moved on, its owner changed, the batch lost its condition, the
conversation was deleted) is told by the record and removed by the listing
that meets it, once it can never be current again: ``updated_at`` behind the
record's, which only moves forward in one process, or a record gone for
longer than :data:`GONE_GRACE`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from chatledger.conversation_info import ConversationInfo, ConversationQuery

__all__ = [
    "BUCKETS",
    "GONE_GRACE",
    "Candidate",
    "Merge",
    "Record",
    "aware",
    "bucket_scope",
    "from_millis",
    "judge",
    "listing_bound",
    "millis",
    "owner_scope",
    "record_of",
    "scopes_of",
]

#: How many bucket scopes list every record between them.
BUCKETS = 16
#: How long a listing row of a conversation that has no record is left alone:
#: the write that made it may still be committing.
GONE_GRACE = timedelta(minutes=10)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def millis(moment: datetime) -> int:
    """``moment`` (aware) as whole milliseconds since the epoch, rounded down."""
    return (moment - _EPOCH) // timedelta(milliseconds=1)


def from_millis(value: int) -> datetime:
    """The UTC moment of ``value`` milliseconds since the epoch."""
    return _EPOCH + timedelta(milliseconds=value)


def aware(moment: datetime) -> datetime:
    """The driver's naive UTC timestamp, made aware."""
    if moment.tzinfo is not None:
        return moment
    return moment.replace(tzinfo=UTC)


def owner_scope(owner: str) -> str:
    """The scope (listing partition) of an owner's records."""
    return f"o:{owner}"


def bucket_scope(conversation_id: str) -> str:
    """The bucket scope a conversation is listed in whatever its owner."""
    digest = hashlib.blake2b(conversation_id.encode("utf-8"), digest_size=2)
    return f"a:{int.from_bytes(digest.digest(), 'big') % BUCKETS}"


def scopes_of(conversation_id: str, owner: str | None) -> list[str]:
    """Every scope a record of ``owner`` is listed in."""
    scopes = [bucket_scope(conversation_id)]
    if owner is not None:
        scopes.append(owner_scope(owner))
    return scopes


@dataclass(frozen=True, slots=True)
class Record:
    """A conversation's record as read from its partition.

    Attributes:
        version: ``next_seq``.
        emptied: The static ``emptied``.
        owner: The owner, or ``None``.
        metadata: The metadata's JSON text, or ``None`` (``{}``).
        created_at: When it was made.
        updated_at: The last write to its messages, in whole milliseconds.
        stored_times: Whether the partition holds the times (an earlier
            release's conversation does not until a write or an upgrade).
    """

    version: int
    emptied: bool
    owner: str | None
    metadata: str | None
    created_at: datetime
    updated_at: datetime
    stored_times: bool

    def info(self, conversation_id: str, count: int) -> ConversationInfo:
        """The record as the protocol gives it, holding ``count`` messages."""
        metadata = {} if self.metadata is None else json.loads(self.metadata)
        return ConversationInfo(
            conversation_id,
            self.created_at,
            self.updated_at,
            count,
            self.owner,
            metadata,
        )


def record_of(values: Sequence[Any] | None) -> Record | None:
    """The record of a ``select_record`` row (``None``: no conversation).

    A conversation an earlier release wrote has no times: both are then when
    its version was last written, to the millisecond.
    """
    if values is None:
        return None
    version, emptied, owner, metadata, created, updated, written = values
    if version is None:
        return None
    stored = updated is not None
    updated = from_millis(int(written) // 1000) if updated is None else aware(updated)
    created = updated if created is None else aware(created)
    return Record(version, bool(emptied), owner, metadata, created, updated, stored)


def listing_bound(query: ConversationQuery) -> tuple[datetime, str] | None:
    """The ``(updated_at, id)`` key a listing reads strictly below.

    The cursor's key, or ``updated_before`` (its millisecond rounded up: the
    times are stored in milliseconds, and ``(t, "")`` is below every id at
    ``t``), whichever is lower.
    """
    bounds: list[tuple[datetime, str]] = []
    if query.after is not None:
        bounds.append(query.after)
    if query.updated_before is not None:
        micros = (query.updated_before - _EPOCH) // timedelta(microseconds=1)
        bounds.append((from_millis(-(-micros // 1000)), ""))
    return min(bounds) if bounds else None


@dataclass(frozen=True, slots=True)
class Candidate:
    """One listing row: where a record may be.

    Attributes:
        scope: Its partition.
        updated_at: Its ``updated_at``.
        conversation_id: The conversation it names.
    """

    scope: str
    updated_at: datetime
    conversation_id: str

    @property
    def key(self) -> tuple[datetime, str]:
        """Its place in the listing's order (descending)."""
        return self.updated_at, self.conversation_id


def judge(
    candidate: Candidate,
    record: Record | None,
    now: datetime,
) -> Literal["current", "stale", "skip"]:
    """What a listing does with ``candidate`` given the record read for it.

    ``"current"``: the row says where the record is. ``"stale"``: it never
    will again, remove it: the record moved past it (``updated_at`` only moves
    forward), or the conversation has had no record for :data:`GONE_GRACE`.
    ``"skip"``: not current, but a write in flight may still make it so (its
    batch not committed yet, or an owner set back).
    """
    if record is None:
        if candidate.updated_at < now - GONE_GRACE:
            return "stale"
        return "skip"
    if record.updated_at > candidate.updated_at:
        return "stale"
    if record.updated_at < candidate.updated_at:
        return "skip"
    if candidate.scope.startswith("o:") and (
        record.owner is None or owner_scope(record.owner) != candidate.scope
    ):
        return "skip"
    return "current"


@dataclass
class _Scope:
    name: str
    rows: list[Candidate] = field(default_factory=list)
    exhausted: bool = False


class Merge:
    """The listing rows of several scopes, read a page at a time, merged
    newest first.

    Example:
        from datetime import UTC, datetime

        from chatledger_cassandra.records import Merge

        merge = Merge(["a:0", "a:1"], bound=None, batch=2)
        merge.wanted()  # each scope to read, and the key to read below
        # [('a:0', None), ('a:1', None)]
        merge.add("a:0", [(datetime(2026, 1, 2, tzinfo=UTC), "c2")], asked=2)
        merge.add("a:1", [(datetime(2026, 1, 3, tzinfo=UTC), "c3")], asked=2)
        [merge.pop().conversation_id, merge.pop().conversation_id]  # newest first
        # ['c3', 'c2']
        merge.done()
        # True
    """

    def __init__(
        self,
        scopes: Iterable[str],
        bound: tuple[datetime, str] | None,
        batch: int,
    ) -> None:
        self._scopes = {name: _Scope(name) for name in scopes}
        self._bound: dict[str, tuple[datetime, str] | None] = dict.fromkeys(
            self._scopes, bound
        )
        self.batch = batch

    def wanted(self) -> list[tuple[str, tuple[datetime, str] | None]]:
        """The scopes that must be read before the next candidate is known,
        each with the key to read strictly below (``None``: from the newest)."""
        return [
            (name, self._bound[name])
            for name, scope in self._scopes.items()
            if not scope.rows and not scope.exhausted
        ]

    def add(self, name: str, rows: Sequence[tuple[datetime, str]], asked: int) -> None:
        """Take a read of ``asked`` rows at most of scope ``name``."""
        scope = self._scopes[name]
        for updated_at, conversation_id in rows:
            scope.rows.append(Candidate(name, aware(updated_at), conversation_id))
        if len(rows) < asked:
            scope.exhausted = True
        if scope.rows:
            self._bound[name] = scope.rows[-1].key

    def pop(self) -> Candidate | None:
        """The newest candidate left; ``None`` when every scope is read out,
        or when :meth:`wanted` names a scope to read first."""
        if self.wanted():
            return None
        heads = [scope for scope in self._scopes.values() if scope.rows]
        if not heads:
            return None
        newest = max(heads, key=lambda scope: scope.rows[0].key)
        return newest.rows.pop(0)

    def done(self) -> bool:
        """Whether every scope is read out and taken."""
        return all(s.exhausted and not s.rows for s in self._scopes.values())
