"""Raw-driver floors: the least work each backend's own driver does per operation.

Example:
    floor = SQLiteFloor("/tmp/floor.db")
    floor.insert("c1", 0, '{"role": "user"}')   # one INSERT, autocommit
    rows = floor.select("c1")                    # one ordered SELECT
    floor.replace("c1", payloads)                # DELETE all + INSERT all, one tx
    floor.close()                                # drops the table

An append is one parameterised INSERT of a pre-encoded row (RPUSH on Redis) in
its own transaction (on Cassandra, a plain prepared INSERT), a read is one
ordered SELECT of the conversation (LRANGE).
Nothing is decoded: a floor is the physical cost of the round trip and the
commit, which no library can beat. ``replace`` is the write half of the
full-rewrite baseline (:class:`FullRewrite`), Spring AI's way of saving a window.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Sequence
from typing import Any, Protocol
from urllib.parse import unquote, urlsplit

from chatledger import Message, codec
from chatledger.validation import stamp_messages
from chatledger.window import MessageWindow, apply_window

__all__ = [
    "CassandraFloor",
    "DuckDBFloor",
    "Floor",
    "FullRewrite",
    "MariaDBFloor",
    "MemoryFloor",
    "PostgresFloor",
    "RedisFloor",
    "SQLiteFloor",
    "unique_name",
]


def unique_name(prefix: str = "bench") -> str:
    """Return a table name (or key prefix) no one else on the server uses."""
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


class Floor(Protocol):
    """What every raw-driver floor offers."""

    name: str

    def insert(self, conversation_id: str, seq: int, payload: str) -> None:
        """Store one encoded message at position ``seq``, committed."""
        ...

    def select(self, conversation_id: str) -> Sequence[Any]:
        """Return the stored rows of one conversation, in order."""
        ...

    def replace(self, conversation_id: str, payloads: Sequence[str]) -> None:
        """Delete the conversation and insert ``payloads``, in one transaction."""
        ...

    def payload(self, row: Any) -> str | bytes:
        """Return the encoded message held by a row from :meth:`select`."""
        ...

    def close(self) -> None:
        """Drop what this floor created and close its connection."""
        ...


class MemoryFloor:
    """The in-memory floor: a dict of lists, nothing else."""

    name = "dict of lists"

    def __init__(self) -> None:
        """Start empty."""
        self._rows: dict[str, list[str]] = {}

    def insert(self, conversation_id: str, seq: int, payload: str) -> None:
        """Append to the conversation's list."""
        self._rows.setdefault(conversation_id, []).append(payload)

    def select(self, conversation_id: str) -> Sequence[Any]:
        """Copy the conversation's list."""
        return list(self._rows.get(conversation_id, ()))

    def replace(self, conversation_id: str, payloads: Sequence[str]) -> None:
        """Swap in a new list."""
        self._rows[conversation_id] = list(payloads)

    def payload(self, row: Any) -> str | bytes:
        """A row is the payload."""
        return row  # type: ignore[no-any-return]

    def close(self) -> None:
        """Forget everything."""
        self._rows.clear()


