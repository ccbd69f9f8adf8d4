"""Conversation records on a real Neo4j: their plans, their times, old stores.

The suite (``ConversationInfoTests``) runs in the conformance classes; here
are what it cannot see: that an owner's listing seeks that owner's index
entries only, in the index's order; that updated_at never moves back; ties
the server orders otherwise than the listing; a metadata filter that reads
on; and nodes an earlier release wrote, which have no record times.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from chatledger import Message, MessageWindow
from chatledger.adapters import codec
from chatledger_neo4j import Neo4jChatMemoryRepository
from chatledger_neo4j.log_steps import NO_BOUND
from chatledger_neo4j.steps import record_parameters
from tests.backends import backend_url


@pytest.fixture(scope="module")
def neo4j_url(required: set[str]) -> str:
    return backend_url("neo4j", required)


@pytest.fixture
def repository(neo4j_url: str) -> Iterator[Neo4jChatMemoryRepository]:
    tag = uuid.uuid4().hex[:12]
    repository = Neo4jChatMemoryRepository.from_url(
        neo4j_url,
        conversation_label=f"ConversationI{tag}",
        message_label=f"MessageI{tag}",
    )
    repository.create_schema()
    try:
        yield repository
    finally:
        repository.drop_schema()
        repository.close()


def _run(
    repository: Neo4jChatMemoryRepository, query: str, **params: Any
) -> list[dict[str, Any]]:
    with repository._session() as session:
        return [record.data() for record in session.run(query, params)]


def _labels(repository: Neo4jChatMemoryRepository) -> tuple[str, str]:
    statements = repository.statements
    return f"`{statements.conversation_label}`", f"`{statements.message_label}`"


def _operators(plan: Any) -> Iterator[tuple[str, str, int]]:
    """(operator without its runtime suffix, details, rows) of a profiled plan."""
    operator = str(plan.get("operatorType", "")).split("@")[0]
    arguments = plan.get("args", plan.get("arguments", {}))
    yield operator, str(arguments.get("Details", "")), int(plan.get("rows", 0))
    for child in plan.get("children", []):
        yield from _operators(child)


def _profile(
    repository: Neo4jChatMemoryRepository, query: str, **params: Any
) -> tuple[list[tuple[str, str, int]], list[dict[str, Any]]]:
    with repository._session() as session:
        result = session.run("PROFILE " + query, params)
        rows = [record.data() for record in result]
        summary = result.consume()
    assert summary.profile is not None
    return list(_operators(summary.profile)), rows


def _listing_params(**more: Any) -> dict[str, Any]:
    return {"top": NO_BOUND, "after_id": None, **record_parameters(), **more}


def test_an_owners_listing_reads_that_owners_index_entries_only(
    repository: Neo4jChatMemoryRepository,
) -> None:
    """PROFILE: a range seek of (owner, updated_at, id), in its order, no scan."""
    for n in range(60):
        cid = f"c{n:02d}"
        repository.append_to_log(cid, [Message.user("hi")])
        repository.set_conversation_info(cid, owner="alice" if n % 20 == 0 else "bob")
    query = repository.statements.list_owned
    operators, rows = _profile(
        repository, query, **_listing_params(owner="alice", limit=10)
    )
    assert [row["id"] for row in rows] == ["c40", "c20", "c00"]
    kinds = [op for op, _, _ in operators]
    scans = {"NodeByLabelScan", "AllNodesScan", "NodeIndexScan"}
    assert not scans & set(kinds), operators
    # The rows come in the index's order: nothing sorts them.
    assert not {"Sort", "Top", "PartialSort", "PartialTop"} & set(kinds), operators
    seeks = [(op, d, n) for op, d, n in operators if "IndexSeek" in op]
    owner_seeks = [s for s in seeks if "owner, updated_at, id" in s[1]]
    assert owner_seeks, operators
    # Bob's 57 entries are never read: the seek yields Alice's 3.
    assert [n for _, _, n in owner_seeks] == [3], operators
    # A page stops at its limit: the seek yields limit rows, whatever is left.
    operators, rows = _profile(
        repository, query, **_listing_params(owner="bob", limit=5)
    )
    assert len(rows) == 5
    owner_seeks = [(op, d, n) for op, d, n in operators if "owner, updated_at, id" in d]
    assert [n for _, _, n in owner_seeks] == [5], operators


def test_everyones_listing_and_a_record_read_seek_their_indexes(
    repository: Neo4jChatMemoryRepository,
) -> None:
    """The listing seeks (updated_at, id) newest first; a record read seeks (id)."""
    for n in range(30):
        repository.append_to_log(f"c{n:02d}", [Message.system("s"), Message.user("u")])
    operators, rows = _profile(
        repository, repository.statements.list_all, **_listing_params(limit=4)
    )
    assert [row["id"] for row in rows] == ["c29", "c28", "c27", "c26"]
    assert [row["message_count"] for row in rows] == [2, 2, 2, 2]
    kinds = {op for op, _, _ in operators}
    assert not {"NodeByLabelScan", "AllNodesScan", "NodeIndexScan"} & kinds
    assert not {"Sort", "Top", "PartialSort", "PartialTop"} & kinds, operators
    # A range seek (NodeIndexSeek, or NodeIndexSeekByRange before 5.x) that
    # yields the page's rows and stops.
    listing = [(op, n) for op, d, n in operators if "(updated_at, id)" in d]
    assert len(listing) == 1, operators
    assert listing[0][0].startswith("NodeIndexSeek"), operators
    assert listing[0][1] == 4, operators
    for name in ("get_info", "set_info"):
        operators, _ = _profile(
            repository,
            getattr(repository.statements, name),
            cid="c03",
            **record_parameters(),
            set_owner=False,
            owner=None,
            set_metadata=False,
            metadata=None,
        )
        kinds = {op for op, _, _ in operators}
        assert not {"NodeByLabelScan", "AllNodesScan", "NodeIndexScan"} & kinds
        assert any("(id)" in d for op, d, _ in operators if "IndexSeek" in op)


def test_updated_at_never_moves_back(repository: Neo4jChatMemoryRepository) -> None:
    """A write whose time is older than the record's leaves updated_at.

    A writer that began before the previous one committed waits for the
    lock with an older time; a record moving back would let a listing show
    it twice. Here the record is set ahead of the clock, and every write to
    the messages leaves it there.
    """
    conversation, _ = _labels(repository)
    ahead = int((datetime.now(UTC) + timedelta(days=1)).timestamp() * 1000)
    repository.append_to_log("c", [Message.user(f"m{n}") for n in range(4)])
    _run(
        repository,
        f"MATCH (c:{conversation} {{id: 'c'}}) SET c.updated_at = $ahead",
        ahead=ahead,
    )
    writes: list[Callable[[], object]] = [
        lambda: repository.append_to_log("c", [Message.user("later")]),
        lambda: repository.append_to_window(
            "c", [Message.user("windowed")], MessageWindow(3)
        ),
        lambda: repository.remove_newest("c"),
        lambda: repository.save_all("c", [Message.user("only")]),
    ]
    for write in writes:
        write()
        info = repository.get_conversation_info("c")
        assert info is not None
        assert info.updated_at == datetime.fromtimestamp(ahead / 1000, UTC)


def test_ties_the_server_orders_otherwise_are_listed_once_in_code_point_order(
    repository: Neo4jChatMemoryRepository,
) -> None:
    """Neo4j compares strings by UTF-16 unit; the listing's ties go by code point.

    Ids with characters past U+FFFF and from U+E000 on, all at one
    updated_at: a walk a record at a time gives each once, in the listing's
    order.
    """
    conversation, _ = _labels(repository)
    ids = ["a", "z", "\ue000", "\ufffd", "\U0001f600", "\U0001f600x", "\ufffdz"]
    for cid in ids:
        repository.set_conversation_info(cid, owner="tie")
    _run(repository, f"MATCH (c:{conversation}) SET c.updated_at = 1000")
    expected = sorted(ids, reverse=True)
    for owner in ("tie", None):
        walked = []
        cursor = None
        while True:
            page = repository.find_conversations(owner=owner, cursor=cursor, limit=1)
            walked += [info.id for info in page.items]
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        assert walked == expected


def test_a_metadata_filter_reads_on_until_the_page_is_full(
    repository: Neo4jChatMemoryRepository,
) -> None:
    """Few matches among many records: each page full, each match once."""
    wanted = []
    for n in range(150):
        cid = f"c{n:03d}"
        topic = "tax" if n % 37 == 0 else "other"
        repository.set_conversation_info(cid, owner="o", metadata={"topic": topic})
        if topic == "tax":
            wanted.append(cid)
    for owner in ("o", None):
        pages = []
        cursor = None
        while True:
            page = repository.find_conversations(
                owner=owner, metadata={"topic": "tax"}, cursor=cursor, limit=2
            )
            pages.append([info.id for info in page.items])
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        assert [len(p) for p in pages] == [2, 2, 1]
        assert sorted(cid for p in pages for cid in p) == wanted


def _old_conversation(
    repository: Neo4jChatMemoryRepository, cid: str, messages: list[Message]
) -> None:
    """Write a conversation as the statements before the records did.

    The conversation node has its counters and version but no owner,
    metadata, created_at nor updated_at; each message its node as
    ``Statements.log_append`` creates it.
    """
    conversation, message = _labels(repository)
    rows = [
        {
            "id": m.id,
            "seq": seq,
            "role": m.role.value,
            "payload": codec.to_json(m),
        }
        for seq, m in enumerate(messages)
    ]
    _run(
        repository,
        f"CREATE (c:{conversation} {{id: $cid, next_seq: $n, "
        "message_count: $others, version: randomUUID()}) "
        f"WITH c UNWIND $rows AS row CREATE (:{message} {{conversation_id: $cid, "
        "id: row.id, seq: row.seq, batch: 0, role: row.role, "
        "payload: row.payload})",
        cid=cid,
        n=len(rows),
        others=sum(1 for m in messages if m.role.value != "system"),
        rows=rows,
    )


def _stamped(text: str, moment: datetime, role: str = "user") -> Message:
    made = Message.system(text) if role == "system" else Message.user(text)
    return made.stamped(moment)


def test_a_conversation_an_earlier_release_wrote(
    repository: Neo4jChatMemoryRepository,
) -> None:
    """Its record reads its messages' times; writes and the upgrade store them."""
    first = datetime(2024, 5, 1, 10, 0, 0, 123000, tzinfo=UTC)
    last = datetime(2024, 5, 2, 11, 30, 0, 456000, tzinfo=UTC)
    _old_conversation(
        repository,
        "old",
        [
            _stamped("be brief", first, "system"),
            _stamped("hi", first),
            _stamped("again", last),
        ],
    )
    _old_conversation(repository, "old-2", [_stamped("x", last)])
    _old_conversation(repository, "old-empty", [])
    info = repository.get_conversation_info("old")
    assert info is not None
    assert (info.created_at, info.updated_at) == (first, last)
    assert (info.message_count, info.owner, info.metadata) == (3, None, {})
    empty = repository.get_conversation_info("old-empty")
    assert empty is not None
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    assert (empty.created_at, empty.updated_at, empty.message_count) == (
        epoch,
        epoch,
        0,
    )
    # Not in the listing's index until they have times.
    assert repository.find_conversations().items == []
    before = datetime.now(UTC)
    repository.append_to_log("old", [Message.user("now")])
    appended = repository.get_conversation_info("old")
    assert appended is not None
    assert appended.created_at == first
    assert before - timedelta(milliseconds=1) <= appended.updated_at
    assert appended.message_count == 4
    assert [i.id for i in repository.find_conversations().items] == ["old"]
    # Setting the owner stores the times it read: the owner's listing has it.
    owned = repository.set_conversation_info("old-2", owner="ann")
    assert (owned.created_at, owned.updated_at) == (last, last)
    assert [i.id for i in repository.find_conversations(owner="ann").items] == ["old-2"]
    # Times are data, not schema: the upgrade fills them and reports nothing.
    assert repository.upgrade_schema() == []
    conversation, _ = _labels(repository)
    missing = f"MATCH (c:{conversation}) WHERE c.created_at IS NULL RETURN c.id AS id"
    assert _run(repository, missing) == []
    listed = repository.find_conversations().items
    assert [i.id for i in listed] == ["old", "old-2", "old-empty"]
    assert listed[0] == repository.get_conversation_info("old")
    stored = _run(
        repository,
        f"MATCH (c:{conversation} {{id: 'old'}}) "
        "RETURN c.created_at AS created, c.updated_at AS updated",
    )
    assert stored[0]["created"] == int(first.timestamp() * 1000)


