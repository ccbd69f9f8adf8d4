# Written by tools/async_to_sync.py from async_repository.py: edit that one.
"""Conversation memory in Apache Cassandra (and ScyllaDB), on cassandra-driver.

Example (needs a Cassandra server):
    from cassandra.cluster import Cluster
    from chatledger import MessageWindowChatMemory, Message
    from chatledger_cassandra import CassandraChatMemoryRepository

    session = Cluster(["127.0.0.1"]).connect()
    repository = CassandraChatMemoryRepository(session, keyspace="chat")
    memory = MessageWindowChatMemory(repository, max_messages=20)
    memory.add("c1", Message.user("Hello"))

    # or let the repository own the cluster:
    url = "cassandra://db1,db2/chat"
    with CassandraChatMemoryRepository.from_url(url) as repo:
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
the plans are built (:mod:`chatledger_cassandra.steps`).

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

The log (``SupportsLog``). The same partition is the conversation's log
(:mod:`chatledger_cassandra.log_plans`): a log append evicts nothing, so lane
0 also keeps the system messages a newer set superseded, the static
``system_batch`` says where the current set starts, and lane 3 indexes every
id the conversation holds or held (:mod:`chatledger_cassandra.id_index`), so
an append tells a retried id from a new one by its slot, never by reading the
log. ``append_to_log`` is one conditional batch, like every write: atomic,
isolated, gap-free and linearizable under writers in any thread or process.
How many round trips it takes follows from the model: CQL cannot increment a
regular column inside a lightweight transaction (and counters cannot join
one), so the client numbers the messages and must know the version, and it
must know the current system messages for rule 1. After its own append or
view of a conversation the repository remembers both
(:mod:`chatledger_cassandra.log_states`) and sends the batch at once: one
round trip, the Paxos rounds running between the coordinator and the
replicas. Otherwise it first sends three reads together (the static columns,
the slots of the batch's ids, the newest system rows): two round trips. A
condition that fails (another writer got there first, or a retried id the
remembered state could not know fills its slot) means reading and sending
again. ``find_window`` reads the newest rows backwards in clustering order
with the current system messages (:mod:`chatledger_cassandra.log_views`), one
round trip of one or two reads; ``find_messages_page`` reads the two message
lanes from the cursor, one round trip of two reads. Every read names the
version it saw, and reads that disagree are sent again. With a TTL a log
append rewrites every cell of the conversation under it, as the window
append rewrites its window, so its cost grows with the log.

Retention. Under ``retention=Retention.last(n)`` (:mod:`chatledger.retention`)
a log append whose numbers make a trim due trims the conversation in one more
conditional batch once its own has committed
(:mod:`chatledger_cassandra.log_trims`): a range delete of lane 1 below the
cutoff core computes, another of the superseded system messages below it,
the ids removed added to the record of evicted ids, and, when that record
trims, the index rows of the ids it drops. Its reads go in one round trip
(the view of the append's window among them), then the batch: about one
append in ``slack`` pays for them, and the others cost what they cost
unbounded.

Removals on request (``SupportsLogRemoval``: ``remove_newest``,
``remove_messages``) are one conditional batch each too
(:mod:`chatledger_cassandra.log_removals`): the batch takes one sequence
number as its version, so it is atomic against appends and other removals,
and it holds a condition on every row it deletes and on one it keeps, so a
trim between its reads and its batch fails it. It deletes the rows and their
ids' rows of the id index (the ids are forgotten), and moves
``system_batch`` by rule 1 over what is left. ``remove_newest`` reads the
newest rows of each message lane, sent together, then the id index's slots:
its cost grows with ``count``, not the log; ``remove_messages`` looks for its
ids newest first, as far back as the oldest one named.

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

The repository for asyncio sends every statement with the driver's futures,
delivered to the event loop by :mod:`chatledger_cassandra.bridge`, so no
thread waits for a statement and the event loop never blocks on one. A call
cancelled before its batch is sent sends nothing; one cancelled after waits
for the server's answer before the cancellation returns
(:func:`chatledger.adapters.settled`), so the batch cannot land later: the
conversation holds the old state or the new, never a part, for good. The
repository still forgets what it remembered of the conversation after a
cancelled commit and reads it again on the next write. cassandra-driver has
no asynchronous form of connecting, preparing or shutting down, so those run
on a thread of their own (:func:`chatledger_cassandra.bridge.off_loop`), once
each in the repository's life.

Neither repository opens anything when it is made, so one made at import time
does not need the cluster up: ``from_url`` only checks the URL and the
options, and the first call connects, creates the keyspace and the table when
asked (or finds the keyspace missing), once, behind a lock that concurrent
first calls wait on. Both prepare each statement once, on first use.
"""

from __future__ import annotations

import json
import threading  # noqa: F401, RUF100
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from cassandra import (
    AlreadyExists,
    ConsistencyLevel,
    DriverException,
    InvalidRequest,
    ReadTimeout,
    WriteTimeout,
)
from cassandra.cluster import NoHostAvailable
from cassandra.query import UNSET_VALUE

from chatledger.adapters import (
    DEFAULT_MESSAGE_PAGE_SIZE,
    EVICTED_IDS_TRIM_STEP,
    TURN_SLACK,
    AppendResult,
    ClosingContext,
    ConversationPage,
    FaultPoints,
    Message,
    MessagePage,
    Retention,
    Role,
    StoreNotFoundError,
    TailView,
    Window,
    check_message_page,
    checked_window,
    codec,
    message_page,
    stamp_messages,
    to_retention,
    validate_conversation_id,
    validate_message_ids,
    validate_messages,
    validate_removal_count,
    view_reads,
)
from chatledger.conversation_info import (
    UNSET,
    ConversationInfo,
    ConversationInfoPage,
    ConversationInfoUpdate,
    Unset,
    check_conversation_info,
    check_find_conversations,
)
from chatledger_cassandra.connecting import url_settings
from chatledger_cassandra.errors import ContentionError, missing_keyspace
from chatledger_cassandra.id_index import SlotMap
from chatledger_cassandra.listing import PageGathering, listed
from chatledger_cassandra.locks import ConversationLocks
from chatledger_cassandra.log_plans import (
    LogKnowledge,
    LogPlan,
    plan_log_append,
    whole_partition,
)
from chatledger_cassandra.log_removals import (
    NewestScan,
    RemovalReads,
    newest,
    plan_removal,
    removed_messages,
    system_after,
)
from chatledger_cassandra.log_rows import (
    LOG_COLUMNS,
    SLOT_COLUMNS,
    Read,
    Statics,
    agree,
    read_of,
)
from chatledger_cassandra.log_states import LogState, LogStates
from chatledger_cassandra.log_trims import (
    LaneScan,
    anchor_of,
    first_user,
    ids_read,
    index_batches,
    plan_index_release,
    plan_log_trim,
    trimmed,
)
from chatledger_cassandra.log_views import (
    NEWEST_SYSTEM_ROWS,
    disagrees,
    log_rows,
    page_bound,
    page_rows,
    system_rows,
    tail_start,
)
from chatledger_cassandra.opening import open_cluster
from chatledger_cassandra.records import (
    BUCKETS,
    Candidate,
    Merge,
    Record,
    aware,
    from_millis,
    judge,
    listing_bound,
    millis,
    owner_scope,
    record_of,
    scopes_of,
)
from chatledger_cassandra.sizes import DEFAULT_MAX_WRITE_BYTES, check_write
from chatledger_cassandra.snapshots import (
    SnapshotCache,
    after_commit,
    first_sequence_number,
)
from chatledger_cassandra.statements import (
    ADDED_COLUMNS,
    LANE_EVICTED,
    LANE_IDS,
    LANE_OTHER,
    LANE_SYSTEM,
    RECORD_COLUMNS,
    STATIC_COLUMNS,
    Statements,
)
from chatledger_cassandra.statements import create_keyspace as keyspace_statement
from chatledger_cassandra.steps import (
    FULL_COLUMNS,
    INDEX_COLUMNS,
    MAX_TTL_SECONDS,
    Plan,
    Snapshot,
    StoredRow,
    Write,
    backoff,
    cells,
    commit_statement,
    configure_prepared,
    is_retryable,
    payloads_needed,
    plan_append_batch,
    plan_delete,
    plan_replace,
    record_floor,
    rewrite_write,
    to_snapshot,
    ttl_seconds,
)

__all__ = ["MAX_TTL_SECONDS", "CassandraChatMemoryRepository", "ttl_seconds"]

#: How long a listing table another process made may take to answer, and
#: the pause between two tries (:meth:`_until_listing_answers`).
_LISTING_WAIT_SECONDS = 10.0
_LISTING_WAIT_STEP_SECONDS = 0.05
#: Stands for the session a repository made by ``from_url`` opens.
_NOT_OPENED: Any = object()
#: The replication of a keyspace the repository creates, unless told otherwise.
_DEFAULT_REPLICATION: dict[str, object] = {
    "class": "SimpleStrategy",
    "replication_factor": 1,
}
#: How many conversations a repository remembers the last written snapshot of
#: (:mod:`chatledger_cassandra.snapshots`), most recently written first.
_REMEMBERED_CONVERSATIONS = 64
#: How many conversations' owners (and last updated_at) a repository keeps
#: from its own writes and reads, so that a write names the owner its batch
#: conditions on without reading it first.
_KNOWN_RECORDS = 4096
#: Said beside the server's refusal of a statement on a table made before
#: the log's static columns.
_OLDER_TABLE = (
    "{} was made before the columns of the log (system_batch, indexed): "
    "call create_schema() or upgrade_schema() once (chatledger migrate URL), "
    "or open a repository with create_schema=True, to add them"
)
#: What a log append knows of a conversation not stored yet: its size check
#: plans on it before any I/O.
_NEW_LOG = LogKnowledge(None, None, False, (), SlotMap(whole=True))
#: How many slots of the id index one read of a trim asks for.
_SLOTS_PER_READ = 100
_PHASE_POINT = {
    "delete": "after_delete",
    "insert": "after_insert",
    "evict": "after_evict",
}


