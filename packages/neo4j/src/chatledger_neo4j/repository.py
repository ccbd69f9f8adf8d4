"""A chat memory repository on Neo4j 5, through the official ``neo4j`` driver.

Example (needs a Neo4j server):
    from chatledger import Message, MessageWindowChatMemory
    from chatledger_neo4j import Neo4jChatMemoryRepository

    repository = Neo4jChatMemoryRepository.from_url("neo4j://neo4j:secret@localhost")
    memory = MessageWindowChatMemory(repository, max_messages=20)
    memory.add("c1", Message.user("Hello"))

Every operation is one managed transaction (``session.execute_write``, or
``driver.execute_query`` for a conversation read); a replace is never split in
two. Each write first locks the conversation node by writing a property to it
(Neo4j runs at read committed and does not lock what a transaction only
reads), and only then reads the sequence and counters. The driver retries a
transaction function on transient errors, and may run it again after a commit
whose outcome it could not see, so the functions are idempotent: an append
skips every message id the conversation already holds or has evicted (its
record of evicted ids, the ``evicted_ids`` list on the conversation node,
bounded to the newest :data:`chatledger.adapters.EVICTED_IDS_KEPT`), and a
replace writes the same state however often it runs.

Why one JSON payload per message and not child nodes (metadata, tool calls,
tool responses and media as nodes of their own, as other Neo4j chat stores do):

- Neo4j properties hold only scalars and homogeneous lists of them, so nested
  metadata, ``None`` inside lists and big integers cannot be stored as
  properties without a second encoding; the core codec already is one, it is
  lossless, versioned and shared with every other backend.
- A message is read and written whole. Child nodes would turn every read into
  a fan-out of optional matches (whose cartesian products duplicate entries)
  and every write into several node and relationship creations.
- Order inside a message (tool calls, media) is list order in the payload, not
  an ``idx`` property that has to be kept right.

What the window and the queries need stays in plain properties beside the
payload: ``conversation_id``, ``id``, ``seq``, ``role`` and the stored ``size``
with the name of its measure. Messages point to their conversation by
``conversation_id`` rather than by a relationship: every read seeks a composite
index on it, and appends do not add relationships to one ever denser node.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, Self, TypeVar

from neo4j import (
    Driver,
    GraphDatabase,
    ManagedTransaction,
    Record,
    RoutingControl,
    Session,
)
from neo4j.exceptions import ClientError, IncompleteCommit

from chatledger.adapters import (
    EVICTED_IDS_KEPT,
    AppendResult,
    ClosingContext,
    ConversationPage,
    FaultPoints,
    Message,
    Role,
    StoredEntry,
    StoredWindow,
    Window,
    codec,
    plan_append,
    stamp_messages,
    validate_conversation_id,
    validate_messages,
    validate_page_request,
)
from chatledger_neo4j.cypher import Statements
from chatledger_neo4j.url import parse_url

__all__ = ["Neo4jChatMemoryRepository"]

_T = TypeVar("_T")
_SYSTEM = Role.SYSTEM.value
#: Rows of the oldest messages read by the first page of an eviction; a window
#: that overflows by a turn rarely needs more.
_FIRST_PAGE = 32
_MAX_PAGE = 1024
#: Reads of a conversation that writes keep interleaving with before the
#: read takes the conversation's write lock instead.
_SNAPSHOT_ATTEMPTS = 8
#: Nodes deleted per transaction by :meth:`Neo4jChatMemoryRepository.drop`.
_PURGE_BATCH = 5000
#: Errors a concurrent ``CREATE ... IF NOT EXISTS`` of the same schema may raise.
_SCHEMA_RACES = frozenset(
    {
        "Neo.ClientError.Schema.EquivalentSchemaRuleAlreadyExists",
        "Neo.ClientError.Schema.ConstraintAlreadyExists",
        "Neo.ClientError.Schema.IndexAlreadyExists",
    }
)


def _row(
    message: Message, seq: int, size: int | None, counter: str | None
) -> dict[str, Any]:
    return {
        "id": message.id,
        "seq": seq,
        "role": message.role.value,
        "payload": codec.to_json(message),
        "size": size,
        "size_counter": counter,
    }


class Neo4jChatMemoryRepository(ClosingContext):
    """Conversations as nodes in a Neo4j 5 database.

    Args:
        driver: A ``neo4j.Driver``. The repository does not close a driver it
            was given.
        database: The database to use; ``None`` means the server's default.
        conversation_label: Label of conversation nodes.
        message_label: Label of message nodes.
        create_schema: Create the constraints and indexes now (idempotent,
            safe from several processes at once). Pass ``False`` when they are
            managed elsewhere; :meth:`create_schema` creates them later.

    Raises:
        chatledger.InvalidNameError: a label is not allowed.
    """

    def __init__(
        self,
        driver: Driver,
        *,
        database: str | None = None,
        conversation_label: str = "Conversation",
        message_label: str = "Message",
        create_schema: bool = True,
    ) -> None:
        """Validate the labels, keep the driver and create the schema."""
        self._statements = Statements(conversation_label, message_label)
        self._driver = driver
        self._database = database
        self._owns_driver = False
        self.fault_points = FaultPoints()
        if create_schema:
            self.create_schema()

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        database: str | None = None,
        conversation_label: str = "Conversation",
        message_label: str = "Message",
        create_schema: bool = True,
        **driver_config: Any,
    ) -> Self:
        """Open a repository on a ``neo4j://``, ``neo4j+s://`` or ``bolt://`` URL.

        Credentials come from the URL's userinfo
        (``neo4j://user:password@host:7687``) and the database from its path
        (``/chat``) unless ``database`` is given. Other keyword arguments go to
        ``GraphDatabase.driver``. The repository owns that driver:
        :meth:`close` closes it.
        """
        settings = parse_url(url)
        statements = Statements(conversation_label, message_label)
        driver = GraphDatabase.driver(settings.uri, auth=settings.auth, **driver_config)
        try:
            repository = cls(
                driver,
                database=settings.database if database is None else database,
                conversation_label=statements.conversation_label,
                message_label=statements.message_label,
                create_schema=create_schema,
            )
        except BaseException:
            driver.close()
            raise
        repository._owns_driver = True
        return repository

    def __repr__(self) -> str:
        return (
            f"Neo4jChatMemoryRepository(database={self._database!r}, "
            f"conversation_label={self._statements.conversation_label!r}, "
            f"message_label={self._statements.message_label!r})"
        )

    @property
    def statements(self) -> Statements:
        """The Cypher text this repository runs."""
        return self._statements

    @property
    def database(self) -> str | None:
        """The database in use (``None``: the server's default)."""
        return self._database

    # -- lifecycle ---------------------------------------------------------

    def close(self) -> None:
        """Close the driver if this repository opened it (idempotent)."""
        if self._owns_driver:
            self._owns_driver = False
            self._driver.close()

    def _session(self) -> Session:
        # The driver's shared bookmark manager gives read-your-writes across
        # this repository's sessions, in a cluster too.
        return self._driver.session(
            database=self._database,
            bookmark_manager=self._driver.execute_query_bookmark_manager,
        )

    def create_schema(self) -> None:
        """Create the constraints and indexes if missing, and wait until online."""
        with self._session() as session:
            for statement in self._statements.schema:
                try:
                    session.run(statement).consume()
                except ClientError as exc:
                    if exc.code not in _SCHEMA_RACES:
                        raise
            session.run("CALL db.awaitIndexes(300)").consume()

    def drop_schema(self) -> None:
        """Delete every node with this repository's labels and drop its schema.

        Irreversible; meant for tests and for tearing a deployment down.
        """
        with self._session() as session:
            for statement in self._statements.purge:
                while True:
                    batch = session.run(statement, batch=_PURGE_BATCH)
                    if batch.single(strict=True)["deleted"] < _PURGE_BATCH:
                        break
            for statement in self._statements.drop_schema:
                session.run(statement).consume()

    def _write(self, work: Callable[[ManagedTransaction], _T]) -> _T:
        with self._session() as session:
            result = session.execute_write(work)
            # Every commit the server confirms carries a bookmark. A server
            # that killed the connection (dbms.killConnection) can still answer
            # the pending COMMIT with an empty SUCCESS and then close: the
            # driver reports success, yet nothing was committed.
            confirmed = bool(session.last_bookmarks().raw_values)
        if not confirmed:
            raise IncompleteCommit(
                "Neo4j answered the commit without a bookmark and closed the "
                "connection; the write may not be stored (retrying the same "
                "write is safe)"
            )
        self.fault_points.reach("after_commit")
        return result

    def _read(self, work: Callable[[ManagedTransaction], _T]) -> _T:
        with self._session() as session:
            return session.execute_read(work)

    # -- the four operations -------------------------------------------------

    def find_conversation_ids(self) -> list[str]:
        """Return the id of every stored conversation."""
        query = self._statements.list_ids

        def work(tx: ManagedTransaction) -> list[str]:
            # A conversation deleted while the label is scanned reads as null.
            return [v for v in tx.run(query).value("id") if isinstance(v, str)]

        return self._read(work)

    def count_messages(self, conversation_id: str) -> int:
        """Return how many messages a conversation holds, counted on an index."""
        cid = validate_conversation_id(conversation_id)
        query = self._statements.count_messages
        return self._read(
            lambda tx: int(tx.run(query, cid=cid).single(strict=True)["n"])
        )

    def find_conversation_ids_page(
        self, cursor: str | None = None, limit: int = 100
    ) -> ConversationPage:
        """Return up to ``limit`` conversation ids after ``cursor``, in id order.

        One range seek on the conversation id's uniqueness index per page.
        """
        after, limit = validate_page_request(cursor, limit)
        q = self._statements

        def work(tx: ManagedTransaction) -> list[str]:
            if after is None:
                found = tx.run(q.first_ids_page, limit=limit + 1)
            else:
                found = tx.run(q.ids_page_after, after=after, limit=limit + 1)
            return [str(v) for v in found.value("id")]

        ids = self._read(work)
        if len(ids) > limit:
            return ConversationPage(ids[:limit], ids[limit - 1])
        return ConversationPage(ids, None)

    def find_by_conversation_id(self, conversation_id: str) -> list[Message]:
        """Return the messages of one conversation, oldest first.

        The list is the conversation as one committed write left it, never a
        mix of two: see :meth:`_snapshot`.
        """
        cid = validate_conversation_id(conversation_id)
        payloads = self._snapshot(cid)
        if payloads is None:
            payloads = self._locked_read(cid)
        return [codec.from_json(payload) for payload in payloads]

    def _snapshot(self, cid: str) -> list[str] | None:
        """The payloads as of one commit, or ``None`` if writes kept interleaving.

        Neo4j reads at read committed, without read locks: one query can see
        a message that a concurrent append evicts as a null payload, and the
        messages that append adds further on. Every write sets a new version
        on the conversation before touching its messages, so the same version
        read before and after the messages proves no write committed between.
        One statement reads all three, in one round trip and its commit.
        """
        for _ in range(_SNAPSHOT_ATTEMPTS):
            row = self._driver.execute_query(
                self._statements.read_snapshot,
                {"cid": cid},
                routing_=RoutingControl.READ,
                database_=self._database,
                bookmark_manager_=self._driver.execute_query_bookmark_manager,
            ).records[0]
            before, payloads = row["before"], row["payloads"]
            # With no conversation node, only "no messages" is a state that
            # held at the first read; a null payload is a message deleted
            # while it was read.
            settled = before == row["after"] and (bool(before) or not payloads)
            if (
                settled
                and len(payloads) == row["messages"]
                and all(isinstance(p, str) for p in payloads)
            ):
                return list(payloads)
        return None

    def _locked_read(self, cid: str) -> list[str]:
        """Read the payloads holding the conversation's write lock."""
        q = self._statements

        def work(tx: ManagedTransaction) -> list[str]:
            if not tx.run(q.lock_existing, cid=cid).single(strict=True)["found"]:
                return []
            payloads = tx.run(q.read_all, cid=cid).value("payload")
            if not all(isinstance(p, str) for p in payloads):
                raise RuntimeError(f"a message of {cid!r} has no payload")
            return payloads

        with self._session() as session:
            return session.execute_write(work)

    def save_all(self, conversation_id: str, messages: Sequence[Message]) -> None:
        """Replace one conversation in one transaction; ``[]`` removes it."""
        cid = validate_conversation_id(conversation_id)
        batch = stamp_messages(validate_messages(messages))
        if not batch:
            self._delete(cid)
            return
        q = self._statements
        rows = [_row(m, seq, None, None) for seq, m in enumerate(batch)]
        keep = [m.id for m in batch]
        count = sum(1 for m in batch if m.role is not Role.SYSTEM)

        def work(tx: ManagedTransaction) -> None:
            tx.run(q.lock, cid=cid).consume()
            self.fault_points.reach("after_lock")
            # Deletes, upserts and counters travel as one statement.
            tx.run(
                q.replace,
                cid=cid,
                keep=keep,
                rows=rows,
                next_seq=len(rows),
                message_count=count,
                size_total=None,
                size_counter=None,
            ).consume()
            self.fault_points.reach("after_delete")
            self.fault_points.reach("after_insert")
            self.fault_points.reach("before_commit")

        self._write(work)

    def delete_by_conversation_id(self, conversation_id: str) -> None:
        """Remove one conversation, if it exists, in one transaction."""
        self._delete(validate_conversation_id(conversation_id))

    def _delete(self, cid: str) -> None:
        q = self._statements

        def work(tx: ManagedTransaction) -> None:
            found = tx.run(q.lock_existing, cid=cid).single(strict=True)["found"]
            self.fault_points.reach("after_lock")
            if found:
                tx.run(q.delete_messages, cid=cid).consume()
                tx.run(q.delete_conversation, cid=cid).consume()
                self.fault_points.reach("after_delete")
            self.fault_points.reach("before_commit")

        self._write(work)

    # -- the atomic window append ----------------------------------------------

    def append_to_window(
        self, conversation_id: str, messages: Sequence[Message], window: Window
    ) -> AppendResult:
        """Append and evict in one locked transaction (see ``SupportsWindowAppend``).

        One statement locks the conversation and reads its counters, which of
        the new ids it already holds, its system messages and its oldest
        non-system messages; a second writes. Further pages of old messages
        are read only when the eviction needs them.
        """
        cid = validate_conversation_id(conversation_id)
        batch = validate_messages(messages)
        if not batch:
            return AppendResult()
        # Stamped once, outside the transaction function, so a retry writes
        # the same created_at.
        batch = stamp_messages(batch)
        ids = [m.id for m in batch]
        q = self._statements
        counter = window.counter_id

        def work(tx: ManagedTransaction) -> AppendResult:
            state = tx.run(
                q.probe,
                cid=cid,
                ids=ids,
                system=_SYSTEM,
                counter=counter,
                limit=_FIRST_PAGE,
            ).single(strict=True)
            self.fault_points.reach("after_lock")
            # Ids still stored and ids the window already took out alike: a
            # late retry of either stores nothing.
            known = {*state["known"], *state["evicted"]}
            fresh = [m for m in batch if m.id not in known]
            if not fresh:
                return AppendResult()
            stored_system = [codec.from_json(p) for p in state["system"]]
            stored = StoredWindow(
                system_count=len(stored_system),
                system_size=sum(window.measure(m) for m in stored_system),
                count=int(state["message_count"]),
                total=self._stored_total(tx, cid, state, window),
                read_oldest=lambda expected: self._oldest(
                    tx, cid, window, state["page"]
                ),
                system=stored_system,
            )
            plan = plan_append(stored, fresh, window)
            next_seq = int(state["next_seq"])
            rows = [
                _row(m, next_seq + i, None if counter is None else size, counter)
                for i, (m, size) in enumerate(
                    zip(plan.insert, plan.insert_sizes, strict=True)
                )
            ]
            # The new messages, the evictions, the record of evicted ids and
            # the counters, at once. A window that leaves nothing keeps the
            # node, marked emptied, for the record.
            tx.run(
                q.append,
                cid=cid,
                rows=rows,
                delete_ids=plan.delete_ids,
                evicted=plan.evicted_ids,
                evicted_kept=EVICTED_IDS_KEPT,
                emptied=True if plan.empty else None,
                next_seq=next_seq + len(rows),
                message_count=plan.message_count,
                size_total=None if counter is None else plan.size_total,
                size_counter=counter,
            ).consume()
            self.fault_points.reach("after_insert")
            self.fault_points.reach("after_evict")
            self.fault_points.reach("before_commit")
            return AppendResult(plan.appended, plan.evicted_ids)

        return self._write(work)

    def _stored_total(
        self, tx: ManagedTransaction, cid: str, state: Record, window: Window
    ) -> int:
        """The size of the stored non-system messages, in the window's measure."""
        counter = window.counter_id
        if counter is None:
            return int(state["message_count"])
        if state["size_counter"] == counter and state["size_total"] is not None:
            return int(state["size_total"])
        # Another measure was kept until now: size every message once; the
        # append then stores this measure's total on the conversation.
        rows = tx.run(
            self._statements.read_sizes, cid=cid, system=_SYSTEM, counter=counter
        )
        return sum(
            _size(row["size"], row["size_counter"], row["payload"], window)
            for row in rows
        )

    def _oldest(
        self,
        tx: ManagedTransaction,
        cid: str,
        window: Window,
        first_page: list[list[Any]],
    ) -> Iterator[StoredEntry]:
        """The stored non-system messages, oldest first, fetched page by page.

        The first page came with the lock; later ones are read only if the
        eviction gets that far.
        """
        page = first_page
        limit = _FIRST_PAGE
        while True:
            for mid, _, role, size, size_counter, payload in page:
                yield StoredEntry(
                    str(mid), Role(role), _size(size, size_counter, payload, window)
                )
            if len(page) < limit:
                return
            after = int(page[-1][1])
            limit = min(limit * 2, _MAX_PAGE)
            page = tx.run(
                self._statements.read_page,
                cid=cid,
                after=after,
                system=_SYSTEM,
                counter=window.counter_id,
                limit=limit,
            ).value("entry")


def _size(size: Any, size_counter: Any, payload: Any, window: Window) -> int:
    """A stored message's size: kept beside it when measured the same way."""
    counter = window.counter_id
    if counter is None:
        return 1
    if size_counter == counter and size is not None:
        return int(size)
    return window.measure(codec.from_json(payload))
