"""Conversation memory in Apache Cassandra (and ScyllaDB), on cassandra-driver.

Example (needs a Cassandra server):
    from cassandra.cluster import Cluster
    from chatledger import Message, MessageWindowChatMemory
    from chatledger_cassandra import CassandraChatMemoryRepository

    session = Cluster(["127.0.0.1"]).connect()
    repository = CassandraChatMemoryRepository(session, keyspace="chat")
    memory = MessageWindowChatMemory(repository, max_messages=20)
    memory.add("c1", Message.user("Hello"))

    # or let the repository own the cluster:
    with CassandraChatMemoryRepository.from_url("cassandra://db1,db2/chat") as repo:
        ...

Design. One partition per conversation, its rows clustered by a per-conversation
sequence number (see :mod:`chatledger_cassandra.statements` for the table). The
partition's static column ``next_seq`` is both the next free sequence number
and the conversation's version. **Every write is a lightweight transaction on
that partition**: a conditional single-partition batch whose condition is
``IF next_seq = <version read>`` (``IF next_seq = null`` for a new one) and
whose other statements insert the new messages, range-delete the evicted ones
and rewrite the survivors under a refreshed TTL. A lost condition means another
writer got there first: the repository reads again and retries.

Why not reserve sequence numbers with an LWT on a separate conversation row and
then send a plain batch, the usual recipe? Because reserving numbers does not
serialize the read-decide-write of a window append: two appenders that reserve
in turn can each read the partition before the other's batch lands, and then
both miss each other's message ids (a retried append duplicates) and evict by a
wrong count; a crash between the reservation and the batch leaves a gap. With
the version check inside the batch, the check, the inserts, the evictions and
the TTL refresh are one Paxos round: atomic and isolated (a single-partition
batch), linearizable (the condition), gap-free (numbers are taken only by a
committed write) and free of client clocks: every write of the partition gets
its timestamp from the Paxos ballot, never from a client, so clock skew can
neither reorder messages nor let a delete shadow a later insert. The DataStax
warning against mixing LWT and non-LWT writes on one partition is kept the
strict way: no non-LWT write ever touches a conversation's partition. A
conditional batch may carry range deletions (Cassandra applies them inside the
CAS request) as long as the condition sits on another statement, which is how
the plans are built (:mod:`chatledger_cassandra.plan`).

The price is an LWT per write (about four round trips) plus a plain read: an
append reads the index columns of the conversation (ids, roles, sizes: no
payloads except the system messages'), then commits. The read need not be
serial: a read that missed a newer write only makes the version check fail.
Writers sharing one repository take turns on a per-conversation lock
(:mod:`chatledger_cassandra.locks`), so only writers in different processes
race; a loser retries with jittered back-off, at most ``max_attempts`` times,
then raises :class:`~chatledger_cassandra.errors.ContentionError`. A CAS that times out
(``WriteTimeout`` of write type CAS) has an unknown outcome; the repository
reads again and retries, and the message ids make a second application a no-op.

TTL. With a ``ttl``, every write carries ``USING TTL`` and an append rewrites
every surviving row (system messages included) and ``next_seq`` with the new
TTL in the same batch, so the cells of a conversation always expire together
and a window can never start mid-turn because its oldest cells expired first.
The cost is that a TTL'd append reads and rewrites the payloads of the window.
Cassandra TTLs have one-second precision (a ``ttl`` is rounded up) and a
maximum of 20 years. Cassandra before 5.0 (and 5.0 in storage compatibility
mode 4) stores expiry times as 32-bit seconds: a write whose expiry falls after
2038-01-19T03:14:07Z is rejected or capped by the server's
``expiration_date_overflow_policy``.

Listing pages through the whole token ring with ``SELECT DISTINCT`` and driver
paging. Deleting a conversation (or ``save_all(id, [])``) deletes its whole
partition, so it is never listed again.

The record of evicted ids (:mod:`chatledger.evicted_ids`), which keeps a late
retry of an append a no-op after the window evicted its messages, is lane 2 of
the conversation's own partition: one row per evicted id (``msg_id``), numbered
by the evicted message's sequence number, at most ``EVICTED_IDS_KEPT +
EVICTED_IDS_TRIM_STEP`` (1,250) rows. The read an append decides on returns it
with the message ids; the conditional batch that commits the append adds to it
and trims it. ``save_all`` range-deletes it with the old messages, deleting the
conversation deletes it with the partition, and ``drop_schema`` with the table.
A window that takes every message out keeps the partition for the record, with
its static ``emptied`` set, and such a partition is not listed, paged or
counted as a conversation. With a TTL, each row of the record is written with
the conversation's TTL and is not rewritten by later appends: it never outlives
the conversation, and a retry that comes more than one TTL after its messages
were evicted is no longer recognised.
"""

