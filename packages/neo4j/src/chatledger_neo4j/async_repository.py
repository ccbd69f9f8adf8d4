# sync twin: repository.py
"""``AsyncNeo4jChatMemoryRepository``: conversations in Neo4j 5 through ``neo4j``.

Example (needs a Neo4j server):
    from chatledger import AsyncMessageWindowChatMemory, Message
    from chatledger_neo4j import AsyncNeo4jChatMemoryRepository

    url = "neo4j://neo4j:secret@localhost:7687"
    repository = AsyncNeo4jChatMemoryRepository.from_url(url)
    memory = AsyncMessageWindowChatMemory(repository, max_messages=20)
    await memory.add("c1", Message.user("Hello"))
    await memory.get("c1")
    await repository.aclose()

The sync repository is written from the async one, mechanically, so both
have the same graph model, the same Cypher
(:class:`chatledger_neo4j.cypher.Statements`), the same steps between
statements (:mod:`chatledger_neo4j.steps`) and the same transactions, and read
and write the same conversations.

Every operation is one transaction; a replace is never split in two. The
window append, ``save_all`` and ``delete_by_conversation_id`` are managed
transactions (``session.execute_write``), a conversation read is
``driver.execute_query``. The log calls (``append_to_log``, ``find_window``,
``find_messages_page``) are each one statement run on its own (auto-commit):
one round trip, no BEGIN or COMMIT; the driver does not retry those, so the
repository retries them on retryable errors itself, as the driver would a
managed transaction (they are idempotent).

Each write first locks the conversation node by writing a property to it
(Neo4j runs at read committed and does not lock what a transaction only
reads), and only then reads the sequence and counters. The driver retries a
transaction function on transient errors, and may run it again after a commit
whose outcome it could not see, so the functions are idempotent: an append
skips every message id the conversation already holds or has evicted (its
record of evicted ids, the ``evicted_ids`` list on the conversation node,
bounded to the newest :data:`chatledger.adapters.EVICTED_IDS_KEPT`), and a
replace writes the same state however often it runs.

Under ``retention=Retention.last(n)`` (:mod:`chatledger.retention`), a log
append whose numbers make a trim due trims the conversation in a managed
transaction of its own once the append's statement has committed: it locks
the conversation, finds the first user message from ``first_kept`` on and
the view of the append's window, has core compute the cutoff, and one
statement (``Statements.trim``) deletes the messages below it but the
current system set, adds their ids to the record of evicted ids and keeps
the counters right. Other appends cost what they cost unbounded.

Removals on request (``remove_newest``, ``remove_messages``:
:class:`chatledger.AsyncSupportsLogRemoval`) are each one managed write
transaction of one statement (``Statements.remove_newest``,
``remove_named``): it locks the conversation as an append does, so a removal
and an append or another removal of the conversation take turns, deletes the
messages taken and returns them; the counters lose them, ``next_seq`` stays,
and the record of evicted ids does not learn their ids (appended again, a
removed message is stored again). Rule 1 follows at once: the current system
set is read from the newest system message left and its ``batch``.

Conversation records (:class:`chatledger.AsyncSupportsConversationInfo`) are
properties of the conversation node: ``owner``, ``metadata`` (its compact
JSON text; absent for ``{}``), ``created_at`` and ``updated_at`` (epoch
milliseconds, the writing transaction's time on the server's clock, so every
process orders by one clock). ``updated_at`` is moved, never back, by the
statement that already writes the messages: the log append, the window
append's write, ``save_all``'s replace and the removals; no write gains a
statement or a round trip. A retention trim (the store's own doing) and
``set_conversation_info`` leave it. The count is the node's
``message_count`` (its non-system messages) plus its system messages,
counted on the ``(conversation_id, role, seq)`` index. What each costs:

- ``set_conversation_info``: one auto-commit statement (lock, set, read
  back), one round trip;
- ``get_conversation_info``: one read of the node by its id, and one seek of
  its system messages;
- ``find_conversations``: one read transaction; a page is a range of the
  index ``(owner, updated_at, id)`` given an owner (only that owner's
  entries are read) or of ``(updated_at, id)``, newest first in the index's
  own order, stopped at ``limit + 1`` entries, and a seek of each record's
  system messages. The metadata filter is compared here, on the decoded
  JSON, with the contract's equality: the metadata is JSON text (nested
  values, ``null`` in lists and big integers are no Neo4j properties) and
  Cypher has no JSON reading without plugins, so a filter reads on in the
  listing's order, up to 1,024 entries a read, until the page is full. Keyset
  pages continue strictly below the cursor's ``(updated_at, id)``.

A node an earlier release wrote has no times: its record reads its oldest
message's ``created_at`` as ``created_at`` and its newest one's as
``updated_at`` (the epoch when it holds none), and it is not listed until it
has them: an append stores ``updated_at``, ``set_conversation_info`` stores
both, and :meth:`AsyncNeo4jChatMemoryRepository.upgrade_schema` (or the
first open that creates the listing's indexes) stores them on every such
node.

The graph model and why it is so: :mod:`chatledger_neo4j.cypher`.
"""

from __future__ import annotations

import asyncio  # async-only
import time
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Iterator,
    Mapping,
    Sequence,
)
from datetime import datetime
from typing import Any, Literal, LiteralString, Protocol, Self, TypeVar

