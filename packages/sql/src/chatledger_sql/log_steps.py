"""The pure steps of the log's SQL calls: what an append writes, what a read decodes.

Example:
    from datetime import UTC, datetime
    from chatledger import Message
    from chatledger_sql.dialects.base import ConversationState
    from chatledger_sql.log_steps import log_writes

    now = datetime.now(UTC)
    state = ConversationState.empty()
    writes = log_writes("c1", state, [Message.user("hi")], None, now, None)
    writes.rows[0]["seq"], writes.update["p_next_seq"]     # 0, 1

Nothing here does I/O. A log append keeps every message: it numbers the new
ones from the conversation's ``next_seq``, keeps the counts the conversation
row holds, and records where the current system messages are
(``system_batch`` to ``system_last``, see :mod:`chatledger_sql.schema`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from chatledger.adapters import LogRow, Message, Role, Window, trim_below, trim_due
from chatledger_sql.dialects.base import ConversationState
from chatledger_sql.rows import decode_raw, encode
from chatledger_sql.steps import update_parameters

__all__ = [
    "NUMBERED_COLUMNS",
    "LogTrim",
    "LogWrites",
    "log_append_parameters",
    "log_append_rows",
    "log_row",
    "log_trim",
    "log_writes",
    "numbered_from",
    "numbered_rows",
    "row_values",
    "system_range",
    "untally",
]


#: The columns of each row a numbered log append binds (``r<i>_<column>``);
#: the statement gives the others.
NUMBERED_COLUMNS = ("message_id", "role", "content", "payload", "weight", "created_at")


@dataclass(frozen=True, slots=True)
class LogWrites:
    """The rows and the conversation update of one log append.

    Attributes:
        rows: ``Statements.insert_messages`` values, one per new message.
        update: ``Statements.update_log`` parameters.
    """

    rows: list[dict[str, Any]]
    update: dict[str, Any]


def system_range(
    state: ConversationState, current: Sequence[tuple[int, Message]]
) -> tuple[int | None, int | None]:
    """Where the current system messages are, before an append that adds none.

    Known from the conversation row, or else from the rows read: the first
    and last of them (a window store or a ``save_all`` holds only current
    ones, so that range holds no other system message).
    """
    if state.system_known:
        return state.system_batch, state.system_last
    if not current:
        return None, None
    return current[0][0], current[-1][0]


def log_writes(
    conversation_id: str,
    state: ConversationState,
    appended: Sequence[Message],
    window: Window | None,
    now: datetime,
    ttl: timedelta | None,
    system: tuple[int | None, int | None] = (None, None),
) -> LogWrites:
    """What a log append of ``appended`` (stamped, rule 1 applied) writes.

    Args:
        state: The locked conversation row.
        window: Its counter decides the sizes stored: they are kept while
            every stored message has one under that counter (the
            conversation is new, or its row names that counter), else the
            row stops naming any counter.
        system: Where the current system messages are when ``appended``
            holds none (:func:`system_range`).
    """
    base = state.next_seq
    counter = None if window is None else window.counter_id
    empty = state.system_count + state.other_count == 0
    sizes: list[int | None]
    if counter is not None and (empty or state.weight_counter == counter):
        assert window is not None
        sizes = [window.measure(message) for message in appended]
    else:
        counter = None
        sizes = [None] * len(appended)
    rows = [
        encode(conversation_id, base + index, message, size)
        for index, (message, size) in enumerate(zip(appended, sizes, strict=True))
    ]
    system_seqs = [
        base + index
        for index, message in enumerate(appended)
        if message.role is Role.SYSTEM
    ]
    system_count = len(system_seqs)
    weights = None
    if counter is not None:
        system_size = sum(
            size or 0
            for message, size in zip(appended, sizes, strict=True)
            if message.role is Role.SYSTEM
        )
        other_size = sum(size or 0 for size in sizes) - system_size
        weights = (
            counter,
            (0 if empty else state.system_weight or 0) + system_size,
            (0 if empty else state.other_weight or 0) + other_size,
        )
    update = update_parameters(
        conversation_id,
        now,
        ttl,
        next_seq=base + len(rows),
        system_count=state.system_count + system_count,
        other_count=state.other_count + len(rows) - system_count,
        weights=weights,
    )
    first, last = (base, system_seqs[-1]) if system_seqs else system
    update["p_system_batch"] = first
    update["p_system_last"] = last
    return LogWrites(rows, update)


def log_append_rows(
    conversation_id: str, stamped: Sequence[Message], window: Window | None
) -> list[dict[str, Any]]:
    """The ``Statements.insert_messages`` values of a one-statement log append.

    Numbered from 0 (the statement numbers them); each message's size is
    measured when the window has a counter, and kept if the conversation's
    sizes are all under that counter.
    """
    counter = None if window is None else window.counter_id
    if window is None or counter is None:
        return [encode(conversation_id, 0, message, None) for message in stamped]
    return [
        encode(conversation_id, 0, message, window.measure(message))
        for message in stamped
    ]


def log_append_parameters(
    conversation_id: str,
    rows: Sequence[dict[str, Any]],
    window: Window | None,
    now: datetime,
    ttl: timedelta | None,
) -> dict[str, Any]:
    """The parameters of a dialect's one-statement log append of ``rows``,
    but the rows' own values (:func:`row_values`).

    ``rows`` are :func:`log_append_rows`' (the batch holds no system
    message). The ids go as ``id_<i>``.
    """
    parameters: dict[str, Any] = {
        f"id_{index}": row["message_id"] for index, row in enumerate(rows)
    }
    parameters["cid"] = conversation_id
    parameters["n"] = len(rows)
    parameters["counter"] = None if window is None else window.counter_id
    parameters["size"] = sum(row["weight"] or 0 for row in rows)
    parameters["now"] = now
    parameters["p_expires_at"] = None if ttl is None else now + ttl
    return parameters


def row_values(
    rows: Sequence[dict[str, Any]], arrays_past: int | None
) -> dict[str, Any]:
    """The values of ``rows`` for a one-statement log append: parameters of
    their own (:func:`numbered_rows`), or one array per column when the
    batch holds more than ``arrays_past`` messages (``None``: never)."""
    if arrays_past is not None and len(rows) > arrays_past:
        return row_arrays(rows)
    return numbered_rows(rows)


def row_arrays(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The values of ``rows`` as one array per column (PostgreSQL's ``unnest``)."""
    return {
        "message_ids": [row["message_id"] for row in rows],
        "roles": [row["role"] for row in rows],
        "contents": [row["content"] for row in rows],
        "payloads": [row["payload"] for row in rows],
        "weights": [row["weight"] for row in rows],
        "created": [row["created_at"] for row in rows],
    }


