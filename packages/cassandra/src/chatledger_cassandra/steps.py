"""The steps of every repository call, with the I/O left to whoever runs them.

Example:
    from chatledger import Message, MessageWindow
    from chatledger_cassandra.steps import TableSteps

    steps = TableSteps(keyspace="chatledger", table="chat_memory")
    call = steps.append_to_window("c1", [Message.user("hi")], MessageWindow(20))
    call.writer              # 'c1': the writers of one process take turns on it
    call.steps.send(None)    # Read('select_index', ('c1',), None): read this first
    call.steps.send([])      # nothing is stored: Commit(plan), the batch to send

:class:`chatledger_cassandra.CassandraChatMemoryRepository` and
:class:`chatledger_cassandra.AsyncCassandraChatMemoryRepository` make the same
decisions: which rows to read, what to write, when to read again, when to give
up, what to remember. They are made here, once, as generators that yield a
request (:mod:`chatledger_cassandra.requests`) where they need the server and
are sent back what it answered; a driver error is thrown into them at the same
point. The sync repository runs them on ``session.execute``, the async one on
``session.execute_async``: only the I/O differs.

Every method checks its arguments when it is called, before any step runs, and
returns a :class:`Call`: the steps and the conversation whose writers take
turns (:mod:`chatledger_cassandra.locks`), if any.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Generic, Literal, TypeVar

from cassandra import ConsistencyLevel, ReadTimeout, WriteTimeout, WriteType

from chatledger.adapters import (
    AppendResult,
    ConversationPage,
    FaultPoints,
    Message,
    Window,
    codec,
    stamp_messages,
    to_ttl,
    validate_conversation_id,
    validate_messages,
)
from chatledger_cassandra.errors import ContentionError
from chatledger_cassandra.listing import PageGathering, listed
from chatledger_cassandra.plan import (
    Plan,
    Snapshot,
    StoredRow,
    Write,
    payloads_needed,
    plan_append_batch,
    plan_replace,
)
from chatledger_cassandra.requests import Commit, Pause, Read, Request
from chatledger_cassandra.sizes import DEFAULT_MAX_WRITE_BYTES, check_write
from chatledger_cassandra.snapshots import (
    SnapshotCache,
    after_commit,
    first_sequence_number,
)
from chatledger_cassandra.statements import (
    LANE_EVICTED,
    LANE_SYSTEM,
    Statements,
    create_keyspace,
)

__all__ = [
    "DEFAULT_REPLICATION",
    "MAX_TTL_SECONDS",
    "Call",
    "Steps",
    "TableSteps",
    "cells",
    "ttl_seconds",
]

T = TypeVar("T")
#: The steps of one call: they yield requests, are sent the answers, return T.
Steps = Generator[Request, Any, T]

#: Cassandra's largest TTL: 20 years.
MAX_TTL_SECONDS = 630_720_000
#: The replication of a keyspace the repository creates, unless told otherwise.
DEFAULT_REPLICATION: dict[str, object] = {
    "class": "SimpleStrategy",
    "replication_factor": 1,
}
#: How many conversations a repository remembers the last written snapshot of
#: (:mod:`chatledger_cassandra.snapshots`), most recently written first.
_REMEMBERED_CONVERSATIONS = 64

_PHASE_POINT = {
    "delete": "after_delete",
    "insert": "after_insert",
    "evict": "after_evict",
}
_INDEX = ("next_seq", "lane", "seq", "msg_id", "role", "size_counter", "size")
_FULL = (*_INDEX, "payload")


def ttl_seconds(ttl: timedelta | float | None) -> int:
    """Return ``ttl`` as whole seconds (rounded up), ``0`` for no TTL.

    Raises:
        InvalidTTLError: if ``ttl`` is not positive or exceeds 20 years.
    """
    value = to_ttl(ttl, maximum=timedelta(seconds=MAX_TTL_SECONDS))
    return 0 if value is None else math.ceil(value.total_seconds())


def cells(row: Any, names: Sequence[str]) -> tuple[Any, ...]:
    """The values of ``row`` (a tuple, named tuple or dict, as the session's
    row factory makes it), in the order of ``names``."""
    if isinstance(row, Mapping):
        return tuple(row[name] for name in names)
    return tuple(row)


def _is_retryable(exc: Exception) -> bool:
    """A CAS that timed out or a serial read that did: the outcome is unknown."""
    if isinstance(exc, WriteTimeout):
        return bool(getattr(exc, "write_type", None) == WriteType.CAS)
    serial = (ConsistencyLevel.SERIAL, ConsistencyLevel.LOCAL_SERIAL)
    return isinstance(exc, ReadTimeout) and getattr(exc, "consistency", None) in serial


def _backoff(attempt: int) -> float:
    return random.uniform(0, min(0.1, 0.002 * 2 ** min(attempt, 10)))


def _done(value: T) -> Steps[T]:
    """Steps that need no I/O and return ``value``."""
    return value
    yield  # pragma: no cover - makes this a generator


def _to_snapshot(rows: Iterable[Any], names: Sequence[str]) -> Snapshot:
    version: int | None = None
    stored: list[StoredRow] = []
    evicted: dict[str, int] = {}
    for row in rows:
        values = dict(zip(names, cells(row, names), strict=True))
        version = values["next_seq"]
        if values["seq"] is None:
            continue  # a partition holding only its static columns
        if values["lane"] == LANE_EVICTED:
            evicted[values["msg_id"]] = values["seq"]
            continue
        stored.append(
            StoredRow(
                lane=values["lane"],
                seq=values["seq"],
                msg_id=values["msg_id"],
                role=values["role"],
                size_counter=values["size_counter"],
                size=values["size"],
                payload=values.get("payload"),
            )
        )
    return Snapshot(version, stored, evicted)


@dataclass(frozen=True, slots=True)
class Call(Generic[T]):
    """One repository call, ready to run.

    Attributes:
        steps: Its steps.
        writer: The conversation it writes, whose writers in one process take
            turns; ``None`` for a read or a call that writes nothing.
        needs_server: False when the steps ask for nothing (an empty append).
    """

    steps: Steps[T]
    writer: str | None = None
    needs_server: bool = True


class TableSteps:
    """Every decision of a repository of one Cassandra table.

    Construction checks every option; nothing here does I/O.

    Attributes:
        cql: The table's statements.
        ttl: The TTL in seconds, ``0`` when conversations do not expire.
        keyspace_ddl: ``CREATE KEYSPACE IF NOT EXISTS`` with the replication.
        fault_points: Test hooks reached at the named steps of every write.
        snapshots: What the repository remembers of the conversations it wrote.
    """

    def __init__(
        self,
        *,
        keyspace: str = "chatledger",
        table: str = "chat_memory",
        ttl: timedelta | float | None = None,
        replication: Mapping[str, object] | None = None,
        max_attempts: int = 100,
        page_size: int = 5000,
        max_write_bytes: int = DEFAULT_MAX_WRITE_BYTES,
    ) -> None:
        """Check the options of a repository (see its constructor).

        Raises:
            InvalidNameError: for a bad keyspace, table or replication option.
            InvalidTTLError: for a bad ``ttl``.
            TypeError, ValueError: for a bad number.
        """
        if isinstance(max_attempts, bool) or not isinstance(max_attempts, int):
            raise TypeError("max_attempts must be an int")
        if isinstance(max_write_bytes, bool) or not isinstance(max_write_bytes, int):
            raise TypeError("max_write_bytes must be an int")
        if max_attempts < 1 or page_size < 1 or max_write_bytes < 1:
            raise ValueError(
                "max_attempts, page_size and max_write_bytes must be at least 1"
            )
        self.cql = Statements(keyspace, table)
        self.ttl = ttl_seconds(ttl)
        self.keyspace_ddl = create_keyspace(
            keyspace, dict(DEFAULT_REPLICATION if replication is None else replication)
        )
        self.max_attempts = max_attempts
        self.page_size = page_size
        self.max_write_bytes = max_write_bytes
        self.fault_points = FaultPoints()
        self.snapshots = SnapshotCache(_REMEMBERED_CONVERSATIONS)

    # -- reads -------------------------------------------------------------

    def find_conversation_ids(self) -> Call[list[str]]:
        """Every conversation id: the whole token ring, paged by the driver."""
        return Call(self._find_conversation_ids())

    def _find_conversation_ids(self) -> Steps[list[str]]:
        rows = yield Read("list_ids", (), self.page_size)
        return listed(cells(row, ("conversation_id", "emptied")) for row in rows)

    def count_messages(self, conversation_id: str) -> Call[int]:
        """How many messages a conversation holds; the server counts."""
        validate_conversation_id(conversation_id)
        return Call(self._count_messages(conversation_id))

    def _count_messages(self, conversation_id: str) -> Steps[int]:
        rows = yield Read("count_messages", (conversation_id, LANE_EVICTED))
        return int(cells(rows[0], ("count",))[0]) if rows else 0

    def find_conversation_ids_page(
        self, cursor: str | None, limit: int
    ) -> Call[ConversationPage]:
        """Up to ``limit`` conversation ids after ``cursor``, in token order.

        Raises:
            InvalidPageError: as the protocol says, and for a cursor that is
                not a token a page gave.
        """
        return Call(self._page(PageGathering.start(cursor, limit)))

    def _page(self, gathering: PageGathering) -> Steps[ConversationPage]:
        names = ("conversation_id", "token", "emptied")
        while True:
            rows = yield Read(*gathering.query())
            page = gathering.add([cells(row, names) for row in rows])
            if page is not None:
                return page

    def find_by_conversation_id(self, conversation_id: str) -> Call[list[Message]]:
        """One conversation's messages, oldest first (``[]`` if none)."""
        validate_conversation_id(conversation_id)
        return Call(self._messages(conversation_id))

    def _messages(self, conversation_id: str) -> Steps[list[Message]]:
        rows = yield Read(
            "select_messages", (conversation_id, LANE_EVICTED), self.page_size
        )
        found = (cells(row, ("lane", "seq", "payload")) for row in rows)
        ordered = sorted((seq, payload) for _, seq, payload in found if seq is not None)
        return [codec.from_json(payload) for _, payload in ordered]

    # -- writes ------------------------------------------------------------

    def save_all(self, conversation_id: str, messages: Sequence[Message]) -> Call[None]:
        """Replace a conversation in one conditional batch; ``[]`` deletes it.

        Raises:
            MessageTooLargeError: if the messages cannot fit in one write.
        """
        validate_conversation_id(conversation_id)
        batch = stamp_messages(validate_messages(messages))
        self._check_new(conversation_id, batch)
        return Call(self._save_all(conversation_id, batch), conversation_id)

    def _save_all(self, conversation_id: str, batch: list[Message]) -> Steps[None]:
        def attempt() -> Steps[bool | None]:
            rows = yield Read("select_version", (conversation_id,))
            version = cells(rows[0], ("next_seq",))[0] if rows else None
            self.fault_points.reach("after_lock")
            plan = plan_replace(
                conversation_id, version, batch, self.ttl, first_sequence_number()
            )
            if plan.condition is None:
                return True
            applied = yield from self._commit(conversation_id, plan)
            return True if applied else None

        self.snapshots.forget(conversation_id)
        yield from self._retrying(conversation_id, attempt)

    def delete_by_conversation_id(self, conversation_id: str) -> Call[None]:
        """Delete a conversation's partition; an unknown id does nothing."""
        validate_conversation_id(conversation_id)
        return Call(self._delete(conversation_id), conversation_id)

    def _delete(self, conversation_id: str) -> Steps[None]:
        plan = Plan(
            Write("delete_any", (conversation_id,), "condition"),
            [Write("delete_partition", (conversation_id,), "delete")],
        )

        def attempt() -> Steps[bool]:
            self.fault_points.reach("after_lock")
            # Not applied when there was nothing to delete.
            yield from self._commit(conversation_id, plan)
            return True

        self.snapshots.forget(conversation_id)
        yield from self._retrying(conversation_id, attempt)

    def append_to_window(
        self, conversation_id: str, messages: Sequence[Message], window: Window
    ) -> Call[AppendResult]:
        """Append and evict in one conditional batch (``SupportsWindowAppend``).

        Raises:
            MessageTooLargeError: if the new messages cannot fit in one write;
                while running, if the whole batch cannot (with a TTL it
                rewrites the window).
        """
        validate_conversation_id(conversation_id)
        batch = validate_messages(messages)
        if not batch:
            return Call(_done(AppendResult()), needs_server=False)
        stamped = stamp_messages(batch)
        self._check_new(conversation_id, stamped)
        return Call(self._append(conversation_id, stamped, window), conversation_id)

    def _append(
        self, conversation_id: str, stamped: list[Message], window: Window
    ) -> Steps[AppendResult]:
        def attempt() -> Steps[AppendResult | None]:
            snapshot = yield from self._recall(conversation_id, window)
            if snapshot is None:
                snapshot = yield from self._read_snapshot(conversation_id, window)
                if snapshot is None:
                    return None  # a write landed between two reads: read again
            self.fault_points.reach("after_lock")
            plan = plan_append_batch(
                conversation_id,
                snapshot,
                stamped,
                window,
                self.ttl,
                start=first_sequence_number(),
            )
            if plan.condition is not None:
                try:
                    applied = yield from self._commit(conversation_id, plan)
                except BaseException:
                    self.snapshots.forget(conversation_id)  # outcome unknown
                    raise
                if not applied:
                    self.snapshots.forget(conversation_id)
                    return None
            if not self.ttl:
                self.snapshots.remember(conversation_id, after_commit(snapshot, plan))
            return plan.result

        return (yield from self._retrying(conversation_id, attempt))

    # -- the parts of a write ----------------------------------------------

    def _check_new(self, conversation_id: str, batch: Sequence[Message]) -> None:
        """Refuse, before any I/O, messages whose inserts alone cannot fit."""
        if batch:
            inserts = plan_replace(conversation_id, None, batch, self.ttl)
            check_write(inserts, self.max_write_bytes, conversation_id)

    def _snapshot(
        self, conversation_id: str, mode: Literal["index", "full"]
    ) -> Steps[Snapshot]:
        names = _INDEX if mode == "index" else _FULL
        statement = "select_index" if mode == "index" else "select_full"
        rows = yield Read(statement, (conversation_id,))
        return _to_snapshot(rows, names)

    def _read_snapshot(
        self, conversation_id: str, window: Window
    ) -> Steps[Snapshot | None]:
        """Read what an append decides on; ``None`` if a write came in between.

        A plain read at the repository's consistency, not a serial one: the
        version check of the commit is what makes the write linearizable, and
        a read that missed a newer write only loses that check and is read
        again. A serial read would add a Paxos round to every attempt.
        """
        mode: Literal["index", "full"] = "full" if self.ttl else "index"
        snapshot = yield from self._snapshot(conversation_id, mode)
        need = payloads_needed(snapshot, window, self.ttl)
        if need == "all" and not self.ttl:
            return (yield from self._snapshot(conversation_id, "full"))
        if need == "system":
            return (yield from self._with_system_payloads(conversation_id, snapshot))
        return snapshot

    def _recall(self, conversation_id: str, window: Window) -> Steps[Snapshot | None]:
        """The remembered snapshot, if still current and enough for ``window``."""
        if self.ttl or not self.snapshots.knows(conversation_id):
            return None
        rows = yield Read("select_version", (conversation_id,))
        version = cells(rows[0], ("next_seq",))[0] if rows else None
        snapshot = self.snapshots.recall(conversation_id, version)
        if snapshot is None or payloads_needed(snapshot, window, 0) == "all":
            return None
        return snapshot

    def _with_system_payloads(
        self, conversation_id: str, snapshot: Snapshot
    ) -> Steps[Snapshot | None]:
        rows = yield Read("select_lane", (conversation_id, LANE_SYSTEM))
        lane = _to_snapshot(rows, _FULL)
        expected = {(r.seq, r.msg_id) for r in snapshot.rows if r.lane == LANE_SYSTEM}
        if (
            lane.version != snapshot.version
            or {(r.seq, r.msg_id) for r in lane.rows} != expected
        ):
            return None  # a write landed between the two reads: start over
        others = [r for r in snapshot.rows if r.lane != LANE_SYSTEM]
        return Snapshot(snapshot.version, lane.rows + others, snapshot.evicted)

    def _commit(self, conversation_id: str, plan: Plan) -> Steps[bool]:
        """Send ``plan`` as one conditional statement or batch; True if applied.

        The fault points of its phases are reached before it is sent: the
        batch is one request, so nothing of it lands before the commit.

        Raises:
            MessageTooLargeError: before sending, if the batch may not fit.
        """
        assert plan.condition is not None
        check_write(plan, self.max_write_bytes, conversation_id)
        phase: str | None = None
        for write in plan.writes:
            if phase is not None and write.phase != phase:
                self._reach_phase(phase)
            phase = write.phase
        if phase is not None:
            self._reach_phase(phase)
        self.fault_points.reach("before_commit")
        rows = yield Commit(plan)
        applied = bool(rows) and bool(cells(rows[0], ("[applied]",))[0])
        if applied:
            self.fault_points.reach("after_commit")
        return applied

    def _reach_phase(self, phase: str) -> None:
        point = _PHASE_POINT.get(phase)
        if point is not None:
            self.fault_points.reach(point)

    def _retrying(
        self, conversation_id: str, attempt_once: Callable[[], Steps[T | None]]
    ) -> Steps[T]:
        """Run ``attempt_once`` until it returns non-None, retrying lost races.

        A lost condition, or a CAS whose outcome a timeout left unknown, means
        reading again after a jittered pause; the message ids make a second
        application of the same append a no-op.
        """
        last_error: Exception | None = None
        for attempt in range(self.max_attempts):
            try:
                outcome = yield from attempt_once()
            except (WriteTimeout, ReadTimeout) as exc:
                if not _is_retryable(exc):
                    raise
                last_error = exc
                outcome = None
            if outcome is not None:
                return outcome
            yield Pause(_backoff(attempt))
        if last_error is not None:
            raise last_error
        raise ContentionError(
            conversation_id,
            self.max_attempts,
            "other writers kept changing the conversation",
        )
