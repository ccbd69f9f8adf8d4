"""A log append that advances the conversation row, then inserts, on the driver.

Example:
    from sqlalchemy import create_engine, text
    from chatledger_sql.compiled import OPEN_GATE, CompiledStatement, raw_calls
    from chatledger_sql.dialects.sqlite import SQLiteDialect
    from chatledger_sql.log_advancing import advance_then_insert

    engine = create_engine("sqlite://")
    advancing = CompiledStatement(engine.dialect, [text("SELECT count(*), 0 FROM log")])
    inserting = CompiledStatement(
        engine.dialect, [text("INSERT INTO log VALUES (:seq, :body, :weight)")]
    )
    rows = [{"body": "hi", "weight": None}, {"body": "there", "weight": None}]
    with engine.connect() as connection:
        connection.exec_driver_sql("CREATE TABLE log (seq, body, weight)")
        connection.commit()
        with raw_calls(connection) as calls:
            last = advance_then_insert(
                calls, OPEN_GATE, dialect=SQLiteDialect(),
                advancing=advancing, parameters={}, inserting=inserting, rows=rows,
            )
        stored = connection.exec_driver_sql("SELECT seq, body FROM log").all()
    assert last == 1 and stored == [(0, "hi"), (1, "there")]

For a dialect without a one-statement log append whose write transaction
excludes every other writer (SQLite's ``BEGIN IMMEDIATE``): the transaction
begins as the dialect's ``begin_on_driver`` begins it, the row answers the
batch's first number (``log_advance_statement``), the messages are inserted
and the driver commits. The same procedure runs on a sync driver's
connection and, in one trip, in aiosqlite's thread
(:meth:`~chatledger_sql.compiled.AsyncDriverCalls.together`), where a
cancelled caller stops its wait for the write lock.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from chatledger_sql.compiled import (
    CompiledStatement,
    RawCalls,
    WriteGate,
    transaction_open,
)
from chatledger_sql.dialects.base import SqlDialect
from chatledger_sql.log_steps import numbered_from

__all__ = ["advance_then_insert"]


def advance_then_insert(
    calls: RawCalls,
    gate: WriteGate,
    *,
    dialect: SqlDialect,
    advancing: CompiledStatement,
    parameters: dict[str, Any],
    inserting: CompiledStatement,
    rows: Sequence[dict[str, Any]],
) -> int | None:
    """Append ``rows`` in one write transaction on ``calls``' connection.

    Returns the last number stored, or ``None`` when the row refused the
    append (an id the conversation holds or held, an expired conversation)
    or ``gate`` said the caller was cancelled (``wanted()`` while the begin
    waited for a lock, ``may_commit()`` just before the commit;
    :meth:`~chatledger_sql.compiled.AsyncDriverCalls.together`): nothing is
    written, the transaction rolled back or never begun; after a refusal
    the append is left to the repository's general path. A failing statement
    raises (through :func:`~chatledger_sql.compiled.raw_calls`, with the
    connection invalidated, which ends the transaction).
    """
    if not dialect.begin_on_driver(calls, transaction_open(calls.driver), gate):
        return None
    found = calls.execute(advancing, parameters).fetchone()
    if found is None:
        calls.driver.rollback()
        return None
    base, sized = int(found[0]), bool(found[1])
    calls.execute_many(inserting, numbered_from(rows, base, sized))
    if not gate.may_commit():
        calls.driver.rollback()
        return None
    calls.driver.commit()
    return base + len(rows) - 1
