"""Conversation records on MongoDB's one-document layout.

The conformance suite (``ConversationInfoTests``) checks the records'
behaviour; these tests check what is particular to this adapter: the record
rides on the writes the messages already send (one command each), its
``updated_at`` never moves back and stays when a write stores nothing, an
expired document starts a new record, a document an earlier release wrote
reads its messages' times and is filled by ``create_indexes``, the listing
walks ties of ``updated_at`` exactly once, and the metadata's equality keys
compare as core compares.

Most run on :class:`tests.mongodb.standin.StandInClient` (mongomock storage
plus a test-only evaluator of the pipelines' operators), which is NOT a
MongoDB server: it checks the adapter's code and the logic of its pipelines
and queries, and nothing about which index a server reads. The tests named
``test_mongodb_server_...`` ask a real server's query planner
(``explain``) and run only where ``CHATLEDGER_TEST_MONGODB_URL`` is set (or a
Docker daemon answers).
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from chatledger import Message
from chatledger.adapters import check_find_conversations, metadata_matches
from chatledger.conversation_info import ConversationInfo, listing_key
from chatledger.window import MessageWindow
from tests.backends import backend_url

pytest.importorskip("mongomock")
pymongo = pytest.importorskip("pymongo")

from pymongo import monitoring  # noqa: E402

from chatledger_mongodb import MongoDBChatMemoryRepository  # noqa: E402
from chatledger_mongodb.records import (  # noqa: E402
    OWNER_INDEX_NAME,
    UPDATED_INDEX_NAME,
    listing_pipeline,
    match_keys,
)
from tests.mongodb.test_log import _raw, _recorded, _repository  # noqa: E402

_RECORD_FIELDS = ["created_at", "updated_at", "owner", "meta", "meta_eq"]


def _walk(repository: Any, limit: int, **conditions: Any) -> list[ConversationInfo]:
    items: list[ConversationInfo] = []
    cursor = None
    for _ in range(1_000):
        page = repository.find_conversations(cursor=cursor, limit=limit, **conditions)
        items += page.items
        if page.next_cursor is None:
            return items
        cursor = page.next_cursor
    raise AssertionError("paging did not end")


def _ids(items: list[ConversationInfo]) -> list[str]:
    return [item.id for item in items]


def test_create_schema_makes_the_two_listing_indexes() -> None:
    """``(owner, updated_at, _id)`` and ``(updated_at, _id)``, beside the TTL one."""
    repository = _repository()
    indexes = repository.collection.index_information()
    assert list(indexes[OWNER_INDEX_NAME]["key"]) == [
        ("owner", 1),
        ("updated_at", 1),
        ("_id", 1),
    ]
    assert list(indexes[UPDATED_INDEX_NAME]["key"]) == [("updated_at", 1), ("_id", 1)]


def test_the_listing_reads_its_index_range_in_the_index_order() -> None:
    """The ``$match`` bounds the index's leading keys; the ``$sort`` is its order.

    Given an owner: equality on it and a range of ``updated_at`` below the
    cursor's, sorted by the owner index's keys reversed; without one, the
    update index's. The metadata filter is a condition of the same query.
    """
    first = check_find_conversations(owner="alice", metadata={"t": 1}, limit=2)
    now = datetime.now(UTC)
    owned = listing_pipeline(first, now)
    assert [next(iter(stage)) for stage in owned] == [
        "$match",
        "$sort",
        "$limit",
        "$project",
    ]
    match, sort, limit = owned[0]["$match"], owned[1]["$sort"], owned[2]["$limit"]
    assert match["owner"] == "alice"
    assert match["meta_eq"] == {"$all": match_keys({"t": 1})}
    assert list(sort.items()) == [("owner", -1), ("updated_at", -1), ("_id", -1)]
    assert limit == 3
    everyone = listing_pipeline(check_find_conversations(limit=5), now)
    assert list(everyone[1]["$sort"].items()) == [("updated_at", -1), ("_id", -1)]


def test_each_record_call_and_each_write_is_one_command() -> None:
    """set, get and a page are one command each; a write sends none for its record."""
    repository = _repository()
    recorded = _recorded(repository)
    repository.append_to_log("c", [Message.user("hi")])
    assert recorded.names() == ["find_one_and_update"]
    recorded.clear()
    repository.set_conversation_info("c", owner="ann", metadata={"t": "x"})
    assert recorded.names() == ["find_one_and_update"]
    recorded.clear()
    info = repository.get_conversation_info("c")
    assert recorded.names() == ["aggregate"]
    recorded.clear()
    page = repository.find_conversations(owner="ann", metadata={"t": "x"})
    assert recorded.names() == ["aggregate"]
    assert page.items == [info]
    recorded.clear()
    repository.save_all("c", [Message.user("again")])
    repository.remove_newest("c")
    repository.append_to_window("c", [Message.user("w")], MessageWindow(5))
    assert recorded.names() == [
        "update_one",
        "find_one_and_update",
        "find_one_and_update",
    ]


def test_ties_of_updated_at_are_walked_exactly_once() -> None:
    """Records sharing one ``updated_at`` are ordered by id and each comes once."""
    repository = _repository()
    ids = [f"t{n:02d}" for n in range(9)]
    for cid in ids:
        repository.append_to_log(cid, [Message.user("hi")])
        repository.set_conversation_info(cid, owner="tie" if cid < "t05" else None)
    moment = datetime(2030, 5, 6, 7, 8, 9, 123000, tzinfo=UTC)
    repository.collection.update_many({}, {"$set": {"updated_at": moment}})
    repository.collection.update_one(
        {"_id": "t03"}, {"$set": {"updated_at": moment - timedelta(milliseconds=1)}}
    )
    expected = sorted(ids, key=lambda cid: (cid != "t03", cid), reverse=True)
    for limit in (1, 2, 4, 100):
        walked = _walk(repository, limit)
        assert _ids(walked) == expected
        keys = [listing_key(item) for item in walked]
        assert all(a > b for a, b in itertools.pairwise(keys))
        owned = _walk(repository, limit, owner="tie")
        assert _ids(owned) == [cid for cid in expected if cid < "t05"]
        before = _walk(repository, limit, updated_before=moment)
        assert _ids(before) == ["t03"]


def test_updated_at_never_moves_back() -> None:
    """A write whose clock is behind the record's time leaves the later time."""
    repository = _repository()
    repository.append_to_log("c", [Message.user("one")])
    made = repository.get_conversation_info("c")
    assert made is not None
    ahead = datetime(2099, 1, 1, tzinfo=UTC)
    repository.collection.update_one({"_id": "c"}, {"$set": {"updated_at": ahead}})
    repository.append_to_log("c", [Message.user("two")])
    repository.append_to_window("c", [Message.user("three")], MessageWindow(10))
    repository.remove_newest("c")
    repository.save_all("c", [Message.user("whole")])
    info = repository.get_conversation_info("c")
    assert info is not None
    assert info.updated_at == ahead
    assert (info.created_at, info.message_count) == (made.created_at, 1)