class _DbApiFloor:
    """A floor over a DB-API connection in autocommit mode."""

    name = "dbapi"
    placeholder = "?"
    begin = "BEGIN"

    def __init__(self, connection: Any, table: str, ddl: str) -> None:
        self.connection = connection
        self.table = table
        p = self.placeholder
        self._insert = (
            f"INSERT INTO {table} (conversation_id, seq, payload) "
            f"VALUES ({p}, {p}, {p})"
        )
        self._select = (
            f"SELECT payload FROM {table} WHERE conversation_id = {p} ORDER BY seq"
        )
        self._delete = f"DELETE FROM {table} WHERE conversation_id = {p}"
        self.cursor = connection.cursor()
        self.cursor.execute(ddl.format(table=table))

    def insert(self, conversation_id: str, seq: int, payload: str) -> None:
        self.cursor.execute(self._insert, (conversation_id, seq, payload))

    def select(self, conversation_id: str) -> Sequence[Any]:
        self.cursor.execute(self._select, (conversation_id,))
        return self.cursor.fetchall()  # type: ignore[no-any-return]

    def replace(self, conversation_id: str, payloads: Sequence[str]) -> None:
        cursor = self.cursor
        cursor.execute(self.begin)
        try:
            cursor.execute(self._delete, (conversation_id,))
            cursor.executemany(
                self._insert,
                [(conversation_id, seq, p) for seq, p in enumerate(payloads)],
            )
        except BaseException:
            cursor.execute("ROLLBACK")
            raise
        cursor.execute("COMMIT")

    def payload(self, row: Any) -> str | bytes:
        return row[0]  # type: ignore[no-any-return]

    def close(self) -> None:
        try:
            self.cursor.execute(f"DROP TABLE IF EXISTS {self.table}")
        finally:
            self.connection.close()


_SQLITE_DDL = (
    "CREATE TABLE {table} (conversation_id TEXT NOT NULL, seq INTEGER NOT NULL, "
    "payload TEXT NOT NULL, PRIMARY KEY (conversation_id, seq))"
)


class SQLiteFloor(_DbApiFloor):
    """sqlite3 in autocommit mode, with the journal settings our adapter uses."""

    name = "sqlite3"
    begin = "BEGIN IMMEDIATE"

    def __init__(self, path: str, pragmas: Sequence[str] = ()) -> None:
        """Open ``path`` and apply ``pragmas`` (e.g. ``journal_mode=WAL``)."""
        connection = sqlite3.connect(
            path, isolation_level=None, check_same_thread=False
        )
        for pragma in pragmas:
            connection.execute(f"PRAGMA {pragma}")
        super().__init__(connection, unique_name(), _SQLITE_DDL)


class DuckDBFloor(_DbApiFloor):
    """duckdb in its default autocommit mode."""

    name = "duckdb"

    def __init__(self, path: str) -> None:
        """Open the database file at ``path``."""
        import duckdb

        super().__init__(
            duckdb.connect(path),
            unique_name(),
            "CREATE TABLE {table} (conversation_id VARCHAR NOT NULL, "
            "seq BIGINT NOT NULL, payload VARCHAR NOT NULL, "
            "PRIMARY KEY (conversation_id, seq))",
        )


class MariaDBFloor(_DbApiFloor):
    """pymysql with autocommit (one fsync'ed commit per INSERT, like ours)."""

    name = "pymysql"
    placeholder = "%s"
    begin = "START TRANSACTION"

    def __init__(self, url: str) -> None:
        """Connect to a ``mysql+pymysql://user:pw@host:port/db`` URL."""
        import pymysql

        parts = urlsplit(url)
        connection = pymysql.connect(
            host=parts.hostname or "127.0.0.1",
            port=parts.port or 3306,
            user=unquote(parts.username or "root"),
            password=unquote(parts.password or ""),
            database=parts.path.lstrip("/") or None,
            charset="utf8mb4",
            autocommit=True,
        )
        super().__init__(
            connection,
            unique_name(),
            "CREATE TABLE {table} (conversation_id VARCHAR(255) NOT NULL, "
            "seq BIGINT NOT NULL, payload LONGTEXT NOT NULL, "
            "PRIMARY KEY (conversation_id, seq)) ENGINE=InnoDB "
            "DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin",
        )


