"""The stores release 0.2 writes for the upgrade tests, one kind per backend.

Example:
    target = TARGETS["postgresql"]
    options = target.namespace("3f9a", "read")   # {"table_name": "r02_3f9a_read"}
    target.changes(url, options)                 # what migrate adds to 0.2's tables

Each target names its URL (a server's, from ``tests.backends``, or a file in
a temporary folder), the options that give each store a namespace of its
own (a table, a key prefix, a pair of labels), the options both releases
need besides, and the schema changes this release's ``upgrade_schema`` makes
to a store 0.2 made: ``None`` where the backend keeps no schema.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["TARGETS", "Target"]

#: The conversations table's columns the log, then the conversation's
#: record, added after 0.2.
_SQL_COLUMNS = (
    "system_batch",
    "system_last",
    "system_as_of",
    "owner",
    "metadata",
    "created_at",
)
#: The record's listing indexes (DuckDB keeps none).
_SQL_INDEXES = ("_conversations_by_owner", "_conversations_by_update")


def _table(tag: str, role: str) -> dict[str, Any]:
    return {"table_name": f"r02_{tag}_{role}"}


def _sql_columns(url: str, options: dict[str, Any]) -> list[str]:
    table = options["table_name"]
    return [f"added column {c} to table {table}_conversation" for c in _SQL_COLUMNS]


def _sql_changes(url: str, options: dict[str, Any]) -> list[str]:
    table = options["table_name"]
    return [
        *_sql_columns(url, options),
        *(
            f"created index {table}{suffix} on table {table}_conversation"
            for suffix in _SQL_INDEXES
        ),
    ]


def _sql_routine_changes(url: str, options: dict[str, Any]) -> list[str]:
    # 0.2 made the routine of its own version (_append_v1); this release calls
    # another, with the log's rules and the record's.
    routine = f"created routine {options['table_name']}_append_v4"
    return [*_sql_changes(url, options), routine]


def _cassandra_changes(url: str, options: dict[str, Any]) -> list[str]:
    keyspace = url.rstrip("/").rsplit("/", 1)[-1].partition("?")[0]
    table = f"{keyspace}.{options['table']}"
    # The log's columns and the conversation record's, then its listing table.
    columns = ("created_at", "indexed", "metadata", "owner", "system_batch")
    added = [f"added column {c} to table {table}" for c in (*columns, "updated_at")]
    return [*added, f"created table {table}_records"]


def _neo4j_changes(url: str, options: dict[str, Any]) -> list[str]:
    # The log's index, then the conversation record's two listing indexes.
    conversation = options["conversation_label"]
    return [
        f"created index chatledger_message_{options['message_label']}_system",
        f"created index chatledger_conversation_{conversation}_owner",
        f"created index chatledger_conversation_{conversation}_updated",
    ]


@dataclass(frozen=True)
class Target:
    """A backend as the upgrade tests write to it with 0.2 and open it now.

    Attributes:
        name: The test id.
        server: The backend of ``tests.backends`` that gives the URL, or
            ``None`` for a file.
        file: The URL of a file-backed store, ``{folder}`` left to fill.
        namespace: The options of one store's namespace, from the run's tag
            and the store's role.
        options: The other options both releases open it with.
        modules: What this environment needs to open it (the adapter and
            its driver); 0.2's environment gets the same drivers.
        written_with: The options only 0.2's writer opens it with (to make a
            keyspace, say).
        changes: What ``upgrade_schema`` adds to a store 0.2 made, from the
            URL and the namespace; ``None`` for a backend without a schema.
        alone: Why two processes cannot open the store at once, for a
            backend that allows one at a time; ``None`` for the others.
    """

    name: str
    server: str | None
    namespace: Callable[[str, str], dict[str, Any]]
    modules: tuple[str, ...]
    file: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    written_with: dict[str, Any] = field(default_factory=dict)
    changes: Callable[[str, dict[str, Any]], list[str]] | None = None
    alone: str | None = None

    def file_url(self, folder: Path) -> str:
        """The URL of the store's file in ``folder``."""
        assert self.file is not None
        return self.file.format(folder=folder.as_posix())


TARGETS: dict[str, Target] = {
    target.name: target
    for target in [
        Target(
            "sqlite",
            None,
            _table,
            ("chatledger_sql",),
            file="sqlite:///{folder}/release-0.2.db",
            changes=_sql_changes,
        ),
        Target(
            "duckdb",
            None,
            _table,
            ("chatledger_sql", "duckdb_engine"),
            file="duckdb:///{folder}/release-0.2.duckdb",
            changes=_sql_columns,
            alone="DuckDB lets one process at a time open a database file (a "
            "second one fails to take its lock), so no two processes meet a store",
        ),
        Target(
            "postgresql",
            "postgresql",
            _table,
            ("chatledger_sql", "psycopg"),
            changes=_sql_routine_changes,
        ),
        Target(
            "mariadb",
            "mariadb",
            _table,
            ("chatledger_sql", "pymysql"),
            changes=_sql_routine_changes,
        ),
        Target(
            "redis",
            "redis",
            lambda tag, role: {"key_prefix": f"r02:{tag}:{role}:"},
            ("chatledger_redis",),
        ),
        Target(
            "redis_cluster",
            "redis_cluster",
            lambda tag, role: {"key_prefix": f"r02:{tag}:{role}:"},
            ("chatledger_redis",),
            options={"cluster": True},
        ),
        Target(
            "cassandra",
            "cassandra",
            lambda tag, role: {"table": f"r02_{tag}_{role}"},
            ("chatledger_cassandra",),
            written_with={"create_keyspace": True},
            changes=_cassandra_changes,
        ),
        Target(
            "neo4j",
            "neo4j",
            lambda tag, role: {
                "conversation_label": f"R02Conversation_{tag}_{role}",
                "message_label": f"R02Message_{tag}_{role}",
            },
            ("chatledger_neo4j",),
            changes=_neo4j_changes,
        ),
        Target(
            "mongodb",
            "mongodb",
            lambda tag, role: {"collection": f"r02_{tag}_{role}"},
            ("chatledger_mongodb",),
        ),
    ]
}
