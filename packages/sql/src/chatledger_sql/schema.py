"""The three tables of a SQL chat memory, built for one dialect.

Example:
    from chatledger_sql.dialects import PostgresDialect
    from chatledger_sql.schema import build_tables

    tables = build_tables(PostgresDialect(), "chat_memory", schema=None)
    tables.messages.c.seq, tables.conversations.c.next_seq
    tables.evicted.name   # 'chat_memory_evicted'

``messages`` holds one row per message, keyed by ``(conversation_id, seq)``.
``conversations`` holds one row per conversation: the next sequence number,
a version, the message counts and size totals the window needs, an optional
expiry, and where the system messages a view of the log shows are
(``system_batch`` to ``system_last``, known right while ``system_as_of``
equals ``next_seq``). Writers of one conversation lock its row, so they queue behind
each other while writers of other conversations go on. ``evicted`` is the
record of :mod:`chatledger.evicted_ids`: one row per message id an append took
out of the window, keyed by ``(conversation_id, message_id)`` and numbered by
the sequence number the message had, so that a late retry of an evicted
message stays a no-op. It holds at most ``EVICTED_IDS_KEPT`` plus
``EVICTED_IDS_TRIM_STEP`` rows per conversation.

The conversation row is also the conversation's record
(:mod:`chatledger.conversation_info`): ``owner``, ``metadata`` (JSON text,
``NULL`` for none), ``created_at`` and ``updated_at``, listed newest first
through two indexes, ``(owner, updated_at, conversation_id)`` for one owner's
and ``(updated_at, conversation_id)`` for everyone's
(:func:`conversation_indexes`).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Column,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    Table,
    UniqueConstraint,
)

from chatledger.adapters import (
    InvalidNameError,
    Role,
)

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from chatledger_sql.dialects.base import SqlDialect

__all__ = [
    "ADDED_COLUMNS",
    "COMPANION_SUFFIXES",
    "CONVERSATION_SUFFIX",
    "EVICTED_SUFFIX",
    "INDEX_SUFFIXES",
    "INFO_COLUMNS",
    "LOG_COLUMNS",
    "MAX_NAME_LENGTH",
    "NAME_PATTERN",
    "Tables",
    "build_tables",
    "check_name",
    "check_table_name",
    "conversation_indexes",
    "missing_columns",
    "missing_log_columns",
]

#: Table and schema names must match this, whole.
NAME_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
#: The longest identifier every supported database accepts (PostgreSQL: 63).
MAX_NAME_LENGTH = 63

#: What the conversations table adds to the messages table's name.
CONVERSATION_SUFFIX = "_conversation"
#: What the evicted-id record's table adds to the messages table's name.
EVICTED_SUFFIX = "_evicted"
#: The endings of the companion tables, which a messages table may not have.
COMPANION_SUFFIXES = (CONVERSATION_SUFFIX, EVICTED_SUFFIX)

#: The endings of the conversations table's indexes: one owner's
#: conversations, and everyone's, by their last write.
OWNER_INDEX_SUFFIX = "_conversations_by_owner"
UPDATE_INDEX_SUFFIX = "_conversations_by_update"
#: A messages table may not end with these either: PostgreSQL, SQLite and
#: DuckDB keep tables and indexes under one set of names.
INDEX_SUFFIXES = (OWNER_INDEX_SUFFIX, UPDATE_INDEX_SUFFIX)

#: The columns of the conversations table the log added after release 0.2:
#: :meth:`create_schema` adds them to a table that lacks them.
LOG_COLUMNS = ("system_batch", "system_last", "system_as_of")
#: The columns of the conversation's record, added after the log's.
INFO_COLUMNS = ("owner", "metadata", "created_at")
#: Every column a later release added to the conversations table, in the
#: order :meth:`create_schema` adds them.
ADDED_COLUMNS = LOG_COLUMNS + INFO_COLUMNS

ROLES = tuple(role.value for role in Role)


def check_name(value: object, what: str) -> str:
    """Return ``value`` if it is an allowed table or schema name, else raise.

    Raises:
        InvalidNameError: for anything but ``[A-Za-z_][A-Za-z0-9_]{0,62}``.
    """
    if not isinstance(value, str) or NAME_PATTERN.fullmatch(value) is None:
        raise InvalidNameError(
            f"{what} {value!r} is not allowed: use 1 to 63 ASCII letters, digits "
            "and underscores, not starting with a digit"
        )
    return value


def check_table_name(value: object) -> str:
    """Return ``value`` if it may name a messages table, else raise.

    Beyond :func:`check_name`, the name must not end with ``_conversation``
    or ``_evicted`` (in any case): ``chat_memory_conversation`` and
    ``chat_memory_evicted`` are the companion tables of the repository named
    ``chat_memory``, and the two repositories would read each other's rows.
    Databases that fold case would collide on any spelling. Nor may it end
    with ``_conversations_by_owner`` or ``_conversations_by_update``, the
    names of another repository's indexes.

    Raises:
        InvalidNameError: for a name that is not allowed.
    """
    name = check_name(value, "table name")
    for suffix in COMPANION_SUFFIXES + INDEX_SUFFIXES:
        if name.lower().endswith(suffix):
            base = name[: -len(suffix)]
            kind = "companion table" if suffix in COMPANION_SUFFIXES else "index"
            raise InvalidNameError(
                f"table name {name!r} is not allowed: it ends with {suffix!r}, "
                f"like the {kind} {base + suffix!r} of the repository "
                f"named {base!r}, and the two would collide; choose a name "
                "without that ending"
            )
    return name


def derived_name(base: str, suffix: str) -> str:
    """``base + suffix``, shortened with a hash when it would exceed 63 characters."""
    name = base + suffix
    if len(name) <= MAX_NAME_LENGTH:
        return name
    digest = hashlib.sha256(base.encode("ascii")).hexdigest()[:8]
    return base[: MAX_NAME_LENGTH - len(suffix) - 9] + "_" + digest + suffix


@dataclass(frozen=True)
class Tables:
    """The tables of one repository.

    Attributes:
        metadata: The ``MetaData`` that holds the tables.
        messages: One row per message.
        conversations: One row per conversation.
        evicted: One row per message id a window append took out (the record
            of :mod:`chatledger.evicted_ids`).
    """

    metadata: MetaData
    messages: Table
    conversations: Table
    evicted: Table

    @property
    def all(self) -> list[Table]:
        """Every table, in the order they are created."""
        return [self.conversations, self.messages, self.evicted]


def build_tables(dialect: SqlDialect, table_name: str, schema: str | None) -> Tables:
    """Build the table definitions of ``dialect`` for ``table_name``.

    The names are validated again here, so no unchecked name reaches SQL.
    SQLAlchemy quotes them for the database in use.
    """
    check_table_name(table_name)
    if schema is not None:
        check_name(schema, "schema name")
    metadata = MetaData(schema=schema)
    options = dialect.table_options()
    role = Column("role", dialect.role_type(), nullable=False)
    messages = Table(
        table_name,
        metadata,
        Column("conversation_id", dialect.id_type(), nullable=False),
        Column("seq", BigInteger(), nullable=False, autoincrement=False),
        Column("message_id", dialect.id_type(), nullable=False),
        role,
        # Text of the message; None when the text lives in the payload (None,
        # empty, or holding NUL, which PostgreSQL text and Oracle '' cannot keep).
        Column("content", dialect.text_type(), nullable=True),
        Column("payload", dialect.text_type(), nullable=False),
        Column("weight", Integer(), nullable=True),
        Column("created_at", dialect.timestamp_type(), nullable=False),
        PrimaryKeyConstraint("conversation_id", "seq"),
        UniqueConstraint("conversation_id", "message_id"),
        CheckConstraint(role.in_(ROLES), name=derived_name(table_name, "_role_ck")),
        **options,
    )
    conversations = Table(
        derived_name(table_name, CONVERSATION_SUFFIX),
        metadata,
        Column("conversation_id", dialect.id_type(), nullable=False),
        Column("next_seq", BigInteger(), nullable=False),
        Column("version", BigInteger(), nullable=False),
        Column("system_count", Integer(), nullable=False),
        Column("other_count", Integer(), nullable=False),
        # Name of the measure the two weight totals (and messages.weight) hold;
        # None when they are not maintained.
        Column("weight_counter", dialect.id_type(), nullable=True),
        Column("system_weight", BigInteger(), nullable=True),
        Column("other_weight", BigInteger(), nullable=True),
        Column("updated_at", dialect.timestamp_type(), nullable=False),
        Column("expires_at", dialect.timestamp_type(), nullable=True),
        # Where the log keeps the system messages a view shows: the first and
        # last sequence numbers of the append that stored them (rule 1 of
        # chatledger.window_view), known right while ``system_as_of`` equals
        # ``next_seq``; a write of another kind moves next_seq past it.
        *(Column(name, BigInteger(), nullable=True) for name in LOG_COLUMNS),
        # The record: who owns the conversation, the application's metadata
        # (a JSON object's text; NULL: none) and when the row was made. A row
        # an earlier release made gets created_at from upgrade_schema; one
        # such a release's process makes meanwhile has none (read as
        # updated_at).
        Column("owner", dialect.id_type(), nullable=True),
        Column("metadata", dialect.text_type(), nullable=True),
        Column("created_at", dialect.timestamp_type(), nullable=True),
        PrimaryKeyConstraint("conversation_id"),
        **options,
    )
    c = conversations.c
    by_owner = derived_name(table_name, OWNER_INDEX_SUFFIX)
    by_update = derived_name(table_name, UPDATE_INDEX_SUFFIX)
    Index(by_owner, c.owner, c.updated_at, c.conversation_id)
    Index(by_update, c.updated_at, c.conversation_id)
    evicted = Table(
        derived_name(table_name, EVICTED_SUFFIX),
        metadata,
        Column("conversation_id", dialect.id_type(), nullable=False),
        Column("message_id", dialect.id_type(), nullable=False),
        # The sequence number the message had (or would have had): trimming
        # keeps the rows numbered above ``trim_below`` of the newest.
        Column("seq", BigInteger(), nullable=False, autoincrement=False),
        PrimaryKeyConstraint(
            "conversation_id", "message_id", **dialect.id_pair_key_options()
        ),
        **options,
    )
    return Tables(metadata, messages, conversations, evicted)


def conversation_indexes(tables: Tables) -> list[Index]:
    """The conversations table's indexes: by owner, then by last write.

    ``(owner, updated_at, conversation_id)`` serves one owner's listing,
    ``(updated_at, conversation_id)`` everyone's; both are read backwards,
    newest first, in keyset order. The dialect creates them
    (:meth:`SqlDialect.create_index`, which orders the id as its listing
    does), where it keeps them.
    """
    return sorted(tables.conversations.indexes, key=lambda index: str(index.name))


def missing_columns(
    connection: Connection, tables: Tables, names: tuple[str, ...] = ADDED_COLUMNS
) -> list[Column[Any]]:
    """Those of ``names`` (by default :data:`ADDED_COLUMNS`) the database's
    conversations table lacks, in that order.

    A table made by release 0.2 lacks them all, one made by 0.3 the record's
    (:data:`INFO_COLUMNS`); ``create_schema`` adds them.
    """
    table = tables.conversations
    # The columns of an empty answer, where an inspector's catalogue queries
    # are not portable (DuckDB answers PostgreSQL's differently).
    name = connection.dialect.identifier_preparer.format_table(table)
    found = connection.exec_driver_sql(f"SELECT * FROM {name} WHERE 1 = 0")
    keys = found.keys()
    found.close()
    present = {key.lower() for key in keys}
    return [table.c[column] for column in names if column not in present]


def missing_log_columns(connection: Connection, tables: Tables) -> list[Column[Any]]:
    """The :data:`LOG_COLUMNS` the database's conversations table lacks."""
    return missing_columns(connection, tables, LOG_COLUMNS)
