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
    "COMPANION_SUFFIXES",
    "CONVERSATION_SUFFIX",
    "EVICTED_SUFFIX",
    "LOG_COLUMNS",
    "MAX_NAME_LENGTH",
    "NAME_PATTERN",
    "Tables",
    "build_tables",
    "check_name",
    "check_table_name",
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

#: The columns of the conversations table the log added after release 0.2:
#: :meth:`create_schema` adds them to a table that lacks them.
LOG_COLUMNS = ("system_batch", "system_last", "system_as_of")

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
    Databases that fold case would collide on any spelling.

    Raises:
        InvalidNameError: for a name that is not allowed.
    """
    name = check_name(value, "table name")
    for suffix in COMPANION_SUFFIXES:
        if name.lower().endswith(suffix):
            base = name[: -len(suffix)]
            raise InvalidNameError(
                f"table name {name!r} is not allowed: it ends with {suffix!r}, "
                f"like the companion table {base + suffix!r} of the repository "
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
        PrimaryKeyConstraint("conversation_id"),
        **options,
    )
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


def missing_log_columns(connection: Connection, tables: Tables) -> list[Column[Any]]:
    """The :data:`LOG_COLUMNS` the database's conversations table lacks.

    A table made by release 0.2 lacks all three; ``create_schema`` adds them.
    """
    table = tables.conversations
    # The columns of an empty answer, where an inspector's catalogue queries
    # are not portable (DuckDB answers PostgreSQL's differently).
    name = connection.dialect.identifier_preparer.format_table(table)
    found = connection.exec_driver_sql(f"SELECT * FROM {name} WHERE 1 = 0")
    keys = found.keys()
    found.close()
    present = {key.lower() for key in keys}
    return [table.c[column] for column in LOG_COLUMNS if column not in present]