class CassandraChatMemoryRepository(ClosingContext):
    """Conversations in one Cassandra table, one partition each.

    Implements :class:`chatledger.ChatMemoryRepository`, the atomic
    :class:`chatledger.SupportsWindowAppend`, the log
    (:class:`chatledger.SupportsLog`) and removals from it
    (:class:`chatledger.SupportsLogRemoval`), counting, paging and
    :class:`chatledger.SupportsSchemaUpgrade`. Each statement is
    prepared once, on first use.

    Args:
        session: A connected ``cassandra.cluster.Session``; the repository
            never shuts it down.
        keyspace: The keyspace holding the table.
        table: The table name.
        ttl: Sliding time-to-live of a whole conversation (a ``timedelta`` or
            seconds), refreshed by every write; ``None`` keeps forever.
        create_schema: Run ``CREATE TABLE IF NOT EXISTS`` on the first call.
        create_keyspace: Run ``CREATE KEYSPACE IF NOT EXISTS`` first.
        replication: Replication options for a created keyspace, e.g.
            ``{"class": "NetworkTopologyStrategy", "dc1": 3}``; the default,
            SimpleStrategy with one replica, suits development only.
        consistency_level: Consistency of reads (those a write decides on
            too) and of the commit of every write. Below a quorum, a write
            may retry until the replica it reads has caught up.
        serial_consistency_level: Consistency of the Paxos phase of every
            write.
        max_attempts: How often a write is tried when other writers win the
            race, before :class:`~chatledger_cassandra.errors.ContentionError`.
        page_size: Rows per page when listing and reading.
        max_write_bytes: The largest write (one conditional batch) sent; a
            larger one raises ``MessageTooLargeError`` before it is sent. The
            default is the server's default limit of a request and of a
            mutation (16 MiB); raise it only with the server's
            ``native_transport_max_message_size`` and ``max_mutation_size``.
        retention: What each conversation's log keeps:
            ``Retention.everything()`` (the default) or ``Retention.last(n)``
            (``n`` for short); see :mod:`chatledger.retention`.

    Attributes:
        keyspace: The keyspace of the table.
        table: The table name.
        ttl: The TTL in seconds, ``0`` when conversations do not expire.
        retention: The :class:`~chatledger.retention.Retention` of the logs.

    Raises:
        InvalidNameError: for a bad keyspace, table or replication option.
        InvalidTTLError: for a bad ``ttl``.
        InvalidRetentionError: for a bad ``retention``.
        TypeError, ValueError: for a missing session or a bad number.
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
        retention: Retention | int | None = None,
    ) -> None:
        """Check the options; nothing is sent before the first call."""
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
        self.retention = to_retention(retention)
        self._keyspace_ddl = keyspace_statement(
            keyspace, dict(_DEFAULT_REPLICATION if replication is None else replication)
        )
        self._max_attempts = max_attempts
        self._page_size = page_size
        self._max_write_bytes = max_write_bytes
        self._fault_points = FaultPoints()
        self._snapshots = SnapshotCache(_REMEMBERED_CONVERSATIONS)
        self._log_states = LogStates(_REMEMBERED_CONVERSATIONS)
        self._session: Any = None if session is _NOT_OPENED else session
        self._consistency = consistency_level
        self._serial = serial_consistency_level
        self._create_keyspace = bool(create_keyspace)
        self._create_schema = bool(create_schema)
        self._cluster_args: dict[str, Any] | None = None
        self._cluster: Any = None
        self._closed = False
        self._ready = False
        self._setup_lock = threading.Lock()
        self._texts = self._cql.prepared()
        self._prepared: dict[str, Any] = {}
        self._writers = ConversationLocks()
        self._known: OrderedDict[str, tuple[str | None, datetime]] = OrderedDict()
        self._unsure: set[str] = set()
        self._opening_lock = threading.Lock()

    @classmethod
    def from_url(cls, url: str, **options: Any) -> CassandraChatMemoryRepository:
        """A repository for ``cassandra://[user:pass@]host[:port][,host...][/keyspace]``.

        The repository owns the cluster it opens: :meth:`close` (or leaving
        its ``with`` block) shuts it down. The URL and the options are
        checked now; the repository connects on its first call (a cluster
        that is down fails that call with the driver's ``NoHostAvailable``).
        Query options (``table``, ``ttl``, ``retention``,
        ``create_schema``, ``create_keyspace``, ``replication_factor``,
        ``local_dc``, ``protocol_version``, ``connect_timeout``,
        ``control_connection_timeout``: 10 s unless given) are applied first,
        then ``options`` override them.

        Raises:
            InvalidURLError: for a URL that cannot be parsed.
            InvalidNameError: for a bad keyspace, table or replication option.
            InvalidTTLError: for a bad ``ttl``.
            InvalidRetentionError: for a bad ``retention``.
        """
        cluster_args, settings = url_settings(url, options)
        repository = cls(_NOT_OPENED, **settings)
        repository._cluster_args = cluster_args
        return repository

    def __repr__(self) -> str:
        bound = f", retention={self.retention!r}" if self.retention.bounded else ""
        return (
            f"CassandraChatMemoryRepository(keyspace={self.keyspace!r}, "
            f"table={self.table!r}, ttl={self.ttl or None!r}{bound})"
        )

    @property
    def session(self) -> Any:
        """The driver session every statement runs on.

        The sync repository does its first call's work on the first read of
        this property, when no call has yet: it connects (a repository
        ``from_url`` made), creates the keyspace and the table asked for,
        and returns the session, ``None`` once closed without connecting.
        The asyncio repository cannot connect here: its session is ``None``
        until its first call has connected.
        """
        if not self._ready and not self._closed:
            self._made_ready()
        return self._session

    @property
    def fault_points(self) -> FaultPoints:
        """Test hooks reached at the named steps of every write."""
        return self._fault_points

    def close(self) -> None:
        """Shut down the cluster if :meth:`from_url` made it; calling twice is fine."""
        if self._closed:
            return
        self._closed = True
        if self._cluster is not None:
            self._cluster.shutdown()

    # -- schema --------------------------------------------------------------

    def create_schema(self) -> None:
        """Create the table if it is missing (idempotent).

        The keyspace first, if ``create_keyspace`` asked for it and it is not
        made yet.
        """
        self._connected()
        self._make_schema(table=True)

    def drop_schema(self) -> None:
        """Drop the table and every conversation in it (the keyspace stays)."""
        self._connected()
        for name in (self._cql.qualified, self._cql.listing):
            ddl = f"DROP TABLE IF EXISTS {name}"
            list(self._session.execute(ddl))

    def _make_schema(self, *, table: bool) -> None:
        if self._create_keyspace:
            list(self._session.execute(self._keyspace_ddl))
            self._create_keyspace = False
        if table:
            try:
                list(self._session.execute(self._cql.create_table))
            except InvalidRequest as error:
                refused = missing_keyspace(error, self.keyspace)
                if refused is None:
                    raise
                raise refused from error
            self._add_log_columns()
            self._make_listing()
            self._create_schema = False

    def upgrade_schema(self) -> list[str]:
        """Bring a table an earlier release made up to date; say what changed.

        Adds the log's and the record's static columns and the listing table
        (what :meth:`create_schema` does on a table that exists), then gives
        every conversation that has no record times its record: both times
        are when it was last written (``WRITETIME`` of its version), and it
        is listed there. The messages are not read or rewritten (the id index
        of a conversation written before is built by its first log append).
        Safe beside other processes opening or upgrading the table: a column
        or table another one made first is not reported here, and a record
        is filled once, by a conditional write.

        Returns:
            One line per column or table added, ``[]`` when the schema was
            current (the records filled are data, not reported).

        Raises:
            StoreNotFoundError: the keyspace or the table does not exist;
                nothing is created.
        """
        self._connected()
        if not self._table_columns():
            raise StoreNotFoundError(
                f"the Cassandra table {self.keyspace}.{self.table} does not "
                "exist: there is no store to upgrade (check the keyspace and "
                "table; opening it with create_schema=True creates a new one)"
            )
        added = self._add_log_columns()
        table = f"{self.keyspace}.{self.table}"
        changes = [f"added column {name} to table {table}" for name in added]
        if self._make_listing():
            changes.append(f"created table {self.keyspace}.{self._cql.listing_table}")
        self._fill_records()
        return changes

    def _make_listing(self) -> bool:
        """Create the listing table if missing; True when this call made it."""
        exists = list(
            self._session.execute(
                "SELECT table_name FROM system_schema.tables "
                "WHERE keyspace_name = %s AND table_name = %s",
                (self.keyspace, self._cql.listing_table),
            )
        )
        if exists:
            self._until_listing_answers()
            return False
        # Without IF NOT EXISTS: of two processes making it at once, the one
        # the server refuses is not the one that made it, and says nothing.
        ddl = self._cql.create_listing.replace(" IF NOT EXISTS", "", 1)
        try:
            list(self._session.execute(ddl))
        except AlreadyExists:
            self._until_listing_answers()
            return False
        return True

    def _until_listing_answers(self) -> None:
        """Wait until the listing table, made by another process, answers.

        Cassandra shows a table that a concurrent ``CREATE TABLE`` is making
        (in ``system_schema``, or by refusing ours) a moment before it serves
        statements: one sent then fails with "table ... does not exist" or
        "Unknown CF". The last such error is raised after
        ``_LISTING_WAIT_SECONDS``.
        """
        probe = f"SELECT * FROM {self._cql.listing} LIMIT 1"
        deadline = time.monotonic() + _LISTING_WAIT_SECONDS
        while True:
            try:
                list(self._session.execute(probe))
                return
            except (InvalidRequest, NoHostAvailable):
                if time.monotonic() > deadline:
                    raise
            time.sleep(_LISTING_WAIT_STEP_SECONDS)

    def _fill_records(self) -> None:
        """Give every conversation without record times its times and its
        listing row: both when its version was last written."""
        rows = self._read("list_ids", (), self._page_size)
        for conversation_id in (cells(row, ("conversation_id",))[0] for row in rows):
            found = self._read("select_record", (conversation_id,))
            record = record_of(cells(found[0], RECORD_COLUMNS) if found else None)
            if record is None or record.stored_times:
                continue
            moment = record.updated_at
            plan = Plan(
                Write(
                    "fill_record",
                    (moment, moment, conversation_id, record.version),
                    "condition",
                )
            )
            self._commit(
                conversation_id, plan, scopes_of(conversation_id, None), moment
            )

    def _table_columns(self) -> set[str]:
        """The names of the table's columns (none: no table, or no keyspace)."""
        rows = list(
            self._session.execute(
                "SELECT column_name FROM system_schema.columns "
                "WHERE keyspace_name = %s AND table_name = %s",
                (self.keyspace, self.table),
            )
        )
        return {cells(row, ("column_name",))[0] for row in rows}

    def _add_log_columns(self) -> list[str]:
        """Add the static columns of the log to a table made before them.

        Idempotent: a column another process added meanwhile is no error,
        and is not among the names returned, which this call added.
        """
        added = []
        for name in sorted(ADDED_COLUMNS.keys() - self._table_columns()):
            try:
                list(self._session.execute(self._cql.add_column(name)))
            except InvalidRequest as error:
                if "already exist" not in str(error):
                    raise
            else:
                added.append(name)
        return added

    # -- reads ---------------------------------------------------------------

    def find_conversation_ids(self) -> list[str]:
        """Return every conversation id; pages through the whole token ring."""
        self._made_ready()
        rows = self._read("list_ids", (), self._page_size)
        return listed(cells(row, ("conversation_id", "emptied")) for row in rows)

    def count_messages(self, conversation_id: str) -> int:
        """Return how many messages a conversation holds; the server counts."""
        validate_conversation_id(conversation_id)
        self._made_ready()
        rows = self._read("count_messages", (conversation_id, LANE_EVICTED))
        return int(cells(rows[0], ("count",))[0]) if rows else 0

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
        self._made_ready()
        names = ("conversation_id", "token", "emptied")
        while True:
            rows = self._read(*gathering.query())
            page = gathering.add([cells(row, names) for row in rows])
            if page is not None:
                return page

    def find_by_conversation_id(self, conversation_id: str) -> list[Message]:
        """Return one conversation's messages, oldest first (``[]`` if none)."""
        validate_conversation_id(conversation_id)
        self._made_ready()
        rows = self._read(
            "select_messages", (conversation_id, LANE_EVICTED), self._page_size
        )
        found = (cells(row, ("lane", "seq", "payload")) for row in rows)
        ordered = sorted((seq, payload) for _, seq, payload in found if seq is not None)
        return [codec.from_json(payload) for _, payload in ordered]

    # -- writes --------------------------------------------------------------

    def save_all(self, conversation_id: str, messages: Sequence[Message]) -> None:
        """Replace a conversation atomically; an empty list deletes it.

        Raises:
            MessageTooLargeError: before any I/O, if the messages cannot fit in
                one write (``max_write_bytes``).
        """
        validate_conversation_id(conversation_id)
        batch = stamp_messages(validate_messages(messages))
        self._check_new(conversation_id, batch)
        self._made_ready()
        with self._writers.hold(conversation_id):
            self._forget(conversation_id)
            self._retrying(
                conversation_id, lambda: self._replace_once(conversation_id, batch)
            )

    def delete_by_conversation_id(self, conversation_id: str) -> None:
        """Delete a conversation's partition; an unknown id does nothing."""
        validate_conversation_id(conversation_id)
        self._made_ready()
        with self._writers.hold(conversation_id):
            self._forget(conversation_id)
            self._retrying(conversation_id, lambda: self._delete_once(conversation_id))

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
        self._made_ready()
        with self._writers.hold(conversation_id):
            self._log_states.forget(conversation_id)
            result: AppendResult = self._retrying(
                conversation_id,
                lambda: self._append_once(conversation_id, stamped, window),
            )
        return result

    # -- conversation records ------------------------------------------------

    def set_conversation_info(
        self,
        conversation_id: str,
        *,
        owner: str | Unset | None = UNSET,
        metadata: Mapping[str, Any] | Unset = UNSET,
    ) -> ConversationInfo:
        """Set a conversation's owner or metadata in one conditional write.

        A new id gets a record without messages (listed by
        :meth:`find_conversations`, not by ``find_conversation_ids``). The
        write is conditional on the version and the owner read, so a write to
        the messages or another owner set in between makes it read again;
        ``updated_at`` stays. The record is listed under its (new) owner in
        the same round trip. With a TTL, every cell of the conversation is
        written again under it, so it reads and writes the whole log.

        Raises:
            InvalidConversationIdError: a bad id, before any I/O.
            InvalidConversationInfoError: a bad owner or metadata, before any I/O.
        """
        update = check_conversation_info(conversation_id, owner, metadata)
        self._made_ready()
        with self._writers.hold(conversation_id):
            info: ConversationInfo = self._retrying(
                conversation_id, lambda: self._set_info_once(update)
            )
        return info

    def get_conversation_info(self, conversation_id: str) -> ConversationInfo | None:
        """Return a conversation's record, ``None`` when it has none.

        One round trip: the record's static columns and the count of its
        message rows, read together.
        """
        validate_conversation_id(conversation_id)
        self._made_ready()
        found = self._records_of([conversation_id])
        record, count = found[0]
        return None if record is None else record.info(conversation_id, count)

    def find_conversations(
        self,
        *,
        owner: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        updated_before: datetime | None = None,
        cursor: str | None = None,
        limit: int = 100,
    ) -> ConversationInfoPage:
        """Return up to ``limit`` records, newest ``updated_at`` first.

        With ``owner``, reads that owner's partition of the listing table
        from the cursor on, newest first, ``limit + 1`` rows at a time;
        without, the :data:`~chatledger_cassandra.records.BUCKETS` bucket
        partitions, merged. Each row's record is read (with its count) in one
        round trip per batch of rows; rows whose record moved on are skipped
        and removed (:mod:`chatledger_cassandra.records`). The metadata
        filter is compared here, on the records read in listing order: a
        filter that few records match reads on through the listing.

        Raises:
            InvalidConversationInfoError: a bad owner, metadata filter or
                ``updated_before``, before any I/O.
            InvalidPageError: a bad ``limit`` or ``cursor``, before any I/O.
        """
        query = check_find_conversations(
            owner=owner,
            metadata=metadata,
            updated_before=updated_before,
            cursor=cursor,
            limit=limit,
        )
        self._made_ready()
        if query.owner is not None:
            scopes = [owner_scope(query.owner)]
        else:
            scopes = [f"a:{n}" for n in range(BUCKETS)]
        merge = Merge(scopes, listing_bound(query), query.limit + 1)
        now = datetime.now(UTC)
        found: list[ConversationInfo] = []
        stale: list[Any] = []
        while len(found) <= query.limit:
            wanted = merge.wanted()
            if wanted:
                answers = [
                    (name, self._send(*self._scope_read(name, bound, merge)))
                    for name, bound in wanted
                ]
                for name, answer in answers:
                    rows = self._rows(answer)
                    names = ("updated_at", "conversation_id")
                    merge.add(name, [cells(r, names) for r in rows], merge.batch)
                continue
            candidates: list[Candidate] = []
            while len(candidates) < query.limit + 1 - len(found):
                candidate = merge.pop()
                if candidate is None:
                    break
                candidates.append(candidate)
            if not candidates:
                break
            ids = [candidate.conversation_id for candidate in candidates]
            records = self._records_of(ids)
            for candidate, (record, count) in zip(candidates, records, strict=True):
                verdict = judge(candidate, record, now)
                if verdict == "stale":
                    stale.append(candidate)
                elif verdict == "current" and record is not None:
                    info = record.info(candidate.conversation_id, count)
                    if query.matches(info):
                        found.append(info)
        removals = [
            self._send(
                "delete_listing",
                (row.scope, row.updated_at, row.conversation_id),
            )
            for row in stale
        ]
        for answer in removals:
            self._rows(answer)
        return query.page(found)

    def _scope_read(
        self, scope: str, bound: tuple[datetime, str] | None, merge: Merge
    ) -> tuple[str, tuple[object, ...]]:
        if bound is None:
            return "list_scope", (scope, merge.batch)
        return "list_scope_after", (scope, bound[0], bound[1], merge.batch)

    def _records_of(
        self, conversation_ids: Sequence[str]
    ) -> list[tuple[Record | None, int]]:
        """The record and message count of each conversation, read together."""
        answers = [
            (
                self._send("select_record", (cid,)),
                self._send("count_messages", (cid, LANE_EVICTED)),
            )
            for cid in conversation_ids
        ]
        found: list[tuple[Record | None, int]] = []
        for cid, (record_answer, count_answer) in zip(
            conversation_ids, answers, strict=True
        ):
            rows = self._rows(record_answer)
            counted = self._rows(count_answer)
            record = record_of(cells(rows[0], RECORD_COLUMNS) if rows else None)
            count = int(cells(counted[0], ("count",))[0]) if counted else 0
            if record is not None:
                self._know(cid, record.owner, record.updated_at)
            found.append((record, count))
        return found

    def _set_info_once(self, update: ConversationInfoUpdate) -> ConversationInfo | None:
        """One attempt of ``set_conversation_info``; ``None`` to read again."""
        cid = update.conversation_id
        rewrites: list[Write] = []
        partition = None
        if self.ttl:
            partition = self._send("select_partition", (cid,), self._page_size)
        ((record, count),) = self._records_of([cid])
        if partition is not None:
            rows = self._rows(partition)
            rewrites, version, count = _rewrites(cid, rows, self.ttl)
            if record is not None and version != record.version:
                return None  # a write landed between the reads: read again
        self._fault_points.reach("after_lock")
        ttl = self.ttl
        now = from_millis(millis(datetime.now(UTC)))
        owner = update.owner_after(None if record is None else record.owner)
        if update.metadata_json is not UNSET:
            text: str | None = update.metadata_json
        else:
            text = None if record is None else record.metadata
        if text == "{}":
            text = None
        if record is None:
            condition = Write(
                "new_record",
                (
                    *(ttl, first_sequence_number(), True, now, now),
                    *(_or_unset(owner), _or_unset(text), cid),
                ),
                "condition",
            )
            made = ConversationInfo(cid, now, now, 0, owner, json.loads(text or "{}"))
        else:
            condition = Write(
                "set_record",
                (
                    ttl,
                    record.version,
                    record.emptied,
                    record.updated_at,
                    record.created_at,
                    owner,
                    text,
                    cid,
                    record.version,
                    record.owner,
                ),
                "condition",
            )
            made = replace(record, owner=owner, metadata=text).info(cid, count)
        plan = Plan(condition, rewrites)
        if not self._commit(cid, plan, scopes_of(cid, owner), made.updated_at):
            return None
        return made

    # -- the log -------------------------------------------------------------

    def append_to_log(
        self,
        conversation_id: str,
        messages: Sequence[Message],
        window: Window | None = None,
    ) -> AppendResult:
        """Append to the log in one conditional batch (``SupportsLog``).

        Nothing is evicted: the messages go after the last one, less the ids
        the conversation holds or held (its id index, and before the first
        log append its rows and record of evicted ids) and the system
        messages equal to the current ones (rule 1). Given a window with a
        counter, each message's size under it is stored beside it.

        One round trip when the repository knows the conversation's state
        from its last append or view of it and nobody wrote since: the batch
        is sent on that state, and its condition checks it. Otherwise the
        state (version, current system messages, the slots of the ids) is
        read first, in one round trip of reads sent together, then the batch
        is sent: two. With a TTL, every cell of the conversation is rewritten
        under it, so such an append reads and writes the whole log.

        Under ``Retention.last(n)``, an append whose numbers make a trim due
        (:meth:`~chatledger.retention.Retention.trim_due`, about one in
        ``slack`` messages) then trims the log in a second conditional batch
        (:mod:`chatledger_cassandra.log_trims`), given ``window`` to keep
        what its view shows: one round trip of reads sent together, then the
        batch. Any other append costs what it costs unbounded. A trim that
        fails raises its error, but the append was committed before it and
        stays stored; the next trim removes what this one left.

        Raises:
            TypeError: ``window`` is neither ``None`` nor a ``Window``.
            MessageTooLargeError: before any I/O, if the new messages cannot
                fit in one write (``max_write_bytes``); before writing, if the
                whole batch cannot (with a TTL it rewrites the log).
            ContentionError: other writers kept changing the conversation.
        """
        validate_conversation_id(conversation_id)
        batch = validate_messages(messages)
        if window is not None:
            checked_window(window)
        if not batch:
            return AppendResult()
        stamped = stamp_messages(batch)
        check_write(
            plan_log_append(conversation_id, _NEW_LOG, stamped, None, self.ttl, 0).plan,
            self._max_write_bytes,
            conversation_id,
        )
        self._made_ready()
        with self._writers.hold(conversation_id):
            self._snapshots.forget(conversation_id)
            planned: LogPlan = self._retrying(
                conversation_id,
                lambda: self._log_append_once(conversation_id, stamped, window),
            )
            appended = planned.plan.result.appended
            if appended and planned.state.version is not None:
                last = planned.state.version - 1
                if self.retention.trim_due(last - len(appended) + 1, last):
                    self._trim(conversation_id, appended[-1], last, window)
        return planned.plan.result

    def find_window(self, conversation_id: str, window: Window) -> list[Message]:
        """Return the view of ``window`` on the log, oldest first.

        Reads the newest rows only, newest first in clustering order (the
        window's limit and a turn's slack, or 32 rows for tokens), with the
        current system messages read beside them: one round trip, of one
        read when the repository knows those system messages already, else
        of two sent together. Core's ``TailView`` builds the view; only a
        turn reaching further back makes it read older rows, a page per
        round trip. Sizes stored under the window's counter are used, others
        measured here.

        Raises:
            TypeError: ``window`` is not a ``Window``, before any I/O.
            ContentionError: writers kept changing the conversation between
                the reads of every attempt.
        """
        validate_conversation_id(conversation_id)
        checked_window(window)
        self._made_ready()
        for _ in range(self._max_attempts):
            view = self._view_once(conversation_id, window)
            if view is not None:
                return view
        raise ContentionError(
            conversation_id,
            self._max_attempts,
            "other writers kept changing the conversation while its view was read",
        )

    def find_messages_page(
        self,
        conversation_id: str,
        cursor: str | None = None,
        limit: int = DEFAULT_MESSAGE_PAGE_SIZE,
        newest_first: bool = True,
    ) -> MessagePage:
        """Return up to ``limit`` messages of the log after ``cursor``.

        One bounded read of each message lane (system messages, the rest)
        from the cursor on, the two sent together: one round trip, whose
        cost grows with the page, not with the log.

        Raises:
            InvalidPageError: for a bad ``limit`` or ``cursor``, before any I/O.
        """
        validate_conversation_id(conversation_id)
        after, limit = check_message_page(cursor, limit, newest_first=newest_first)
        self._made_ready()
        name = "select_before" if newest_first else "select_after"
        bound = page_bound(after, newest_first=newest_first)
        answers = [
            self._send(name, (conversation_id, lane, bound, limit + 1))
            for lane in (LANE_SYSTEM, LANE_OTHER)
        ]
        reads = [read_of(self._rows(answer), LOG_COLUMNS) for answer in answers]
        rows = page_rows(reads, newest_first=newest_first)
        return message_page(rows, limit, newest_first=newest_first)

    def _log_append_once(
        self, conversation_id: str, stamped: list[Message], window: Window | None
    ) -> LogPlan | None:
        """One attempt of a log append, what it wrote (or found written);
        ``None`` to read again and retry."""
        remembered = None if self.ttl else self._log_states.recall(conversation_id)
        if remembered is not None and remembered.suffices(stamped):
            planned = plan_log_append(
                conversation_id,
                LogKnowledge.of_state(remembered),
                stamped,
                window,
                self.ttl,
                first_sequence_number(),
            )
            if planned.plan.condition is not None:
                self._fault_points.reach("after_lock")
                return self._commit_log(conversation_id, planned)
            # Nothing to append, on a state remembered only: read what is stored.
        knowledge = self._log_knowledge(conversation_id, stamped)
        if knowledge is None:
            return None  # the reads saw different states: read again
        self._fault_points.reach("after_lock")
        planned = plan_log_append(
            conversation_id,
            knowledge,
            stamped,
            window,
            self.ttl,
            first_sequence_number(),
        )
        if planned.plan.condition is None:
            self._log_states.remember(conversation_id, planned.state)
            return planned
        return self._commit_log(conversation_id, planned)

    def _commit_log(self, conversation_id: str, planned: LogPlan) -> LogPlan | None:
        try:
            applied = self._commit(conversation_id, planned.plan)
        except BaseException:
            self._log_states.forget(conversation_id)  # outcome unknown
            raise
        if not applied:
            self._log_states.forget(conversation_id)
            return None
        self._log_states.remember(conversation_id, planned.state)
        return planned

    def _log_knowledge(
        self, conversation_id: str, stamped: list[Message]
    ) -> LogKnowledge | None:
        """Read what a log append decides on, at one version; ``None`` if the
        reads saw different states.

        The static columns, the home slots of the batch's ids and the newest
        system rows are sent together (the last so that the state remembered
        after the commit knows the current system messages, and the next
        append with one needs no read); only a system set larger than that
        read (for a batch with a system message), a conversation not indexed
        yet, or ids whose home slot another id took need a further round.
        """
        if self.ttl:
            rows = self._read("select_partition", (conversation_id,), self._page_size)
            return whole_partition(read_of(rows, LOG_COLUMNS))
        ids = [m.id for m in stamped]
        with_system = any(m.role is Role.SYSTEM for m in stamped)
        slots = SlotMap()
        wanted = slots.unread(ids)
        newest = page_bound(None, newest_first=True)
        answers = [
            self._send("select_statics", (conversation_id,)),
            self._send("select_slots", (conversation_id, LANE_IDS, wanted)),
            self._send(
                "select_before",
                (conversation_id, LANE_SYSTEM, newest, NEWEST_SYSTEM_ROWS),
            ),
        ]
        statics_read = read_of(self._rows(answers[0]), STATIC_COLUMNS)
        slot_read = read_of(self._rows(answers[1]), SLOT_COLUMNS)
        system_read = read_of(self._rows(answers[2]), LOG_COLUMNS)
        reads = [statics_read, slot_read, system_read]
        statics = statics_read.statics or Statics(None, None, False)
        if not agree(reads) or (
            statics_read.statics is None and any(r.statics for r in reads)
        ):
            return None
        if statics.indexed:
            slots.learn(wanted, {row.seq: row.msg_id for row in slot_read.rows})
        else:
            slots = SlotMap(whole=True)  # no index yet: lane 3 is empty
        if disagrees(system_read, statics):
            return None
        whole = system_read.count < NEWEST_SYSTEM_ROWS
        system = system_rows(system_read, statics, whole=whole)
        stored: tuple[str, ...] | None = None
        if statics.version is None or statics.indexed:
            stored = ()
        while True:
            more = slots.unread(ids)
            pending: list[tuple[str, Any]] = []
            if with_system and system is None:
                name, params = _system_set_read(conversation_id, statics)
                pending.append(("system", self._send(name, params, self._page_size)))
            if stored is None:
                params = (conversation_id, LANE_IDS)
                answer = self._send("select_index", params, self._page_size)
                pending.append(("stored", answer))
            if more:
                params = (conversation_id, LANE_IDS, more)
                pending.append(("slots", self._send("select_slots", params)))
            if not pending:
                break
            for kind, answer in pending:
                rows = self._rows(answer)
                if kind == "system":
                    read = read_of(rows, LOG_COLUMNS)
                    if disagrees(read, statics):
                        return None
                    system = system_rows(read, statics, whole=True)
                    continue
                read = read_of(rows, SLOT_COLUMNS if kind == "slots" else INDEX_COLUMNS)
                if read.statics is not None and read.version != statics.version:
                    return None
                if kind == "stored":
                    stored = tuple(row.msg_id for row in read.rows)
                else:
                    slots.learn(more, {row.seq: row.msg_id for row in read.rows})
        return LogKnowledge(
            statics.version,
            statics.system_batch,
            statics.indexed,
            None if system is None else tuple(system),
            slots,
            stored or (),
        )

    def _view_once(self, conversation_id: str, window: Window) -> list[Message] | None:
        """One attempt of a view; ``None`` when its reads saw different states."""
        viewed = self._tail_view_once(conversation_id, window)
        return None if viewed is None else viewed[0].messages()

    def _tail_view_once(
        self, conversation_id: str, window: Window
    ) -> tuple[TailView, int | None] | None:
        """One attempt of a view and the version it shows (``None``: no
        conversation); ``None`` when its reads saw different states."""
        sizes = view_reads(window)
        first = next(sizes)
        remembered = self._log_states.recall(conversation_id)
        newest_answer = self._send(
            "select_newest", (conversation_id, LANE_EVICTED, first)
        )
        system_answer = None
        # The system messages remembered serve only where a batch names them.
        if remembered is None or None in (remembered.system, remembered.system_batch):
            system_answer = self._send(
                "select_before",
                (
                    conversation_id,
                    LANE_SYSTEM,
                    page_bound(None, newest_first=True),
                    NEWEST_SYSTEM_ROWS,
                ),
            )
        newest = read_of(self._rows(newest_answer), LOG_COLUMNS)
        newest_system: Read | None = None
        if system_answer is not None:
            newest_system = read_of(self._rows(system_answer), LOG_COLUMNS)
        start = tail_start(newest, first, newest_system, remembered)
        if start is None:
            return None
        statics = start.statics
        if statics is None:
            return TailView(window, []), None
        system = start.system
        if system is None:
            name, params = _system_set_read(conversation_id, statics)
            read = read_of(self._read(name, params, self._page_size), LOG_COLUMNS)
            if disagrees(read, statics):
                return None
            system = system_rows(read, statics, whole=True)
            assert system is not None  # a whole read holds them all
        view = TailView(window, list(log_rows(system, window)))
        others, exhausted = start.others, start.exhausted
        while not view.feed(log_rows(others, window)) and not exhausted:
            rows = next(sizes)
            params = (conversation_id, LANE_OTHER, others[-1].seq, rows)
            older = read_of(self._read("select_before", params), LOG_COLUMNS)
            if older.statics is not None and older.version != statics.version:
                return None
            others, exhausted = older.rows, older.count < rows
        self._log_states.remember(
            conversation_id,
            LogState(
                statics.version, statics.system_batch, statics.indexed, tuple(system)
            ),
        )
        return view, statics.version

    # -- removals on request -------------------------------------------------

    def remove_newest(self, conversation_id: str, count: int = 1) -> list[Message]:
        """Remove the newest ``count`` messages in one conditional batch.

        See ``SupportsLogRemoval`` and, for what makes it atomic,
        :mod:`chatledger_cassandra.log_removals`. Reads the newest ``count``
        rows and one more of each message lane, sent together, and, when it
        takes a current system message, as much more of lane 0 as rule 1
        needs; on a conversation whose ids are indexed, the slots of the ids
        it takes (a read, usually one); then the batch: three round trips,
        whatever the log's length. With a TTL it reads and writes the whole
        conversation instead, as a log append does.

        Raises:
            InvalidPageError: ``count`` is not an int from 1 to
                :data:`chatledger.validation.MAX_PAGE_SIZE`, before any I/O.
            ContentionError: other writers kept changing the conversation.
            WriteTimeout: the batch's outcome is unknown (a CAS timeout): it
                is not sent again, since a second removal would take the
                messages after these.
        """
        validate_conversation_id(conversation_id)
        validate_removal_count(count)
        return self._removal(conversation_id, count, ())

    def remove_messages(
        self, conversation_id: str, message_ids: Sequence[str]
    ) -> list[Message]:
        """Remove the messages of ``message_ids`` in one conditional batch.

        As :meth:`remove_newest` does (oldest first), for the ids the log
        holds; ids it does not hold (never stored, removed or evicted) are
        ignored. The rows hold no index from an id to its number, so the
        ids are looked for in the numbers, ids and roles of each message
        lane, newest first, a page per round trip, until every id is found:
        as far back as the oldest one named, the whole log for an id it does
        not hold. Then the payloads of the rows it takes are read.

        Raises:
            InvalidMessageError: ``message_ids`` is not a list of non-empty
                str, before any I/O.
            ContentionError: other writers kept changing the conversation.
            WriteTimeout: the batch's outcome is unknown (a CAS timeout).
        """
        validate_conversation_id(conversation_id)
        ids = list(dict.fromkeys(validate_message_ids(message_ids)))
        if not ids:
            return []
        return self._removal(conversation_id, None, ids)

    def _removal(
        self, conversation_id: str, count: int | None, message_ids: Sequence[str]
    ) -> list[Message]:
        """Run a removal under the conversation's lock, tried again as every
        write when another writer got there first."""
        self._made_ready()
        with self._writers.hold(conversation_id):
            self._snapshots.forget(conversation_id)
            removed: list[Message] = self._retrying(
                conversation_id,
                lambda: self._remove_once(conversation_id, count, message_ids),
                idempotent=False,
            )
        return removed

    def _remove_once(
        self, conversation_id: str, count: int | None, message_ids: Sequence[str]
    ) -> list[Message] | None:
        """One attempt of a removal: the messages it took; ``None`` to read
        again (the reads saw different versions, or the batch lost)."""
        if self.ttl:
            found = self._partition_removal(conversation_id, count, message_ids)
        elif count is not None:
            found = self._newest_removal(conversation_id, count)
        else:
            found = self._named_removal(conversation_id, message_ids)
        if found is None:
            return None
        statics = found.statics
        if statics is None or not found.removed:
            return []
        version = statics.version
        assert version is not None
        lane = found.lane
        taken = {row.seq for row in found.removed}
        while True:
            change = system_after(statics, lane.rows, lane.exhausted, taken)
            if change is not None:
                break
            params = lane.params(conversation_id)
            read = read_of(self._read("select_before", params), LOG_COLUMNS)
            if read.statics is not None and read.version != version:
                return None
            lane.add(read)
        freed: list[int] = []
        vacated: list[int] = []
        if statics.indexed:
            slots = self._vacated_slots(
                conversation_id,
                [row.msg_id for row in found.removed],
                version,
                found.index,
            )
            if slots is None:
                return None
            freed, vacated = slots
        self._fault_points.reach("after_lock")
        plan = plan_removal(
            conversation_id,
            version,
            found.removed,
            change,
            kept=found.kept,
            empty=found.empty,
            freed=freed,
            vacated=vacated,
            ttl=self.ttl,
            indexed=statics.indexed,
            system_batch=statics.system_batch,
            rewrite=found.rewrite,
            index=found.index,
        )
        try:
            applied = self._commit(conversation_id, plan)
        except BaseException:
            self._log_states.forget(conversation_id)  # outcome unknown
            raise
        if not applied:
            self._log_states.forget(conversation_id)
            return None
        self._log_states.remember(
            conversation_id,
            LogState(
                version + 1,
                change.system_batch,
                statics.indexed,
                change.rows,
            ),
        )
        return removed_messages(found.removed)

    def _newest_removal(self, conversation_id: str, count: int) -> RemovalReads | None:
        """Read what ``remove_newest`` takes; ``None`` if the reads disagree.

        The newest ``count`` rows and one more of lane 1, and of lane 0 as
        many more as a view reads, sent together: the newest ``count`` of
        both are taken, and a row of either that stays is seen.
        """
        lane = NewestScan(LANE_SYSTEM, first=count + NEWEST_SYSTEM_ROWS)
        top = page_bound(None, newest_first=True)
        answers = [
            self._send("select_before", (conversation_id, LANE_OTHER, top, count + 1)),
            self._send("select_before", lane.params(conversation_id)),
        ]
        others = read_of(self._rows(answers[0]), LOG_COLUMNS)
        system = read_of(self._rows(answers[1]), LOG_COLUMNS)
        if not agree([others, system]):
            return None
        lane.add(system)
        statics = others.statics or system.statics
        if statics is None:
            return RemovalReads.nothing()
        rows = [*others.rows, *system.rows]
        removed = newest(rows, count)
        taken = {row.seq for row in removed}
        left = [row for row in rows if row.seq not in taken]
        kept = [max(left, key=lambda r: r.seq)] if left else []
        return RemovalReads(statics, removed, lane, kept, empty=not left)

    def _named_removal(
        self, conversation_id: str, message_ids: Sequence[str]
    ) -> RemovalReads | None:
        """Read what ``remove_messages`` takes; ``None`` if the reads disagree.

        Lane 1 is read newest first without payloads, lane 0 with them (it
        holds the system messages rule 1 may need), a page of each per round
        trip, until every id is found and a row that stays is seen, or the
        lanes end; then the payloads of the rows of lane 1 taken.
        """
        wanted = set(message_ids)
        others = NewestScan(LANE_OTHER)
        lane = NewestScan(LANE_SYSTEM, first=NEWEST_SYSTEM_ROWS)
        version: int | None = None
        statics: Statics | None = None
        while True:
            rows = [*others.rows, *lane.rows]
            found = [row for row in rows if row.msg_id in wanted]
            stays = any(row.msg_id not in wanted for row in rows)
            if (len(found) == len(wanted) and stays) or (
                others.exhausted and lane.exhausted
            ):
                break
            scans = [scan for scan in (others, lane) if not scan.exhausted]
            answers = [
                self._send(
                    "select_before" if scan is lane else "select_ids_before",
                    scan.params(conversation_id),
                )
                for scan in scans
            ]
            for scan, answer in zip(scans, answers, strict=True):
                got = self._rows(answer)
                read = (
                    read_of(got, LOG_COLUMNS)
                    if scan is lane
                    else ids_read(got, LANE_OTHER)
                )
                if read.statics is not None:
                    if version is not None and read.version != version:
                        return None
                    version, statics = read.version, read.statics
                scan.add(read)
        if statics is None or not found:
            return RemovalReads.nothing()
        numbers = [row.seq for row in found if row.lane == LANE_OTHER]
        payloads: dict[int, StoredRow] = {}
        chunks = [
            numbers[i : i + _SLOTS_PER_READ]
            for i in range(0, len(numbers), _SLOTS_PER_READ)
        ]
        answers = [
            self._send("select_rows", (conversation_id, LANE_OTHER, chunk))
            for chunk in chunks
        ]
        for answer in answers:
            read = read_of(self._rows(answer), LOG_COLUMNS)
            if read.statics is not None and read.version != version:
                return None
            payloads.update((row.seq, row) for row in read.rows)
        if len(payloads) != len(numbers):
            return None  # a row went between the reads
        removed = [payloads.get(row.seq, row) for row in found]
        left = [row for row in rows if row.msg_id not in wanted]
        kept = [max(left, key=lambda r: r.seq)] if left else []
        return RemovalReads(statics, removed, lane, kept, empty=not left)

    def _partition_removal(
        self, conversation_id: str, count: int | None, message_ids: Sequence[str]
    ) -> RemovalReads | None:
        """Read what a removal under a TTL takes, and everything it writes
        again: the whole partition, as a log append under a TTL reads it."""
        read = read_of(
            self._read("select_partition", (conversation_id,), self._page_size),
            LOG_COLUMNS,
        )
        statics = read.statics
        if statics is None:
            return RemovalReads.nothing()
        rows = [r for r in read.rows if r.lane in (LANE_SYSTEM, LANE_OTHER)]
        wanted = set(message_ids)
        removed = (
            newest(rows, count)
            if count is not None
            else [r for r in rows if r.msg_id in wanted]
        )
        taken = {row.seq for row in removed}
        left = sorted((r for r in rows if r.seq not in taken), key=lambda r: r.seq)
        lane = NewestScan(LANE_SYSTEM, exhausted=True)
        lane.rows = sorted(
            (r for r in rows if r.lane == LANE_SYSTEM), key=lambda r: -r.seq
        )
        # The oldest row left of each lane: a trim since deletes it first.
        oldest = {r.lane: r for r in reversed(left)}
        index = {r.seq: r.msg_id for r in read.rows if r.lane == LANE_IDS}
        return RemovalReads(
            statics,
            removed,
            lane,
            list(oldest.values()),
            empty=not left,
            rewrite=tuple(left),
            index=index,
        )

    def _vacated_slots(
        self,
        conversation_id: str,
        message_ids: Sequence[str],
        version: int,
        index: Mapping[int, str] | None,
    ) -> tuple[list[int], list[int]] | None:
        """The slots of the id index whose rows go with ``message_ids``, and
        those left holding no id (:mod:`chatledger_cassandra.log_removals`);
        read unless ``index`` holds the whole index; ``None`` when a read saw
        another version."""
        if index is not None:
            slots = SlotMap(whole=True)
            slots.learn(index, index)
            _, freed = slots.freed(message_ids)
        else:
            slots = SlotMap()
            found = self._freed_slots(conversation_id, message_ids, version, slots)
            if found is None:
                return None
            freed = found
        held = slots.held_at(message_ids).values()
        return freed, sorted(set(held) - set(freed))

    # -- the trim of a bounded log -------------------------------------------

    def _trim(
        self, conversation_id: str, anchor: Message, last: int, window: Window | None
    ) -> None:
        """Trim the log after the append whose last message, ``anchor``, is
        numbered ``last`` made a trim due; tried again, as every write, when
        another writer got there first."""
        self._retrying(
            conversation_id,
            lambda: self._trim_once(conversation_id, anchor, last, window),
        )

    def _trim_once(
        self, conversation_id: str, anchor: Message, last: int, window: Window | None
    ) -> list[str] | None:
        """One attempt of a trim: the ids it removed; ``None`` to read again.

        The first reads go together, with the view of ``window`` when there
        is one: the append's last row (the version, ``system_batch``, the
        time left to live, and that the conversation still holds the row, so
        a trim never reaches a conversation replaced since), the record's
        newest row, and lanes 1 and 0 from their start: about ``slack``
        rows below ``first_kept`` and a turn's slack past it, where the
        first user message from ``first_kept`` on usually is. Further pages
        are read only while what they decide on lies further on (lane 1 then
        from ``first_kept``); the record's oldest rows and the id index only
        when the record trims.
        """
        cid = conversation_id
        retention = self.retention
        first_kept = retention.first_kept(last)
        below = LaneScan(LANE_OTHER, first=retention.slack + TURN_SLACK)
        superseded = LaneScan(LANE_SYSTEM)
        scans = (below, superseded)
        lane = LANE_SYSTEM if anchor.role is Role.SYSTEM else LANE_OTHER
        newest = page_bound(None, newest_first=True)
        answers = [
            self._send("select_anchor", (cid, lane, last)),
            self._send("select_before", (cid, LANE_EVICTED, newest, 1)),
        ]
        for scan in scans:
            answers.append(self._send("select_ids_after", scan.params(cid)))
        viewed = None if window is None else self._tail_view_once(cid, window)
        found = anchor_of(self._rows(answers[0]))
        record_read = read_of(self._rows(answers[1]), LOG_COLUMNS)
        reads = [record_read]
        for scan, answer in zip(scans, answers[2:], strict=True):
            reads.append(ids_read(self._rows(answer), scan.lane))
            scan.add(reads[-1])
        if found is None or found.msg_id != anchor.id:
            return []  # replaced or deleted since, or a later trim went past it
        statics, version = found.statics, found.version
        if any(r.statics is not None and r.version != version for r in reads) or (
            window is not None and (viewed is None or viewed[1] != version)
        ):
            return None
        if found.ttl is not None and found.ttl < 1:
            return []  # the whole conversation expires within the second
        self._fault_points.reach("after_lock")
        user_from = first_user(below.rows, first_kept)
        if user_from is None and not below.exhausted:
            after = max(first_kept - 1, below.rows[-1].seq)
            users = LaneScan(LANE_OTHER, after=after)
            if not self._scan(
                cid, users, version, lambda: first_user(users.rows, first_kept) is None
            ):
                return None
            user_from = first_user(users.rows, first_kept)
        shown_from = None if viewed is None else viewed[0].shown_from()
        cutoff = retention.cutoff(last, user_from=user_from, shown_from=shown_from)
        batch = statics.system_batch
        if not self._scan(
            cid, below, version, lambda: not below.reaches(cutoff)
        ) or not self._scan(
            cid,
            superseded,
            version,
            lambda: batch is not None and not superseded.reaches(min(cutoff, batch)),
        ):
            return None
        rows = [*below.rows, *superseded.rows]
        gone = trimmed(rows, cutoff, batch)
        record = {row.msg_id: row.seq for row in record_read.rows}
        floor = record_floor(
            max(record.values(), default=None), [(r.seq, r.msg_id) for r in gone]
        )
        leaving = [r.msg_id for r in gone if floor is not None and r.seq <= floor]
        if floor is not None:
            oldest = LaneScan(LANE_EVICTED, first=EVICTED_IDS_TRIM_STEP)
            if not self._scan(
                cid, oldest, version, lambda: not oldest.reaches(floor + 1)
            ):
                return None
            dropped = [row for row in oldest.rows if row.seq <= floor]
            record.update((row.msg_id, row.seq) for row in dropped)
            leaving += [row.msg_id for row in dropped]
        freed: list[int] = []
        if statics.indexed and leaving:
            slots = self._freed_slots(cid, leaving, version)
            if slots is None:
                return None
            freed = slots
        ttl = found.ttl or 0
        batches = index_batches(freed)
        plan = plan_log_trim(cid, version, ttl, cutoff, batch, rows, record, batches[0])
        if plan.condition is None:
            return []
        if not self._commit(cid, plan):
            return None
        for more in batches[1:]:
            if not self._commit(cid, plan_index_release(cid, version, ttl, more)):
                break  # another writer came in: these rows stay, holding their ids
        return plan.result.evicted_ids

    def _scan(
        self,
        conversation_id: str,
        scan: LaneScan,
        version: int | None,
        more: Callable[[], bool],
    ) -> bool:
        """Read further pages of ``scan`` while ``more()`` and the lane goes
        on; False when one saw another version than ``version``."""
        while not scan.exhausted and more():
            params = scan.params(conversation_id)
            read = ids_read(self._read("select_ids_after", params), scan.lane)
            if read.statics is not None and read.version != version:
                return False
            scan.add(read)
        return True

    def _freed_slots(
        self,
        conversation_id: str,
        leaving: Sequence[str],
        version: int | None,
        slots: SlotMap | None = None,
    ) -> list[int] | None:
        """The slots of the id index whose rows go with the ids ``leaving``
        (:meth:`~chatledger_cassandra.id_index.SlotMap.freed`), learned into
        ``slots`` if given; ``None`` when a read saw another version than
        ``version``."""
        slots = SlotMap() if slots is None else slots
        while True:
            wanted, freed = slots.freed(leaving)
            if not wanted:
                return freed
            chunks = [
                wanted[i : i + _SLOTS_PER_READ]
                for i in range(0, len(wanted), _SLOTS_PER_READ)
            ]
            answers = [
                self._send("select_slots", (conversation_id, LANE_IDS, chunk))
                for chunk in chunks
            ]
            for chunk, answer in zip(chunks, answers, strict=True):
                read = read_of(self._rows(answer), SLOT_COLUMNS)
                if read.statics is not None and read.version != version:
                    return None
                slots.learn(chunk, {row.seq: row.msg_id for row in read.rows})

    # -- one attempt of a write ----------------------------------------------

    def _replace_once(self, conversation_id: str, batch: list[Message]) -> bool | None:
        read = read_of(self._read("select_statics", (conversation_id,)), STATIC_COLUMNS)
        statics = read.statics or Statics(None, None, False)
        self._fault_points.reach("after_lock")
        plan = plan_replace(
            conversation_id,
            statics.version,
            batch,
            self.ttl,
            first_sequence_number(),
            system_batch=statics.system_batch,
            indexed=statics.indexed,
        )
        if plan.condition is None:
            return True
        return True if self._commit(conversation_id, plan) else None

    def _delete_once(self, conversation_id: str) -> bool:
        self._fault_points.reach("after_lock")
        # Not applied when there was nothing to delete.
        self._commit(conversation_id, plan_delete(conversation_id))
        return True

    def _append_once(
        self, conversation_id: str, stamped: list[Message], window: Window
    ) -> AppendResult | None:
        snapshot = self._recall(conversation_id, window)
        if snapshot is None:
            snapshot = self._read_snapshot(conversation_id, window)
            if snapshot is None:
                return None  # a write landed between two reads: read again
        self._fault_points.reach("after_lock")
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

    def _retrying(
        self,
        conversation_id: str,
        attempt_once: Callable[[], Any],
        *,
        idempotent: bool = True,
    ) -> Any:
        """Run (and await) ``attempt_once`` until it returns non-None.

        A lost condition, or a CAS whose outcome a timeout left unknown, means
        reading again after a jittered pause; the message ids make a second
        application of the same append a no-op. A write that is not
        ``idempotent`` (a removal, which would take the next messages) raises
        the timeout instead.
        """
        last_error: Exception | None = None
        for attempt in range(self._max_attempts):
            try:
                outcome = attempt_once()
            except (WriteTimeout, ReadTimeout) as exc:
                if not idempotent or not is_retryable(exc):
                    raise
                last_error = exc
                outcome = None
            if outcome is not None:
                return outcome
            time.sleep(backoff(attempt))
        if last_error is not None:
            raise last_error
        raise ContentionError(
            conversation_id,
            self._max_attempts,
            "other writers kept changing the conversation",
        )

    # -- the parts of a write ------------------------------------------------

    def _forget(self, conversation_id: str) -> None:
        """Forget what was remembered of a conversation about to be replaced."""
        self._snapshots.forget(conversation_id)
        self._log_states.forget(conversation_id)

    def _check_new(self, conversation_id: str, batch: Sequence[Message]) -> None:
        """Refuse, before any I/O, messages whose inserts alone cannot fit."""
        if batch:
            inserts = plan_replace(conversation_id, None, batch, self.ttl)
            check_write(inserts, self._max_write_bytes, conversation_id)

    def _read_snapshot(self, conversation_id: str, window: Window) -> Snapshot | None:
        """Read what an append decides on; ``None`` if a write came in between.

        A plain read at the repository's consistency, not a serial one: the
        version check of the commit is what makes the write linearizable, and
        a read that missed a newer write only loses that check and is read
        again. A serial read would add a Paxos round to every attempt.
        """
        full = bool(self.ttl)
        snapshot = self._snapshot(conversation_id, full=full)
        need = payloads_needed(snapshot, window, self.ttl)
        if need == "all" and not full:
            return self._snapshot(conversation_id, full=True)
        if need == "system":
            return self._with_system_payloads(conversation_id, snapshot)
        return snapshot

    def _snapshot(self, conversation_id: str, *, full: bool) -> Snapshot:
        statement = "select_full" if full else "select_index"
        rows = self._read(statement, (conversation_id, LANE_IDS))
        return to_snapshot(rows, FULL_COLUMNS if full else INDEX_COLUMNS)

    def _recall(self, conversation_id: str, window: Window) -> Snapshot | None:
        """The remembered snapshot, if still current and enough for ``window``."""
        if self.ttl or not self._snapshots.knows(conversation_id):
            return None
        rows = self._read("select_version", (conversation_id,))
        version = cells(rows[0], ("next_seq",))[0] if rows else None
        snapshot = self._snapshots.recall(conversation_id, version)
        if snapshot is None or payloads_needed(snapshot, window, 0) == "all":
            return None
        return snapshot

    def _with_system_payloads(
        self, conversation_id: str, snapshot: Snapshot
    ) -> Snapshot | None:
        rows = self._read("select_lane", (conversation_id, LANE_SYSTEM))
        lane = to_snapshot(rows, FULL_COLUMNS)
        expected = {(r.seq, r.msg_id) for r in snapshot.rows if r.lane == LANE_SYSTEM}
        if (
            lane.version != snapshot.version
            or {(r.seq, r.msg_id) for r in lane.rows} != expected
        ):
            return None  # a write landed between the two reads: start over
        others = [r for r in snapshot.rows if r.lane != LANE_SYSTEM]
        return replace(snapshot, rows=lane.rows + others)

    def _commit(
        self,
        conversation_id: str,
        plan: Plan,
        scopes: Sequence[str] = (),
        moment: datetime | None = None,
    ) -> bool:
        """Send ``plan`` as one conditional statement or batch; True if applied.

        The fault points of its phases are reached before it is sent: the
        batch is one request, so nothing of it lands before the commit.

        A write to the messages (a ``start`` or ``advance`` condition) moves
        the record's ``updated_at`` to now in its condition, which then also
        holds only while the record's owner is the one the repository knows
        (:meth:`_recorded`). The record's listing rows (``scopes`` at
        ``moment``, or those of such a write) are sent just before the batch
        and waited for after it: the same round trip. They are sent whether
        the batch applies or not, since a row the listing finds without its
        record is skipped, where a record without its row would be missed.

        Raises:
            MessageTooLargeError: before sending, if the batch may not fit.
        """
        assert plan.condition is not None
        check_write(plan, self._max_write_bytes, conversation_id)
        owner: str | None = None
        if plan.condition.statement in ("start", "advance"):
            plan, owner, moment = self._recorded(conversation_id, plan)
            scopes = scopes_of(conversation_id, owner)
        elif moment is not None and scopes:
            owner = next((s[2:] for s in scopes if s.startswith("o:")), None)
        phase: str | None = None
        for write in plan.writes:
            if phase is not None and write.phase != phase:
                self._reach_phase(phase)
            phase = write.phase
        if phase is not None:
            self._reach_phase(phase)
        self._fault_points.reach("before_commit")
        assert plan.condition is not None
        names = {plan.condition.statement, *(write.statement for write in plan.writes)}
        for name in names - self._prepared.keys():
            self._prepare(name)
        # A cancellation asked for while the write was planned lands here,
        # before the batch is sent: then nothing is written.
        statement = commit_statement(
            plan, self._prepared.__getitem__, self._consistency, self._serial
        )
        listed = [
            self._send("insert_listing", (scope, moment, conversation_id, self.ttl))
            for scope in scopes
        ]
        try:
            rows = list(self._session.execute(statement))
            for answer in listed:
                self._rows(answer)
        except BaseException:
            self._forget_record(conversation_id)  # outcome unknown
            raise
        applied = bool(rows) and bool(cells(rows[0], ("[applied]",))[0])
        if applied:
            if moment is not None:
                self._know(conversation_id, owner, moment)
            self._fault_points.reach("after_commit")
        elif not self._learn_record(conversation_id, rows):
            self._forget_record(conversation_id)
        return applied

    def _recorded(
        self, conversation_id: str, plan: Plan
    ) -> tuple[Plan, str | None, datetime]:
        """``plan``, a write to the messages, with a condition that moves the
        record's ``updated_at`` too; the owner it holds for and that time.

        The time is now, to the millisecond, or the ``updated_at`` the
        repository last knew if its clock is behind that (it never moves
        back in one process). A new conversation's record starts with it as
        ``created_at``. An existing one's condition names the owner known
        from the repository's last write or read of the conversation, else
        none, which a conversation nobody gave an owner has: a wrong one fails
        the batch, and the next attempt reads the record before its batch.
        With a TTL, the record's other cells are read and written again under
        it (the condition then names the metadata read too).
        """
        condition = plan.condition
        assert condition is not None
        now = from_millis(millis(datetime.now(UTC)))
        known = self._known.get(conversation_id)
        if condition.statement == "start":
            ttl, new, emptied, cid = condition.params
            write = Write(
                "start_record", (ttl, new, emptied, now, now, cid), "condition"
            )
            return Plan(write, plan.writes, plan.result), None, now
        ttl, new, emptied, cid, version = condition.params
        record: Record | None = None
        if self.ttl or conversation_id in self._unsure:
            ((record, _),) = self._records_of([conversation_id])
            self._unsure.discard(conversation_id)
            known = self._known.get(conversation_id)
        owner = None if known is None else known[0]
        moment = now if known is None else max(now, known[1])
        if self.ttl:
            created = now if record is None else record.created_at
            text = None if record is None else record.metadata
            params: tuple[object, ...] = (ttl, new, emptied, moment, created)
            params += (_or_unset(owner), _or_unset(text), cid, version, owner, text)
            write = Write("refresh_record", params, "condition")
        else:
            params = (ttl, new, emptied, moment, cid, version, owner)
            write = Write("advance_record", params, "condition")
        return Plan(write, plan.writes, plan.result), owner, moment

    def _learn_record(self, conversation_id: str, rows: Sequence[Any]) -> bool:
        """Learn the owner and ``updated_at`` from the answer of a batch that
        lost its condition (the server returns the partition's static
        columns); False when the rows do not name them."""
        for row in rows:
            named = row if isinstance(row, Mapping) else getattr(row, "_asdict", None)
            values = named if isinstance(named, Mapping) else None
            if values is None and callable(named):
                values = named()
            if values is None or not {"next_seq", "owner"} <= values.keys():
                continue
            if values["next_seq"] is None:
                self._known.pop(conversation_id, None)
                return True
            updated = values.get("updated_at")
            moment = from_millis(0) if updated is None else aware(updated)
            self._know(conversation_id, values["owner"], moment)
            return True
        return False

    def _forget_record(self, conversation_id: str) -> None:
        """Forget a conversation's record: its next write reads it first."""
        self._known.pop(conversation_id, None)
        self._unsure.add(conversation_id)
        while len(self._unsure) > _KNOWN_RECORDS:
            self._unsure.pop()

    def _know(
        self, conversation_id: str, owner: str | None, updated_at: datetime
    ) -> None:
        """Remember a conversation's owner and ``updated_at``."""
        self._unsure.discard(conversation_id)
        self._known[conversation_id] = (owner, updated_at)
        self._known.move_to_end(conversation_id)
        while len(self._known) > _KNOWN_RECORDS:
            self._known.popitem(last=False)

    def _reach_phase(self, phase: str) -> None:
        point = _PHASE_POINT.get(phase)
        if point is not None:
            self._fault_points.reach(point)

    # -- the I/O -------------------------------------------------------------

    def _read(
        self, name: str, params: tuple[object, ...], fetch_size: int | None = None
    ) -> list[Any]:
        """Every row the prepared read ``name`` returns; paged by ``fetch_size``
        rows, or one unpaged request when it is ``None``."""
        return self._rows(self._send(name, params, fetch_size))

    def _send(
        self, name: str, params: tuple[object, ...], fetch_size: int | None = None
    ) -> Any:
        """Send the prepared read ``name`` now; :meth:`_rows` collects its answer.

        Reads sent one after the other before any answer is awaited travel
        together: they cost one round trip between them.
        """
        prepared = self._prepared.get(name)
        if prepared is None:
            prepared = self._prepare(name)
        bound = prepared.bind(params)
        bound.fetch_size = fetch_size
        # Not session.execute: it would wait for the answer before the
        # next read is sent.
        return self._session.execute_async(bound)

    def _rows(self, response: Any) -> list[Any]:
        """Every row of a read :meth:`_send` sent, page after page."""
        return list(response.result())

    def _prepare(self, name: str) -> Any:
        """Prepare the statement ``name``, once.

        On first use, not when connecting: with ``create_schema=False`` the
        table may not exist yet, and the server refuses to prepare a statement
        on a missing table.
        """
        with self._setup_lock:
            prepared = self._prepared.get(name)
            if prepared is None:
                session, text = self._session, self._texts[name]
                try:
                    prepared = session.prepare(text)
                except InvalidRequest as error:
                    refused = missing_keyspace(error, self.keyspace)
                    if refused is not None:
                        raise refused from error
                    if "Undefined column name" in str(error):
                        error.add_note(_OLDER_TABLE.format(self._cql.qualified))
                    raise
                prepared = configure_prepared(prepared, self._consistency, self._serial)
                self._prepared[name] = prepared
        return prepared

    def _made_ready(self) -> None:
        """Connect and make the schema asked for, once."""
        if self._ready:
            return
        with self._setup_lock:
            if not self._ready:
                self._connected()
                self._make_schema(table=self._create_schema)
                self._ready = True

    def _connected(self) -> Any:
        """The session; a repository made by ``from_url`` connects on first use.

        Once: the first calls that come together share one connection (a
        failed one leaves it to the next call).
        """
        if self._session is not None:
            return self._session
        with self._opening_lock:
            if self._session is None:
                if self._closed or self._cluster_args is None:
                    raise DriverException("Cluster is already shut down")
                self._cluster, self._session = self._open()
        return self._session

    def _open(self) -> tuple[Any, Any]:
        """Make the cluster and connect it (off the loop, for asyncio)."""
        assert self._cluster_args is not None
        return open_cluster(self._cluster_args)


def _system_set_read(
    conversation_id: str, statics: Statics
) -> tuple[str, tuple[object, ...]]:
    """The read of every current system row: lane 0 from ``system_batch`` on,
    or all of it when none is recorded."""
    if statics.system_batch is None:
        return "select_lane", (conversation_id, LANE_SYSTEM)
    return "select_from", (conversation_id, LANE_SYSTEM, statics.system_batch)


def _or_unset(value: object) -> object:
    """``value``, or the driver's unset (no cell written) for ``None``."""
    return UNSET_VALUE if value is None else value


def _rewrites(
    conversation_id: str, rows: Sequence[Any], ttl: int
) -> tuple[list[Write], int | None, int]:
    """The writes that store every row of a partition read whole
    (``select_partition``) again under ``ttl``; its version and how many
    messages it holds."""
    version: int | None = None
    writes: list[Write] = []
    count = 0
    statics: tuple[object, object] = (UNSET_VALUE, UNSET_VALUE)
    for row in rows:
        values = dict(zip(FULL_COLUMNS, cells(row, FULL_COLUMNS), strict=True))
        version = values["next_seq"]
        statics = (
            _or_unset(values["system_batch"]),
            _or_unset(values["indexed"]),
        )
        lane, seq = values["lane"], values["seq"]
        if seq is None:
            continue
        if lane in (LANE_SYSTEM, LANE_OTHER):
            count += 1
            stored = StoredRow(*(values[name] for name in FULL_COLUMNS[3:]))
            writes.append(rewrite_write(conversation_id, stored, ttl))
        else:
            params = (conversation_id, lane, seq, values["msg_id"], ttl)
            writes.append(Write("insert_evicted", params, "refresh"))
    if version is not None:
        writes.append(Write("mark", (ttl, *statics, conversation_id), "mark"))
    return writes, version, count
