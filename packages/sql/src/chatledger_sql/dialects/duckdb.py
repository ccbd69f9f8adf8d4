"""DuckDB: writers of one process queue on a lock; conflicts are retried.

Example:
    from chatledger_sql import SqlChatMemoryRepository

    repository = SqlChatMemoryRepository.from_url("duckdb:///chat.duckdb")

DuckDB has no row locks: concurrent transactions that touch the same row fail
at commit with a conflict. One process owns a DuckDB file, so the repository
serialises its writers on an in-process lock per engine, and still retries a
conflict should another connection write.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy import Select, exc

from chatledger_sql.dialects.base import SqlDialect

if TYPE_CHECKING:
    from sqlalchemy import Table

__all__ = ["DuckDBDialect"]


class DuckDBDialect(SqlDialect):
    """DuckDB 1.0 and later, through ``duckdb-engine``."""

    name = "duckdb"
    writes_exclusively = True
    #: No listing indexes: DuckDB's ART indexes answer point lookups, never an
    #: ordered range (a listing is a scan and a top-N either way), they would
    #: cost every append, and a table with an index refuses later ALTERs.
    keeps_conversation_indexes = False

    def serialize_in_process(self) -> bool:
        """Yes: DuckDB has no row locks."""
        return True

    def is_retryable(self, error: exc.DBAPIError) -> bool:
        """A write-write conflict between transactions."""
        return "conflict" in str(error.orig).lower() or super().is_retryable(error)

    def lock_rows(self, statement: Select[Any], table: Table) -> Select[Any]:
        """No row locks in DuckDB; writers are serialised in the process."""
        return statement
