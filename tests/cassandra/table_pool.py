"""Tables the conformance suites reuse, emptied between tests.

Each test gets a store that is empty and no other test's. Dropping a
repository's two tables (its own and its listing table) and creating two
more costs Cassandra about 1.4 s a test here; emptying them with TRUNCATE
about 0.5 s. A table a test dropped is not reused.
"""

from __future__ import annotations

import uuid
from typing import Any

from cassandra import InvalidRequest

from chatledger_cassandra import CassandraChatMemoryRepository
from chatledger_cassandra.statements import listing_table_name


class TablePool:
    """Table names for one module's tests: new ones, or emptied ones."""

    def __init__(self, root: CassandraChatMemoryRepository, prefix: str) -> None:
        self.root = root
        self._prefix = prefix
        self._free: list[str] = []
        self._made: set[str] = set()

    def take(self) -> str:
        """A table name that holds nothing: reused, or new (made on first use)."""
        if self._free:
            return self._free.pop()
        table = f"{self._prefix}_{uuid.uuid4().hex[:20]}"
        self._made.add(table)
        return table

    def give_back(self, repository: Any) -> None:
        """Empty the repository's tables for the next test, or drop what is left."""
        table = repository.table
        try:
            for name in (table, listing_table_name(table)):
                self.root.session.execute(f"TRUNCATE {self._qualified(name)}")
        except InvalidRequest:  # the test dropped one: start the next anew
            self._drop(table)
            return
        self._free.append(table)

    def close(self) -> None:
        """Drop every table this pool made."""
        for table in self._made:
            self._drop(table)

    def _drop(self, table: str) -> None:
        for name in (table, listing_table_name(table)):
            self.root.session.execute(f"DROP TABLE IF EXISTS {self._qualified(name)}")

    def _qualified(self, name: str) -> str:
        return f'"{self.root.keyspace}"."{name}"'
