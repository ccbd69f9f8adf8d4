"""A window append in one round trip: what every server-side routine shares.

Example (needs a PostgreSQL server; the repository creates and calls it):
    from chatledger import Message, MessageWindow
    from chatledger_sql import SqlChatMemoryRepository

    repository = SqlChatMemoryRepository.from_url(
        "postgresql+psycopg://app@localhost/chat"
    )  # create_schema() also made the function chat_memory_append_v4
    window = MessageWindow(20)
    repository.append_to_window("c1", [Message.user("hi")], window)  # one call

The portable append locks the conversation row, reads what the window needs,
plans in Python and writes: two round trips at best, and the planning costs
client CPU. A routine created with the tables does the same inside the
server, in one statement: it creates or locks the conversation row, counts
which of the oldest rows the window drops (a translation of
:func:`chatledger.window.count_evictions`), deletes them, inserts the new
rows, records the evicted ids as :mod:`chatledger.evicted_ids` says and
updates the row. Sizes are measured by the client (a token counter is Python
code) and passed in. PostgreSQL's is a PL/pgSQL function
(:mod:`chatledger_sql.dialects.postgresql_routine`), MariaDB's a stored
procedure (:mod:`chatledger_sql.dialects.mariadb_routine`); the dialects that
create and call them derive from :class:`chatledger_sql.dialects.base.RoutineDialect`.

Its ``outcome`` is ``appended``; or ``known`` when the conversation holds
or evicted every id of the batch (a retry: nothing to write, as in the
portable append); or ``declined``, having changed nothing but the row's
``version``, for every case it leaves to the portable path: a batch holding
a system message (rule 1 compares stored messages), some of the ids known,
stored sizes measured by another counter, and on MariaDB evicted ids that
would not fit one packet (``max_allowed_packet``) as the answer. The
repository then runs the portable append, which reads everything again
under its own lock.

The routine's name carries a version: a change to its parameters or its
rules is a new routine, so an older one left in a database is never called
with arguments it does not take, nor keeps rules the Python path no longer
keeps; ``drop_schema`` drops the older ones too (:data:`RETIRED_SUFFIXES`).
A database made before it existed (opened with ``create_schema=False``) has
none: the first call fails without writing, and the repository keeps to the
portable path.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, ClassVar

from sqlalchemy import TextClause, bindparam, text

from chatledger.adapters import (
    AppendResult,
    Message,
    Window,
    needs_stored_system,
    stamp_messages,
)
from chatledger_sql.rows import encode, literal_bytes, statement_limit
from chatledger_sql.schema import derived_name

if TYPE_CHECKING:
    from chatledger_sql.schema import Tables

__all__ = ["RETIRED_SUFFIXES", "ROUTINE_SUFFIX", "AppendRoutine"]

#: The routine's name is the messages table's name followed by this. v2: a
#: history with no user message is kept whole (v1 dropped it on overflow).
#: v3: the row it makes has a ``created_at``, and a conversation it finds
#: expired starts a new record (no owner, no metadata). v4: MariaDB's answers
#: evicted ids past ``group_concat_max_len`` (v3 failed on more than 1 MiB of
#: them), and leaves to the portable append an answer longer than a packet.
ROUTINE_SUFFIX = "_append_v4"
#: The suffixes of the routines earlier versions made, never called again.
RETIRED_SUFFIXES = ("_append_v1", "_append_v2", "_append_v3")


class AppendRoutine:
    """A server-side append of one repository's tables: its DDL and its call.

    The Python side every routine shares: the name, the parameters (the
    batch packed as one JSON array of rows) and the reading of the answer.
    Each database's subclass gives the routine's text and how its call is
    written, and names the SQLAlchemy dialect whose identifier rules quote
    its name (:attr:`sql_dialect`):
    :class:`chatledger_sql.dialects.postgresql_routine.PostgresAppendRoutine`
    is PostgreSQL's, and
    :class:`chatledger_sql.dialects.mariadb_routine.MariaDBAppendRoutine`
    MariaDB's.

    Args:
        tables: The repository's tables; the routine is named after the
            messages table, in its schema.
        timestamp: The timestamp column type, for binding ``now``.
    """

    __slots__ = ("_tables", "call", "name", "qualified", "retired_names")

    #: The SQLAlchemy dialect whose identifier rules name the routine.
    sql_dialect: ClassVar[Any]
    #: The routine begins and commits its own transaction; otherwise it is
    #: called in autocommit, a statement's transaction of its own.
    commits_itself = False

    def __init__(self, tables: Tables, timestamp: Any = None) -> None:
        """Name the routine and build its call."""
        messages = tables.messages
        self.name = derived_name(messages.name, ROUTINE_SUFFIX)
        self.qualified = self._qualify(self.name, messages.schema)
        #: The names of the routines earlier versions made.
        self.retired_names = [
            derived_name(messages.name, suffix) for suffix in RETIRED_SUFFIXES
        ]
        self._tables = tables
        #: One call, answering one row ``outcome, evicted_ids``;
        #: :meth:`parameters` gives its bound values.
        self.call: TextClause = text(self.call_sql()).bindparams(
            bindparam("now", type_=timestamp), bindparam("expires_at", type_=timestamp)
        )

    @classmethod
    def _qualify(cls, name: str, schema: str | None) -> str:
        preparer = cls.sql_dialect.identifier_preparer
        if schema is None:
            return str(preparer.quote(name))
        return f"{preparer.quote_schema(schema)}.{preparer.quote(name)}"

    def call_sql(self) -> str:
        """The call's text, with ``:cid, :now, :expires_at, :limit, :counter,
        :batch``."""
        raise NotImplementedError

    def create_sql(self) -> str:
        """The routine's DDL: run when :meth:`exists_sql` finds none."""
        raise NotImplementedError

    def exists_sql(self) -> str:
        """A query returning one row, non-null when the routine exists."""
        return self.exists_sql_of(self.name)

    def exists_sql_of(self, name: str) -> str:
        """A query returning one row, non-null when the routine ``name`` (in
        the messages table's schema, with this routine's parameters) exists."""
        raise NotImplementedError

    def drop_sql(self) -> str:
        """Drop the routine if it exists."""
        return self.drop_sql_of(self.qualified)

    def drop_sql_of(self, qualified: str) -> str:
        """Drop the routine named ``qualified`` (this routine's parameters) if
        it exists."""
        raise NotImplementedError

    def drops_if_present(self) -> list[tuple[str, str]]:
        """``(exists query, drop)`` of this routine and of each an earlier
        version made: a drop is sent only where its query found the routine
        (a driver may log the server's note on every drop of a missing one)."""
        names = [self.name, *self.retired_names]
        schema = self._tables.messages.schema
        return [
            (self.exists_sql_of(name), self.drop_sql_of(self._qualify(name, schema)))
            for name in names
        ]

    def created_text(self, moment: datetime) -> str:
        """A message's ``created_at`` as the routine reads it from the batch."""
        return moment.isoformat()

    def evicted_list(self, value: Any) -> list[str]:
        """The evicted ids the routine answered, as a list."""
        return list(value)

    def table_names(self) -> dict[str, str]:
        """``m``, ``c``, ``e``: the three tables, quoted for the routine's text."""
        preparer = self.sql_dialect.identifier_preparer
        tables = self._tables
        return {
            "m": preparer.format_table(tables.messages),
            "c": preparer.format_table(tables.conversations),
            "e": preparer.format_table(tables.evicted),
        }

    @staticmethod
    def takes(batch: Sequence[Message]) -> bool:
        """Whether the routine may write ``batch`` (it holds no system message)."""
        return not needs_stored_system(batch)

    def parameters(
        self,
        conversation_id: str,
        batch: Sequence[Message],
        window: Window,
        now: datetime,
        ttl: timedelta | None,
    ) -> tuple[dict[str, Any], list[Message]]:
        """The bound values of :attr:`call` for appending ``batch`` at ``now``,
        and the batch stamped with ``now`` where it has no ``created_at``."""
        stamped = stamp_messages(batch, now)
        rows = []
        for message in stamped:
            row = encode(conversation_id, 0, message, None)
            rows.append(
                {
                    "id": row["message_id"],
                    "role": row["role"],
                    "content": row["content"],
                    "payload": row["payload"],
                    "size": window.measure(message),
                    "created": self.created_text(row["created_at"]),
                }
            )
        return {
            "cid": conversation_id,
            "now": now,
            "expires_at": None if ttl is None else now + ttl,
            "limit": window.limit,
            "counter": window.counter_id,
            "batch": json.dumps(rows, ensure_ascii=False, separators=(",", ":")),
        }, stamped

    @staticmethod
    def fits(parameters: dict[str, Any], limit: int | None) -> bool:
        """Whether the call with :meth:`parameters` fits a statement of ``limit`` bytes.

        The whole batch is one value of the call: a server that caps a
        statement (MariaDB's ``max_allowed_packet``; ``None``: no cap) would
        drop the connection on a call whose batch does not fit even though
        each of its rows does. The repository then leaves such a batch to the
        portable append, which sends the rows in statements of their own.
        """
        if limit is None:
            return True
        texts = [parameters[name] for name in ("cid", "counter", "batch")]
        packet = statement_limit(limit)
        # Four UTF-8 bytes and one escape a character at most: a batch well
        # under the limit, as nearly every one is, needs no encoding to pass.
        if packet.fits(5 * sum(len(text) for text in texts if text)):
            return True
        return packet.fits(sum(literal_bytes(text) for text in texts))

    def result(self, row: Sequence[Any], stamped: list[Message]) -> AppendResult | None:
        """What the append did, from the call's row (``outcome, evicted_ids``);
        ``None``: it wrote nothing and the portable append is to run."""
        outcome, evicted_ids = row
        if outcome == "appended":
            return AppendResult(stamped, self.evicted_list(evicted_ids))
        if outcome == "known":
            return AppendResult()
        return None