from neo4j import (
    READ_ACCESS,
    WRITE_ACCESS,
    AsyncDriver,
    AsyncGraphDatabase,
    AsyncManagedTransaction,
    AsyncSession,
    Record,
    RoutingControl,
)
from neo4j.api import AsyncBookmarkManager
from neo4j.exceptions import ClientError, DriverError, Neo4jError

from chatledger.adapters import (
    DEFAULT_CONVERSATION_PAGE_SIZE,
    DEFAULT_MESSAGE_PAGE_SIZE,
    UNSET,
    AppendResult,
    AsyncClosingContext,
    AsyncStoredWindow,
    ContentionError,
    ConversationInfo,
    ConversationInfoPage,
    ConversationPage,
    FaultPoints,
    JsonValue,
    Message,
    MessagePage,
    Retention,
    StoredEntry,
    StoreNotFoundError,
    TailView,
    Unset,
    Window,
    check_conversation_info,
    check_find_conversations,
    check_message_page,
    checked_window,
    message_page,
    plan_append_async,
    stamp_messages,
    to_retention,
    validate_conversation_id,
    validate_message_ids,
    validate_messages,
    validate_page_request,
    validate_removal_count,
    view_reads,
)
from chatledger_neo4j.cypher import AWAIT_INDEX, INDEXES_FOUND, LABEL_USED, Statements
from chatledger_neo4j.log_steps import (
    KEY_ROUNDS,
    RETRY_TIME,
    appended_numbers,
    log_append_parameters,
    log_append_result,
    older_parameters,
    page_query,
    page_rows,
    removal_parameters,
    removed_messages,
    retry_delays,
    system_rows,
    tail_rows,
    trim_parameters,
    trim_start_parameters,
    unkeyed_keys,
    view_parameters,
    view_settled,
)
from chatledger_neo4j.steps import (
    FILL_BATCH,
    FIRST_PAGE,
    PURGE_BATCH,
    SNAPSHOT_ATTEMPTS,
    Listing,
    append_parameters,
    append_result,
    checked_payloads,
    confirm_commit,
    conversation_page,
    decoded,
    fresh_messages,
    ids_page_query,
    info_parameters,
    is_schema_race,
    kept_total,
    list_ids_query,
    listed_ids,
    measured_total,
    next_page,
    page_entries,
    page_parameters,
    probe_parameters,
    purge_done,
    record_info,
    record_parameters,
    replace_parameters,
    schema_object,
    sizes_parameters,
    snapshot_payloads,
    stored_window,
    time_fills,
)
from chatledger_neo4j.url import parse_url

if True:  # async
    from chatledger.adapters import LoopLocal, settled
    from chatledger_neo4j.loop_drivers import LoopDrivers
else:
    import threading

_T = TypeVar("_T")
_T_co = TypeVar("_T_co", covariant=True)


class _Work(Protocol[_T_co]):
    """A transaction function: the work of one managed transaction."""

    async def __call__(self, tx: AsyncManagedTransaction, /) -> _T_co: ...


#: Runs one statement and returns its one record.
_Run = Callable[[LiteralString, dict[str, Any]], Awaitable[Record]]


__all__ = ["AsyncNeo4jChatMemoryRepository"]


