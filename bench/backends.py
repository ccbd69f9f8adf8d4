"""The backends the benchmarks run on, each with our repository and its floor.

Example:
    backend = BACKENDS["sqlite"]
    with backend.open(workdir) as setup:
        setup.repository      # our repository (None if the adapter is missing)
        setup.floor           # the raw-driver floor on the same engine

Server URLs come from ``CHATLEDGER_BENCH_<NAME>_URL``, then
``CHATLEDGER_TEST_<NAME>_URL``, then the loopback defaults below. Every table
and key prefix is fresh and removed afterwards.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.floors import (
    CassandraFloor,
    DuckDBFloor,
    Floor,
    MariaDBFloor,
    MemoryFloor,
    PostgresFloor,
    RedisFloor,
    SQLiteFloor,
    unique_name,
)
from bench.log_size import LOAD_BATCH
from bench.neo4j import Neo4jFloor
from chatledger import ChatMemoryRepository, InMemoryChatMemoryRepository, Retention

__all__ = ["BACKENDS", "Backend", "Setup"]

_DEFAULT_URLS = {
    "postgresql": "postgresql+psycopg://postgres@127.0.0.1:5432/test",
    "mariadb": "mysql+pymysql://root@127.0.0.1:3306/test",
    "redis": "redis://127.0.0.1:6379/0",
    "cassandra": "cassandra://127.0.0.1:9042/chatledger_test",
    # Where .ci/neo4j/up serves Bolt, with authentication off.
    "neo4j": "bolt://127.0.0.1:7687",
}


def server_url(name: str) -> str:
    """Return the URL of a server backend (environment first, then loopback)."""
    for var in (
        f"CHATLEDGER_BENCH_{name.upper()}_URL",
        f"CHATLEDGER_TEST_{name.upper()}_URL",
    ):
        if os.environ.get(var):
            return os.environ[var]
    return _DEFAULT_URLS[name]


@dataclass
class Setup:
    """One backend, opened: our repository, its floor and what describes them.

    Attributes:
        repository: Our repository on a fresh table or key prefix, or ``None``
            when its adapter is not installed (``missing`` says why).
        floor: The raw-driver floor on the same server or engine.
        notes: Settings worth printing beside the figures.
        bounded: Makes our repository on the same store with
            ``retention=Retention.last(n)``, or ``None`` where the bench
            does not measure a bounded log.
        refresh_statistics: Brings the planner's statistics of our tables
            up to date, as the server's own background work would after a
            bulk load, or ``None`` where the store keeps them itself.
        log_batch: Messages per append when the long log is loaded
            (:mod:`bench.log_size`).
    """

    repository: ChatMemoryRepository | None
    floor: Floor
    missing: str | None = None
    notes: list[str] = field(default_factory=list)
    bounded: Callable[[int], ChatMemoryRepository] | None = None
    refresh_statistics: Callable[[], None] | None = None
    log_batch: int = LOAD_BATCH


@dataclass(frozen=True)
class Backend:
    """How to open one backend.

    Attributes:
        name: The name ``--backends`` takes.
        label: The name printed in the table.
        append_target: The largest ours/floor append ratio we aim for at every W,
            or ``None`` when there is no target for this backend.
        opener: Makes the :class:`Setup`, registering cleanup on the stack.
    """

    name: str
    label: str
    append_target: float | None
    opener: Callable[[ExitStack, Path], Setup]

    @contextmanager
    def open(self, workdir: Path) -> Iterator[Setup]:
        """Open the backend; everything it created is removed on exit."""
        with ExitStack() as stack:
            yield self.opener(stack, workdir)


def _sql_repository(stack: ExitStack, url: str) -> tuple[Any, str | None, str]:
    """Open our SQL repository on a fresh table; returns (repo, missing, table)."""
    table = unique_name()
    try:
        from chatledger_sql import SqlChatMemoryRepository
    except ImportError as exc:
        return None, f"chatledger-sql not installed ({exc})", table
    repository = SqlChatMemoryRepository.from_url(url, table_name=table)
    # Callbacks run last-in first-out: drop the tables, then dispose the engine.
    stack.callback(repository.close)
    stack.callback(repository.drop_schema)
    return repository, None, table


def _sql_bounded(repository: Any, table: str) -> Callable[[int], Any] | None:
    """Our SQL repository on the same engine and tables, with a bound."""
    if repository is None:
        return None
    from chatledger_sql import SqlChatMemoryRepository

    return lambda n: SqlChatMemoryRepository(
        repository.engine,
        table_name=table,
        create_schema=False,
        retention=Retention.last(n),
    )


def _analyze(repository: Any) -> Callable[[], None] | None:
    """``ANALYZE`` of our PostgreSQL tables: what autovacuum does within a
    minute of a bulk load, done at once so that a plan made on a table
    without statistics (an index condition left as a filter over the whole
    conversation) does not outlast the load."""
    if repository is None:
        return None

    def analyze() -> None:
        tables = repository.tables
        with repository.engine.begin() as connection:
            preparer = connection.dialect.identifier_preparer
            for table in (tables.messages, tables.conversations, tables.evicted):
                connection.exec_driver_sql(f"ANALYZE {preparer.format_table(table)}")

    return analyze


def _memory(stack: ExitStack, workdir: Path) -> Setup:
    floor = MemoryFloor()
    stack.callback(floor.close)
    return Setup(InMemoryChatMemoryRepository(), floor)


def _sqlite(stack: ExitStack, workdir: Path) -> Setup:
    repository, missing, table = _sql_repository(
        stack, f"sqlite:///{workdir / 'ours.db'}"
    )
    pragmas: list[str] = []
    if repository is not None:
        # The floor gets the journal settings our adapter runs with, so the
        # ratio compares code, not durability settings.
        with repository.engine.connect() as connection:
            for pragma in ("journal_mode", "synchronous"):
                value = connection.exec_driver_sql(f"PRAGMA {pragma}").scalar()
                pragmas.append(f"{pragma}={value}")
    floor = SQLiteFloor(str(workdir / "floor.db"), pragmas)
    stack.callback(floor.close)
    return Setup(
        repository,
        floor,
        missing,
        [f"PRAGMA {p}" for p in pragmas],
        _sql_bounded(repository, table),
    )


def _duckdb(stack: ExitStack, workdir: Path) -> Setup:
    repository, missing, _ = _sql_repository(
        stack, f"duckdb:///{workdir / 'ours.duckdb'}"
    )
    floor = DuckDBFloor(str(workdir / "floor.duckdb"))
    stack.callback(floor.close)
    return Setup(repository, floor, missing)


def _server_sql(
    name: str, floor_class: Callable[[str], Floor]
) -> Callable[[ExitStack, Path], Setup]:
    def opener(stack: ExitStack, workdir: Path) -> Setup:
        url = server_url(name)
        floor = floor_class(url)
        stack.callback(floor.close)
        repository, missing, table = _sql_repository(stack, url)
        return Setup(
            repository,
            floor,
            missing,
            bounded=_sql_bounded(repository, table),
            refresh_statistics=_analyze(repository) if name == "postgresql" else None,
        )

    return opener


def _redis(stack: ExitStack, workdir: Path) -> Setup:
    url = server_url("redis")
    floor = RedisFloor(url)
    stack.callback(floor.close)
    try:
        from chatledger_redis import RedisChatMemoryRepository
    except ImportError as exc:
        return Setup(None, floor, f"chatledger-redis not installed ({exc})")
    prefix = unique_name("bench-ours")
    repository = RedisChatMemoryRepository.from_url(url, key_prefix=prefix)

    def cleanup() -> None:
        keys = list(floor.client.scan_iter(match=prefix + "*", count=1000))
        if keys:
            floor.client.delete(*keys)

    # Registered after floor.close, so it runs before the floor's client closes.
    stack.callback(cleanup)
    stack.callback(repository.close)
    from redis.utils import HIREDIS_AVAILABLE

    connection = floor.client.connection_pool.get_connection()
    protocol = connection.protocol
    floor.client.connection_pool.release(connection)
    parser = "hiredis" if HIREDIS_AVAILABLE else "pure-Python parser"

    def bounded(n: int) -> Any:
        made = RedisChatMemoryRepository.from_url(
            url, key_prefix=prefix, retention=Retention.last(n)
        )
        stack.callback(made.close)
        return made

    return Setup(
        repository, floor, notes=[f"RESP{protocol}, {parser}"], bounded=bounded
    )


def _cassandra(stack: ExitStack, workdir: Path) -> Setup:
    url = server_url("cassandra")
    floor = CassandraFloor(url)
    stack.callback(floor.close)
    try:
        from chatledger_cassandra import CassandraChatMemoryRepository
    except ImportError as exc:
        return Setup(None, floor, f"chatledger-cassandra not installed ({exc})")
    repository = CassandraChatMemoryRepository.from_url(
        url, table=unique_name(), create_keyspace=True
    )
    # Last in, first out: drop our table, then shut our cluster down.
    stack.callback(repository.close)
    stack.callback(repository.drop_schema)
    version = floor.session.execute("SELECT release_version FROM system.local").one()[0]
    return Setup(
        repository,
        floor,
        notes=[f"Cassandra {version}, LWT per write, LOCAL_QUORUM / LOCAL_SERIAL"],
    )


def _neo4j(stack: ExitStack, workdir: Path) -> Setup:
    url = server_url("neo4j")
    floor = Neo4jFloor(url)
    stack.callback(floor.close)
    server = floor.driver.get_server_info().agent
    try:
        from chatledger_neo4j import Neo4jChatMemoryRepository
    except ImportError as exc:
        return Setup(None, floor, f"chatledger-neo4j not installed ({exc})")
    tag = unique_name("Bench")
    repository = Neo4jChatMemoryRepository.from_url(
        url, conversation_label=f"{tag}Conv", message_label=f"{tag}Msg"
    )
    # Last in, first out: drop our labels, then close the driver.
    stack.callback(repository.close)
    stack.callback(repository.drop_schema)
    import neo4j

    # Loading 100,000 messages took 62 s in appends of 1,000 and 158 s in
    # appends of 5,000: the cost of one append grows faster than its size.
    return Setup(
        repository,
        floor,
        notes=[server, f"driver {neo4j.__version__}"],
        log_batch=1000,
    )


BACKENDS: dict[str, Backend] = {
    b.name: b
    for b in (
        Backend("memory", "in-memory", None, _memory),
        Backend("sqlite", "SQLite file", 1.5, _sqlite),
        Backend("duckdb", "DuckDB file", None, _duckdb),
        Backend(
            "postgresql", "PostgreSQL", 1.5, _server_sql("postgresql", PostgresFloor)
        ),
        Backend("mariadb", "MariaDB", 1.5, _server_sql("mariadb", MariaDBFloor)),
        Backend("redis", "Redis", 1.5, _redis),
        Backend("cassandra", "Cassandra", None, _cassandra),
        Backend("neo4j", "Neo4j", None, _neo4j),
    )
}