def test_a_write_that_stores_nothing_leaves_updated_at() -> None:
    """A retried append, of the log or of the window, is not a write of the messages."""
    repository = _repository()
    sent = [
        Message.user("one"),
        Message.assistant("two"),
        Message.user("three"),
        Message.assistant("four"),
    ]
    repository.append_to_log("c", sent)
    first = repository.get_conversation_info("c")
    assert first is not None
    past = datetime(2001, 2, 3, tzinfo=UTC)
    repository.collection.update_one({"_id": "c"}, {"$set": {"updated_at": past}})
    repository.append_to_log("c", sent)
    repository.append_to_window("c", sent, MessageWindow(10))
    assert repository.remove_messages("c", ["never-stored"]) == []
    info = repository.get_conversation_info("c")
    assert info is not None
    assert (info.updated_at, info.message_count) == (past, 4)
    # A window that takes messages out writes them: updated_at moves.
    result = repository.append_to_window("c", sent, MessageWindow(2))
    assert (result.appended, len(result.evicted_ids)) == ([], 2)
    evicted = repository.get_conversation_info("c")
    assert evicted is not None
    assert evicted.updated_at > past
    assert evicted.message_count == 2


@pytest.mark.parametrize("write", ["log", "window", "save_all", "set"])
def test_an_expired_conversation_starts_a_new_record(write: str) -> None:
    """Over a document the TTL monitor has not removed yet, a write starts afresh.

    No TTL index: mongomock would remove the expired document at once, where
    a server's monitor leaves it for up to a minute.
    """
    repository = _repository(ttl=timedelta(hours=1), create_indexes=False)
    repository.append_to_log("c", [Message.user("old"), Message.user("older")])
    repository.set_conversation_info("c", owner="old-owner", metadata={"t": "old"})
    created = datetime(2020, 1, 1, tzinfo=UTC)
    repository.collection.update_one(
        {"_id": "c"},
        {
            "$set": {
                "expires_at": datetime.now(UTC) - timedelta(seconds=1),
                "created_at": created,
                "updated_at": created,
            }
        },
    )
    assert _raw(repository, "c") is not None
    assert repository.get_conversation_info("c") is None
    assert repository.find_conversations().items == []
    fresh = [Message.user("new")]
    if write == "log":
        repository.append_to_log("c", fresh)
    elif write == "window":
        repository.append_to_window("c", fresh, MessageWindow(10))
    elif write == "save_all":
        repository.save_all("c", fresh)
    else:
        repository.set_conversation_info("c", owner="new-owner")
    info = repository.get_conversation_info("c")
    assert info is not None
    assert info.created_at > created
    assert info.updated_at == info.created_at
    assert info.metadata == {}
    if write == "set":
        assert (info.owner, info.message_count) == ("new-owner", 0)
        assert repository.find_by_conversation_id("c") == []
    else:
        assert (info.owner, info.message_count) == (None, 1)
    assert repository.find_conversations(metadata={"t": "old"}).items == []
    assert _ids(repository.find_conversations().items) == ["c"]


