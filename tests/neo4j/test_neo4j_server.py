"""Neo4j-specific tests that need a server: query plans, atomicity, retries."""

from __future__ import annotations

import re
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import neo4j
import pytest

from chatledger import Message, MessageWindow, ToolResponse
from chatledger.adapters import EVICTED_IDS_KEPT, AppendResult, kept_newest
from chatledger_neo4j import Neo4jChatMemoryRepository
from tests.backends import backend_url

#: Repositories that create one schema at once, and how many times they do.
CREATORS = 8
SCHEMA_ROUNDS = 5


@pytest.fixture(scope="module")
def neo4j_url(required: set[str]) -> str:
    return backend_url("neo4j", required)


@pytest.fixture
def repository(neo4j_url: str) -> Iterator[Neo4jChatMemoryRepository]:
    tag = uuid.uuid4().hex[:12]
    repository = Neo4jChatMemoryRepository.from_url(
        neo4j_url,
        conversation_label=f"ConversationP{tag}",
        message_label=f"MessageP{tag}",
    )
    # The first call makes the schema: made here, the plans below use it.
    repository.find_conversation_ids()
    try:
        yield repository
    finally:
        repository.fault_points.clear()
        repository.drop_schema()
        repository.close()


def _operators(plan: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(operator type without its runtime suffix, details) for a plan tree."""
    operator = str(plan["operatorType"]).split("@")[0]
    details = str(plan.get("args", plan.get("arguments", {})).get("Details", ""))
    yield operator, details
    for child in plan.get("children", []):
        yield from _operators(child)


def _explain(
    repository: Neo4jChatMemoryRepository, query: str, **params: Any
) -> list[tuple[str, str]]:
    with repository._session() as session:
        summary = session.run("EXPLAIN " + query, params).consume()
    assert summary.plan is not None
    return list(_operators(summary.plan))


def _seeded(repository: Neo4jChatMemoryRepository) -> None:
    # Other conversations beside the one explained, so a scan and a seek differ.
    for c in range(20):
        repository.save_all(
            f"seed-{c}",
            [Message.system("s")]
            + [
                Message.user(f"u{i}") if i % 2 == 0 else Message.assistant(f"a{i}")
                for i in range(30)
            ],
        )


_PARAMS: dict[str, Any] = {
    "cid": "seed-1",
    "after": -1,
    "limit": 32,
    "system": "system",
    "counter": "tokens:x",
    "ids": ["x"],
    "delete_ids": ["x"],
    "evicted": ["y"],
    "evicted_kept": 1000,
    "emptied": None,
    "keep": [],
    "rows": [],
    "next_seq": 0,
    "message_count": 0,
    "size_total": None,
    "size_counter": None,
    "keys": {},
    "below": 2**63 - 1,
    "anchor": "x",
}


@pytest.mark.parametrize(
    ("name", "indexes"),
    [
        ("probe", ["(id)", "conversation_id, id", "conversation_id, role, seq"]),
        ("log_append", ["(id)", "conversation_id, id", "conversation_id, role, seq"]),
        ("view", ["(id)", "conversation_id, role, seq", "conversation_id, seq"]),
        ("view_older", ["(id)", "conversation_id, id", "conversation_id, seq"]),
        ("page_newest", ["conversation_id, seq"]),
        ("page_oldest", ["conversation_id, seq"]),
        ("read_page", ["conversation_id, seq"]),
        ("read_sizes", ["conversation_id, seq"]),
        ("read_all", ["conversation_id, seq"]),
        ("read_snapshot", ["(id)", "conversation_id, seq"]),
        ("append", ["(id)", "conversation_id, id"]),
        ("replace", ["(id)", "conversation_id, seq", "conversation_id, id"]),
        ("delete_messages", ["conversation_id, seq"]),
        ("delete_conversation", ["(id)"]),
        ("lock", ["(id)"]),
        ("lock_existing", ["(id)"]),
    ],
)
def test_neo4j_queries_seek_their_index(
    repository: Neo4jChatMemoryRepository, name: str, indexes: list[str]
) -> None:
    """EXPLAIN shows each per-conversation query seeking its indexes, no scans."""
    _seeded(repository)
    operators = _explain(repository, getattr(repository.statements, name), **_PARAMS)
    kinds = [op for op, _ in operators]
    scans = {"NodeByLabelScan", "AllNodesScan", "NodeIndexScan"}
    assert not any(op in scans for op in kinds), operators
    seeks = [d for op, d in operators if "IndexSeek" in op]
    for properties in indexes:
        assert any(properties in d for d in seeks), (properties, operators)
    if name in ("read_all", "read_page", "read_snapshot", "page_newest", "page_oldest"):
        # Rows come in the index's order: nothing sorts the whole conversation.
        assert not any(op in {"Sort", "Top", "PartialSort"} for op in kinds), operators
    if name == "probe":
        # The page of oldest messages streams from the seek and stops at LIMIT.
        assert "Top" not in kinds, operators


def _execution_order(plan: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """Operators in the order they first produce rows: children left to right."""
    for child in plan.get("children", []):
        yield from _execution_order(child)
    operator = str(plan["operatorType"]).split("@")[0]
    yield operator, str(plan.get("args", {}).get("Details", ""))


def test_neo4j_probe_reads_messages_only_after_the_lock(
    repository: Neo4jChatMemoryRepository,
) -> None:
    """In the probe's plan the SET that locks runs before any message is read."""
    message = repository.statements.message_label
    with repository._session() as session:
        summary = session.run(
            "EXPLAIN " + repository.statements.probe, _PARAMS
        ).consume()
    assert summary.plan is not None
    order = list(_execution_order(summary.plan))
    lock = next(
        i for i, (op, d) in enumerate(order) if op == "SetProperty" and "version" in d
    )
    message_reads = [i for i, (op, d) in enumerate(order) if f":{message}(" in d]
    assert message_reads, order
    assert lock < min(message_reads), order


def test_neo4j_schema_is_idempotent(repository: Neo4jChatMemoryRepository) -> None:
    """Creating the schema again changes nothing and raises nothing."""
    repository.create_schema()
    repository.create_schema()
    names = set(repository.statements.index_names.values())
    with repository._session() as session:
        shown = set(session.run("SHOW INDEXES YIELD name").value("name"))
    assert names <= shown


def test_neo4j_schema_made_by_several_repositories_at_once(neo4j_url: str) -> None:
    """Concurrent creators deadlock on the label's schema lock; the driver retries.

    A deadlock needs the creators' statements to interleave just so: several
    rounds, each on labels of its own, make one likely.
    """
    for _ in range(SCHEMA_ROUNDS):
        tag = uuid.uuid4().hex[:12]
        _create_schema_at_once(neo4j_url, f"ConvS{tag}", f"MsgS{tag}")


def _create_schema_at_once(url: str, conversation: str, message: str) -> None:
    start = threading.Barrier(CREATORS)
    failures: list[BaseException] = []

    def create() -> None:
        try:
            with Neo4jChatMemoryRepository.from_url(
                url,
                conversation_label=conversation,
                message_label=message,
                create_schema=False,
            ) as repository:
                repository.driver.verify_connectivity()  # connected beforehand
                start.wait()
                repository.create_schema()
        except BaseException as error:  # reported below
            failures.append(error)

    threads = [threading.Thread(target=create) for _ in range(CREATORS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    with Neo4jChatMemoryRepository.from_url(
        url, conversation_label=conversation, message_label=message
    ) as repository:
        try:
            assert failures == []
            names = set(repository.statements.index_names.values())
            with repository._session() as session:
                shown = set(session.run("SHOW INDEXES YIELD name").value("name"))
            assert names <= shown
        finally:
            repository.drop_schema()


@pytest.mark.parametrize(
    "point", ["after_lock", "after_insert", "after_evict", "before_commit"]
)
def test_neo4j_append_failing_midway_writes_nothing(
    repository: Neo4jChatMemoryRepository, point: str
) -> None:
    """An error at any step of an append rolls the whole append back."""
    first = [Message.user("U1"), Message.assistant("A1")]
    repository.append_to_window("c", first, MessageWindow(2))

    def fail(reached: str) -> None:
        raise RuntimeError(reached)

    repository.fault_points.on(point, fail)
    with pytest.raises(RuntimeError, match=point):
        repository.append_to_window(
            "c", [Message.user("U2"), Message.assistant("A2")], MessageWindow(2)
        )
    repository.fault_points.clear()
    assert repository.find_by_conversation_id("c") == first


@pytest.mark.parametrize("point", ["after_lock", "after_delete", "after_insert"])
def test_neo4j_replace_failing_midway_writes_nothing(
    repository: Neo4jChatMemoryRepository, point: str
) -> None:
    """An error at any step of ``save_all`` leaves the old conversation whole."""
    before = [Message.user(f"u{i}") for i in range(5)]
    repository.save_all("c", before)

    def fail(reached: str) -> None:
        raise RuntimeError(reached)

    repository.fault_points.on(point, fail)
    with pytest.raises(RuntimeError, match=point):
        repository.save_all("c", [Message.user("replacement")])
    repository.fault_points.clear()
    assert repository.find_by_conversation_id("c") == before


def test_neo4j_append_retried_after_lost_ack_is_a_noop(
    repository: Neo4jChatMemoryRepository,
) -> None:
    """An append committed but not acknowledged, then sent again, stores once."""
    batch = [Message.user("U1"), Message.assistant("A1")]

    def lose_ack(reached: str) -> None:
        raise ConnectionError(reached)

    repository.fault_points.on("after_commit", lose_ack)
    with pytest.raises(ConnectionError):
        repository.append_to_window("c", batch, MessageWindow(10))
    repository.fault_points.clear()
    result = repository.append_to_window("c", batch, MessageWindow(10))
    assert result.appended == []
    assert [m.id for m in repository.find_by_conversation_id("c")] == [
        m.id for m in batch
    ]


def test_neo4j_eviction_reads_pages_and_keeps_sequence(
    repository: Neo4jChatMemoryRepository,
) -> None:
    """A window shrunk far below a long history evicts across several pages."""
    history = [
        Message.user(f"u{i}") if i % 2 == 0 else Message.assistant(f"a{i}")
        for i in range(400)
    ]
    repository.append_to_window("long", history, MessageWindow(1000))
    result = repository.append_to_window(
        "long", [Message.user("last")], MessageWindow(1)
    )
    kept = repository.find_by_conversation_id("long")
    assert [m.content for m in kept] == ["last"]
    assert len(result.evicted_ids) == 400
    with repository._session() as session:
        seqs = session.run(
            "MATCH (m:`" + repository.statements.message_label + "`) "
            "WHERE m.conversation_id = 'long' RETURN m.seq AS seq"
        ).value("seq")
    assert seqs == [400]


def _conversation_node(
    repository: Neo4jChatMemoryRepository, cid: str
) -> dict[str, Any] | None:
    with repository._session() as session:
        record = session.run(
            "MATCH (c:`" + repository.statements.conversation_label + "` {id: $cid}) "
            "RETURN properties(c) AS p",
            cid=cid,
        ).single()
    return None if record is None else dict(record["p"])


def test_neo4j_evicted_ids_are_the_newest_kept_on_the_node(
    repository: Neo4jChatMemoryRepository,
) -> None:
    """The record on the node is what ``kept_newest`` makes, across its bound."""
    expected: list[str] = []
    every_evicted: list[str] = []
    # Two evictions of 700 each cross EVICTED_IDS_KEPT (1000): the oldest go.
    for round_ in range(3):
        batch = [
            Message.user(f"u{round_}.{i}")
            if i % 2 == 0
            else Message.assistant(f"a{round_}.{i}")
            for i in range(700)
        ]
        result = repository.append_to_window("bound", batch, MessageWindow(700))
        expected = kept_newest(expected, result.evicted_ids)
        every_evicted += result.evicted_ids
        node = _conversation_node(repository, "bound")
        assert node is not None
        assert node.get("evicted_ids", []) == expected
    assert len(every_evicted) == 1400
    assert len(expected) == EVICTED_IDS_KEPT
    # A retry of an id still in the record is a no-op; one that fell out of
    # it is stored again (the documented bound).
    window = MessageWindow(700)
    remembered = Message.user("again", id=expected[0])
    assert repository.append_to_window("bound", [remembered], window).appended == []
    forgotten = Message.user("again", id=every_evicted[0])
    result = repository.append_to_window("bound", [forgotten], window)
    assert [m.id for m in result.appended] == [forgotten.id]


def test_neo4j_window_that_empties_keeps_an_unlisted_node(
    repository: Neo4jChatMemoryRepository,
) -> None:
    """A window left empty keeps the record on a node no listing shows."""
    orphan = Message.tool(ToolResponse("call-1", "lookup", "42"))
    result = repository.append_to_window("orphan", [orphan], MessageWindow(5))
    assert result.evicted_ids == [orphan.id]
    assert repository.find_by_conversation_id("orphan") == []
    assert repository.count_messages("orphan") == 0
    assert "orphan" not in repository.find_conversation_ids()
    assert repository.find_conversation_ids_page().ids == []
    node = _conversation_node(repository, "orphan")
    assert node is not None
    assert node["evicted_ids"] == [orphan.id]
    assert node["emptied"] is True
    # The retry is a no-op, and writes no message.
    assert repository.append_to_window("orphan", [orphan], MessageWindow(5)) == (
        AppendResult()
    )
    assert repository.count_messages("orphan") == 0
    # The next message makes it a listed conversation again, record kept.
    user = Message.user("hello")
    repository.append_to_window("orphan", [user], MessageWindow(5))
    assert repository.find_conversation_ids() == ["orphan"]
    assert repository.find_conversation_ids_page().ids == ["orphan"]
    node = _conversation_node(repository, "orphan")
    assert node is not None
    assert "emptied" not in node
    assert node["evicted_ids"] == [orphan.id]
    # A replace states the whole conversation: the record goes.
    repository.save_all("orphan", [user])
    node = _conversation_node(repository, "orphan")
    assert node is not None
    assert "evicted_ids" not in node


def test_neo4j_listings_name_no_property_a_database_may_lack(
    repository: Neo4jChatMemoryRepository, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Listing a database where no window ever emptied a conversation is quiet.

    There the property ``emptied`` is unknown, and a statement that names it
    gets a warning from the server, which the driver logs on stderr with every
    listing. This server has seen the property, so each statement the listings
    send is explained here as that database would plan it: with the name
    replaced by one no database has seen.
    """
    sent: list[tuple[str, dict[str, Any]]] = []
    run = neo4j.ManagedTransaction.run

    def recorded(
        tx: neo4j.ManagedTransaction,
        query: Any,
        parameters: dict[str, Any] | None = None,
        **more: Any,
    ) -> Any:
        sent.append((str(query), {**(parameters or {}), **more}))
        return run(tx, query, parameters, **more)

    monkeypatch.setattr(neo4j.ManagedTransaction, "run", recorded)
    repository.save_all("c1", [Message.user("hi")])
    sent.clear()
    assert repository.find_conversation_ids() == ["c1"]
    assert repository.find_conversation_ids_page(None, 1).ids == ["c1"]
    assert repository.find_conversation_ids_page("a", 1).ids == ["c1"]
    monkeypatch.undo()
    assert len(sent) == 3
    unseen = f"emptied_{uuid.uuid4().hex[:12]}"
    for query, parameters in sent:
        query = re.sub(r"\.emptied\b", f".{unseen}", query)
        parameters = {
            key: unseen if value == "emptied" else value
            for key, value in parameters.items()
        }
        with repository._session() as session:
            summary = session.run("EXPLAIN " + query, parameters).consume()
        warnings = [
            status.status_description
            for status in summary.gql_status_objects
            if status.gql_status == "01N52"  # the property key does not exist
        ]
        assert warnings == [], query


def test_neo4j_reads_never_create_a_conversation_node(
    repository: Neo4jChatMemoryRepository,
) -> None:
    """Reading an unknown conversation leaves no node behind (the CLI's ls/show)."""
    assert repository.find_by_conversation_id("ghost") == []
    assert repository.count_messages("ghost") == 0
    assert repository.find_conversation_ids() == []
    assert repository.find_conversation_ids_page().ids == []
    assert repository._locked_read("ghost") == []
    assert _conversation_node(repository, "ghost") is None


def test_neo4j_drop_removes_every_node_and_the_schema(neo4j_url: str) -> None:
    """``drop`` deletes both labels' nodes and the four schema objects."""
    tag = uuid.uuid4().hex[:12]
    repository = Neo4jChatMemoryRepository.from_url(
        neo4j_url,
        conversation_label=f"ConversationD{tag}",
        message_label=f"MessageD{tag}",
    )
    try:
        for c in range(3):
            repository.save_all(f"c{c}", [Message.user(f"u{i}") for i in range(5)])
        repository.drop_schema()
        statements = repository.statements
        with repository._session() as session:
            left = session.run(
                "MATCH (n) WHERE n:`"
                + statements.conversation_label
                + "` OR n:`"
                + statements.message_label
                + "` RETURN count(n) AS n"
            ).single(strict=True)["n"]
            shown = set(session.run("SHOW INDEXES YIELD name").value("name"))
        assert left == 0
        assert not set(statements.index_names.values()) & shown
    finally:
        repository.close()