def test_opening_a_store_without_the_record_indexes_fills_the_times(
    neo4j_url: str, repository: Neo4jChatMemoryRepository
) -> None:
    """The first open that makes the listing's indexes stores the times too."""
    moment = datetime(2023, 1, 2, 3, 4, 5, 6000, tzinfo=UTC)
    _old_conversation(repository, "old", [_stamped("hi", moment)])
    statements = repository.statements
    names = statements.index_names
    for key in ("conversation_owner", "conversation_updated"):
        _run(repository, f"DROP INDEX `{names[key]}`")
    with Neo4jChatMemoryRepository.from_url(
        neo4j_url,
        conversation_label=statements.conversation_label,
        message_label=statements.message_label,
    ) as reopened:
        listed = reopened.find_conversations().items
    assert [(i.id, i.created_at, i.updated_at) for i in listed] == [
        ("old", moment, moment)
    ]


def test_record_reads_name_no_property_a_database_may_lack(
    repository: Neo4jChatMemoryRepository,
) -> None:
    """Records read on a database that never stored a title draw no warning.

    There ``metadata`` (or ``created_at``, ``message_count``) is an unknown
    property, and a statement naming it gets a warning from the server with
    every read. Each record statement is explained as that database would
    plan it: those names replaced by names no database has seen.
    """
    statements = repository.statements
    keys = record_parameters()["keys"]
    unseen = {key: f"{key}_{uuid.uuid4().hex[:12]}" for key in keys}
    parameters = {
        **_listing_params(owner="o", limit=2, batch=10),
        "keys": unseen,
        "cid": "c",
    }
    for name in ("get_info", "list_owned", "list_all", "times_missing"):
        query = getattr(statements, name)
        for key, renamed in unseen.items():
            query = re.sub(rf"\.{key}\b", f".{renamed}", query)
        with repository._session() as session:
            summary = session.run("EXPLAIN " + query, parameters).consume()
        warnings = [
            status.status_description
            for status in summary.gql_status_objects
            if status.gql_status == "01N52"  # the property key does not exist
        ]
        assert warnings == [], (name, warnings)
