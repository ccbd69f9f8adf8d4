"""Reading a source table through SQLAlchemy: its engine, its columns, its times.

Example (needs a notes.db of your own):
    from datetime import UTC

    from chatledger.move_in.tables import TableReader

    class Notes(TableReader):
        family = "notes"
        conversation_column = "thread"
        columns = ("thread", "position", "text")

        def order(self, table):
            return [table.c.position]

        def convert(self, conversation, rows):
            ...   # one message per row, or conversation.refuse(row, why)

    reader = Notes("sqlite:///notes.db", "notes", UTC)   # no I/O yet
    for conversation_id in reader.conversation_ids():
        reader.read(conversation_id)

A reader checks its source URL before any I/O: SQLAlchemy must be installed
(chatledger-sql brings it; the error names the install line), the URL must
name a sync driver, and a SQLite file must exist (SQLite would create an
empty one). The table is found on first use, its name matched without regard
to case (PostgreSQL folds unquoted names to lower case, MariaDB keeps them as
written), and every column the format needs must be there. A column the
format does not know is read too: its values have no place in a message, and
each one that is not NULL is reported as not carried.

Times: an aware value is taken as it is; a naive one is in the zone the
reader is given (the source's own, UTC unless told), except a MySQL or
MariaDB ``TIMESTAMP``, which is read in UTC (the reader's session sets
``time_zone`` to ``+00:00``). An integer is milliseconds since the epoch
(what sqlite-jdbc writes for a JDBC timestamp).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar
from urllib.parse import parse_qs, unquote

from chatledger.backends import install_hint, url_scheme
from chatledger.errors import ChatLedgerError, InvalidNameError, InvalidUrlError
from chatledger.move_in.conversation import SourceConversation, SourceError
from chatledger.redaction import redact_url

__all__ = ["MissingLibraryError", "TableReader", "load_sqlalchemy", "table_name"]

#: A table or schema name as the readers take it (quoted names aside).
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*")

#: Asyncio drivers, and the sync driver of the same database to give instead.
_SYNC_DRIVER = {
    "asyncpg": "postgresql+psycopg",
    "psycopg_async": "postgresql+psycopg",
    "aiosqlite": "sqlite",
    "asyncmy": "mysql+pymysql",
    "aiomysql": "mysql+pymysql",
}


class MissingLibraryError(ChatLedgerError, ImportError):
    """A library a source format is read with is not installed; says how to."""


def load_sqlalchemy(source: str) -> ModuleType:
    """Import SQLAlchemy, or say which install line brings it."""
    try:
        import sqlalchemy
    except ImportError:
        hint = install_hint(url_scheme(source)) or "pip install chatledger-sql"
        raise MissingLibraryError(
            f"reading {redact_url(source)} needs SQLAlchemy, which chatledger-sql "
            f"brings: {hint}"
        ) from None
    return sqlalchemy


def table_name(text: str) -> tuple[str | None, str]:
    """``(schema, table)`` of ``table`` or ``schema.table``, checked before any I/O.

    Raises:
        InvalidNameError: a part is not a plain SQL name.
    """
    schema, dot, name = text.rpartition(".")
    for part in [name, schema] if dot else [name]:
        if not _NAME.fullmatch(part):
            raise InvalidNameError(
                f"table {text!r}: expected NAME or SCHEMA.NAME, each a letter or "
                "_ then letters, digits, _ or $"
            )
    return (schema or None), name


def _sqlite_file(url: str) -> Path | None:
    """The file a ``sqlite://`` URL names, or ``None`` (in memory, a ``file:`` URI)."""
    path, _, query = url.partition("://")[2].partition("?")
    options = parse_qs(query)
    if "memory" in options.get("mode", []) or "true" in options.get("uri", []):
        return None
    name = unquote(path.removeprefix("/"))
    return Path(name) if name and name != ":memory:" else None