class AsyncNeo4jChatMemoryRepository(AsyncClosingContext):
    """Conversations as nodes in a Neo4j 5 database.

    Implements :class:`chatledger.AsyncChatMemoryRepository`,
    :class:`chatledger.AsyncSupportsWindowAppend`,
    :class:`chatledger.AsyncSupportsLog`,
    :class:`chatledger.AsyncSupportsLogRemoval`,
    :class:`chatledger.AsyncSupportsConversationInfo`,
    :class:`chatledger.AsyncSupportsSchemaUpgrade`, and counting and paging.

    Args:
        driver: A ``neo4j.AsyncDriver`` (``AsyncGraphDatabase.driver``). The
            repository does not close a driver it was given. The async
            repository's driver serves one event loop, the first to use it
            through the repository: a call from another loop raises
            ``RuntimeError``, where the driver would fail or hang. The async
            repository that :meth:`from_url` makes serves any loop.
        database: The database to use; ``None`` means the server's default.
        conversation_label: Label of conversation nodes.
        message_label: Label of message nodes.
        create_schema: Create the constraints and indexes if missing
            (idempotent, safe from several processes at once) on the first
            call, once however many calls arrive together (on the async
            repository, together on its event loop). Pass ``False`` when
            they are managed elsewhere; :meth:`create_schema` creates them at
            a time you choose.
        retention: What each conversation's log keeps:
            ``Retention.everything()`` (the default) or ``Retention.last(n)``
            (``n`` for short); see :mod:`chatledger.retention`.

    Attributes:
        fault_points: Test-only hooks called at the named steps of a write.
        retention: The :class:`~chatledger.retention.Retention` of the logs.

    Raises:
        chatledger.InvalidNameError: a label is not allowed.
        chatledger.InvalidRetentionError: ``retention`` is not a retention.
        TypeError: ``driver`` is not a ``neo4j.AsyncDriver``.
    """

    def __init__(
        self,
        driver: AsyncDriver,
        *,
        database: str | None = None,
        conversation_label: str = "Conversation",
        message_label: str = "Message",
        create_schema: bool = True,
        retention: Retention | int | None = None,
    ) -> None:
        """Validate the labels and the driver, and keep the driver; no I/O."""
        self._statements = Statements(conversation_label, message_label)
        self.retention = to_retention(retention)
        if not isinstance(driver, AsyncDriver):
            raise TypeError(
                "driver must be a neo4j.AsyncDriver (AsyncGraphDatabase.driver), "
                f"not {type(driver).__name__}"
            )
        self._database = database
        self._ready = not create_schema
        if True:  # async
            self._drivers = LoopDrivers(driver, None)
            # An asyncio.Lock belongs to the loop that first waits on it.
            self._ready_locks = LoopLocal(asyncio.Lock)
        else:
            self._driver = driver
            self._owns_driver = False
            self._ready_lock = threading.Lock()
        self.fault_points = FaultPoints()
        # How many rows a window view reads, first and then further back.
        self._view_reads: Callable[[Window], Iterator[int]] = view_reads

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        database: str | None = None,
        conversation_label: str = "Conversation",
        message_label: str = "Message",
        create_schema: bool = True,
        retention: Retention | int | None = None,
        **driver_config: Any,
    ) -> Self:
        """Open a repository on a ``neo4j://``, ``neo4j+s://`` or ``bolt://`` URL.

        Credentials come from the URL's userinfo
        (``neo4j://user:password@host:7687``) and the database from its path
        (``/chat``) unless ``database`` is given; ``retention`` from the
        URL's query (``?retention=100``) unless given. Other keyword
        arguments go to ``AsyncGraphDatabase.driver``. The repository owns
        that driver: :meth:`aclose` closes it. No I/O: the driver connects on
        the first call, which a server that is down or a wrong password fails.
        """
        settings = parse_url(url)
        statements = Statements(conversation_label, message_label)
        keep = to_retention(settings.retention if retention is None else retention)
        driver = AsyncGraphDatabase.driver(
            settings.uri, auth=settings.auth, **driver_config
        )
        try:
            repository = cls(
                driver,
                database=settings.database if database is None else database,
                conversation_label=statements.conversation_label,
                message_label=statements.message_label,
                create_schema=create_schema,
                retention=keep,
            )
        except BaseException:
            if True:  # async
                pass  # made without I/O, the driver holds no connection yet
            else:
                driver.close()  # no connection yet: nothing is sent
            raise
        if True:  # async
            # A driver serves one event loop, so each loop gets one of its
            # own, made on its first call (chatledger_neo4j.loop_drivers).
            def make() -> AsyncDriver:
                return AsyncGraphDatabase.driver(
                    settings.uri, auth=settings.auth, **driver_config
                )

            repository._drivers = LoopDrivers(driver, make)
        else:
            repository._owns_driver = True
        return repository

    def __repr__(self) -> str:
        bound = f", retention={self.retention!r}" if self.retention.bounded else ""
        return (
            f"AsyncNeo4jChatMemoryRepository(database={self._database!r}, "
            f"conversation_label={self._statements.conversation_label!r}, "
            f"message_label={self._statements.message_label!r}{bound})"
        )

    @property
    def statements(self) -> Statements:
        """The Cypher text this repository runs."""
        return self._statements

    @property
    def database(self) -> str | None:
        """The database in use (``None``: the server's default)."""
        return self._database

    @property
    def driver(self) -> AsyncDriver:
        """The driver this repository talks through.

        The async repository that :meth:`from_url` made has one per event
        loop: this is the running loop's, and outside a running loop it
        raises ``RuntimeError``.
        """
        if True:  # async
            return self._drivers.shown()
        else:
            return self._driver

    # -- lifecycle ---------------------------------------------------------

    async def aclose(self) -> None:
        """Close the driver if :meth:`from_url` made it (idempotent).

        The async repository closes every driver it made: the running
        loop's before this returns, another open loop's on that loop, on its
        next turn. A loop's driver is closed when the loop shuts down, too.
        """
        if True:  # async
            await self._drivers.aclose()
        else:
            if self._owns_driver:
                self._owns_driver = False
                self._driver.close()

    def _connection(self) -> tuple[AsyncDriver, AsyncBookmarkManager]:
        """The driver to talk through, and the bookmarks its sessions share.

        Sharing them gives read-your-writes across this repository's
        sessions, in a cluster too.
        """
        if True:  # async
            return self._drivers.current(), self._drivers.bookmarks
        else:
            return self._driver, self._driver.execute_query_bookmark_manager

    def _session(self, access: str = WRITE_ACCESS) -> AsyncSession:
        driver, bookmarks = self._connection()
        return driver.session(
            database=self._database,
            bookmark_manager=bookmarks,
            default_access_mode=access,
        )

    def _schema_lock(self) -> asyncio.Lock:
        """The lock the first calls wait on while one creates the schema."""
        if True:  # async
            return self._ready_locks.get()
        else:
            return self._ready_lock

    async def _prepared(self) -> None:
        """Create the schema if due, once however many calls race.

        The async repository's calls wait for one another on each event
        loop; loops that start at once may each create it, which is safe.
        """
        if self._ready:
            return
        async with self._schema_lock():
            if not self._ready:
                await self.create_schema()
                self._ready = True

    async def create_schema(self) -> None:
        """Create the constraints and indexes if missing, and wait until online.

        When this call creates the index of the records' ``updated_at`` (the
        store is new, or an earlier release made it), it then stores the
        record times of the conversations an earlier release wrote, as
        :meth:`upgrade_schema` does.
        """
        made = await self._make_schema()
        listing = self._statements.index_names["conversation_updated"]
        if f"index {listing}" in made:
            await self._fill_times()

    async def upgrade_schema(self) -> list[str]:
        """Create the indexes a store of an earlier release lacks; say which.

        Release 0.2 made no index on ``(conversation_id, role, seq)``, which
        the log's reads of the current system messages seek: this creates
        it, and any other constraint or index of this repository that is
        missing, and waits until they are online. Nothing stored is read or
        rewritten (a system message written before the log gets its
        ``system_key`` from the first log append that compares it), and
        the ``(conversation_id, role)`` index 0.2 made stays for its
        processes still running (:meth:`drop_schema` drops it). Safe beside
        other processes opening or upgrading the store: one of them creates
        each index, the others find it there.

        The conversation records (:meth:`find_conversations`) need two
        indexes on the conversation label, ``(owner, updated_at, id)`` and
        ``(updated_at, id)``, and their times on every node: a node an
        earlier release wrote gets ``created_at`` from its oldest message's
        ``created_at`` and ``updated_at`` from its newest one's (the epoch,
        for a node a window emptied), a batch of nodes per transaction
        after a scan of the label. Until then such a conversation is not
        listed, though its record reads the same times.

        Returns:
            One line per constraint or index created, ``[]`` when the store
            was current. Times filled are no change of the schema, and are
            not reported: two upgrades racing may each fill some nodes.

        Raises:
            StoreNotFoundError: the database holds neither a constraint or
                index of this repository's names nor a node of its
                conversation label; nothing is created.
        """
        statements = self._statements
        names = list(statements.index_names.values())
        async with self._session(READ_ACCESS) as session:
            exists = bool(
                await (await session.run(INDEXES_FOUND, names=names)).values()
            )
            if not exists:
                label = statements.conversation_label
                exists = bool(
                    await (await session.run(LABEL_USED, label=label)).values()
                )
        if not exists:
            raise StoreNotFoundError(
                "no constraint, index or conversation of the labels "
                f"{statements.conversation_label!r} and {statements.message_label!r} "
                f"in the database {self._database or '(the default)'}: there is no "
                "store to upgrade (check the labels and the database; opening it "
                "with create_schema=True creates a new one)"
            )
        done = [f"created {created}" for created in await self._make_schema()]
        await self._fill_times()
        return done

    async def _fill_times(self) -> int:
        """Store the record times of nodes an earlier release wrote; how many.

        One transaction per batch: it reads up to :data:`FILL_BATCH` nodes
        without them, with their oldest and newest messages, and stores the
        times :func:`~chatledger_neo4j.steps.record_info` reads from those,
        where a node still has none.
        """
        q = self._statements

        async def work(tx: AsyncManagedTransaction) -> tuple[int, int]:
            result = await tx.run(
                q.times_missing, {"batch": FILL_BATCH, **record_parameters()}
            )
            records = [record async for record in result]
            rows = time_fills(records)
            if rows:
                await (await tx.run(q.fill_times, rows=rows)).consume()
            return len(records), len(rows)

        filled = 0
        async with self._session() as session:
            while True:
                found, stored = await session.execute_write(work)
                filled += stored
                if found < FILL_BATCH or not stored:
                    return filled

    async def _make_schema(self) -> list[str]:
        """Create what is missing and wait until online; return what this call
        created (``index <name>``, ``constraint <name>``)."""
        made = []
        async with self._session() as session:
            for statement in self._statements.schema:
                try:
                    # A managed transaction: the driver runs it again when
                    # creators in other processes or event loops deadlock on
                    # the label's schema lock (a transient error).
                    if await session.execute_write(_schema_step, statement):
                        made.append(schema_object(statement))
                except ClientError as exc:
                    if not is_schema_race(exc):
                        raise
            # Each of this repository's indexes, not every index in the
            # database: another one dropped meanwhile would never come online.
            for name in self._statements.index_names.values():
                await (await session.run(AWAIT_INDEX, name=name)).consume()
        return made

    async def drop_schema(self) -> None:
        """Delete every node with this repository's labels and drop its schema.

        Irreversible; meant for tests and for tearing a deployment down.
        """
        async with self._session() as session:
            for statement in self._statements.purge:
                while True:
                    batch = await session.run(statement, batch=PURGE_BATCH)
                    if purge_done((await batch.single(strict=True))["deleted"]):
                        break
            for statement in self._statements.drop_schema:
                await (await session.run(statement)).consume()

    async def _write(self, work: _Work[_T]) -> _T:
        await self._prepared()
        async with self._session() as session:
            if True:  # async
                result = await _settled_write(session, work)
            else:
                result = session.execute_write(work)
            bookmarks = (await session.last_bookmarks()).raw_values
        confirm_commit(bookmarks)
        self.fault_points.reach("after_commit")
        return result

    async def _read(self, work: _Work[_T]) -> _T:
        await self._prepared()
        async with self._session() as session:
            return await session.execute_read(work)

    # -- the four operations -------------------------------------------------

    async def find_conversation_ids(self) -> list[str]:
        """Return the id of every stored conversation."""
        query, parameters = list_ids_query(self._statements)

        async def work(tx: AsyncManagedTransaction) -> list[str]:
            return listed_ids(await (await tx.run(query, parameters)).value("id"))

        return await self._read(work)

    async def count_messages(self, conversation_id: str) -> int:
        """Return how many messages a conversation holds, counted on an index."""
        cid = validate_conversation_id(conversation_id)
        query = self._statements.count_messages

        async def work(tx: AsyncManagedTransaction) -> int:
            return int((await (await tx.run(query, cid=cid)).single(strict=True))["n"])

        return await self._read(work)

    async def find_conversation_ids_page(
        self, cursor: str | None = None, limit: int = 100
    ) -> ConversationPage:
        """Return up to ``limit`` conversation ids after ``cursor``, in id order.

        One range seek on the conversation id's uniqueness index per page.
        """
        after, limit = validate_page_request(cursor, limit)
        query, parameters = ids_page_query(self._statements, after, limit)

        async def work(tx: AsyncManagedTransaction) -> list[Any]:
            return await (await tx.run(query, parameters)).value("id")

        return conversation_page(await self._read(work), limit)

    async def find_by_conversation_id(self, conversation_id: str) -> list[Message]:
        """Return the messages of one conversation, oldest first.

        The list is the conversation as one committed write left it, never a
        mix of two: see :meth:`_snapshot`.
        """
        cid = validate_conversation_id(conversation_id)
        await self._prepared()
        payloads = await self._snapshot(cid)
        if payloads is None:
            payloads = await self._locked_read(cid)
        return decoded(payloads)

    async def _snapshot(self, cid: str) -> list[str] | None:
        """The payloads as of one commit, or ``None`` if writes kept interleaving.

        One statement reads the version, the messages and the version again
        (see :func:`chatledger_neo4j.steps.snapshot_payloads`), in one round
        trip and its commit.
        """
        driver, bookmarks = self._connection()
        for _ in range(SNAPSHOT_ATTEMPTS):
            result = await driver.execute_query(
                self._statements.read_snapshot,
                {"cid": cid},
                routing_=RoutingControl.READ,
                database_=self._database,
                bookmark_manager_=bookmarks,
            )
            found = snapshot_payloads(result.records[0])
            if found is not None:
                return found
        return None

    async def _locked_read(self, cid: str) -> list[str]:
        """Read the payloads holding the conversation's write lock."""
        q = self._statements

        async def work(tx: AsyncManagedTransaction) -> list[str]:
            lock = await (await tx.run(q.lock_existing, cid=cid)).single(strict=True)
            if not lock["found"]:
                return []
            payloads = await (await tx.run(q.read_all, cid=cid)).value("payload")
            return checked_payloads(payloads, cid)

        async with self._session() as session:
            return await session.execute_write(work)

    async def save_all(self, conversation_id: str, messages: Sequence[Message]) -> None:
        """Replace one conversation in one transaction; ``[]`` removes it."""
        cid = validate_conversation_id(conversation_id)
        batch = stamp_messages(validate_messages(messages))
        if not batch:
            await self._delete(cid)
            return
        q = self._statements
        parameters = replace_parameters(cid, batch)

        async def work(tx: AsyncManagedTransaction) -> None:
            await (await tx.run(q.lock, cid=cid)).consume()
            self.fault_points.reach("after_lock")
            # Deletes, upserts and counters travel as one statement.
            await (await tx.run(q.replace, parameters)).consume()
            self.fault_points.reach("after_delete")
            self.fault_points.reach("after_insert")
            self.fault_points.reach("before_commit")

        await self._write(work)

    async def delete_by_conversation_id(self, conversation_id: str) -> None:
        """Remove one conversation, if it exists, in one transaction."""
        await self._delete(validate_conversation_id(conversation_id))

    async def _delete(self, cid: str) -> None:
        q = self._statements

        async def work(tx: AsyncManagedTransaction) -> None:
            lock = await (await tx.run(q.lock_existing, cid=cid)).single(strict=True)
            self.fault_points.reach("after_lock")
            if lock["found"]:
                await (await tx.run(q.delete_messages, cid=cid)).consume()
                await (await tx.run(q.delete_conversation, cid=cid)).consume()
                self.fault_points.reach("after_delete")
            self.fault_points.reach("before_commit")

        await self._write(work)

    # -- conversation records ----------------------------------------------------

    async def set_conversation_info(
        self,
        conversation_id: str,
        *,
        owner: str | Literal[Unset.UNSET] | None = UNSET,
        metadata: Mapping[str, Any] | Literal[Unset.UNSET] = UNSET,
    ) -> ConversationInfo:
        """Set the owner or the metadata in one statement; return the record.

        See :class:`chatledger.AsyncSupportsConversationInfo`. One
        auto-commit statement locks the conversation node (making it, as a
        record without messages, for a new id), sets what was given and
        reads the record back: one round trip. ``updated_at`` stays. On a
        node an earlier release wrote, the times read from its messages are
        stored by a second statement.

        Raises:
            InvalidConversationIdError: the id is not valid, before any I/O.
            InvalidConversationInfoError: a bad owner or metadata, before any
                I/O.
        """
        update = check_conversation_info(conversation_id, owner, metadata)
        await self._prepared()
        q = self._statements
        record = await self._write_alone(q.set_info, info_parameters(update))
        info, fill = record_info(record)
        if fill is not None:
            await self._write_alone(q.fill_times, {"rows": [fill]})
        return info

    async def get_conversation_info(
        self, conversation_id: str
    ) -> ConversationInfo | None:
        """Return the record of one conversation, or ``None``; one read.

        The node's properties, and its system messages counted on the
        ``(conversation_id, role, seq)`` index.
        """
        cid = validate_conversation_id(conversation_id)
        query = self._statements.get_info

        async def work(tx: AsyncManagedTransaction) -> Record | None:
            parameters = {"cid": cid, **record_parameters()}
            return await (await tx.run(query, parameters)).single()

        record = await self._read(work)
        return None if record is None else record_info(record)[0]

    async def find_conversations(
        self,
        *,
        owner: str | None = None,
        metadata: Mapping[str, JsonValue] | None = None,
        updated_before: datetime | None = None,
        cursor: str | None = None,
        limit: int = DEFAULT_CONVERSATION_PAGE_SIZE,
    ) -> ConversationInfoPage:
        """Return up to ``limit`` records, newest ``updated_at`` first.

        One read transaction. Each read is a range of the ``(owner,
        updated_at, id)`` index (given an owner) or of ``(updated_at, id)``,
        read newest first below the cursor's record and stopped by ``LIMIT``
        at ``limit + 1``; without a metadata filter one read is the page. The
        metadata filter is compared here, on the decoded JSON (Cypher cannot
        read the JSON text): a filter few records match reads on, up to
        1,024 rows a read (:class:`chatledger_neo4j.steps.Listing`).

        Raises:
            InvalidConversationInfoError: a bad ``owner``, ``metadata`` filter
                or ``updated_before``, before any I/O.
            InvalidPageError: a bad ``limit`` or ``cursor``, before any I/O.
        """
        query = check_find_conversations(
            owner=owner,
            metadata=metadata,
            updated_before=updated_before,
            cursor=cursor,
            limit=limit,
        )

        async def work(tx: AsyncManagedTransaction) -> ConversationInfoPage:
            listing = Listing(self._statements, query)
            while not listing.done:
                statement, parameters = listing.read()
                result = await tx.run(statement, parameters)
                listing.feed([record async for record in result])
            return listing.page()

        return await self._read(work)

    # -- the atomic window append ----------------------------------------------

    async def append_to_window(
        self, conversation_id: str, messages: Sequence[Message], window: Window
    ) -> AppendResult:
        """Append and evict in one locked transaction (``AsyncSupportsWindowAppend``).

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

        async def work(tx: AsyncManagedTransaction) -> AppendResult:
            state = await (await tx.run(q.probe, probe)).single(strict=True)
            self.fault_points.reach("after_lock")
            fresh = fresh_messages(batch, state)
            if not fresh:
                return AppendResult()
            total = kept_total(state, window)
            if total is None:
                sizes = await tx.run(q.read_sizes, sizes_parameters(cid, window))
                total = measured_total([row async for row in sizes], window)
            stored = stored_window(
                AsyncStoredWindow,
                state,
                window,
                total,
                lambda expected: self._oldest(tx, cid, window, state),
            )
            plan = await plan_append_async(stored, fresh, window)
            await (
                await tx.run(q.append, append_parameters(cid, plan, state, window))
            ).consume()
            self.fault_points.reach("after_insert")
            self.fault_points.reach("after_evict")
            self.fault_points.reach("before_commit")
            return append_result(plan)

        return await self._write(work)

    async def _oldest(
        self, tx: AsyncManagedTransaction, cid: str, window: Window, state: Record
    ) -> AsyncIterator[StoredEntry]:
        """The stored non-system messages, oldest first, fetched page by page.

        The first page came with the lock; later ones are read only if the
        eviction gets that far.
        """
        page: list[Any] = state["page"]
        limit = FIRST_PAGE
        while True:
            # No ``yield from`` in an async generator; the sync twin keeps the loop.
            for entry in page_entries(page, window):  # noqa: UP028, RUF100
                yield entry
            following = next_page(page, limit)
            if following is None:
                return
            after, limit = following
            result = await tx.run(
                self._statements.read_page, page_parameters(cid, after, limit, window)
            )
            page = await result.value("entry")

    # -- the log ---------------------------------------------------------------

    async def append_to_log(
        self,
        conversation_id: str,
        messages: Sequence[Message],
        window: Window | None = None,
    ) -> AppendResult:
        """Append to the conversation's log in one statement (``AsyncSupportsLog``).

        One auto-commit statement, one round trip: it locks the conversation,
        leaves out the ids it holds or held and the system messages rule 1
        leaves out, and stores the rest with the next sequence numbers. Given
        a window with a counter, each message's size under it is stored too.
        Nothing stored is evicted: the result's ``evicted_ids`` is empty.

        Under ``Retention.last(n)``, an append whose numbers make a trim due
        (:meth:`~chatledger.retention.Retention.trim_due`, about one in
        ``slack`` messages) then trims the log in a transaction of its own,
        given ``window`` to keep what its view shows: three statements more
        and the commit. Any other append costs what it costs unbounded. A
        trim that fails raises its error, but the append was committed
        before it and stays stored; the next trim removes what this one left.

        Raises:
            TypeError: ``window`` is neither ``None`` nor a ``Window``, before
                any I/O.
            chatledger.ContentionError: writers of an older release kept
                storing system messages without their key meanwhile.
        """
        cid = validate_conversation_id(conversation_id)
        batch = validate_messages(messages)
        if window is not None:
            checked_window(window)
        if not batch:
            return AppendResult()
        # Stamped once, so a retry writes the same created_at.
        batch = stamp_messages(batch)
        keys: dict[str, str] = {}
        await self._prepared()
        for _ in range(KEY_ROUNDS):
            record = await self._write_alone(
                self._statements.log_append,
                log_append_parameters(cid, batch, window, keys),
            )
            if not record["unkeyed"]:
                result = log_append_result(record, batch)
                numbers = appended_numbers(record)
                if numbers is not None and self.retention.trim_due(*numbers):
                    await self._trim(cid, record["appended"][-1], numbers[1], window)
                return result
            keys.update(unkeyed_keys(record["unkeyed"]))
        raise ContentionError(
            cid, KEY_ROUNDS, "system messages without a system_key kept coming"
        )

    async def find_window(self, conversation_id: str, window: Window) -> list[Message]:
        """Return the view of ``window`` on the log, oldest first.

        One statement reads the current system set and the newest rows (the
        window's limit plus a few, or 32 for tokens) by sequence number, and
        core's ``TailView`` builds the view from them; only a turn reaching
        further back (rule 3) reads older rows, a statement per read. Sizes
        stored under the window's counter are used, others measured here.
        Each read shows the state one write committed; when writes keep
        interleaving, the view is read holding the conversation's lock.

        Raises:
            TypeError: ``window`` is not a ``Window``, before any I/O.
        """
        cid = validate_conversation_id(conversation_id)
        checked_window(window)
        await self._prepared()
        for _ in range(SNAPSHOT_ATTEMPTS):
            view = await self._view(cid, window, self._read_alone)
            if view is not None:
                return view
        found = await self._locked(cid, lambda run: self._view(cid, window, run))
        return [] if found is None else found

    async def _view(self, cid: str, window: Window, run: _Run) -> list[Message] | None:
        """The view, read through ``run``; ``None`` if a write interleaved."""
        view = await self._tail_view(cid, window, run)
        return None if view is None else view.messages()

    async def _tail_view(self, cid: str, window: Window, run: _Run) -> TailView | None:
        """The view as core's ``TailView`` built it from the rows read through
        ``run``; ``None`` if a write interleaved."""
        q = self._statements
        reads = self._view_reads(window)
        rows = next(reads)
        record = await run(q.view, view_parameters(cid, window, rows))
        if not view_settled(record):
            return None
        view = TailView(window, system_rows(record))
        tail = tail_rows(record)
        while not view.feed(tail) and len(tail) == rows:
            rows = next(reads)
            record = await run(
                q.view_older, older_parameters(cid, window, tail[-1], rows)
            )
            if not view_settled(record):
                return None
            tail = tail_rows(record)
        return view

    async def _trim(
        self, cid: str, anchor: str, last: int, window: Window | None
    ) -> list[str]:
        """Trim the log after the append whose last message, ``anchor``, is
        numbered ``last`` made a trim due; return the ids removed.

        One managed transaction: ``trim_start`` locks the conversation and
        answers whether ``anchor`` is still stored at ``last`` (a save_all or
        a delete since leaves nothing of this append to trim after) and the
        first user message from ``first_kept`` on; the view of ``window`` is
        read holding the lock; core's :meth:`Retention.cutoff` takes both,
        and ``trim`` removes what lies below.
        """
        q = self._statements
        retention = self.retention
        start = trim_start_parameters(cid, anchor, last, retention.first_kept(last))

        async def work(tx: AsyncManagedTransaction) -> list[str]:
            found = await (await tx.run(q.trim_start, start)).single(strict=True)
            self.fault_points.reach("after_lock")
            if not found["anchored"]:
                return []
            shown_from = None
            if window is not None:

                async def run(
                    query: LiteralString, parameters: dict[str, Any]
                ) -> Record:
                    return await (await tx.run(query, parameters)).single(strict=True)

                view = await self._tail_view(cid, window, run)
                if view is None:
                    raise RuntimeError(f"a message of {cid!r} has no payload")
                shown_from = view.shown_from()
            user_from = found["user_from"]
            cutoff = retention.cutoff(
                last,
                user_from=int(user_from[0]) if user_from else None,
                shown_from=shown_from,
            )
            trimmed = await (await tx.run(q.trim, trim_parameters(cid, cutoff))).single(
                strict=True
            )
            self.fault_points.reach("after_evict")
            self.fault_points.reach("before_commit")
            return list(trimmed["trimmed"])

        return await self._write(work)

    # -- removals on request -----------------------------------------------------

    async def remove_newest(
        self, conversation_id: str, count: int = 1
    ) -> list[Message]:
        """Remove the newest ``count`` messages in one transaction; return them.

        See :class:`chatledger.AsyncSupportsLogRemoval`. One managed write
        transaction of one statement: it locks the conversation node (as an
        append does), seeks the newest ``count`` messages on the sequence
        index and deletes them, and keeps the counters right. It reads the
        messages it removes and one more, whatever the log's length.

        Raises:
            InvalidPageError: ``count`` is not an int from 1 to
                :data:`chatledger.validation.MAX_PAGE_SIZE`, before any I/O.
        """
        cid = validate_conversation_id(conversation_id)
        validate_removal_count(count)
        return await self._remove(
            self._statements.remove_newest, removal_parameters(cid, count=count)
        )

    async def remove_messages(
        self, conversation_id: str, message_ids: Sequence[str]
    ) -> list[Message]:
        """Remove the messages of ``message_ids`` in one transaction; return them.

        As :meth:`remove_newest` does (oldest first), for the ids the log
        holds, found on the ``(conversation_id, id)`` index; ids it does not
        hold (never stored, removed or evicted) are ignored.

        Raises:
            InvalidMessageError: ``message_ids`` is not a list of non-empty
                str, before any I/O.
        """
        cid = validate_conversation_id(conversation_id)
        ids = list(dict.fromkeys(validate_message_ids(message_ids)))
        if not ids:
            return []
        return await self._remove(
            self._statements.remove_named, removal_parameters(cid, message_ids=ids)
        )

    async def _remove(
        self, query: LiteralString, parameters: dict[str, Any]
    ) -> list[Message]:
        """Run one removal statement as a managed write; the messages it took."""

        async def work(tx: AsyncManagedTransaction) -> list[Message]:
            record = await (await tx.run(query, parameters)).single()
            self.fault_points.reach("before_commit")
            return removed_messages(record)

        return await self._write(work)

    async def find_messages_page(
        self,
        conversation_id: str,
        cursor: str | None = None,
        limit: int = DEFAULT_MESSAGE_PAGE_SIZE,
        newest_first: bool = True,
    ) -> MessagePage:
        """Return up to ``limit`` messages of the log after ``cursor``, in one read.

        One statement seeks the page's range of sequence numbers (one row
        more, to tell whether another page follows): it reads as much as the
        page, however long the log.

        Raises:
            InvalidPageError: for a bad ``limit`` or ``cursor``, before any I/O.
        """
        cid = validate_conversation_id(conversation_id)
        after, limit = check_message_page(cursor, limit, newest_first=newest_first)
        query, parameters = page_query(
            self._statements, cid, after, limit, newest_first
        )

        async def read(run: _Run) -> list[tuple[int, Message]] | None:
            return page_rows(await run(query, parameters))

        await self._prepared()
        for _ in range(SNAPSHOT_ATTEMPTS):
            rows = await read(self._read_alone)
            if rows is not None:
                return message_page(rows, limit, newest_first=newest_first)
        rows = await self._locked(cid, read)
        return message_page(rows or [], limit, newest_first=newest_first)

    async def _locked(
        self, cid: str, read: Callable[[_Run], Awaitable[_T | None]]
    ) -> _T | None:
        """``read`` holding the conversation's write lock, so no write interleaves.

        ``None`` when there is no conversation.

        Raises:
            RuntimeError: a message node has no payload (not written by
                chatledger).
        """
        q = self._statements

        async def work(tx: AsyncManagedTransaction) -> _T | None:
            lock = await (await tx.run(q.lock_existing, cid=cid)).single(strict=True)
            if not lock["found"]:
                return None

            async def run(query: LiteralString, parameters: dict[str, Any]) -> Record:
                return await (await tx.run(query, parameters)).single(strict=True)

            found = await read(run)
            if found is None:
                raise RuntimeError(f"a message of {cid!r} has no payload")
            return found

        async with self._session() as session:
            return await session.execute_write(work)

    async def _read_alone(
        self, query: LiteralString, parameters: dict[str, Any]
    ) -> Record:
        """Run one read statement as its own transaction: one round trip."""

        async def attempt() -> Record:
            async with self._session(READ_ACCESS) as session:
                return await (await session.run(query, parameters)).single(strict=True)

        return await self._retried(attempt)

    async def _write_alone(
        self, query: LiteralString, parameters: dict[str, Any]
    ) -> Record:
        """Run one write statement as its own transaction: one round trip.

        The server commits as the statement's result ends (auto-commit), so
        there is no BEGIN or COMMIT to send. The statement is idempotent, so
        it is sent again on a retryable error, even one that left its outcome
        unknown (see :meth:`_retried`).
        """

        async def attempt() -> Record:
            async with self._session() as session:
                result = await session.run(query, parameters)
                record = await result.single(strict=True)
                bookmarks = (await session.last_bookmarks()).raw_values
            confirm_commit(bookmarks)
            return record

        self.fault_points.reach("before_commit")
        if True:  # async
            # Once sent, the statement commits whatever the client does: a
            # cancellation waits for its answer (chatledger.adapters.settled).
            record = await self._retried(lambda: settled(attempt()))
        else:
            record = self._retried(attempt)
        self.fault_points.reach("after_commit")
        return record

    async def _retried(self, attempt: Callable[[], Awaitable[_T]]) -> _T:
        """Run ``attempt``, again after each retryable error, for up to 30 s.

        The driver retries managed transactions only; these statements run
        on their own (one round trip each), so this does what it would:
        deadlocks, a leader that moved, a connection lost.
        """
        delays = retry_delays()
        first_failure: float | None = None
        while True:
            try:
                return await attempt()
            except (Neo4jError, DriverError) as error:
                if not error.is_retryable():
                    raise
                now = time.monotonic()
                if first_failure is None:
                    first_failure = now
                elif now - first_failure > RETRY_TIME:
                    raise
            await asyncio.sleep(next(delays))


async def _schema_step(tx: AsyncManagedTransaction, statement: LiteralString) -> bool:
    """Run one schema statement as the whole of a transaction.

    Returns whether it created its constraint or index (``IF NOT EXISTS``
    found none there).
    """
    summary = await (await tx.run(statement)).consume()
    counters = summary.counters
    return counters.constraints_added + counters.indexes_added > 0


async def _settled_write(  # async-only
    session: AsyncSession, work: _Work[_T]
) -> _T:
    """Run ``work`` as a managed write; a cancellation waits out a sent commit.

    Cancelled before its commit, the driver drops the connection the
    transaction was using and the server rolls back what it had not
    committed; cancelled during its commit, the call waits for the answer
    (:func:`chatledger.adapters.settled`), since a commit once sent is
    carried out whatever the client does. When the cancellation returns, the
    conversation is as it was or as the write left it, never a part.
    """
    committing = False

    async def attempt(tx: AsyncManagedTransaction) -> _T:
        nonlocal committing
        committing = False
        done = await work(tx)
        committing = True  # the driver commits as soon as this returns
        return done

    return await settled(session.execute_write(attempt), committing=lambda: committing)
