"""Every SQL statement the repository runs, built once per repository.

Example:
    from sqlalchemy import create_engine
    from chatledger_sql.dialects import SQLiteDialect
    from chatledger_sql.schema import build_tables
    from chatledger_sql.statements import Statements

    dialect = SQLiteDialect()
    statements = Statements(build_tables(dialect, "chat_memory", None), dialect)
    with create_engine("sqlite://").connect() as connection:
        statements.tables.metadata.create_all(connection)
        connection.execute(statements.read, {"cid": "c1", "now": None}).all()

Statements are SQLAlchemy Core constructs with bound parameters, built once, so
SQLAlchemy caches their compiled form (and drivers that prepare statements,
such as psycopg, reuse their plans). Tests compile them with every SQLAlchemy
dialect to check the SQL each database gets.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import (
    CompoundSelect,
    Delete,
    Insert,
    Integer,
    Select,
    Update,
    and_,
    bindparam,
    case,
    delete,
    exists,
    func,
    insert,
    null,
    or_,
    select,
    union_all,
    update,
)

from chatledger.adapters import (
    Role,
)

if TYPE_CHECKING:
    from chatledger_sql.dialects.append_routine import AppendRoutine
    from chatledger_sql.dialects.base import SqlDialect
    from chatledger_sql.schema import Tables

__all__ = ["Statements"]

SYSTEM = Role.SYSTEM.value
USER = Role.USER.value
#: How many driver-compiled statements one repository keeps built.
_KEPT_DRIVER_STATEMENTS = 256
#: How many statements with a LIMIT one repository keeps built.
_KEPT_LIMITED_STATEMENTS = 80
#: Above every sequence number: the upper bound of a range left open.
_BEYOND_EVERY_SEQ = 2**62
#: How many shapes of the listing's query one repository keeps built.
_KEPT_LISTINGS = 64

T = TypeVar("T")


class Statements:
    """The statements of one repository (tables plus dialect).

    Bound parameters: ``cid`` (conversation id), ``now`` (the application's
    UTC clock, which also decides what has expired), ``ids`` (message or
    conversation ids, expanding), ``after`` (a sequence number), ``upto`` (the
    last sequence number to evict), ``below`` (the last sequence number the
    evicted-id record forgets) and the ``p_*`` values of the conversation
    update.
    """

    def __init__(self, tables: Tables, dialect: SqlDialect) -> None:
        """Build every statement for ``tables`` as ``dialect`` wants them."""
        m = tables.messages.c
        c = tables.conversations.c
        e = tables.evicted.c
        cid: Any = bindparam("cid")
        self.tables = tables
        message_columns = (m.message_id, m.role, m.content, m.payload, m.created_at)
        state_columns = (
            c.next_seq,
            c.system_count,
            c.other_count,
            c.weight_counter,
            c.system_weight,
            c.other_weight,
            c.expires_at,
            c.system_batch,
            c.system_last,
            c.system_as_of,
        )
        self.state_columns = state_columns
        expired = c.expires_at <= bindparam("now")
        ids: Any = bindparam("ids", expanding=True)

        #: One ordered query over the primary key: the whole conversation,
        #: nothing when its row says it has expired (an uncorrelated probe of
        #: the conversation's primary key, evaluated once).
        #: ``created_at`` comes back raw, as the dialect's ``raw_timestamp``
        #: selects it, for :func:`chatledger_sql.rows.moment`: the column
        #: type's own conversion parses SQLite's text with a regular
        #: expression, then converts again.
        self.read: Select[Any] = (
            select(
                m.message_id,
                m.role,
                m.content,
                m.payload,
                dialect.raw_timestamp(m.created_at).label("created_at"),
            )
            .where(
                m.conversation_id == cid,
                ~exists().where(c.conversation_id == cid, expired),
            )
            .order_by(m.seq)
        )
        live = or_(c.expires_at.is_(None), c.expires_at > bindparam("now"))
        live_row = live
        self.list_ids: Select[Any] = select(c.conversation_id).where(
            c.system_count + c.other_count > 0, live
        )
        #: Pages of ids in id order: the first page, and the pages after an id
        #: (Oracle reads ``> ''`` as ``> NULL``, so the first has no bound).
        self.first_ids_page: Select[Any] = self.list_ids.order_by(c.conversation_id)
        self.ids_page_after: Select[Any] = self.first_ids_page.where(
            c.conversation_id > bindparam("after_id")
        )
        #: The message count kept in the conversation row.
        self.count_messages: Select[Any] = select(c.system_count + c.other_count).where(
            c.conversation_id == cid, live
        )
        self.lock_select: Select[Any] = dialect.lock_rows(
            select(*state_columns).where(c.conversation_id == cid),
            tables.conversations,
        )
        #: The values of a new, empty conversation row (every dialect's upsert).
        self.new_conversation: dict[str, Any] = {
            "conversation_id": cid,
            "next_seq": 0,
            "version": 0,
            "system_count": 0,
            "other_count": 0,
            "weight_counter": None,
            "system_weight": 0,
            "other_weight": 0,
            "updated_at": bindparam("now"),
            "expires_at": None,
            "created_at": bindparam("now"),
        }
        #: The same, inserted alone or many at once: ``created_at`` is bound
        #: as ``created``, of the same value as ``now`` (SQLAlchemy's
        #: many-row INSERT misnumbers a repeated parameter on DuckDB).
        self.insert_conversation: Insert = insert(tables.conversations).values(
            **{**self.new_conversation, "created_at": bindparam("created")}
        )
        #: The next sequence number of each of ``ids`` that has a row.
        self.next_seqs: Select[Any] = select(c.conversation_id, c.next_seq).where(
            c.conversation_id.in_(ids)
        )
        #: Which of ``ids`` are stored or in the record of evicted ids (an
        #: id may come twice).
        self.known_ids: Any = union_all(
            select(m.message_id).where(
                m.conversation_id == cid,
                m.message_id.in_(bindparam("ids", expanding=True)),
            ),
            select(e.message_id).where(
                e.conversation_id == cid,
                e.message_id.in_(bindparam("ids", expanding=True)),
            ),
        )
        #: The stored system messages, with their sequence numbers.
        self.system_rows: Select[Any] = (
            select(m.seq, *message_columns)
            .where(m.conversation_id == cid, m.role == SYSTEM)
            .order_by(m.seq)
        )
        #: The oldest non-system rows after ``after``; the caller adds a limit.
        self.oldest: Select[Any] = (
            select(m.seq, m.message_id, m.role, m.weight)
            .where(
                m.conversation_id == cid,
                m.role != SYSTEM,
                m.seq > bindparam("after"),
            )
            .order_by(m.seq)
        )
        self.all_rows: Select[Any] = (
            select(m.seq, *message_columns)
            .where(m.conversation_id == cid)
            .order_by(m.seq)
        )
        self.set_weight: Update = (
            update(tables.messages)
            .where(m.conversation_id == cid, m.seq == bindparam("p_seq"))
            .values(weight=bindparam("p_weight"))
        )
        self.insert_messages: Insert = insert(tables.messages)
        self.delete_system: Delete = delete(tables.messages).where(
            m.conversation_id == cid, m.role == SYSTEM
        )
        self.delete_oldest: Delete = delete(tables.messages).where(
            m.conversation_id == cid,
            m.role != SYSTEM,
            m.seq <= bindparam("upto"),
        )
        self.delete_messages: Delete = delete(tables.messages).where(
            m.conversation_id == cid
        )
        self.delete_conversation: Delete = delete(tables.conversations).where(
            c.conversation_id == cid
        )
        #: A bounded log's trim (:mod:`chatledger.retention`): the first user
        #: message numbered ``after`` or later, where the log is cut; the rows
        #: numbered below ``below``, which it may remove; their removal by
        #: ``seqs``; and what they took of the conversation row's tallies.
        self.first_user_from: Select[Any] = select(func.min(m.seq)).where(
            m.conversation_id == cid, m.role == USER, m.seq >= bindparam("after")
        )
        self.trim_candidates: Select[Any] = (
            select(m.seq, m.message_id, m.role, m.weight)
            .where(m.conversation_id == cid, m.seq < bindparam("below"))
            .order_by(m.seq)
        )
        self.delete_seqs: Delete = delete(tables.messages).where(
            m.conversation_id == cid, m.seq.in_(bindparam("seqs", expanding=True))
        )
        untallied = {
            "system_count": c.system_count - bindparam("p_systems"),
            "other_count": c.other_count - bindparam("p_others"),
            "system_weight": c.system_weight - bindparam("p_system_weight"),
            "other_weight": c.other_weight - bindparam("p_other_weight"),
            "version": c.version + 1,
            "expires_at": bindparam("p_expires_at"),
        }
        #: After a removal, which is a write to the messages: it moves
        #: ``updated_at``.
        self.untally: Update = (
            update(tables.conversations)
            .where(c.conversation_id == cid)
            .values(**untallied, updated_at=bindparam("now"))
        )
        #: After a trim, which the log's retention makes, not the
        #: application: ``updated_at`` stays.
        self.untally_trimmed: Update = (
            update(tables.conversations)
            .where(c.conversation_id == cid)
            .values(**untallied)
        )
        #: A removal's rows (as the log reads them, the stored weight as
        #: size): the newest first (the caller adds a limit), or those of
        #: ``ids``.
        removal_columns = (
            m.seq,
            m.message_id,
            m.role,
            m.content,
            m.payload,
            dialect.raw_timestamp(m.created_at).label("created_at"),
            m.weight,
        )
        self.removal_newest: Select[Any] = (
            select(*removal_columns)
            .where(m.conversation_id == cid)
            .order_by(m.seq.desc())
        )
        self.removal_named: Select[Any] = select(*removal_columns).where(
            m.conversation_id == cid, m.message_id.in_(ids)
        )
        #: After a removal took a current system message: the first and last
        #: number of the system rows of the newest append that stored any
        #: left (one append stamps its messages with one ``created_at``).
        newest_system = (
            select(func.max(m.seq))
            .where(m.conversation_id == cid, m.role == SYSTEM)
            .scalar_subquery()
        )
        newest_stamp = (
            select(m.created_at)
            .where(m.conversation_id == cid, m.seq == newest_system)
            .scalar_subquery()
        )
        self.newest_system_batch: Select[Any] = select(
            func.min(m.seq), func.max(m.seq)
        ).where(
            m.conversation_id == cid, m.role == SYSTEM, m.created_at == newest_stamp
        )
        self.set_system_range: Update = (
            update(tables.conversations)
            .where(c.conversation_id == cid)
            .values(
                system_batch=bindparam("p_system_batch"),
                system_last=bindparam("p_system_last"),
                system_as_of=c.next_seq,
            )
        )
        #: Rows ``conversation_id``, ``message_id``, ``seq`` (executemany).
        self.insert_evicted: Insert = insert(tables.evicted)
        self.trim_evicted: Delete = delete(tables.evicted).where(
            e.conversation_id == cid, e.seq <= bindparam("below")
        )
        self.delete_evicted: Delete = delete(tables.evicted).where(
            e.conversation_id == cid
        )
        #: Conversations expired at ``now``; the caller adds a limit.
        self.expired_ids: Select[Any] = select(c.conversation_id).where(expired)
        #: Lock the rows of ``ids`` (in id order) to confirm they have expired.
        self.lock_expired: Select[Any] = dialect.lock_rows(
            select(c.conversation_id, c.expires_at)
            .where(c.conversation_id.in_(ids))
            .order_by(c.conversation_id),
            tables.conversations,
        )
        self.purge_messages: Delete = delete(tables.messages).where(
            m.conversation_id.in_(ids)
        )
        self.purge_conversations: Delete = delete(tables.conversations).where(
            c.conversation_id.in_(ids)
        )
        self.purge_evicted: Delete = delete(tables.evicted).where(
            e.conversation_id.in_(ids)
        )
        # A write that finds its conversation expired (as of ``now``) starts
        # a new record: no owner, no metadata, made now. These come first in
        # the SET of a write that renews the expiry: MySQL and MariaDB
        # assign from left to right, and must read the old ``expires_at``.
        expired_now = c.expires_at <= bindparam("now")
        renewed: list[tuple[Any, Any]] = [
            (c.owner, case((expired_now, null()), else_=c.owner)),
            (c.metadata, case((expired_now, null()), else_=c.metadata)),
            (
                c.created_at,
                case(
                    (expired_now, bindparam("now", type_=c.created_at.type)),
                    else_=c.created_at,
                ),
            ),
        ]
        written = (
            *renewed,
            (c.next_seq, bindparam("p_next_seq")),
            (c.version, c.version + 1),
            (c.system_count, bindparam("p_system_count")),
            (c.other_count, bindparam("p_other_count")),
            (c.weight_counter, bindparam("p_weight_counter")),
            (c.system_weight, bindparam("p_system_weight")),
            (c.other_weight, bindparam("p_other_weight")),
            (c.updated_at, bindparam("now")),
            (c.expires_at, bindparam("p_expires_at")),
        )
        self.update_conversation: Update = (
            update(tables.conversations)
            .where(c.conversation_id == cid)
            .ordered_values(*written)
        )
        # -- the log -----------------------------------------------------------
        # Rows come back as (seq, message_id, role, content, payload,
        # created_at raw, size): size is the stored weight when it was
        # measured by the ``counter`` given, else NULL (measure it).
        live = ~exists().where(c.conversation_id == cid, expired)
        stored_counter = (
            select(c.weight_counter).where(c.conversation_id == cid).scalar_subquery()
        )
        log_columns = (
            m.seq,
            m.message_id,
            m.role,
            m.content,
            m.payload,
            dialect.raw_timestamp(m.created_at).label("created_at"),
            case((stored_counter == bindparam("counter"), m.weight)).label("size"),
        )
        first_system = (
            select(func.coalesce(c.system_batch, 0))
            .where(c.conversation_id == cid)
            .scalar_subquery()
        )
        # Known: the last current system message; else every system message
        # from the first on is current (a window store keeps only those).
        last_system = (
            select(
                case(
                    (c.system_as_of == c.next_seq, func.coalesce(c.system_last, -1)),
                    else_=_BEYOND_EVERY_SEQ,
                )
            )
            .where(c.conversation_id == cid)
            .scalar_subquery()
        )
        #: The system messages a view shows (rule 1): a range of the primary
        #: key that the conversation row bounds, never a scan of the log.
        self.current_system: Select[Any] = (
            select(*log_columns)
            .where(
                m.conversation_id == cid,
                m.seq >= first_system,
                m.seq <= last_system,
                m.role == SYSTEM,
                live,
            )
            .order_by(m.seq)
        )
        #: The newest non-system rows, newest first; the caller adds a limit.
        self.log_tail: Select[Any] = (
            select(*log_columns)
            .where(m.conversation_id == cid, m.role != SYSTEM, live)
            .order_by(m.seq.desc())
        )
        #: The non-system rows from ``before`` down, newest first: a view
        #: reading further back continues from the row ``before``, and checks
        #: that it is still stored. The caller adds a limit.
        self.log_older: Select[Any] = (
            select(*log_columns)
            .where(
                m.conversation_id == cid,
                m.seq <= bindparam("before"),
                m.role != SYSTEM,
                live,
            )
            .order_by(m.seq.desc())
        )
        page_columns: tuple[Any, ...] = log_columns[:-1]
        newest: Select[Any] = select(*page_columns).where(
            m.conversation_id == cid, live
        )
        #: Message pages, each direction from the start and after a cursor;
        #: the caller adds a limit.
        self.page_newest: Select[Any] = newest.order_by(m.seq.desc())
        self.page_newest_after: Select[Any] = self.page_newest.where(
            m.seq < bindparam("after")
        )
        self.page_oldest: Select[Any] = newest.order_by(m.seq)
        self.page_oldest_after: Select[Any] = self.page_oldest.where(
            m.seq > bindparam("after")
        )
        #: The conversation row after a log append or a ``save_all``.
        self.update_log: Update = (
            update(tables.conversations)
            .where(c.conversation_id == cid)
            .ordered_values(
                *renewed,
                (c.next_seq, bindparam("p_next_seq")),
                (c.version, c.version + 1),
                (c.system_count, bindparam("p_system_count")),
                (c.other_count, bindparam("p_other_count")),
                (c.weight_counter, bindparam("p_weight_counter")),
                (c.system_weight, bindparam("p_system_weight")),
                (c.other_weight, bindparam("p_other_weight")),
                (c.updated_at, bindparam("now")),
                (c.expires_at, bindparam("p_expires_at")),
                (c.system_batch, bindparam("p_system_batch")),
                (c.system_last, bindparam("p_system_last")),
                (c.system_as_of, bindparam("p_next_seq")),
            )
        )
        #: Views by first read size (see ``view``).
        self.views: dict[int, CompoundSelect[Any]] = {}

        # -- the conversation's record -------------------------------------------
        info_columns = (
            c.conversation_id,
            c.created_at,
            c.updated_at,
            (c.system_count + c.other_count).label("message_count"),
            c.owner,
            c.metadata,
        )
        self._info_columns: tuple[Any, ...] = info_columns
        self._live = live_row
        #: The record of an unexpired conversation.
        self.get_info: Select[Any] = select(*info_columns).where(
            c.conversation_id == cid, live_row
        )
        #: The record as a write left it, read in the write's transaction.
        self.read_info: Select[Any] = select(*info_columns).where(
            c.conversation_id == cid
        )
        #: Set the owner and the metadata, each unless told to keep it
        #: (``p_keep_owner``, ``p_keep_metadata``: 1 keeps), and renew the
        #: expiry; ``updated_at`` stays.
        self.set_info: Update = (
            update(tables.conversations)
            .where(c.conversation_id == cid)
            .values(
                owner=case(
                    (bindparam("p_keep_owner", type_=Integer()) == 1, c.owner),
                    else_=bindparam("p_owner", type_=c.owner.type),
                ),
                metadata=case(
                    (bindparam("p_keep_metadata", type_=Integer()) == 1, c.metadata),
                    else_=bindparam("p_metadata", type_=c.metadata.type),
                ),
                expires_at=bindparam("p_expires_at"),
            )
        )
        #: Created_at of the rows an earlier release made, from the oldest of
        #: their messages (none later than the row's last write), else the
        #: last write.
        m_first = (
            select(func.min(m.created_at))
            .where(
                m.conversation_id == c.conversation_id,
                m.created_at <= c.updated_at,
            )
            .scalar_subquery()
        )
        self.fill_created_at: Update = (
            update(tables.conversations)
            .where(c.created_at.is_(None))
            .values(created_at=func.coalesce(m_first, c.updated_at))
        )
        #: The listing's queries by shape (see ``listing``).
        self.listings: dict[Any, Select[Any]] = {}

        #: The dialect's single-statement lock-or-create, if it has one.
        self.upsert_conversation: Any = dialect.upsert_conversation(self)
        #: The dialect's lock that also returns the probes, if it has one.
        self.lock_probing: Any = dialect.probing_lock(self)
        #: The dialect's read of a locked row with the probes, if it has one.
        self.read_probing: Any = dialect.probing_read(self)
        #: The dialect's single-statement append, if it has one.
        self.append_all: Any = dialect.append_statement(self)
        #: The dialect's one-statement log append of one message, if it has
        #: one (``log_append`` gives it for any batch size).
        self.append_log: Any = dialect.log_append_statement(self, 1)
        #: The dialect's advance of the row for a log append of one message in
        #: the write transaction, if it has one (``log_advance`` gives it for
        #: any batch size).
        self.advance_log: Any = dialect.log_advance_statement(self, 1)
        self._dialect = dialect
        #: The dialect's server-side append routine, if it has one.
        self.append_routine: AppendRoutine | None = dialect.append_routine(self)
        #: The dialect's single-statement delete of messages and evicted ids.
        self.forget: Any = dialect.forget_statement(self)
        #: Statements a dialect compiled for a driver it talks to directly.
        self.driver_sql: dict[Any, Any] = {}
        #: Statements with a LIMIT, by statement and row count (see ``limited``).
        self.limits: dict[tuple[int, int], Select[Any]] = {}

    def driver_statement(self, key: Any, build: Callable[[], T]) -> T:
        """The statement a dialect compiled for its driver under ``key``.

        Built by ``build`` on first use. Keys vary with the batch size, of
        which a few are common, so a bounded number are kept.
        """
        found: T | None = self.driver_sql.get(key)
        if found is None:
            found = build()
            if len(self.driver_sql) < _KEPT_DRIVER_STATEMENTS:
                self.driver_sql[key] = found
        return found

    def limited(self, statement: Select[Any], rows: int) -> Select[Any]:
        """``statement.limit(rows)``, kept built for the row counts in use.

        A new ``.limit()`` is a new cache key for SQLAlchemy, compiled again
        on every call; a window uses a few chunk and page sizes, kept here.
        """
        key = (id(statement), rows)
        found = self.limits.get(key)
        if found is None:
            found = statement.limit(rows)
            if len(self.limits) < _KEPT_LIMITED_STATEMENTS:
                self.limits[key] = found
        return found

    def log_append(self, ids: int) -> Any:
        """The dialect's one-statement log append of ``ids`` messages, or ``None``."""
        if self.append_log is None:
            return None
        return self.driver_statement(
            ("log append", ids),
            lambda: self._dialect.log_append_statement(self, ids),
        )

    def log_advance(self, ids: int) -> Any:
        """The dialect's advance of the row for ``ids`` messages, or ``None``."""
        if self.advance_log is None:
            return None
        return self.driver_statement(
            ("log advance", ids),
            lambda: self._dialect.log_advance_statement(self, ids),
        )

    def listing(
        self,
        *,
        owner: bool,
        before: bool,
        after: bool,
        metadata: tuple[str, ...] = (),
        native: bool = True,
    ) -> Select[Any]:
        """The records of unexpired conversations, newest ``updated_at`` first,
        ties by id descending; the caller adds a limit.

        Args:
            owner: Only the owner ``:owner``'s (the owner index's range).
            before: Only those with ``updated_at < :before``.
            after: Only those strictly after ``(:after_at, :after_id)`` in
                the listing's order: ``updated_at <= :after_at`` bounds the
                index's range, and the ties at ``:after_at`` are filtered.
            metadata: The shapes (``SqlDialect.metadata_shape``) of the
                metadata filter's values the dialect compares in SQL, bound
                as ``mk<i>`` and ``mv<i>``.
            native: The dialect's own product: its order of ids
                (``SqlDialect.listing_id``), else the column's.
        """
        key = (owner, before, after, metadata, native)
        found = self.listings.get(key)
        if found is not None:
            return found
        c = self.tables.conversations.c
        dialect = self._dialect
        ordered_id = (
            dialect.listing_id(c.conversation_id) if native else c.conversation_id
        )
        conditions: list[Any] = [self._live]
        if owner:
            conditions.append(c.owner == bindparam("owner"))
        if before:
            conditions.append(c.updated_at < bindparam("before"))
        if after:
            at: Any = bindparam("after_at")
            conditions.append(c.updated_at <= at)
            conditions.append(
                or_(c.updated_at < at, ordered_id < bindparam("after_id"))
            )
        for index, shape in enumerate(metadata):
            conditions.append(dialect.metadata_match(c.metadata, index, shape))
        found = (
            select(*self._info_columns)
            .where(and_(*conditions))
            .order_by(c.updated_at.desc(), ordered_id.desc())
        )
        if len(self.listings) < _KEPT_LISTINGS:
            self.listings[key] = found
        return found

    def view(self, rows: int) -> CompoundSelect[Any]:
        """A view's first read: the current system rows and ``rows`` newest others.

        One statement, so both come from one snapshot of the conversation.
        """
        found = self.views.get(rows)
        if found is None:
            tail = self.limited(self.log_tail, rows)
            if not self._dialect.limits_union_members:
                tail = select(*tail.subquery("tail").c)
            found = union_all(self.current_system.order_by(None), tail)
            if len(self.views) < _KEPT_LIMITED_STATEMENTS:
                self.views[rows] = found
        return found

    def all(self) -> dict[str, Any]:
        """Every statement by name (tests compile them all)."""
        return {
            name: value
            for name, value in vars(self).items()
            if name
            not in (
                "tables",
                "state_columns",
                "new_conversation",
                "driver_sql",
                "limits",
                "views",
                "listings",
                "_dialect",
                "_info_columns",
                "_live",
                "append_routine",
            )
            and value is not None
        }