class PostgresFloor:
    """psycopg 3 in autocommit mode with server-side prepared statements."""

    name = "psycopg"

    def __init__(self, url: str) -> None:
        """Connect to a ``postgresql[+psycopg]://`` URL."""
        import psycopg

        scheme, rest = url.split("://", 1)
        self.connection = psycopg.connect(
            f"{scheme.split('+')[0]}://{rest}", autocommit=True, prepare_threshold=0
        )
        self.table = table = unique_name()
        self.connection.execute(
            f"CREATE TABLE {table} (conversation_id VARCHAR(255) NOT NULL, "
            "seq BIGINT NOT NULL, payload TEXT NOT NULL, "
            "PRIMARY KEY (conversation_id, seq))"
        )
        self._insert = (
            f"INSERT INTO {table} (conversation_id, seq, payload) VALUES (%s, %s, %s)"
        )
        self._select = (
            f"SELECT payload FROM {table} WHERE conversation_id = %s ORDER BY seq"
        )
        self._delete = f"DELETE FROM {table} WHERE conversation_id = %s"

    def insert(self, conversation_id: str, seq: int, payload: str) -> None:
        """One prepared INSERT, its own transaction."""
        self.connection.execute(self._insert, (conversation_id, seq, payload))

    def select(self, conversation_id: str) -> Sequence[Any]:
        """One prepared ordered SELECT."""
        return self.connection.execute(self._select, (conversation_id,)).fetchall()

    def replace(self, conversation_id: str, payloads: Sequence[str]) -> None:
        """DELETE and a pipelined executemany INSERT in one transaction."""
        with self.connection.transaction(), self.connection.cursor() as cursor:
            cursor.execute(self._delete, (conversation_id,))
            cursor.executemany(
                self._insert,
                [(conversation_id, seq, p) for seq, p in enumerate(payloads)],
            )

    def payload(self, row: Any) -> str | bytes:
        """The first column."""
        return row[0]  # type: ignore[no-any-return]

    def close(self) -> None:
        """Drop the table."""
        try:
            self.connection.execute(f"DROP TABLE IF EXISTS {self.table}")
        finally:
            self.connection.close()


class RedisFloor:
    """redis-py: RPUSH per append, LRANGE per read, MULTI DEL + RPUSH to replace."""

    name = "redis-py"

    def __init__(self, url: str) -> None:
        """Connect to ``url``; every key lives under a fresh prefix."""
        import redis

        self.client = redis.Redis.from_url(url)
        self.prefix = unique_name("bench-floor") + ":"

    def insert(self, conversation_id: str, seq: int, payload: str) -> None:
        """RPUSH one encoded message."""
        self.client.rpush(self.prefix + conversation_id, payload)

    def select(self, conversation_id: str) -> Sequence[Any]:
        """LRANGE the whole list."""
        return self.client.lrange(self.prefix + conversation_id, 0, -1)

    def replace(self, conversation_id: str, payloads: Sequence[str]) -> None:
        """DEL and RPUSH everything inside MULTI/EXEC."""
        key = self.prefix + conversation_id
        pipe = self.client.pipeline(transaction=True)
        pipe.delete(key)
        if payloads:
            pipe.rpush(key, *payloads)
        pipe.execute()

    def payload(self, row: Any) -> str | bytes:
        """A list element is the payload."""
        return row  # type: ignore[no-any-return]

    def close(self) -> None:
        """Delete every key under this floor's prefix (SCAN, never FLUSHDB)."""
        try:
            keys = list(self.client.scan_iter(match=self.prefix + "*", count=1000))
            if keys:
                self.client.delete(*keys)
        finally:
            self.client.close()


