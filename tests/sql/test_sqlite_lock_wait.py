"""How a write on SQLite's own connection waits for the write lock.

SQLite waits for the lock inside ``BEGIN IMMEDIATE``, up to the busy
timeout, and nothing cuts that wait short. A write that can be cancelled
(the async repository's, in aiosqlite's thread) waits in slices instead and
asks between them whether it is still wanted; a sync write waits as SQLite
waits. Real database files, a second connection holding the lock.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from chatledger_sql.compiled import OPEN_GATE, RawCalls, WriteGate
from chatledger_sql.dialects.sqlite import SQLiteDialect


class _Gate(WriteGate):
    """A cancellable gate whose answer the test sets, counting the questions."""

    __slots__ = ("asked", "still_wanted")
    cancellable = True

    def __init__(self, still_wanted: bool) -> None:
        self.still_wanted = still_wanted
        self.asked = 0

    def wanted(self) -> bool:
        self.asked += 1
        return self.still_wanted


@pytest.fixture
def database(tmp_path: Path) -> Iterator[tuple[sqlite3.Connection, list[str]]]:
    """A WAL database another connection holds the write lock of, and our
    connection to it with the statements it sends."""
    path = tmp_path / "chat.db"
    ours = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    ours.execute("PRAGMA journal_mode=WAL")
    ours.execute("CREATE TABLE log (body TEXT)")
    sent: list[str] = []
    ours.set_trace_callback(sent.append)
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        yield ours, sent
    finally:
        blocker.close()
        ours.close()


def _busy_timeout(connection: sqlite3.Connection) -> int:
    return int(connection.execute("PRAGMA busy_timeout").fetchone()[0])


def test_a_write_no_longer_wanted_stops_waiting_and_begins_nothing(
    database: tuple[sqlite3.Connection, list[str]],
) -> None:
    ours, _ = database
    gate = _Gate(still_wanted=False)
    info: dict[str, int] = {}
    start = time.monotonic()
    begun = SQLiteDialect(busy_timeout_ms=30_000).begin_on_driver(
        RawCalls(ours, info), False, gate
    )
    assert begun is False
    assert time.monotonic() - start < 5  # one slice, not the 30 s timeout
    assert gate.asked == 1
    assert not ours.in_transaction
    assert _busy_timeout(ours) == 30_000 == info["chatledger_busy_timeout_ms"]


def test_a_wanted_write_waits_the_whole_busy_timeout_then_raises_locked(
    database: tuple[sqlite3.Connection, list[str]],
) -> None:
    ours, _ = database
    gate = _Gate(still_wanted=True)
    start = time.monotonic()
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        SQLiteDialect(busy_timeout_ms=450).begin_on_driver(
            RawCalls(ours, {}), False, gate
        )
    # The slices add up to the timeout: it asked between them, and went on.
    assert time.monotonic() - start >= 0.45
    assert gate.asked >= 3
    assert not ours.in_transaction
    assert _busy_timeout(ours) == 450


def test_a_write_takes_the_lock_once_it_is_free_and_sets_the_timeout_back(
    tmp_path: Path,
) -> None:
    ours = sqlite3.connect(tmp_path / "free.db", isolation_level=None)
    sent: list[str] = []
    ours.set_trace_callback(sent.append)
    try:
        begun = SQLiteDialect(busy_timeout_ms=2_000).begin_on_driver(
            RawCalls(ours, {}), False, _Gate(still_wanted=True)
        )
        assert begun is True
        assert ours.in_transaction
        assert sent == [
            "PRAGMA busy_timeout = 100",
            "BEGIN IMMEDIATE",
            "PRAGMA busy_timeout = 2000",
        ]
        ours.rollback()
    finally:
        ours.close()


def test_a_sync_write_waits_as_sqlite_waits(
    database: tuple[sqlite3.Connection, list[str]],
) -> None:
    ours, sent = database
    sent.clear()
    start = time.monotonic()
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        SQLiteDialect(busy_timeout_ms=300).begin_on_driver(
            RawCalls(ours, {}), False, OPEN_GATE
        )
    assert time.monotonic() - start >= 0.3
    assert sent == ["PRAGMA busy_timeout = 300", "BEGIN IMMEDIATE"]