def test_an_earlier_releases_document_reads_its_messages_times_and_is_filled() -> None:
    """Read from its messages; listed once ``create_indexes`` fills its record."""
    repository = _repository()
    oldest = datetime(2024, 3, 4, 5, 6, 7, 8000, tzinfo=UTC)
    newest = oldest + timedelta(minutes=5)
    repository.save_all(
        "legacy",
        [Message.user("q").stamped(oldest), Message.assistant("a").stamped(newest)],
    )
    repository.append_to_log("current", [Message.user("hi")])
    unset = dict.fromkeys(_RECORD_FIELDS, "")
    repository.collection.update_one({"_id": "legacy"}, {"$unset": unset})
    current = repository.get_conversation_info("current")
    info = repository.get_conversation_info("legacy")
    assert info is not None
    assert (info.created_at, info.updated_at) == (oldest, newest)
    assert (info.message_count, info.owner, info.metadata) == (2, None, {})
    assert _ids(repository.find_conversations().items) == ["current"]
    repository.create_indexes()
    assert repository.get_conversation_info("legacy") == info
    assert repository.get_conversation_info("current") == current
    assert _ids(repository.find_conversations().items) == ["current", "legacy"]
    assert _raw(repository, "legacy")["updated_at"] == newest


def test_match_keys_are_equal_exactly_when_core_holds_the_values_equal() -> None:
    """Every pair of scalars: equal keys if and only if ``metadata_matches``."""
    values: list[Any] = [
        True,
        False,
        None,
        0,
        0.0,
        -0.0,
        1,
        1.0,
        -1,
        0.1,
        "1",
        "true",
        "",
        "null",
        2**53,
        2**53 + 1,
        float(2**53),
        2**64,
        2**64 + 1,
        float(2**64),
        1e300,
        int(1e300),
    ]
    for a, b in itertools.product(values, repeat=2):
        equal = metadata_matches({"k": a}, {"k": b})
        assert (match_keys({"k": a}) == match_keys({"k": b})) is equal, (a, b)
    keys = ["a.b", "a", "", "$set", 'say "hi"', "ключ"]
    found = [match_keys({key: "v"}) for key in keys]
    assert len({tuple(k) for k in found}) == len(keys)
    assert match_keys({"list": ["v"], "object": {"k": "v"}}) == []


