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
from neo4j.exceptions import ClientError

from chatledger.adapters import (
    AppendResult,
    ClosingContext,
    ConversationPage,
    FaultPoints,
    Message,
    StoredEntry,
    StoredWindow,
    Window,
    plan_append,
    stamp_messages,
    validate_conversation_id,
    validate_messages,
    validate_page_request,
)
from chatledger_neo4j.cypher import AWAIT_INDEXES, Statements
from chatledger_neo4j.steps import (
    FIRST_PAGE,
    PURGE_BATCH,
    SNAPSHOT_ATTEMPTS,
    append_parameters,
    append_result,
    checked_payloads,
    confirm_commit,
    conversation_page,
    decoded,
    fresh_messages,
    ids_page_query,
    is_schema_race,
    kept_total,
    listed_ids,
    measured_total,
    next_page,
    page_entries,
    page_parameters,
    probe_parameters,
    purge_done,
    replace_parameters,
    sizes_parameters,
    snapshot_payloads,
    stored_window,
)
from chatledger_neo4j.url import parse_url

__all__ = ["Neo4jChatMemoryRepository"]

_T = TypeVar("_T")


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
                    if not is_schema_race(exc):
                        raise
            session.run(AWAIT_INDEXES).consume()

    def drop_schema(self) -> None:
        """Delete every node with this repository's labels and drop its schema.

        Irreversible; meant for tests and for tearing a deployment down.
        """
        with self._session() as session:
            for statement in self._statements.purge:
                while True:
                    batch = session.run(statement, batch=PURGE_BATCH)
                    if purge_done(batch.single(strict=True)["deleted"]):
                        break
            for statement in self._statements.drop_schema:
                session.run(statement).consume()

    def _write(self, work: Callable[[ManagedTransaction], _T]) -> _T:
        with self._session() as session:
            result = session.execute_write(work)
            bookmarks = session.last_bookmarks().raw_values
        confirm_commit(bookmarks)
        self.fault_points.reach("after_commit")
        return result

    def _read(self, work: Callable[[ManagedTransaction], _T]) -> _T:
        with self._session() as session:
            return session.execute_read(work)

    # -- the four operations -------------------------------------------------

    def find_conversation_ids(self) -> list[str]:
        """Return the id of every stored conversation."""
        query = self._statements.list_ids
        return self._read(lambda tx: listed_ids(tx.run(query).value("id")))

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
        query, parameters = ids_page_query(self._statements, after, limit)
        ids = self._read(lambda tx: tx.run(query, parameters).value("id"))
        return conversation_page(ids, limit)

    def find_by_conversation_id(self, conversation_id: str) -> list[Message]:
        """Return the messages of one conversation, oldest first.

        The list is the conversation as one committed write left it, never a
        mix of two: see :meth:`_snapshot`.
        """
        cid = validate_conversation_id(conversation_id)
        payloads = self._snapshot(cid)
        if payloads is None:
            payloads = self._locked_read(cid)
        return decoded(payloads)

    def _snapshot(self, cid: str) -> list[str] | None:
        """The payloads as of one commit, or ``None`` if writes kept interleaving.

        One statement reads the version, the messages and the version again
        (see :func:`chatledger_neo4j.steps.snapshot_payloads`), in one round
        trip and its commit.
        """
        for _ in range(SNAPSHOT_ATTEMPTS):
            found = snapshot_payloads(
                self._driver.execute_query(
                    self._statements.read_snapshot,
                    {"cid": cid},
                    routing_=RoutingControl.READ,
                    database_=self._database,
                    bookmark_manager_=self._driver.execute_query_bookmark_manager,
                ).records[0]
            )
            if found is not None:
                return found
        return None

    def _locked_read(self, cid: str) -> list[str]:
        """Read the payloads holding the conversation's write lock."""
        q = self._statements

        def work(tx: ManagedTransaction) -> list[str]:
            if not tx.run(q.lock_existing, cid=cid).single(strict=True)["found"]:
                return []
            return checked_payloads(tx.run(q.read_all, cid=cid).value("payload"), cid)

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
        parameters = replace_parameters(cid, batch)

        def work(tx: ManagedTransaction) -> None:
            tx.run(q.lock, cid=cid).consume()
            self.fault_points.reach("after_lock")
            # Deletes, upserts and counters travel as one statement.
            tx.run(q.replace, parameters).consume()
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
        the new ids it already holds or has evicted, its system messages and
        its oldest non-system messages; a second writes. Further pages of old
        messages are read only when the eviction needs them.
        """
        cid = validate_conversation_id(conversation_id)
        batch = validate_messages(messages)
        if not batch:
            return AppendResult()
        # Stamped once, outside the transaction function, so a retry writes
        # the same created_at.
        batch = stamp_messages(batch)
        q = self._statements
        probe = probe_parameters(cid, batch, window)

        def work(tx: ManagedTransaction) -> AppendResult:
            state = tx.run(q.probe, probe).single(strict=True)
            self.fault_points.reach("after_lock")
            fresh = fresh_messages(batch, state)
            if not fresh:
                return AppendResult()
            total = kept_total(state, window)
            if total is None:
                sizes = tx.run(q.read_sizes, sizes_parameters(cid, window))
                total = measured_total(sizes, window)
            stored = stored_window(
                StoredWindow,
                state,
                window,
                total,
                lambda expected: self._oldest(tx, cid, window, state),
            )
            plan = plan_append(stored, fresh, window)
            tx.run(q.append, append_parameters(cid, plan, state, window)).consume()
            self.fault_points.reach("after_insert")
            self.fault_points.reach("after_evict")
            self.fault_points.reach("before_commit")
            return append_result(plan)

        return self._write(work)

    def _oldest(
        self, tx: ManagedTransaction, cid: str, window: Window, state: Record
    ) -> Iterator[StoredEntry]:
        """The stored non-system messages, oldest first, fetched page by page.

        The first page came with the lock; later ones are read only if the
        eviction gets that far.
        """
        page: list[Any] = state["page"]
        limit = FIRST_PAGE
        while True:
            yield from page_entries(page, window)
            following = next_page(page, limit)
            if following is None:
                return
            after, limit = following
            page = tx.run(
                self._statements.read_page, page_parameters(cid, after, limit, window)
            ).value("entry")
