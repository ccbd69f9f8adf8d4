"""A driver session that notes every request a repository sends, for the tests.

Example:
    session = CountingSession(cluster.connect())
    repository = CassandraChatMemoryRepository(session, keyspace="ks")
    with session.counting() as calls:
        repository.append_to_log("c", [Message.user("hi")])
    calls.requests     # how many requests went to the server
    calls.round_trips  # how many times the client waited before sending more

Every request goes through ``execute`` or ``execute_async``; its answer is
waited for by ``execute`` itself, by ``ResponseFuture.result()`` (the sync
repository) or through ``add_callbacks`` (the asyncio one). A round trip is a
run of requests sent before any of their answers is waited for: requests sent
together cost one between them.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from cassandra.query import BatchStatement

__all__ = ["Calls", "CountingSession"]


@dataclass
class Calls:
    """What the requests of one block were.

    Attributes:
        events: ``"send"`` and ``"wait"``, in order.
        statements: The CQL (``"BATCH"`` for a batch) of each request.
        rows: How many rows each answer the sync repository took held.
    """

    events: list[str] = field(default_factory=list)
    statements: list[str] = field(default_factory=list)
    rows: list[int] = field(default_factory=list)

    @property
    def requests(self) -> int:
        """How many requests were sent."""
        return self.events.count("send")

    @property
    def round_trips(self) -> int:
        """How many runs of requests were sent, each before waiting for any."""
        trips, waited = 0, True
        for event in self.events:
            if event == "send" and waited:
                trips += 1
            waited = event == "wait"
        return trips

    def sent(self, text: str) -> int:
        """How many requests held ``text`` in their CQL."""
        return sum(text in statement for statement in self.statements)


def _text(statement: Any) -> str:
    if isinstance(statement, BatchStatement):
        return "BATCH"
    prepared = getattr(statement, "prepared_statement", None)
    if prepared is not None:
        return str(prepared.query_string)
    return str(getattr(statement, "query_string", statement))


class _Answer:
    """A driver ``ResponseFuture`` that notes when its answer is waited for."""

    def __init__(self, future: Any, calls: Calls | None) -> None:
        self._future = future
        self._calls = calls

    def __getattr__(self, name: str) -> Any:
        return getattr(self._future, name)

    def _waited(self) -> None:
        if self._calls is not None:
            self._calls.events.append("wait")
            self._calls = None  # later pages of the same read wait again unseen

    def result(self) -> list[Any]:
        calls = self._calls
        self._waited()
        rows = list(self._future.result())
        if calls is not None:
            calls.rows.append(len(rows))
        return rows

    def add_callbacks(self, *args: Any, **kwargs: Any) -> Any:
        self._waited()
        return self._future.add_callbacks(*args, **kwargs)


class CountingSession:
    """Wraps a driver session; :meth:`counting` notes the requests of a block."""

    def __init__(self, session: Any) -> None:
        self._session = session
        self._calls: Calls | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)

    @contextmanager
    def counting(self) -> Iterator[Calls]:
        """Note every request sent while the block runs."""
        self._calls = Calls()
        try:
            yield self._calls
        finally:
            self._calls = None

    def _note(self, statement: Any) -> Calls | None:
        calls = self._calls
        if calls is not None:
            calls.events.append("send")
            calls.statements.append(_text(statement))
        return calls

    def execute(self, statement: Any, *args: Any, **kwargs: Any) -> Any:
        calls = self._note(statement)
        rows = list(self._session.execute(statement, *args, **kwargs))
        if calls is not None:
            calls.events.append("wait")
            calls.rows.append(len(rows))
        return rows

    def execute_async(self, statement: Any, *args: Any, **kwargs: Any) -> Any:
        calls = self._note(statement)
        return _Answer(self._session.execute_async(statement, *args, **kwargs), calls)
