"""Label pairs the Neo4j suites reuse, emptied between tests.

Each test gets a store that holds nothing and is no other test's. Creating a
repository's constraints and indexes (and waiting until they are online)
costs Neo4j about 0.3 s here and dropping them about 0.1 s; deleting the
nodes of a pair a test used, about 0.03 s. A pair keeps its schema from one
test to the next, and its queries keep their cached plans (the labels are in
their text).

What a pair's schema is depends on its two labels only: the repositories'
other options (retention, how many rows a view reads) change no constraint
or index, so one pool serves repositories of any options. A pair whose
constraints or indexes a test dropped, added or changed is not reused: it is
dropped when given back.
"""

from __future__ import annotations

import uuid
from typing import Any, LiteralString

from neo4j import Driver, GraphDatabase

from chatledger_neo4j import Neo4jChatMemoryRepository, parse_url

#: Nodes deleted per transaction when a pair is emptied.
EMPTY_BATCH = 2_000

_INDEXES: LiteralString = (
    "SHOW INDEXES YIELD name, type, entityType, labelsOrTypes, properties, "
    "state, owningConstraint "
    "WHERE any(label IN coalesce(labelsOrTypes, []) WHERE label IN $labels) "
    "RETURN name, type, entityType, labelsOrTypes, properties, state, "
    "owningConstraint"
)
_CONSTRAINTS: LiteralString = (
    "SHOW CONSTRAINTS YIELD name, type, entityType, labelsOrTypes, properties "
    "WHERE any(label IN coalesce(labelsOrTypes, []) WHERE label IN $labels) "
    "RETURN name, type, entityType, labelsOrTypes, properties"
)

Pair = tuple[str, str]
Schema = frozenset[tuple[str, ...]]


class LabelPool:
    """Label pairs for one module's tests: new ones, or emptied ones.

    Args:
        url: The server's URL (``CHATLEDGER_TEST_NEO4J_URL``); the pool
            talks through a driver of its own.
        prefix: Put in every label it makes, to tell the suites apart.
    """

    def __init__(self, url: str, prefix: str) -> None:
        """Open the pool's driver; no pair is made yet."""
        settings = parse_url(url)
        self._database = settings.database
        self._driver: Driver = GraphDatabase.driver(settings.uri, auth=settings.auth)
        self._prefix = prefix
        self._free: list[Pair] = []
        self._made: set[Pair] = set()
        self._schemas: dict[Pair, Schema] = {}

    def take(self) -> Pair:
        """A ``(conversation_label, message_label)`` pair whose labels no node
        has, with the repository's schema in place: reused, or new."""
        if self._free:
            return self._free.pop()
        tag = uuid.uuid4().hex[:12]
        pair = (f"Conversation{self._prefix}{tag}", f"Message{self._prefix}{tag}")
        self._made.add(pair)
        # Made here rather than by the test's first call, to know what the
        # pair's schema is before any test could change it.
        Neo4jChatMemoryRepository(
            self._driver,
            database=self._database,
            conversation_label=pair[0],
            message_label=pair[1],
        ).create_schema()
        self._schemas[pair] = self._schema(pair)
        return pair

    def give_back(self, repository: Any) -> None:
        """Empty the repository's labels for the next test, or drop the pair
        when its schema is no longer the one made for it."""
        statements = repository.statements
        pair = (statements.conversation_label, statements.message_label)
        if pair not in self._made or pair in self._free:
            return
        try:
            for label in pair:
                self._empty(label)
            kept = self._schema(pair) == self._schemas[pair]
        except Exception:
            kept = False
        if kept:
            self._free.append(pair)
        else:
            self._drop(pair)

    def close(self) -> None:
        """Drop every pair this pool made, nodes and schema, and the driver."""
        try:
            for pair in sorted(self._made):
                self._drop(pair)
        finally:
            self._driver.close()

    def _empty(self, label: str) -> None:
        delete = (
            f"MATCH (n:`{label}`) WITH n LIMIT $batch DETACH DELETE n "
            "RETURN count(*) AS deleted"
        )
        with self._session() as session:
            while True:
                record = session.run(delete, batch=EMPTY_BATCH).single(strict=True)
                if record["deleted"] < EMPTY_BATCH:
                    return

    def _schema(self, pair: Pair) -> Schema:
        rows: set[tuple[str, ...]] = set()
        with self._session() as session:
            for kind, query in (("index", _INDEXES), ("constraint", _CONSTRAINTS)):
                for record in session.run(query, labels=list(pair)):
                    rows.add((kind, *(repr(value) for value in record.values())))
        return frozenset(rows)

    def _drop(self, pair: Pair) -> None:
        """Delete the pair's nodes and every constraint and index on its
        labels, whatever a test made of them."""
        for label in pair:
            self._empty(label)
        with self._session() as session:
            constraints = [
                r["name"] for r in session.run(_CONSTRAINTS, labels=list(pair))
            ]
            for name in constraints:
                drop = f"DROP CONSTRAINT `{name}` IF EXISTS"
                session.run(drop).consume()
            indexes = [r["name"] for r in session.run(_INDEXES, labels=list(pair))]
            for name in indexes:
                session.run(f"DROP INDEX `{name}` IF EXISTS").consume()
        self._made.discard(pair)
        self._schemas.pop(pair, None)

    def _session(self) -> Any:
        return self._driver.session(database=self._database)