class CassandraFloor:
    """cassandra-driver: prepared statements at LOCAL_QUORUM on a plain table.

    An append is one INSERT of a pre-encoded row (no lightweight transaction),
    a read one SELECT of the partition in clustering order. ``replace`` sends
    the partition delete and the inserts as one single-partition batch, the
    delete one microsecond older than the inserts: statements of a batch share
    a timestamp otherwise, and a delete wins a tie.
    """

    name = "cassandra-driver"

    def __init__(self, url: str) -> None:
        """Connect to ``cassandra://host[:port][,host...]/keyspace``."""
        from cassandra import ConsistencyLevel
        from cassandra.cluster import Cluster

        parts = urlsplit(url)
        hosts = [h.rpartition(":")[0] or h for h in parts.netloc.split(",")]
        ports = {int(h.rpartition(":")[2]) for h in parts.netloc.split(",") if ":" in h}
        keyspace = unquote(parts.path.lstrip("/")) or "chatledger_bench"
        self.cluster = Cluster(hosts, port=ports.pop() if ports else 9042)
        self.session = self.cluster.connect()
        self.session.execute(
            f"CREATE KEYSPACE IF NOT EXISTS {keyspace} WITH replication = "
            "{'class': 'SimpleStrategy', 'replication_factor': 1}"
        )
        self.table = table = f"{keyspace}.{unique_name()}"
        self.session.execute(
            f"CREATE TABLE {table} (conversation_id text, seq bigint, payload text, "
            "PRIMARY KEY ((conversation_id), seq))"
        )
        prepare = self.session.prepare
        self._insert = prepare(
            f"INSERT INTO {table} (conversation_id, seq, payload) VALUES (?, ?, ?)"
        )
        self._select = prepare(
            f"SELECT payload FROM {table} WHERE conversation_id = ? ORDER BY seq"
        )
        self._stamped_insert = prepare(
            f"INSERT INTO {table} (conversation_id, seq, payload) VALUES (?, ?, ?) "
            "USING TIMESTAMP ?"
        )
        self._delete = prepare(
            f"DELETE FROM {table} USING TIMESTAMP ? WHERE conversation_id = ?"
        )
        for statement in (
            self._insert,
            self._select,
            self._stamped_insert,
            self._delete,
        ):
            statement.consistency_level = ConsistencyLevel.LOCAL_QUORUM

    def insert(self, conversation_id: str, seq: int, payload: str) -> None:
        """One prepared INSERT."""
        self.session.execute(self._insert, (conversation_id, seq, payload))

    def select(self, conversation_id: str) -> Sequence[Any]:
        """One prepared ordered SELECT of the partition."""
        return list(self.session.execute(self._select, (conversation_id,)))

    def replace(self, conversation_id: str, payloads: Sequence[str]) -> None:
        """Delete the partition and insert everything, in one batch."""
        import time

        from cassandra.query import BatchStatement, BatchType

        now = time.time_ns() // 1000
        batch = BatchStatement(batch_type=BatchType.UNLOGGED)
        batch.add(self._delete, (now - 1, conversation_id))
        for seq, payload in enumerate(payloads):
            batch.add(self._stamped_insert, (conversation_id, seq, payload, now))
        self.session.execute(batch)

    def payload(self, row: Any) -> str | bytes:
        """The first column."""
        return row[0]  # type: ignore[no-any-return]

    def close(self) -> None:
        """Drop the table and shut the cluster down."""
        try:
            self.session.execute(f"DROP TABLE IF EXISTS {self.table}")
        finally:
            self.cluster.shutdown()


class FullRewrite:
    """Spring AI's window save: read all, trim in Python, delete all, insert all.

    This is what ``MessageWindowChatMemory.add`` plus a ``saveAll`` that deletes
    and re-inserts the conversation cost, on the same raw driver as the floor.
    """

    def __init__(self, floor: Floor, max_messages: int) -> None:
        """Rewrite conversations in ``floor`` to windows of ``max_messages``."""
        self.floor = floor
        self.window = MessageWindow(max_messages)

    def load(self, conversation_id: str, messages: Sequence[Message]) -> None:
        """Store an initial window."""
        stamped = stamp_messages(messages)
        self.floor.replace(conversation_id, [codec.to_json(m) for m in stamped])

    def append(self, conversation_id: str, message: Message) -> None:
        """Add one message the read-trim-rewrite way."""
        floor = self.floor
        stored = [
            codec.from_json(floor.payload(row)) for row in floor.select(conversation_id)
        ]
        update = apply_window(stored, stamp_messages([message]), self.window)
        floor.replace(conversation_id, [codec.to_json(m) for m in update.messages])