from __future__ import annotations

import math
import random
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import timedelta
from typing import Any, Literal, TypeVar

from cassandra import ConsistencyLevel, ReadTimeout, WriteTimeout, WriteType
from cassandra.query import UNSET_VALUE, BatchStatement, BatchType, BoundStatement

from chatledger.adapters import (
    AppendResult,
    ClosingContext,
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
from chatledger_cassandra.errors import (
    ContentionError,
    InvalidURLError,
)
from chatledger_cassandra.listing import PageGathering, listed
from chatledger_cassandra.locks import ConversationLocks
from chatledger_cassandra.names import render_replication
from chatledger_cassandra.plan import (
    Plan,
    Snapshot,
    StoredRow,
    Write,
    payloads_needed,
    plan_append_batch,
    plan_replace,
)
from chatledger_cassandra.sizes import DEFAULT_MAX_WRITE_BYTES, check_write
from chatledger_cassandra.snapshots import (
    SnapshotCache,
    after_commit,
    first_sequence_number,
)
from chatledger_cassandra.statements import LANE_EVICTED, LANE_SYSTEM, Statements
from chatledger_cassandra.statements import create_keyspace as keyspace_statement
from chatledger_cassandra.url import parse_url

__all__ = ["MAX_TTL_SECONDS", "CassandraChatMemoryRepository", "ttl_seconds"]

#: Cassandra's largest TTL: 20 years.
MAX_TTL_SECONDS = 630_720_000

#: How many conversations a repository remembers the last written snapshot of
#: (:mod:`chatledger_cassandra.snapshots`), most recently written first.
_REMEMBERED_CONVERSATIONS = 64

_T = TypeVar("_T")
_N = TypeVar("_N", int, float)

_DEFAULT_REPLICATION: dict[str, object] = {
    "class": "SimpleStrategy",
    "replication_factor": 1,
}
_PHASE_POINT = {
    "delete": "after_delete",
    "insert": "after_insert",
    "evict": "after_evict",
}
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def ttl_seconds(ttl: timedelta | float | None) -> int:
    """Return ``ttl`` as whole seconds (rounded up), ``0`` for no TTL.

    Raises:
        InvalidTTLError: if ``ttl`` is not positive or exceeds 20 years.
    """
    value = to_ttl(ttl, maximum=timedelta(seconds=MAX_TTL_SECONDS))
    return 0 if value is None else math.ceil(value.total_seconds())


def _cells(row: Any, names: Sequence[str]) -> tuple[Any, ...]:
    # Rows come from the session's row factory: tuples, named tuples or dicts.
    if isinstance(row, Mapping):
        return tuple(row[name] for name in names)
    return tuple(row)


_INDEX = ("next_seq", "lane", "seq", "msg_id", "role", "size_counter", "size")
_FULL = (*_INDEX, "payload")


def _values(write: Write) -> tuple[object, ...]:
    """The values to bind for ``write``: a missing one is unset, never null.

    A bound null writes a tombstone cell; an insert of a message without a
    stored size would leave two, and a long conversation's reads would wade
    through (and at 100,000 by default, abort on) tombstones nobody deleted.
    """
    if write.statement != "insert":
        return write.params
    return tuple(UNSET_VALUE if value is None else value for value in write.params)


def _is_retryable(exc: Exception) -> bool:
    if isinstance(exc, WriteTimeout):
        return bool(getattr(exc, "write_type", None) == WriteType.CAS)
    serial = (ConsistencyLevel.SERIAL, ConsistencyLevel.LOCAL_SERIAL)
    return isinstance(exc, ReadTimeout) and getattr(exc, "consistency", None) in serial


def _flag(options: dict[str, Any], key: str) -> None:
    value = options.get(key)
    if isinstance(value, str):
        lowered = value.lower()
        if lowered not in _TRUE | _FALSE:
            raise InvalidURLError(f"{key} must be true or false, not {value!r}")
        options[key] = lowered in _TRUE


def _number(options: dict[str, Any], key: str, kind: type[_N]) -> _N:
    value = options[key]
    try:
        return kind(value)
    except (TypeError, ValueError):
        raise InvalidURLError(
            f"{key} must be a {kind.__name__}, not {value!r}"
        ) from None


class CassandraChatMemoryRepository(ClosingContext):
    """Conversations in one Cassandra table, one partition each.

    Implements :class:`chatledger.ChatMemoryRepository` and the atomic
    :class:`chatledger.SupportsWindowAppend`. Construction validates the names,
    creates the schema when asked; each statement is prepared once, on first use.

    Attributes:
        keyspace: The keyspace of the table.
        table: The table name.
        ttl: The TTL in seconds, ``0`` when conversations do not expire.
        fault_points: Test hooks reached at the named steps of every write.
    """

    def __init__(
        self,
        session: Any,
        *,
        keyspace: str = "chatledger",
        table: str = "chat_memory",
        ttl: timedelta | float | None = None,
        create_schema: bool = True,
        create_keyspace: bool = False,
        replication: Mapping[str, object] | None = None,
        consistency_level: int = ConsistencyLevel.LOCAL_QUORUM,
        serial_consistency_level: int = ConsistencyLevel.LOCAL_SERIAL,
        max_attempts: int = 100,
        page_size: int = 5000,
        max_write_bytes: int = DEFAULT_MAX_WRITE_BYTES,
    ) -> None:
        """Use ``session`` (a connected ``cassandra.cluster.Session``).

        Args:
            session: The driver session; the repository never shuts it down.
            keyspace: The keyspace holding the table.
            table: The table name.
            ttl: Sliding time-to-live of a whole conversation (a ``timedelta``
                or seconds), refreshed by every write; ``None`` keeps forever.
            create_schema: Run ``CREATE TABLE IF NOT EXISTS`` now.
            create_keyspace: Run ``CREATE KEYSPACE IF NOT EXISTS`` now.
            replication: Replication options for a created keyspace, e.g.
                ``{"class": "NetworkTopologyStrategy", "dc1": 3}``; the default,
                SimpleStrategy with one replica, suits development only.
            consistency_level: Consistency of reads (those a write decides on
                too) and of the commit of every write. Below a quorum, a write
                may retry until the replica it reads has caught up.
            serial_consistency_level: Consistency of the Paxos phase of every
                write.
            max_attempts: How often a write is tried when other writers win the
                race, before :class:`ContentionError`.
            page_size: Rows per page when listing and reading.
            max_write_bytes: The largest write (one conditional batch) sent;
                a larger one raises ``MessageTooLargeError`` before it is sent.
                The default is the server's default limit of a request and of
                a mutation (16 MiB); raise it only with the server's
                ``native_transport_max_message_size`` and ``max_mutation_size``.

        Raises:
            InvalidNameError: for a bad keyspace, table or replication option.
            InvalidTTLError: for a bad ``ttl``.
        """
        if session is None:
            raise TypeError("session must be a connected cassandra Session")
        if isinstance(max_attempts, bool) or not isinstance(max_attempts, int):
            raise TypeError("max_attempts must be an int")
        if isinstance(max_write_bytes, bool) or not isinstance(max_write_bytes, int):
            raise TypeError("max_write_bytes must be an int")
        if max_attempts < 1 or page_size < 1 or max_write_bytes < 1:
            raise ValueError(
                "max_attempts, page_size and max_write_bytes must be at least 1"
            )
        self._cql = Statements(keyspace, table)
        self.keyspace = keyspace
        self.table = table
        self.ttl = ttl_seconds(ttl)
        keyspace_ddl = keyspace_statement(
            keyspace, dict(_DEFAULT_REPLICATION if replication is None else replication)
        )
        self.fault_points = FaultPoints()
        self._session = session
        self._cluster: Any = None
        self._consistency = consistency_level
        self._serial = serial_consistency_level
        self._max_attempts = max_attempts
        self._page_size = page_size
        self._max_write_bytes = max_write_bytes
        if create_keyspace:
            session.execute(keyspace_ddl)
        if create_schema:
            self.create_schema()
        # Prepared on first use: with create_schema=False the table may not exist
        # yet, and the server refuses to prepare a statement on a missing table.
        self._texts = self._cql.prepared()
        self._prepared: dict[str, Any] = {}
        self._prepare_lock = threading.Lock()
        self._writers = ConversationLocks()
        self._snapshots = SnapshotCache(_REMEMBERED_CONVERSATIONS)

    @classmethod
    def from_url(cls, url: str, **options: Any) -> CassandraChatMemoryRepository:
        """Connect to ``cassandra://[user:pass@]host[:port][,host...][/keyspace]``.

        The repository owns the cluster it opens: :meth:`close` (or leaving a
        ``with`` block) shuts it down. Query options (``table``, ``ttl``,
        ``create_schema``, ``create_keyspace``, ``replication_factor``,
        ``local_dc``, ``protocol_version``, ``connect_timeout``) are applied
        first, then ``options`` override them.

        Raises:
            InvalidURLError: for a URL that cannot be parsed.
        """
        from cassandra.auth import PlainTextAuthProvider
        from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
        from cassandra.policies import DCAwareRoundRobinPolicy, TokenAwarePolicy

        parsed = parse_url(url)
        settings: dict[str, Any] = dict(parsed.options)
        settings.update(options)
        cluster_args: dict[str, Any] = {"contact_points": parsed.contact_points}
        # Without local_dc the driver takes the data centre of the first contact
        # point, as it does by default; naming the policy keeps the driver from
        # warning that contact points without one will become an error.
        local_dc = settings.pop("local_dc", None) or None
        policy = TokenAwarePolicy(DCAwareRoundRobinPolicy(local_dc=local_dc))
        cluster_args["execution_profiles"] = {
            EXEC_PROFILE_DEFAULT: ExecutionProfile(load_balancing_policy=policy)
        }
        if "protocol_version" in settings:
            cluster_args["protocol_version"] = _number(
                settings, "protocol_version", int
            )
            settings.pop("protocol_version")
        if "connect_timeout" in settings:
            cluster_args["connect_timeout"] = _number(
                settings, "connect_timeout", float
            )
            settings.pop("connect_timeout")
        if parsed.username is not None:
            cluster_args["auth_provider"] = PlainTextAuthProvider(
                username=parsed.username, password=parsed.password or ""
            )
        if "replication_factor" in settings:
            factor = _number(settings, "replication_factor", int)
            settings.pop("replication_factor")
            settings.setdefault(
                "replication",
                {"class": "SimpleStrategy", "replication_factor": factor},
            )
        if isinstance(settings.get("ttl"), str):
            settings["ttl"] = _number(settings, "ttl", float)
        for key in ("create_schema", "create_keyspace"):
            _flag(settings, key)
        if parsed.keyspace is not None:
            settings.setdefault("keyspace", parsed.keyspace)
        # Check names and TTL before opening connections to anything.
        Statements(
            settings.get("keyspace", "chatledger"), settings.get("table", "chat_memory")
        )
        ttl_seconds(settings.get("ttl"))
        if settings.get("replication") is not None:
            render_replication(settings["replication"])
        cluster = Cluster(**cluster_args)
        try:
            repository = cls(cluster.connect(), **settings)
        except BaseException:
            cluster.shutdown()
            raise
        repository._cluster = cluster
        return repository

    def close(self) -> None:
        """Shut down the cluster if :meth:`from_url` opened it; else do nothing."""
        if self._cluster is not None:
            self._cluster.shutdown()
            self._cluster = None

    def __repr__(self) -> str:
        return (
            f"CassandraChatMemoryRepository(keyspace={self.keyspace!r}, "
            f"table={self.table!r}, ttl={self.ttl or None!r})"
        )

    @property
    def session(self) -> Any:
        """The driver session every statement runs on."""
        return self._session

    def create_schema(self) -> None:
        """Create the table if it is missing (idempotent)."""
        self._session.execute(self._cql.create_table)

    def drop_schema(self) -> None:
        """Drop the table and every conversation in it (the keyspace stays)."""
        self._session.execute(f"DROP TABLE IF EXISTS {self._cql.qualified}")

    # -- reads -------------------------------------------------------------

    def _statement(self, name: str) -> Any:
        """Return the prepared statement ``name``, preparing it once."""
        prepared = self._prepared.get(name)
        if prepared is None:
            with self._prepare_lock:
                prepared = self._prepared.get(name)
                if prepared is None:
                    prepared = self._session.prepare(self._texts[name])
                    prepared.consistency_level = self._consistency
                    prepared.serial_consistency_level = self._serial
                    self._prepared[name] = prepared
        return prepared

    def _bind(self, name: str, params: Iterable[object]) -> BoundStatement:
        bound: BoundStatement = self._statement(name).bind(tuple(params))
        return bound

    def _read_whole(self, name: str, params: Iterable[object]) -> list[Any]:
        """Read what a write decides on: one conversation, unpaged.

        A plain read at ``consistency_level``, not a serial one: the version
        check of the commit is what makes the write linearizable, and a read
        that missed a newer write only loses that check and is read again. A
        serial read would add a Paxos round to every attempt, which on a long
        conversation costs several times the read itself.
        """
        bound = self._bind(name, params)
        bound.fetch_size = None
        return list(self._session.execute(bound))

    def find_conversation_ids(self) -> list[str]:
        """Return every conversation id; pages through the whole token ring."""
        bound = self._bind("list_ids", ())
        bound.fetch_size = self._page_size
        names = ("conversation_id", "emptied")
        return listed(_cells(row, names) for row in self._session.execute(bound))

    def count_messages(self, conversation_id: str) -> int:
        """Return how many messages a conversation holds; the server counts."""
        validate_conversation_id(conversation_id)
        row = self._session.execute(
            self._bind("count_messages", (conversation_id, LANE_EVICTED))
        ).one()
        return 0 if row is None else int(_cells(row, ("count",))[0])

    def find_conversation_ids_page(
        self, cursor: str | None = None, limit: int = 100
    ) -> ConversationPage:
        """Return up to ``limit`` conversation ids after ``cursor``, in token order.

        One range query over the partition tokens per page (more only when
        partitions that hold no conversation fill it,
        :mod:`chatledger_cassandra.listing`): the cursor is the token of the
        last id of the previous page, so each page starts where the last ended
        on the ring, whatever the cluster's size.

        Raises:
            InvalidPageError: as the protocol says, and for a cursor that is
                not a token this method gave.
        """
        gathering = PageGathering.start(cursor, limit)
        names = ("conversation_id", "token", "emptied")
        while True:
            bound = self._bind(*gathering.query())
            bound.fetch_size = None
            rows = [_cells(row, names) for row in self._session.execute(bound)]
            page = gathering.add(rows)
            if page is not None:
                return page

    def find_by_conversation_id(self, conversation_id: str) -> list[Message]:
        """Return one conversation's messages, oldest first (``[]`` if none)."""
        validate_conversation_id(conversation_id)
        bound = self._bind("select_messages", (conversation_id, LANE_EVICTED))
        bound.fetch_size = self._page_size
        rows = [
            _cells(row, ("lane", "seq", "payload"))
            for row in self._session.execute(bound)
        ]
        # A partition holding only its static column reads as one null row.
        ordered = sorted(
            (seq, payload) for lane, seq, payload in rows if seq is not None
        )
        return [codec.from_json(payload) for _, payload in ordered]

    def _version(self, conversation_id: str) -> int | None:
        rows = self._read_whole("select_version", (conversation_id,))
        return _cells(rows[0], ("next_seq",))[0] if rows else None

    def _snapshot(
        self, conversation_id: str, mode: Literal["index", "full"]
    ) -> Snapshot:
        names = _INDEX if mode == "index" else _FULL
        statement = "select_index" if mode == "index" else "select_full"
        return self._to_snapshot(self._read_whole(statement, (conversation_id,)), names)

    @staticmethod
    def _to_snapshot(rows: list[Any], names: Sequence[str]) -> Snapshot:
        version: int | None = None
        stored: list[StoredRow] = []
        evicted: dict[str, int] = {}
        for row in rows:
            cells = dict(zip(names, _cells(row, names), strict=True))
            version = cells["next_seq"]
            if cells["seq"] is None:
                continue
            if cells["lane"] == LANE_EVICTED:
                evicted[cells["msg_id"]] = cells["seq"]
                continue
            stored.append(
                StoredRow(
                    lane=cells["lane"],
                    seq=cells["seq"],
                    msg_id=cells["msg_id"],
                    role=cells["role"],
                    size_counter=cells["size_counter"],
                    size=cells["size"],
                    payload=cells.get("payload"),
                )
            )
        return Snapshot(version, stored, evicted)

    def _read_snapshot(self, conversation_id: str, window: Window) -> Snapshot | None:
        """Read what an append decides on; ``None`` if a write came in between."""
        snapshot = self._snapshot(conversation_id, "full" if self.ttl else "index")
        need = payloads_needed(snapshot, window, self.ttl)
        if need == "all" and not self.ttl:
            return self._snapshot(conversation_id, "full")
        if need == "system":
            return self._with_system_payloads(conversation_id, snapshot)
        return snapshot

    def _recall(self, conversation_id: str, window: Window) -> Snapshot | None:
        """The remembered snapshot, if still current and enough for ``window``."""
        if self.ttl or not self._snapshots.knows(conversation_id):
            return None
        version = self._version(conversation_id)
        snapshot = self._snapshots.recall(conversation_id, version)
        if snapshot is None or payloads_needed(snapshot, window, 0) == "all":
            return None
        return snapshot

    def _with_system_payloads(
        self, conversation_id: str, snapshot: Snapshot
    ) -> Snapshot | None:
        lane = self._to_snapshot(
            self._read_whole("select_lane", (conversation_id, LANE_SYSTEM)), _FULL
        )
        expected = {(r.seq, r.msg_id) for r in snapshot.rows if r.lane == LANE_SYSTEM}
        if (
            lane.version != snapshot.version
            or {(r.seq, r.msg_id) for r in lane.rows} != expected
        ):
            return None  # a write landed between the two reads: start over
        others = [r for r in snapshot.rows if r.lane != LANE_SYSTEM]
        return Snapshot(snapshot.version, lane.rows + others, snapshot.evicted)

    # -- writes ------------------------------------------------------------

    def _commit(self, conversation_id: str, plan: Plan) -> bool:
        """Send ``plan`` as one conditional statement or batch; True if applied.

        Raises:
            MessageTooLargeError: before sending, if the batch may not fit.
        """
        assert plan.condition is not None
        check_write(plan, self._max_write_bytes, conversation_id)
        statement: Any
        if not plan.writes:
            statement = self._bind(plan.condition.statement, plan.condition.params)
        else:
            statement = BatchStatement(
                batch_type=BatchType.UNLOGGED,
                consistency_level=self._consistency,
                serial_consistency_level=self._serial,
            )
            statement.add(
                self._statement(plan.condition.statement), plan.condition.params
            )
            phase = None
            for write in plan.writes:
                if phase is not None and write.phase != phase:
                    self._reach_phase(phase)
                phase = write.phase
                statement.add(self._statement(write.statement), _values(write))
            if phase is not None:
                self._reach_phase(phase)
        self.fault_points.reach("before_commit")
        rows = list(self._session.execute(statement))
        applied = bool(rows) and bool(_cells(rows[0], ("[applied]",))[0])
        if applied:
            self.fault_points.reach("after_commit")
        return applied

    def _check_new(self, conversation_id: str, batch: Sequence[Message]) -> None:
        """Refuse, before any I/O, messages whose inserts alone cannot fit."""
        if batch:
            inserts = plan_replace(conversation_id, None, batch, self.ttl)
            check_write(inserts, self._max_write_bytes, conversation_id)

    def _reach_phase(self, phase: str) -> None:
        point = _PHASE_POINT.get(phase)
        if point is not None:
            self.fault_points.reach(point)

    def _backoff(self, attempt: int) -> None:
        time.sleep(random.uniform(0, min(0.1, 0.002 * 2 ** min(attempt, 10))))

    def _retrying(
        self, conversation_id: str, attempt_once: Callable[[], _T | None]
    ) -> _T:
        """Run ``attempt_once`` until it returns non-None, retrying lost races."""
        last_error: Exception | None = None
        for attempt in range(self._max_attempts):
            try:
                outcome = attempt_once()
            except (WriteTimeout, ReadTimeout) as exc:
                if not _is_retryable(exc):
                    raise
                last_error = exc
                outcome = None
            if outcome is not None:
                return outcome
            self._backoff(attempt)
        if last_error is not None:
            raise last_error
        raise ContentionError(
            conversation_id,
            self._max_attempts,
            "other writers kept changing the conversation",
        )

    def save_all(self, conversation_id: str, messages: Sequence[Message]) -> None:
        """Replace a conversation atomically; an empty list deletes it.

        Raises:
            MessageTooLargeError: before any I/O, if the messages cannot fit in
                one write (``max_write_bytes``).
        """
        validate_conversation_id(conversation_id)
        batch = stamp_messages(validate_messages(messages))
        self._check_new(conversation_id, batch)

        def attempt() -> bool | None:
            version = self._version(conversation_id)
            self.fault_points.reach("after_lock")
            plan = plan_replace(
                conversation_id, version, batch, self.ttl, first_sequence_number()
            )
            if plan.condition is None or self._commit(conversation_id, plan):
                return True
            return None

        with self._writers.hold(conversation_id):
            self._snapshots.forget(conversation_id)
            self._retrying(conversation_id, attempt)

    def delete_by_conversation_id(self, conversation_id: str) -> None:
        """Delete a conversation's partition; an unknown id does nothing."""
        validate_conversation_id(conversation_id)

        plan = Plan(
            Write("delete_any", (conversation_id,), "condition"),
            [Write("delete_partition", (conversation_id,), "delete")],
        )

        def attempt() -> bool:
            self.fault_points.reach("after_lock")
            # Not applied when there was nothing to delete.
            self._commit(conversation_id, plan)
            return True

        with self._writers.hold(conversation_id):
            self._snapshots.forget(conversation_id)
            self._retrying(conversation_id, attempt)

    def append_to_window(
        self, conversation_id: str, messages: Sequence[Message], window: Window
    ) -> AppendResult:
        """Append and evict in one conditional batch (``SupportsWindowAppend``).

        Raises:
            MessageTooLargeError: before any I/O, if the new messages cannot
                fit in one write (``max_write_bytes``); before writing, if the
                whole batch cannot (with a TTL it rewrites the window).
        """
        validate_conversation_id(conversation_id)
        batch = validate_messages(messages)
        if not batch:
            return AppendResult()
        stamped = stamp_messages(batch)
        self._check_new(conversation_id, stamped)

        def attempt() -> AppendResult | None:
            snapshot = self._recall(conversation_id, window)
            if snapshot is None:
                snapshot = self._read_snapshot(conversation_id, window)
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
                    applied = self._commit(conversation_id, plan)
                except BaseException:
                    self._snapshots.forget(conversation_id)  # outcome unknown
                    raise
                if not applied:
                    self._snapshots.forget(conversation_id)
                    return None
            if not self.ttl:
                self._snapshots.remember(conversation_id, after_commit(snapshot, plan))
            return plan.result

        with self._writers.hold(conversation_id):
            return self._retrying(conversation_id, attempt)