def numbered_rows(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The values of ``rows`` as parameters of their own, ``r<i>_<column>``
    (:data:`NUMBERED_COLUMNS`), for a statement made per batch size."""
    return {
        f"r{index}_{column}": row[column]
        for index, row in enumerate(rows)
        for column in NUMBERED_COLUMNS
    }


def numbered_from(
    rows: Sequence[dict[str, Any]], base: int, sized: bool
) -> list[dict[str, Any]]:
    """``rows`` numbered from ``base``, their sizes kept only if ``sized``."""
    return [
        {**row, "seq": base + index, "weight": row["weight"] if sized else None}
        for index, row in enumerate(rows)
    ]


def log_row(row: Any) -> LogRow:
    """The :class:`LogRow` of a row the log's reads answer (``Statements.view``)."""
    seq, message_id, role, content, payload, created_at, size = row
    message = decode_raw(message_id, role, content, payload, created_at)
    return LogRow(int(seq), message, None if size is None else int(size))


@dataclass(frozen=True, slots=True)
class LogTrim:
    """What one trim of a bounded log removes (see :mod:`chatledger.retention`).

    Attributes:
        seqs: The sequence numbers of the rows removed.
        evicted: ``Statements.insert_evicted`` rows: each removed id, so a
            late retry of its append stays a no-op.
        trim_below: ``below`` of ``Statements.trim_evicted`` when the record
            of evicted ids is due its own trim (``None``: no trim).
        untally: ``Statements.untally`` parameters: what the removed rows
            took of the conversation row's counts and sizes.
    """

    seqs: list[int]
    evicted: list[dict[str, Any]]
    trim_below: int | None
    untally: dict[str, Any]


def log_trim(
    conversation_id: str, candidates: Sequence[Any], shown_system: set[int]
) -> LogTrim:
    """The trim of the rows ``candidates`` (seq, message_id, role, weight).

    ``candidates`` are the rows numbered below the trim's cutoff, oldest
    first; those numbered in ``shown_system`` (the system messages a view
    shows) stay.
    """
    removed = [row for row in candidates if int(row[0]) not in shown_system]
    seqs = [int(row[0]) for row in removed]
    below = None
    if seqs and trim_due(seqs[0], seqs[-1]) and trim_below(seqs[-1]) >= 0:
        below = trim_below(seqs[-1])
    return LogTrim(
        seqs=seqs,
        evicted=[
            {
                "conversation_id": conversation_id,
                "message_id": row[1],
                "seq": int(row[0]),
            }
            for row in removed
            if below is None or int(row[0]) > below
        ],
        trim_below=below,
        untally=untally(conversation_id, [(row[2], row[3]) for row in removed]),
    )


def untally(
    conversation_id: str, removed: Sequence[tuple[str, int | None]]
) -> dict[str, Any]:
    """``Statements.untally`` parameters (but ``now`` and ``p_expires_at``)
    for the removed rows' ``(role, weight)``."""
    system = [weight for role, weight in removed if role == Role.SYSTEM.value]
    others = [weight for role, weight in removed if role != Role.SYSTEM.value]
    return {
        "cid": conversation_id,
        "p_systems": len(system),
        "p_others": len(others),
        "p_system_weight": sum(int(weight or 0) for weight in system),
        "p_other_weight": sum(int(weight or 0) for weight in others),
    }