def utc_time(value: object, zone: tzinfo) -> datetime | None:
    """``value`` read from a time column as an aware UTC time (``None`` stays)."""
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return datetime.fromtimestamp(value / 1000, UTC)
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if not isinstance(value, datetime):
        raise ValueError(f"{type(value).__name__} is not a time")
    if value.utcoffset() is None:
        value = value.replace(tzinfo=zone)
    return value.astimezone(UTC)


class TableReader:
    """The conversations of one table, each read with one ordered SELECT.

    Subclasses name the columns and the order and turn rows into messages.

    Args:
        source: The SQLAlchemy URL of the database (a sync driver).
        table: The table, ``NAME`` or ``SCHEMA.NAME``.
        zone: The zone of the naive times the table holds.

    Raises:
        MissingLibraryError: SQLAlchemy is not installed.
        InvalidUrlError: ``source`` is not a URL SQLAlchemy reads with a
            sync driver, or names a SQLite file that does not exist.
        InvalidNameError: ``table`` is not a plain name.
        ImportError: the URL's database driver is not installed.
    """

    #: The source family, the first part of every id the reader derives.
    family: ClassVar[str]
    #: The column that holds the conversation id.
    conversation_column: ClassVar[str]
    #: Every column the format needs.
    columns: ClassVar[tuple[str, ...]]
    #: The columns the format reads when there (a newer or older layout).
    optional_columns: ClassVar[tuple[str, ...]] = ()

    def __init__(self, source: str, table: str, zone: tzinfo) -> None:
        """Check the arguments and make the engine, without any I/O."""
        self.sql = load_sqlalchemy(source)
        self.schema, self.table_name = table_name(table)
        self.zone = zone
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import ArgumentError

        shown = redact_url(source)
        try:
            url = make_url(source)
        except ArgumentError:
            raise InvalidUrlError(
                f"{shown!r} is not a SQLAlchemy URL (such as sqlite:///app.db or "
                "postgresql+psycopg://user@host/db)"
            ) from None
        driver = url.get_driver_name()
        if driver in _SYNC_DRIVER:
            raise InvalidUrlError(
                f"{shown}: the source is read with a sync driver, not {driver}: "
                f"give {_SYNC_DRIVER[driver]}://..."
            )
        if url.get_backend_name() == "sqlite":
            path = _sqlite_file(source)
            if path is None or not path.is_file():
                raise InvalidUrlError(
                    f"{shown}: no SQLite file {str(path or '')!r} to read"
                )
        try:
            self.engine = self.sql.create_engine(url)
        except ArgumentError as exc:
            raise InvalidUrlError(f"{shown}: {exc}") from None
        if self.engine.dialect.name in ("mysql", "mariadb"):
            self.sql.event.listen(self.engine, "connect", _utc_session)
        self.where = f"{table} in {shown}"
        self._connection: Any = None
        self._table: Any = None
        self._ids: dict[str, Any] = {}

    # --- what a format says ------------------------------------------------

    def order(self, table: Any) -> list[Any]:
        """The ORDER BY of one conversation's rows: the source's own order."""
        raise NotImplementedError

    def convert(self, conversation: SourceConversation, rows: Sequence[Any]) -> None:
        """Turn ``rows`` (mappings by column name) into the conversation's messages."""
        raise NotImplementedError

    # --- reading -----------------------------------------------------------

    def table_candidates(self) -> list[str]:
        """The names the table may have, the one to read first."""
        return [self.table_name]

    def physical_order(self) -> list[Any]:
        """The rows' stored order, where the database shows one, to break ties."""
        name = self.engine.dialect.name
        if name == "sqlite":
            return [self.sql.literal_column("rowid")]
        if name == "postgresql":
            return [self.sql.literal_column("ctid")]
        return []

    def _open(self) -> Any:
        if self._table is not None:
            return self._table
        self._connection = self.engine.connect()
        inspector = self.sql.inspect(self._connection)
        names = inspector.get_table_names(schema=self.schema)
        found: list[str] = []
        for wanted in self.table_candidates():
            found = [n for n in names if n == wanted] or [
                n for n in names if n.lower() == wanted.lower()
            ]
            if found:
                break
        if len(found) > 1:
            raise SourceError(
                f"tables {', '.join(map(repr, found))} differ from "
                f"{self.table_name!r} in case only: give the one to read with --table"
            )
        if not found:
            raise SourceError(
                f"no table {self.table_name!r} in {redact_url(str(self.engine.url))}"
                + (f" (schema {self.schema!r})" if self.schema else "")
                + ": give the table's name with --table"
            )
        # The columns alone: reflecting the whole table (keys, indexes,
        # constraints) costs PostgreSQL a dozen catalog queries more.
        columns = [
            self.sql.Column(c["name"], c["type"])
            for c in inspector.get_columns(found[0], schema=self.schema)
        ]
        table = self.sql.Table(
            found[0], self.sql.MetaData(), *columns, schema=self.schema
        )
        by_lower = {c.name.lower(): c for c in table.columns}
        missing = [c for c in self.columns if c.lower() not in by_lower]
        if missing:
            raise SourceError(
                f"table {found[0]!r} has no column {', '.join(missing)}: it is not "
                f"what this format reads (its columns: {', '.join(by_lower)})"
            )
        self.found_name = found[0]
        self._columns = by_lower
        self._table = table
        return table

    def column(self, name: str) -> Any:
        """The table's column ``name`` (any case); ``None`` when it has none."""
        self._open()
        return self._columns.get(name.lower())

    def extra_columns(self) -> list[str]:
        """The table's columns this format does not know."""
        self._open()
        known = {c.lower() for c in (*self.columns, *self.optional_columns)}
        return [c.name for c in self._columns.values() if c.name.lower() not in known]

    def conversation_ids(self) -> list[str]:
        """Every conversation id of the table, as text, sorted."""
        column = self.column(self.conversation_column)
        query = self.sql.select(column).distinct()
        values = self._connection.execute(query).scalars().all()
        self._ids = {str(value): value for value in values}
        return sorted(self._ids)

    def read(self, conversation_id: str) -> SourceConversation:
        """One conversation's rows, in the source's order, as messages."""
        table = self._open()
        value = self._ids.get(conversation_id, conversation_id)
        query = (
            self.sql.select(table)
            .where(self.column(self.conversation_column) == value)
            .order_by(*self.order(table), *self.physical_order())
        )
        rows = self._connection.execute(query).mappings().all()
        # Read-only: end the transaction, so no snapshot or lock is held long.
        self._connection.rollback()
        lowered = [{k.lower(): v for k, v in row.items()} for row in rows]
        conversation = SourceConversation(conversation_id)
        self.convert(conversation, lowered)
        return conversation

    def time(self, value: object, column: str) -> datetime | None:
        """A time of ``column`` as an aware UTC time."""
        zone = self.zone
        if self.engine.dialect.name in ("mysql", "mariadb"):
            kind = type(self.column(column).type).__name__.upper()
            if kind == "TIMESTAMP":
                zone = UTC
        return utc_time(value, zone)

    def created_at(
        self,
        conversation: SourceConversation,
        where: str,
        row: dict[str, Any],
        column: str,
    ) -> datetime | None:
        """The time in ``row[column]``; an unreadable one is reported, ``None``."""
        value = row.get(column)
        try:
            return self.time(value, column)
        except (TypeError, ValueError) as exc:
            conversation.refuse(
                where, f"column {column!r} ({str(value)[:40]!r}) is not a time: {exc}"
            )
            return None

    def extra_fields(self, row: dict[str, Any]) -> list[str]:
        """``column 'x' ('value')`` for each unknown column with a value in ``row``."""
        found = []
        for name in self.extra_columns():
            value = row.get(name.lower())
            if value is not None:
                found.append(f"column {name!r} ({str(value)[:40]!r})")
        return found

    def close(self) -> None:
        """Close the connection and the engine."""
        if self._connection is not None:
            self._connection.close()
        self.engine.dispose()


def _utc_session(connection: Any, record: Any) -> None:
    """Read MySQL and MariaDB ``TIMESTAMP`` values in UTC on this connection."""
    cursor = connection.cursor()
    cursor.execute("SET time_zone = '+00:00'")
    cursor.close()
