"""The pure steps of a SQL write: what to send, from what was read.

Example:
    from datetime import UTC, datetime

    from chatledger import Message, MessageWindow
    from chatledger.adapters import StoredWindow, plan_append
    from chatledger_sql.dialects.base import ConversationState
    from chatledger_sql.steps import append_writes, stored_window

    window = MessageWindow(20)
    state = ConversationState(0, 0, 0, None, None, None)  # the locked row: empty
    stored = stored_window(StoredWindow, window, state, None, lambda n: iter([]))
    plan = plan_append(stored, [Message.user("hi")], window)
    now = datetime.now(UTC)
    writes = append_writes(plan, "c1", state, window.counter_id, now, None)
    writes.rows     # connection.execute(statements.insert_messages, writes.rows)
    writes.evicted  # statements.insert_evicted rows: none, nothing left the window
    writes.update   # the parameters of statements.update_conversation

The sync and the async repository run the same writes; only the way they
reach the database differs. Everything a write computes between two
statements (the rows to insert, the parameters of the conversation update,
the state after an expiry or a re-measure, what the planner is told) is here,
so both call the same code and neither does arithmetic of its own.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar

from sqlalchemy import exc

from chatledger.adapters import (
    AppendPlan,
    AppendResult,
    ContentionError,
    Message,
    Role,
    StoredEntry,
    Window,
    trim_below,
    trim_due,
)
from chatledger_sql.dialects.base import (
    MAX_IDS_PER_STATEMENT,
    ConversationState,
    RetryTransaction,
    SqlDialect,
)
from chatledger_sql.rows import decode, encode

__all__ = [
    "MAX_ATTEMPTS",
    "MAX_PURGE_BATCH",
    "AppendWrites",
    "append_writes",
    "check_retry",
    "forgotten",
    "id_chunks",
    "probed_ids",
    "retry_pause",
    "reweighed",
    "save_writes",
    "still_expired",
    "stored_entry",
    "stored_system",
    "stored_window",
    "update_parameters",
]

W = TypeVar("W")
#: How often a write runs again after a deadlock, conflict or race.
MAX_ATTEMPTS = 12
#: The most conversations ``purge_expired`` removes in one transaction (Oracle
#: caps an ``IN`` list at 1000).
MAX_PURGE_BATCH = 1000
_SYSTEM = Role.SYSTEM.value


def update_parameters(
    conversation_id: str,
    now: datetime,
    ttl: timedelta | None,
    *,
    next_seq: int,
    system_count: int,
    other_count: int,
    weights: tuple[str, int, int] | None,
) -> dict[str, Any]:
    """The parameters of ``Statements.update_conversation`` after a write."""
    counter, system_weight, other_weight = weights or (None, None, None)
    return {
        "cid": conversation_id,
        "now": now,
        "p_next_seq": next_seq,
        "p_system_count": system_count,
        "p_other_count": other_count,
        "p_weight_counter": counter,
        "p_system_weight": system_weight,
        "p_other_weight": other_weight,
        "p_expires_at": None if ttl is None else now + ttl,
    }


def id_chunks(ids: list[str]) -> Iterator[list[str]]:
    """``ids`` in chunks ``Statements.known_ids`` takes: it names each id twice
    (stored, evicted), and an ``IN`` list holds at most
    :data:`~chatledger_sql.dialects.base.MAX_IDS_PER_STATEMENT`."""
    step = MAX_IDS_PER_STATEMENT // 2
    for start in range(0, len(ids), step):
        yield ids[start : start + step]


def probed_ids(ids: list[str]) -> list[str]:
    """The ids the lock statement counts as held: all of them, or none for a
    batch past :data:`MAX_IDS_PER_STATEMENT`, whose ids the write then looks
    up a chunk at a time (a statement takes only so many parameters)."""
    return ids if len(ids) <= MAX_IDS_PER_STATEMENT else []


def forgotten(state: ConversationState) -> ConversationState:
    """The state of an expired, locked conversation once its messages are deleted."""
    return ConversationState(
        state.next_seq, 0, 0, state.weight_counter, 0, 0, known=0, oldest=[], peek=1
    )


def reweighed(
    rows: Iterable[Any],
    conversation_id: str,
    window: Window,
    state: ConversationState,
) -> tuple[list[dict[str, Any]], ConversationState]:
    """Measure every stored row (``Statements.all_rows``) with ``window``.

    Returns the parameters of ``Statements.set_weight`` and the state with
    the new totals, measured by ``window.counter_id``.
    """
    system_weight = other_weight = 0
    updates = []
    for row in rows:
        weight = window.measure(decode(row))
        updates.append({"cid": conversation_id, "p_seq": row.seq, "p_weight": weight})
        if row.role == _SYSTEM:
            system_weight += weight
        else:
            other_weight += weight
    return updates, ConversationState(
        state.next_seq,
        state.system_count,
        state.other_count,
        window.counter_id,
        system_weight,
        other_weight,
        state.known,
    )


def stored_entry(row: Any, counted: bool) -> StoredEntry:
    """One of the oldest rows as the planner sees it; ``counted``: weighs 1."""
    size = 1 if counted else int(row.weight)
    return StoredEntry(row.message_id, Role(row.role), size, row.seq)


def stored_system(rows: Iterable[Any]) -> tuple[list[Message], dict[str, int]]:
    """The stored system messages (``Statements.system_rows``) and their
    sequence numbers by id, which the record of a replaced one keeps."""
    messages: list[Message] = []
    seqs: dict[str, int] = {}
    for row in rows:
        message = decode(row)
        messages.append(message)
        seqs[message.id] = int(row.seq)
    return messages, seqs


def stored_window(
    make: Callable[..., W],
    window: Window,
    state: ConversationState,
    system: Sequence[Message] | None,
    read_oldest: Callable[[int], Any],
) -> W:
    """What the planner needs, from the locked row: a ``StoredWindow`` (or its
    async twin, ``make``) with ``read_oldest`` and the stored ``system``."""
    counted = window.counter_id is None
    return make(
        system_count=state.system_count,
        system_size=state.system_count if counted else state.system_weight or 0,
        count=state.other_count,
        total=state.other_count if counted else state.other_weight or 0,
        read_oldest=read_oldest,
        system=system,
    )


@dataclass(frozen=True, slots=True)
class AppendWrites:
    """The statements' parameters of one planned append.

    Attributes:
        rows: ``Statements.insert_messages`` rows, with the next sequence numbers.
        update: ``Statements.update_conversation`` parameters.
        upto: The last evicted sequence number (``-1``: nothing evicted).
        drop_system: Delete the stored system messages.
        result: What the append reports.
        evicted: ``Statements.insert_evicted`` rows: every id the append took
            out of the window, numbered by the sequence number its message
            had (new messages the window dropped at once take the numbers
            after the inserted rows), less those the trim forgets at once.
        trim_below: ``below`` of ``Statements.trim_evicted`` when the record
            is due a trim (``None``: no trim).
    """

    rows: list[dict[str, Any]]
    update: dict[str, Any]
    upto: int
    drop_system: bool
    result: AppendResult
    evicted: list[dict[str, Any]]
    trim_below: int | None

    @property
    def evicts(self) -> bool:
        """Some stored non-system messages are to be deleted."""
        return self.upto >= 0


def append_writes(
    plan: AppendPlan,
    conversation_id: str,
    state: ConversationState,
    counter: str | None,
    now: datetime,
    ttl: timedelta | None,
    system_seqs: dict[str, int] | None = None,
) -> AppendWrites:
    """Turn a plan into the parameters of its statements.

    ``system_seqs`` are the sequence numbers of the stored system messages
    (:func:`stored_system`), for the record of those the plan replaces.
    """
    base = state.next_seq
    rows = [
        encode(conversation_id, base + i, m, None if counter is None else size)
        for i, (m, size) in enumerate(zip(plan.insert, plan.insert_sizes, strict=True))
    ]
    numbered = _numbered_evictions(plan, system_seqs or {}, base + len(rows))
    # Numbers given to ids that had none are used up: the next append's rows
    # start after them, and a probe that predates this write sees next_seq
    # move (see ConversationState.from_mapping).
    next_seq = max([base + len(rows), *(seq + 1 for _, seq in numbered)])
    evicted: list[dict[str, Any]] = []
    below: int | None = None
    if numbered:
        seqs = [seq for _, seq in numbered]
        last = max(seqs)
        bound = trim_below(last)
        if trim_due(min(seqs), last) and bound >= 0:
            below = bound
        evicted = [
            {"conversation_id": conversation_id, "message_id": mid, "seq": seq}
            for mid, seq in numbered
            if seq > bound
        ]
    update = update_parameters(
        conversation_id,
        now,
        ttl,
        next_seq=next_seq,
        system_count=plan.system_count,
        other_count=plan.message_count,
        weights=None
        if counter is None
        else (counter, plan.system_size, plan.size_total),
    )
    return AppendWrites(
        rows=rows,
        update=update,
        upto=plan.evicted[-1].position if plan.evicted else -1,
        drop_system=plan.replace_system,
        result=AppendResult(plan.appended, plan.evicted_ids),
        evicted=evicted,
        trim_below=below,
    )


def _numbered_evictions(
    plan: AppendPlan, system_seqs: dict[str, int], after: int
) -> list[tuple[str, int]]:
    """Each id of ``plan.evicted_ids`` with the sequence number of its record.

    A stored message keeps its own; an id without one (a new message the
    window dropped at once) takes the next number from ``after`` on.
    """
    own = dict(system_seqs)
    own.update((entry.id, int(entry.position)) for entry in plan.evicted)
    numbered: list[tuple[str, int]] = []
    for message_id in plan.evicted_ids:
        seq = own.get(message_id)
        if seq is None:
            seq = after
            after += 1
        numbered.append((message_id, seq))
    return numbered


def save_writes(
    conversation_id: str,
    stamped: Sequence[Message],
    base: int,
    now: datetime,
    ttl: timedelta | None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The rows and the ``Statements.update_log`` parameters of a
    ``save_all`` numbered from ``base``.

    Its messages are one batch: every system message among them is current,
    the last one ends the set (none: ``system_last`` is ``None``).
    """
    rows = [
        encode(conversation_id, base + index, message, None)
        for index, message in enumerate(stamped)
    ]
    system_seqs = [
        base + index for index, m in enumerate(stamped) if m.role is Role.SYSTEM
    ]
    system = len(system_seqs)
    update = update_parameters(
        conversation_id,
        now,
        ttl,
        next_seq=base + len(stamped),
        system_count=system,
        other_count=len(stamped) - system,
        weights=None,
    )
    update["p_system_batch"] = base
    update["p_system_last"] = system_seqs[-1] if system_seqs else None
    return rows, update