# -- on a real server -------------------------------------------------------------


class _Names(monitoring.CommandListener):
    def __init__(self) -> None:
        self.names: list[str] = []

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        self.names.append(event.command_name)

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass


@pytest.fixture
def server() -> Iterator[tuple[MongoDBChatMemoryRepository, _Names]]:
    listener = _Names()
    client: Any = pymongo.MongoClient(
        backend_url("mongodb"), event_listeners=[listener]
    )
    name = f"cl_{uuid.uuid4().hex}"
    try:
        repository = MongoDBChatMemoryRepository(
            client, database="chatledger_test", collection=name
        )
        repository.create_schema()
        yield repository, listener
    finally:
        client["chatledger_test"].drop_collection(name)
        client.close()


def _stages(explained: Any) -> Iterator[dict[str, Any]]:
    """Every stage and statistic of an explain answer's winning plan."""
    if isinstance(explained, dict):
        yield explained
        for key, value in explained.items():
            if key not in ("rejectedPlans", "allPlansExecution"):
                yield from _stages(value)
    elif isinstance(explained, list):
        for value in explained:
            yield from _stages(value)


def _explain(repository: MongoDBChatMemoryRepository, **conditions: Any) -> Any:
    query = check_find_conversations(**conditions)
    collection = repository.collection
    return collection.database.command(
        "explain",
        {
            "aggregate": collection.name,
            "pipeline": listing_pipeline(query, datetime.now(UTC)),
            "cursor": {},
        },
        verbosity="executionStats",
    )


def test_mongodb_server_lists_an_owners_records_from_its_index_only(
    server: tuple[MongoDBChatMemoryRepository, _Names],
) -> None:
    """explain: an owner's page is a range of the owner index, without a sort.

    Four owners of 30 records each and 30 without one, interleaved in time:
    a page of 5 reads about 6 index entries (at most 8 allowed), all of that
    owner's, and its metadata filter reads that owner's entries only, never
    the 150 of the collection.
    """
    repository, listener = server
    start = datetime(2030, 1, 1, tzinfo=UTC)
    owners = ["a", "b", "c", "d", None]
    for step, (n, owner) in enumerate(itertools.product(range(30), owners)):
        cid = f"{owner}-{n:02d}"
        repository.append_to_log(cid, [Message.user("hi")])
        repository.set_conversation_info(cid, owner=owner, metadata={"n": n % 7})
        # One second apart, owners interleaved: no ties at a page's boundary.
        moment = start + timedelta(seconds=step)
        repository.collection.update_one({"_id": cid}, {"$set": {"updated_at": moment}})
    page = repository.find_conversations(owner="b", limit=5)
    for conditions in (
        {"owner": "b", "limit": 5},
        {"owner": "b", "limit": 5, "cursor": page.next_cursor},
        {"owner": "b", "limit": 5, "metadata": {"n": 3}},
    ):
        stages = list(_stages(_explain(repository, **conditions)))
        scans = [s for s in stages if s.get("stage") == "IXSCAN"]
        assert scans
        assert {s.get("indexName") for s in scans} == {OWNER_INDEX_NAME}
        assert not [s for s in stages if s.get("stage") in ("SORT", "COLLSCAN")]
        keys = [s["totalKeysExamined"] for s in stages if "totalKeysExamined" in s]
        assert keys
        bound = 30 if "metadata" in conditions else 5 + 3
        assert max(keys) <= bound, conditions
    everyone = list(_stages(_explain(repository, limit=5)))
    scans = [s for s in everyone if s.get("stage") == "IXSCAN"]
    assert {s.get("indexName") for s in scans} == {UPDATED_INDEX_NAME}
    assert not [s for s in everyone if s.get("stage") in ("SORT", "COLLSCAN")]
    listener.names.clear()
    repository.set_conversation_info("b-00", owner="b", metadata={"n": 1})
    repository.get_conversation_info("b-00")
    repository.find_conversations(owner="b", metadata={"n": 1}, limit=3)
    assert listener.names == ["findAndModify", "aggregate", "aggregate"]
