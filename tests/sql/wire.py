"""What crosses the wire to PostgreSQL, as libpq traces it: round trips, statements.

Example:
    wire = PgWire(engine)        # before the first checkout (async: engine.sync_engine)
    wire.reset()
    memory.add("c", message)
    assert wire.round_trips() == [["BEGIN", "INSERT"], ["WITH", "COMMIT"]]

A SQLAlchemy event sees only the statements SQLAlchemy runs; the adapter also
talks to psycopg directly, so counting happens below both, in libpq's own
trace of the protocol (``PQtrace``). One round trip is a run of messages the
client sends followed by the run of the server's answers.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

from sqlalchemy import Engine, event

__all__ = ["PgWire"]


class PgWire:
    """Traces every psycopg connection the engine hands out."""

    def __init__(self, engine: Engine) -> None:
        handle, self._path = tempfile.mkstemp(prefix="chatledger-wire-")
        self._fd = handle
        self._traced: list[Any] = []
        self._offset = 0
        self._names: dict[str, str] = {}
        self._flags: Any = None
        event.listen(engine, "checkout", self._trace)

    def _trace(self, dbapi: Any, record: Any, proxy: Any) -> None:
        if record.info.get("wire_traced"):
            return
        from psycopg import pq

        record.info["wire_traced"] = True
        self._flags = pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE
        # An async engine's pool holds SQLAlchemy's adapter around psycopg's.
        pgconn = getattr(dbapi, "driver_connection", dbapi).pgconn
        pgconn.trace(self._fd)
        pgconn.set_trace_flags(self._flags)
        self._traced.append(pgconn)

    def _flush(self) -> str:
        # libpq buffers its trace in a stdio stream; untracing flushes it.
        for pgconn in self._traced:
            if pgconn.status == 0:  # CONNECTION_OK
                pgconn.untrace()
                pgconn.trace(self._fd)
                pgconn.set_trace_flags(self._flags)
        with open(self._path, encoding="utf-8", errors="replace") as trace:
            return trace.read()

    def reset(self) -> None:
        """Count from here on."""
        self._offset = len(self._flush())

    def close(self) -> None:
        """Remove the trace file."""
        os.close(self._fd)
        os.unlink(self._path)

    def messages(self) -> list[tuple[str, str, str]]:
        """Every message since :meth:`reset`: ``(direction, kind, text)``."""
        text = self._flush()
        parsed: list[list[Any]] = []
        position = 0
        for line in text.split("\n"):
            start = position
            position += len(line) + 1
            if line[:2] in ("F\t", "B\t"):
                direction, _, rest = line.split("\t", 2)
                kind, _, body = rest.partition("\t")
                parsed.append([start, direction, kind, body])
            elif parsed:  # a multi-line statement goes on
                parsed[-1][3] += "\n" + line
        # Prepared statements are named by a Parse from before the offset too.
        self._names = _statement_names(parsed)
        return [(d, k, b) for start, d, k, b in parsed if start >= self._offset]

    def round_trips(self) -> list[list[str]]:
        """The statements since :meth:`reset`, one list per round trip.

        A statement is named by its first keyword (``BEGIN``, ``INSERT``,
        ``WITH``, ``COMMIT``...), whether sent as a simple query, parsed
        unnamed or bound to a statement prepared earlier.
        """
        trips: list[list[str]] = []
        current: list[str] = []
        sending = False
        unnamed = ""
        for direction, kind, body in self.messages():
            if direction == "F":
                if not sending:
                    current = []
                    trips.append(current)
                    sending = True
                if kind == "Query":
                    current.append(_keyword(_quoted(body)[0]))
                elif kind == "Parse":
                    name, query = _quoted(body)[:2]
                    if not name:
                        unnamed = _keyword(query)
                elif kind == "Bind":
                    name = _quoted(body)[1]
                    current.append(self._names.get(name, "?") if name else unnamed)
            else:
                sending = False
        return [trip for trip in trips if trip]

    def rows_returned(self) -> int:
        """``DataRow`` messages since :meth:`reset`: rows the server sent."""
        return sum(1 for direction, kind, _ in self.messages() if kind == "DataRow")


def _quoted(body: str) -> list[str]:
    """The double-quoted strings of a traced message, in order."""
    values: list[str] = []
    index = 0
    while True:
        start = body.find('"', index)
        if start < 0:
            return values
        end = start + 1
        while True:
            end = body.find('"', end)
            if end < 0:
                return [*values, body[start + 1 :]]
            if body[end + 1 : end + 2] == '"':  # an escaped quote
                end += 2
                continue
            break
        values.append(body[start + 1 : end])
        index = end + 1


def _keyword(query: str) -> str:
    words = query.split(None, 1)
    return words[0].upper() if words else ""


def _statement_names(parsed: list[list[Any]]) -> dict[str, str]:
    names: dict[str, str] = {}
    for _, direction, kind, body in parsed:
        if direction == "F" and kind == "Parse":
            name, query = _quoted(body)[:2]
            if name:
                names[name] = _keyword(query)
    return names