def still_expired(locked: Iterable[Any], now: datetime) -> list[str]:
    """The ids of the locked rows (``Statements.lock_expired``) expired by ``now``."""
    return [
        row.conversation_id
        for row in locked
        if row.expires_at is not None and row.expires_at <= now
    ]


def check_retry(
    error: Exception, attempt: int, dialect: SqlDialect, conversation_id: str
) -> None:
    """Return when a failed write attempt is worth running again, else raise.

    A deadlock, a serialization failure, a lost race to create a row (an
    integrity error, or :class:`RetryTransaction` from the dialect) runs
    again, up to :data:`MAX_ATTEMPTS` attempts in all, then ends in
    :class:`chatledger.ContentionError`; any other error is raised as it is.
    (A lost connection, retried once at once, is the caller's to tell.)
    """
    if isinstance(error, RetryTransaction):
        if attempt >= MAX_ATTEMPTS:
            raise ContentionError(conversation_id, attempt) from error
        return
    if not isinstance(error, exc.DBAPIError) or not (
        isinstance(error, exc.IntegrityError) or dialect.is_retryable(error)
    ):
        raise error
    if attempt >= MAX_ATTEMPTS:
        raise ContentionError(
            conversation_id, attempt, type(error.orig).__name__
        ) from error


def retry_pause(attempt: int) -> float:
    """Seconds to wait before attempt ``attempt + 1``: random, growing, capped."""
    return random.uniform(0, 0.005 * 2 ** min(attempt, 6))
