"""Neo4j in the benchmarks: the floor on the official driver.

Example:
    floor = Neo4jFloor("bolt://127.0.0.1:7687")
    floor.insert("c1", 0, '{"role": "user"}')   # one CREATE, its own transaction
    rows = floor.select("c1")                    # one index-ordered MATCH
    floor.close()                                # deletes its nodes and index

The floor's append is one auto-commit ``CREATE`` of a node holding the
pre-encoded message (one round trip: the driver sends RUN and PULL together,
the server commits as the result ends). Its read is one ``MATCH`` of the
conversation's nodes through a ``(conversation_id, seq)`` range index, in the
index's order, payloads collected into one list and left undecoded. That is
the cheapest the driver can do per operation; our repository adds the lock,
the window rule and a managed transaction around two statements.

The backend that sets it beside our repository is ``neo4j`` in
:data:`bench.backends.BACKENDS`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, LiteralString
from urllib.parse import unquote, urlsplit

from bench.floors import unique_name

__all__ = ["Neo4jFloor"]

_PURGE_BATCH = 5000


def _driver(url: str) -> Any:
    """A driver for ``url``, credentials taken from its userinfo."""
    from neo4j import GraphDatabase

    parts = urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2]
    auth = None
    if parts.username is not None:
        auth = (unquote(parts.username), unquote(parts.password or ""))
    return GraphDatabase.driver(f"{parts.scheme}://{netloc}", auth=auth)


def _query(template: str, label: str) -> LiteralString:
    # The label is made here (unique_name: letters, digits, underscore).
    text: LiteralString = template.replace("{L}", f"`{label}`")
    return text


class Neo4jFloor:
    """The official driver on one long-lived session, auto-commit per statement."""

    name = "neo4j driver, auto-commit"

    def __init__(self, url: str) -> None:
        """Connect and create the floor's own label and its range index."""
        self.driver = _driver(url)
        self.session = self.driver.session()
        self.label = label = unique_name("BenchFloor")
        self._index = f"{label}_seq"
        self._create = _query(
            "CREATE (:{L} {conversation_id: $cid, seq: $seq, payload: $payload})",
            label,
        )
        self._select = _query(
            "MATCH (m:{L}) USING INDEX SEEK m:{L}(conversation_id, seq) "
            "WHERE m.conversation_id = $cid AND m.seq >= 0 "
            "WITH m ORDER BY m.conversation_id, m.seq "
            "RETURN collect(m.payload) AS payloads",
            label,
        )
        self._delete = _query(
            "MATCH (m:{L}) USING INDEX SEEK m:{L}(conversation_id, seq) "
            "WHERE m.conversation_id = $cid AND m.seq >= 0 DELETE m",
            label,
        )
        self._create_all = _query(
            "UNWIND $rows AS row "
            "CREATE (:{L} {conversation_id: $cid, seq: row.seq, payload: row.payload})",
            label,
        )
        index = (
            f"CREATE INDEX `{self._index}` FOR (m:{{L}}) ON (m.conversation_id, m.seq)"
        )
        self.session.run(_query(index, label)).consume()
        self.session.run("CALL db.awaitIndexes(300)").consume()

    def insert(self, conversation_id: str, seq: int, payload: str) -> None:
        """One CREATE in its own (auto-commit) transaction."""
        self.session.run(
            self._create, cid=conversation_id, seq=seq, payload=payload
        ).consume()

    def select(self, conversation_id: str) -> Sequence[Any]:
        """One MATCH of the conversation, in index order, as one list of payloads.

        One record holding a list: the Python driver spends far more per
        record than per list element, so one row per node is not the floor.
        """
        record = self.session.run(self._select, cid=conversation_id).single()
        return record[0] if record is not None else []

    def replace(self, conversation_id: str, payloads: Sequence[str]) -> None:
        """DELETE the conversation's nodes and CREATE the new ones, one transaction."""
        rows = [{"seq": seq, "payload": p} for seq, p in enumerate(payloads)]
        with self.session.begin_transaction() as tx:
            tx.run(self._delete, cid=conversation_id).consume()
            tx.run(self._create_all, cid=conversation_id, rows=rows).consume()
            tx.commit()

    def payload(self, row: Any) -> str | bytes:
        """A list element is the payload."""
        return row  # type: ignore[no-any-return]

    def close(self) -> None:
        """Delete the floor's nodes in batches, drop its index, disconnect."""
        purge = _query(
            "MATCH (m:{L}) WITH m LIMIT $batch DELETE m RETURN count(*) AS deleted",
            self.label,
        )
        try:
            while (
                self.session.run(purge, batch=_PURGE_BATCH).single(strict=True)[
                    "deleted"
                ]
                == _PURGE_BATCH
            ):
                pass
            self.session.run(
                _query(f"DROP INDEX `{self._index}` IF EXISTS", self.label)
            ).consume()
        finally:
            self.session.close()
            self.driver.close()
