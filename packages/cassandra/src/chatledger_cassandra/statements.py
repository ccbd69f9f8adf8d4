"""The CQL text of every statement the repository runs, in one place.

Example:
    from chatledger_cassandra.statements import Statements

    cql = Statements("chatledger", "chat_memory")
    print(cql.create_table)
    print(cql.insert)

The table holds one partition per conversation::

    conversation_id  partition key
    lane             clustering: 0 for system messages, 1 for all others,
                     2 for the record of evicted ids, 3 for the id index
    seq              clustering: the conversation's gap-free sequence number
                     (in lane 3, the slot of an id)
    next_seq         STATIC: the next free sequence number, which is also the
                     version every write checks with IF
    emptied          STATIC: true while a window has left the conversation
                     without messages, holding only its record of evicted ids
    system_batch     STATIC: where the current system messages start: the
                     sequence number of the first message of the append that
                     stored them, or one a removal moved it to; they are the
                     rows of lane 0 from it on (none recorded: all of lane 0)
    indexed          STATIC: true while lane 3 holds the id of every row of
                     lanes 0 to 2
    msg_id, role     the message id and role, readable without the payload
    size_counter     the window measure the stored size was counted with
    size             the message's size in that measure
    payload          the message as chatledger's JSON codec wrote it

Sequence numbers are shared by the message lanes, so sorting a partition's
message rows by ``seq`` gives the conversation order. The lanes exist so that
evicting the oldest turns is one range delete (``lane = 1 AND seq < ?``) that
can never touch a system message, and so that the reads of messages leave the
record out with one bound (``lane < 2``).

The conversation is also a log (:mod:`chatledger_cassandra.log_plans`): a log
append keeps every message, so lane 0 then holds superseded system messages
below ``system_batch`` too, and a window view reads the newest rows of lanes 1
and 0 backwards in clustering order (``ORDER BY lane DESC, seq DESC``). Lane 3
is the id index (:mod:`chatledger_cassandra.id_index`): one row per id, at a
slot its hash gives, holding ``msg_id`` alone, so an append tells a stored id
from a new one by reading (or conditioning on) the rows of its own ids.

The record of evicted ids (:mod:`chatledger.evicted_ids`) lives in lane 2 of
the same partition: one row per id an append took out of the window, numbered
by that message's sequence number, holding ``msg_id`` alone. Being in the
partition, it is read by the same read and written by the same conditional
batch as the messages, trimmed by one range delete, and removed with the
partition. Names are validated before they get here
(:mod:`chatledger_cassandra.names`) and quoted; every value is a bind marker.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from chatledger_cassandra.names import render_replication, validate_name

__all__ = [
    "ADDED_COLUMNS",
    "LANE_EVICTED",
    "LANE_IDS",
    "LANE_OTHER",
    "LANE_SYSTEM",
    "RECORD_COLUMNS",
    "ROW_COLUMNS",
    "STATIC_COLUMNS",
    "Statements",
    "create_keyspace",
    "listing_table_name",
]

#: Clustering lane of system messages.
LANE_SYSTEM = 0
#: Clustering lane of every other message.
LANE_OTHER = 1
#: Clustering lane of the record of evicted ids; every message lane is below it.
LANE_EVICTED = 2
#: Clustering lane of the id index; every other lane is below it.
LANE_IDS = 3
#: The static columns the log added to the table, with their types: a table
#: made before them gets them from :meth:`Statements.add_column`.
ADDED_COLUMNS = {
    "system_batch": "bigint static",
    "indexed": "boolean static",
    "owner": "text static",
    "metadata": "text static",
    "created_at": "timestamp static",
    "updated_at": "timestamp static",
}
#: The columns of a conversation's record, in the order :attr:`Statements.select_record`
#: returns them.
RECORD_COLUMNS = (
    "next_seq",
    "emptied",
    "owner",
    "metadata",
    "created_at",
    "updated_at",
    "written",
)
#: The static columns every read of the log returns, in this order, first.
STATIC_COLUMNS = ("next_seq", "system_batch", "indexed")
#: The columns of a stored row, in the order the reads return them.
ROW_COLUMNS = ("lane", "seq", "msg_id", "role", "size_counter", "size", "payload")


_STATICS = ", ".join(STATIC_COLUMNS)
_ROW = ", ".join(ROW_COLUMNS)


def listing_table_name(table: str) -> str:
    """The listing table of ``table``: ``<table>_records``, or, where that
    would pass Cassandra's 48 characters, a prefix of ``table`` and a digest
    of the whole name."""
    name = f"{table}_records"
    if len(name) <= 48:
        return name
    digest = hashlib.blake2b(table.encode("ascii"), digest_size=4).hexdigest()
    return f"{table[:31]}_{digest}_records"


def create_keyspace(keyspace: str, replication: dict[str, object]) -> str:
    """Return ``CREATE KEYSPACE IF NOT EXISTS`` for ``keyspace``.

    Raises:
        InvalidNameError: for a bad keyspace name or replication option.
    """
    name = validate_name(keyspace, "keyspace")
    options = render_replication(replication)
    return f'CREATE KEYSPACE IF NOT EXISTS "{name}" WITH replication = {options}'


@dataclass(frozen=True)
class Statements:
    """The CQL text for one table, with its (validated) name spliced in.

    Attributes:
        keyspace: The keyspace name.
        table: The table name.
    """

    keyspace: str
    table: str

    def __post_init__(self) -> None:
        validate_name(self.keyspace, "keyspace")
        validate_name(self.table, "table")

    @property
    def qualified(self) -> str:
        """The quoted ``"keyspace"."table"`` name."""
        return f'"{self.keyspace}"."{self.table}"'

    @property
    def create_table(self) -> str:
        """Create the table if it is missing (idempotent)."""
        return (
            f"CREATE TABLE IF NOT EXISTS {self.qualified} ("
            "conversation_id text, "
            "lane tinyint, "
            "seq bigint, "
            "next_seq bigint static, "
            "emptied boolean static, "
            "system_batch bigint static, "
            "indexed boolean static, "
            "owner text static, "
            "metadata text static, "
            "created_at timestamp static, "
            "updated_at timestamp static, "
            "msg_id text, "
            "role text, "
            "size_counter text, "
            "size int, "
            "payload text, "
            "PRIMARY KEY ((conversation_id), lane, seq)"
            ") WITH CLUSTERING ORDER BY (lane ASC, seq ASC)"
        )

    @property
    def listing_table(self) -> str:
        """The table listing the records (:mod:`chatledger_cassandra.records`)."""
        return listing_table_name(self.table)

    @property
    def listing(self) -> str:
        """The quoted ``"keyspace"."listing table"`` name."""
        return f'"{self.keyspace}"."{self.listing_table}"'

    @property
    def create_listing(self) -> str:
        """Create the listing table if it is missing (idempotent).

        One partition per scope (an owner, or one of the buckets every record
        is listed in), its rows newest first: the order a listing reads.
        """
        return (
            f"CREATE TABLE IF NOT EXISTS {self.listing} ("
            "scope text, "
            "updated_at timestamp, "
            "conversation_id text, "
            "PRIMARY KEY ((scope), updated_at, conversation_id)"
            ") WITH CLUSTERING ORDER BY (updated_at DESC, conversation_id DESC)"
        )

    def add_column(self, name: str) -> str:
        """Add one of :data:`ADDED_COLUMNS` to a table made before it."""
        return f"ALTER TABLE {self.qualified} ADD {name} {ADDED_COLUMNS[name]}"

    @property
    def select_messages(self) -> str:
        """Read a conversation's messages (the read path; sorted by seq in Python).

        Bound with :data:`LANE_EVICTED`, so the record stays out.
        """
        return (
            f"SELECT lane, seq, payload FROM {self.qualified} "
            "WHERE conversation_id = ? AND lane < ?"
        )

    @property
    def select_version(self) -> str:
        """Read a conversation's version (``next_seq``) alone."""
        return (
            f"SELECT next_seq FROM {self.qualified} WHERE conversation_id = ? LIMIT 1"
        )

    @property
    def select_index(self) -> str:
        """Read what a window append decides on, without the payloads.

        The record of evicted ids comes with it: an append probes it in the
        read that finds the ids already stored. Bound with :data:`LANE_IDS`,
        so the id index stays out.
        """
        return (
            f"SELECT {_STATICS}, lane, seq, msg_id, role, size_counter, size "
            f"FROM {self.qualified} WHERE conversation_id = ? AND lane < ?"
        )

    @property
    def select_full(self) -> str:
        """Read every message and the record, payloads included.

        Bound with :data:`LANE_IDS`, so the id index stays out.
        """
        return (
            f"SELECT {_STATICS}, {_ROW} "
            f"FROM {self.qualified} WHERE conversation_id = ? AND lane < ?"
        )

    @property
    def select_partition(self) -> str:
        """Read every row of a conversation, the id index too, payloads included."""
        return (
            f"SELECT {_STATICS}, {_ROW} FROM {self.qualified} WHERE conversation_id = ?"
        )

    @property
    def select_lane(self) -> str:
        """Read one lane of a conversation (the system messages), payloads included."""
        return (
            f"SELECT {_STATICS}, {_ROW} "
            f"FROM {self.qualified} WHERE conversation_id = ? AND lane = ?"
        )

    @property
    def select_statics(self) -> str:
        """Read a conversation's static columns alone (none: no conversation)."""
        return (
            f"SELECT {_STATICS} FROM {self.qualified} WHERE conversation_id = ? LIMIT 1"
        )

    @property
    def select_slots(self) -> str:
        """Read the rows of some slots of the id index, bound with :data:`LANE_IDS`."""
        return (
            f"SELECT {_STATICS}, seq, msg_id FROM {self.qualified} "
            "WHERE conversation_id = ? AND lane = ? AND seq IN ?"
        )

    @property
    def select_newest(self) -> str:
        """Read the newest rows below a lane, newest first, in clustering order.

        Bound with :data:`LANE_EVICTED`: the newest messages of lane 1, then,
        once lane 1 is read whole, the newest of lane 0 (system messages).
        """
        return (
            f"SELECT {_STATICS}, {_ROW} FROM {self.qualified} "
            "WHERE conversation_id = ? AND lane < ? "
            "ORDER BY lane DESC, seq DESC LIMIT ?"
        )

    @property
    def select_before(self) -> str:
        """Read the rows of one lane below a sequence number, newest first."""
        return (
            f"SELECT {_STATICS}, {_ROW} FROM {self.qualified} "
            "WHERE conversation_id = ? AND lane = ? AND seq < ? "
            "ORDER BY lane DESC, seq DESC LIMIT ?"
        )

    @property
    def select_after(self) -> str:
        """Read the rows of one lane above a sequence number, oldest first."""
        return (
            f"SELECT {_STATICS}, {_ROW} FROM {self.qualified} "
            "WHERE conversation_id = ? AND lane = ? AND seq > ? "
            "ORDER BY lane ASC, seq ASC LIMIT ?"
        )

    @property
    def select_ids_after(self) -> str:
        """Read the numbers, ids and roles of one lane above a sequence number,
        oldest first: what a trim of the log decides on, without payloads."""
        return (
            f"SELECT {_STATICS}, seq, msg_id, role FROM {self.qualified} "
            "WHERE conversation_id = ? AND lane = ? AND seq > ? "
            "ORDER BY lane ASC, seq ASC LIMIT ?"
        )

    @property
    def select_ids_before(self) -> str:
        """Read the numbers, ids and roles of one lane below a sequence number,
        newest first: where a removal looks for the ids it is given."""
        return (
            f"SELECT {_STATICS}, seq, msg_id, role FROM {self.qualified} "
            "WHERE conversation_id = ? AND lane = ? AND seq < ? "
            "ORDER BY lane DESC, seq DESC LIMIT ?"
        )

    @property
    def select_rows(self) -> str:
        """Read some rows of one lane by number, payloads included."""
        return (
            f"SELECT {_STATICS}, {_ROW} FROM {self.qualified} "
            "WHERE conversation_id = ? AND lane = ? AND seq IN ?"
        )

    @property
    def select_anchor(self) -> str:
        """Read one row's id with the static columns and the time left to live
        of ``next_seq`` (``null`` when it does not expire): where a trim of
        the log starts, the last row its append stored."""
        return (
            f'SELECT {_STATICS}, TTL(next_seq) AS "ttl", msg_id '
            f"FROM {self.qualified} WHERE conversation_id = ? AND lane = ? AND seq = ?"
        )

    @property
    def select_from(self) -> str:
        """Read every row of one lane from a sequence number on (the current
        system messages, from ``system_batch``)."""
        return (
            f"SELECT {_STATICS}, {_ROW} FROM {self.qualified} "
            "WHERE conversation_id = ? AND lane = ? AND seq >= ?"
        )

    @property
    def list_ids(self) -> str:
        """List every partition; the driver pages through the whole token ring.

        A partition whose ``emptied`` is true is no conversation to list.
        """
        return f"SELECT DISTINCT conversation_id, emptied FROM {self.qualified}"

    @property
    def first_ids_page(self) -> str:
        """The first partitions, in token order, with their tokens."""
        return (
            'SELECT DISTINCT conversation_id, token(conversation_id) AS "token", '
            f"emptied FROM {self.qualified} LIMIT ?"
        )

    @property
    def ids_page_after(self) -> str:
        """The partitions after a token, in token order."""
        return (
            'SELECT DISTINCT conversation_id, token(conversation_id) AS "token", '
            f"emptied FROM {self.qualified} WHERE token(conversation_id) > ? LIMIT ?"
        )

    @property
    def count_messages(self) -> str:
        """Count a conversation's message rows, bound with :data:`LANE_EVICTED`."""
        return (
            f'SELECT COUNT(seq) AS "count" FROM {self.qualified} '
            "WHERE conversation_id = ? AND lane < ?"
        )

    @property
    def start(self) -> str:
        """The condition of a batch that creates a conversation."""
        return (
            f"UPDATE {self.qualified} USING TTL ? SET next_seq = ?, emptied = ? "
            "WHERE conversation_id = ? IF next_seq = null"
        )

    @property
    def advance(self) -> str:
        """The condition of a batch that changes an existing conversation."""
        return (
            f"UPDATE {self.qualified} USING TTL ? SET next_seq = ?, emptied = ? "
            "WHERE conversation_id = ? IF next_seq = ?"
        )

    @property
    def insert(self) -> str:
        """Write one message row (also used to rewrite a row with a fresh TTL)."""
        return (
            f"INSERT INTO {self.qualified} "
            "(conversation_id, lane, seq, msg_id, role, size_counter, size, payload) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?) USING TTL ?"
        )

    @property
    def insert_evicted(self) -> str:
        """Write one row of the record of evicted ids: its number and the id."""
        return (
            f"INSERT INTO {self.qualified} (conversation_id, lane, seq, msg_id) "
            "VALUES (?, ?, ?, ?) USING TTL ?"
        )

    @property
    def mark(self) -> str:
        """Set the static columns of the log; an unset value leaves its cell."""
        return (
            f"UPDATE {self.qualified} USING TTL ? SET system_batch = ?, indexed = ? "
            "WHERE conversation_id = ?"
        )

    @property
    def insert_id(self) -> str:
        """Index one id at a free slot of lane 3 (a condition of the batch)."""
        return (
            f"INSERT INTO {self.qualified} (conversation_id, lane, seq, msg_id) "
            "VALUES (?, ?, ?, ?) IF NOT EXISTS USING TTL ?"
        )

    @property
    def confirm(self) -> str:
        """The condition of a trim of the log: the version it read is current.

        It changes nothing a reader sees (``emptied`` stays false), under the
        time the conversation has left to live, so a trim neither moves the
        version nor makes the partition outlive its rows.
        """
        return (
            f"UPDATE {self.qualified} USING TTL ? SET emptied = ? "
            "WHERE conversation_id = ? IF next_seq = ?"
        )

    @property
    def delete_row(self) -> str:
        """Delete one row (a slot of the id index)."""
        return (
            f"DELETE FROM {self.qualified} "
            "WHERE conversation_id = ? AND lane = ? AND seq = ?"
        )

    @property
    def delete_if_exists(self) -> str:
        """Delete one message row, a condition of the batch: the row is there."""
        return (
            f"DELETE FROM {self.qualified} "
            "WHERE conversation_id = ? AND lane = ? AND seq = ? IF EXISTS"
        )

    @property
    def touch(self) -> str:
        """A condition of the batch that one row is there; it writes the id
        the row holds back into it, under the batch's TTL."""
        return (
            f"UPDATE {self.qualified} USING TTL ? SET msg_id = ? "
            "WHERE conversation_id = ? AND lane = ? AND seq = ? IF EXISTS"
        )

    @property
    def delete_lane(self) -> str:
        """Range-delete one whole lane (the id index)."""
        return f"DELETE FROM {self.qualified} WHERE conversation_id = ? AND lane = ?"

    @property
    def delete_before(self) -> str:
        """Range-delete the rows of one lane below a sequence number."""
        return (
            f"DELETE FROM {self.qualified} "
            "WHERE conversation_id = ? AND lane = ? AND seq < ?"
        )

    @property
    def delete_version(self) -> str:
        """The condition of a batch that deletes a conversation at the version read.

        Cassandra takes a condition only on a delete that names every primary
        key column or deletes static columns alone, so the condition sits on the
        delete of ``next_seq`` and :attr:`delete_partition` goes beside it.
        """
        return (
            f"DELETE next_seq FROM {self.qualified} "
            "WHERE conversation_id = ? IF next_seq = ?"
        )

    @property
    def delete_any(self) -> str:
        """The condition of a batch that deletes a conversation whatever its version.

        ``next_seq >= 0`` holds for every stored conversation, so this needs no
        read first; on a missing conversation the batch is simply not applied.
        """
        return (
            f"DELETE next_seq FROM {self.qualified} "
            "WHERE conversation_id = ? IF next_seq >= 0"
        )

    @property
    def delete_partition(self) -> str:
        """Delete a whole conversation; only ever sent behind a delete condition."""
        return f"DELETE FROM {self.qualified} WHERE conversation_id = ?"

    @property
    def start_record(self) -> str:
        """The condition of a batch that creates a conversation and its record."""
        return (
            f"UPDATE {self.qualified} USING TTL ? SET next_seq = ?, emptied = ?, "
            "created_at = ?, updated_at = ? WHERE conversation_id = ? "
            "IF next_seq = null"
        )

    @property
    def advance_record(self) -> str:
        """The condition of a batch that writes an existing conversation's
        messages: it moves ``updated_at``, and holds only while the owner is
        the one whose listing the batch's caller writes beside it."""
        return (
            f"UPDATE {self.qualified} USING TTL ? SET next_seq = ?, emptied = ?, "
            "updated_at = ? WHERE conversation_id = ? IF next_seq = ? AND owner = ?"
        )

    @property
    def refresh_record(self) -> str:
        """:attr:`advance_record` that also writes the record's other cells
        again, under the batch's TTL, while they are the ones read."""
        return (
            f"UPDATE {self.qualified} USING TTL ? SET next_seq = ?, emptied = ?, "
            "updated_at = ?, created_at = ?, owner = ?, metadata = ? "
            "WHERE conversation_id = ? IF next_seq = ? AND owner = ? AND metadata = ?"
        )

    @property
    def set_record(self) -> str:
        """Set a record's owner and metadata (and rewrite its times and
        version under the TTL), while the version and the owner are the ones
        read."""
        return (
            f"UPDATE {self.qualified} USING TTL ? SET next_seq = ?, emptied = ?, "
            "updated_at = ?, created_at = ?, owner = ?, metadata = ? "
            "WHERE conversation_id = ? IF next_seq = ? AND owner = ?"
        )

    @property
    def new_record(self) -> str:
        """Make the record of a conversation without messages."""
        return (
            f"UPDATE {self.qualified} USING TTL ? SET next_seq = ?, emptied = ?, "
            "updated_at = ?, created_at = ?, owner = ?, metadata = ? "
            "WHERE conversation_id = ? IF next_seq = null"
        )

    @property
    def fill_record(self) -> str:
        """Give a conversation an earlier release wrote its record's times."""
        return (
            f"UPDATE {self.qualified} SET updated_at = ?, created_at = ? "
            "WHERE conversation_id = ? IF next_seq = ? AND updated_at = null"
        )

    @property
    def select_record(self) -> str:
        """Read a conversation's record (no row: no conversation).

        ``written`` is when ``next_seq`` was last written, for a conversation
        an earlier release wrote, whose record holds no times.
        """
        return (
            "SELECT next_seq, emptied, owner, metadata, created_at, updated_at, "
            f'WRITETIME(next_seq) AS "written" FROM {self.qualified} '
            "WHERE conversation_id = ? LIMIT 1"
        )

    @property
    def insert_listing(self) -> str:
        """List a record in one scope at one ``updated_at``."""
        return (
            f"INSERT INTO {self.listing} (scope, updated_at, conversation_id) "
            "VALUES (?, ?, ?) USING TTL ?"
        )

    @property
    def delete_listing(self) -> str:
        """Remove one listing row that no longer says where a record is."""
        return (
            f"DELETE FROM {self.listing} "
            "WHERE scope = ? AND updated_at = ? AND conversation_id = ?"
        )

    @property
    def list_scope(self) -> str:
        """The newest listing rows of a scope."""
        return (
            f"SELECT updated_at, conversation_id FROM {self.listing} "
            "WHERE scope = ? LIMIT ?"
        )

    @property
    def list_scope_after(self) -> str:
        """The newest listing rows of a scope below a ``(updated_at, id)`` key."""
        return (
            f"SELECT updated_at, conversation_id FROM {self.listing} "
            "WHERE scope = ? AND (updated_at, conversation_id) < (?, ?) LIMIT ?"
        )

    def prepared(self) -> dict[str, str]:
        """Return the text of every statement prepared once per repository."""
        return {
            "select_messages": self.select_messages,
            "select_version": self.select_version,
            "select_index": self.select_index,
            "select_full": self.select_full,
            "select_lane": self.select_lane,
            "select_partition": self.select_partition,
            "select_statics": self.select_statics,
            "select_slots": self.select_slots,
            "select_newest": self.select_newest,
            "select_before": self.select_before,
            "select_after": self.select_after,
            "select_from": self.select_from,
            "select_ids_after": self.select_ids_after,
            "select_ids_before": self.select_ids_before,
            "select_rows": self.select_rows,
            "select_anchor": self.select_anchor,
            "list_ids": self.list_ids,
            "first_ids_page": self.first_ids_page,
            "ids_page_after": self.ids_page_after,
            "count_messages": self.count_messages,
            "start": self.start,
            "advance": self.advance,
            "insert": self.insert,
            "insert_evicted": self.insert_evicted,
            "mark": self.mark,
            "insert_id": self.insert_id,
            "confirm": self.confirm,
            "delete_row": self.delete_row,
            "delete_if_exists": self.delete_if_exists,
            "touch": self.touch,
            "delete_lane": self.delete_lane,
            "delete_before": self.delete_before,
            "delete_version": self.delete_version,
            "delete_any": self.delete_any,
            "delete_partition": self.delete_partition,
            "start_record": self.start_record,
            "advance_record": self.advance_record,
            "refresh_record": self.refresh_record,
            "set_record": self.set_record,
            "new_record": self.new_record,
            "fill_record": self.fill_record,
            "select_record": self.select_record,
            "insert_listing": self.insert_listing,
            "delete_listing": self.delete_listing,
            "list_scope": self.list_scope,
            "list_scope_after": self.list_scope_after,
        }
