"""MongoDB adapter tests that need no server: options, URLs, and the stand-in.

Tests that touch storage run on :class:`tests.mongodb.standin.StandInClient`
(mongomock storage plus a test-only pipeline evaluator), which is NOT a MongoDB
server; ``tests/mongodb/test_server.py`` repeats what only a server can prove.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from importlib.metadata import entry_points
from typing import Any

import pytest

from chatledger import (
    InMemoryChatMemoryRepository,
    InvalidNameError,
    InvalidTTLError,
    Message,
    MessageTooLargeError,
    ToolResponse,
)
from chatledger.adapters import EVICTED_IDS_KEPT, kept_newest
from chatledger.memory import MessageWindowChatMemory, TokenWindowChatMemory
from chatledger.testing import random_turns
from chatledger.tokens import estimate_tokens
from chatledger.window import MessageWindow, TokenWindow, apply_window

mongomock = pytest.importorskip("mongomock")

from pymongo import AsyncMongoClient  # noqa: E402
from pymongo.errors import OperationFailure  # noqa: E402

from chatledger import ContentionError  # noqa: E402
from chatledger_mongodb import (  # noqa: E402
    MAX_DOCUMENT_BYTES,
    MongoDBChatMemoryRepository,
    steps,
)
from chatledger_mongodb.pipeline import append_pipeline, encode_element  # noqa: E402
from tests.mongodb.standin import StandInClient  # noqa: E402


def _repository(**options: Any) -> MongoDBChatMemoryRepository:
    return MongoDBChatMemoryRepository(
        StandInClient(),  # type: ignore[arg-type]
        collection=f"c_{uuid.uuid4().hex}",
        **options,
    )


def _raw(repository: MongoDBChatMemoryRepository, conversation_id: str) -> Any:
    return repository.collection.find_one({"_id": conversation_id})


@pytest.mark.parametrize(
    "options",
    [
        {"database": "msg; DROP"},
        {"database": "a.b"},
        {"database": ""},
        {"database": "$x"},
        {"database": "d" * 64},
        {"database": None},
        {"collection": 'a"b'},
        {"collection": "schema.table"},
        {"collection": "t\n"},
        {"collection": "$cmd"},
        {"collection": "system_profile"},
        {"collection": "c" * 121},
        {"collection": "1abc"},
    ],
    ids=repr,
)
def test_mongodb_rejects_bad_names(options: dict[str, Any]) -> None:
    with pytest.raises(InvalidNameError):
        MongoDBChatMemoryRepository(mongomock.MongoClient(), **options)


@pytest.mark.parametrize("ttl", [0, -1, timedelta(0), True, "60"], ids=repr)
def test_mongodb_rejects_bad_ttl(ttl: Any) -> None:
    with pytest.raises(InvalidTTLError):
        MongoDBChatMemoryRepository(mongomock.MongoClient(), ttl=ttl)


def test_mongodb_ttl_seconds_mean_a_timedelta() -> None:
    repository = MongoDBChatMemoryRepository(mongomock.MongoClient(), ttl=90)
    assert repository.ttl == timedelta(seconds=90)


def test_mongodb_ttl_index_is_created_idempotently() -> None:
    client = mongomock.MongoClient()
    MongoDBChatMemoryRepository(client, collection="idx")
    assert client["chatledger"]["idx"].index_information() == {}  # not when made
    MongoDBChatMemoryRepository(client, collection="idx").create_schema()
    MongoDBChatMemoryRepository(client, collection="idx", ttl=5).create_schema()
    indexes = client["chatledger"]["idx"].index_information()
    assert list(indexes["chatledger_expires_at"]["key"]) == [("expires_at", 1)]
    assert indexes["chatledger_expires_at"]["expireAfterSeconds"] == 0


@pytest.mark.parametrize(
    ("url", "database"),
    [
        ("mongodb://127.0.0.1:1/app", "app"),
        ("mongodb://user:secret@127.0.0.1:1,127.0.0.1:2/app?replicaSet=rs0", "app"),
        ("mongodb://127.0.0.1:1/?directConnection=true", "chatledger"),
        ("mongodb://127.0.0.1:1", "chatledger"),
    ],
)
def test_mongodb_from_url_takes_the_database_from_the_path(
    url: str, database: str
) -> None:
    repository = MongoDBChatMemoryRepository.from_url(url, create_indexes=False)
    try:
        assert repository.collection.database.name == database
        assert "secret" not in repr(repository)
    finally:
        repository.close()
        repository.close()


def test_mongodb_from_url_keyword_database_wins() -> None:
    repository = MongoDBChatMemoryRepository.from_url(
        "mongodb://127.0.0.1:1/app", database="other", create_indexes=False
    )
    repository.close()
    assert repository.collection.database.name == "other"


def test_mongodb_from_url_rejects_a_bad_path_database() -> None:
    with pytest.raises(InvalidNameError):
        MongoDBChatMemoryRepository.from_url("mongodb://127.0.0.1:1/a%2Eb")


def test_mongodb_entry_points_are_registered() -> None:
    found = {e.name: e.value for e in entry_points(group="chatledger.repositories")}
    target = "chatledger_mongodb:MongoDBChatMemoryRepository.from_url"
    assert found["mongodb"] == target
    assert found["mongodb+srv"] == target


def test_mongodb_too_large_server_refusal_becomes_message_too_large() -> None:
    refusal = steps.size_refusal
    with pytest.raises(MessageTooLargeError) as caught, refusal("c"):
        raise OperationFailure("Resulting document after update is larger", 17419)
    assert isinstance(caught.value.__cause__, OperationFailure)
    with pytest.raises(OperationFailure), refusal("c"):
        raise OperationFailure("something else", 2)


# --- on the stand-in (mongomock + evaluator; NOT a server) --------------------


def test_mongodb_stand_in_metadata_keys_never_become_field_names() -> None:
    repository = _repository()
    message = Message.user("m", metadata={"$set": 1, "a.b": 2, "": 3})
    repository.save_all("c", [message])
    memory = MessageWindowChatMemory(repository, max_messages=5)
    memory.add("c", Message.assistant("x", metadata={"$inc": {"a.b": 1}}))
    for element in _raw(repository, "c")["messages"]:
        assert set(element) <= {"seq", "id", "role", "sizes", "k", "p"}
        assert isinstance(element["p"], str)
    found = repository.find_by_conversation_id("c")
    assert found[0].metadata == {"$set": 1, "a.b": 2, "": 3}
    assert found[1].metadata == {"$inc": {"a.b": 1}}


def test_mongodb_stand_in_dollar_strings_are_stored_literally() -> None:
    repository = _repository()
    window = TokenWindow(100, estimate_tokens, counter_id="$x.y")
    batch = [
        Message.user("$$ROOT", id="$_old"),
        Message.assistant("$messages", id="$$value"),
    ]
    repository.append_to_window("$ne", batch, window)
    found = repository.find_by_conversation_id("$ne")
    assert [(m.id, m.content) for m in found] == [
        ("$_old", "$$ROOT"),
        ("$$value", "$messages"),
    ]
    assert repository.find_conversation_ids() == ["$ne"]


def test_mongodb_stand_in_seq_is_gap_free_and_ordered() -> None:
    repository = _repository()
    memory = MessageWindowChatMemory(repository, max_messages=4)
    for turn in range(6):
        memory.add("c", [Message.user(f"U{turn}"), Message.assistant(f"A{turn}")])
    document = _raw(repository, "c")
    seqs = [e["seq"] for e in document["messages"]]
    assert seqs == list(range(document["next_seq"] - len(seqs), document["next_seq"]))
    assert document["next_seq"] == 12


def test_mongodb_stand_in_expired_document_reads_empty_and_restarts() -> None:
    # No TTL index: mongomock would delete the document at once, whereas a
    # server's TTL monitor leaves it for up to a minute, which is the case here.
    repository = _repository(ttl=timedelta(hours=1), create_indexes=False)
    repository.save_all("c", [Message.user("old")])
    past = datetime.now(UTC) - timedelta(seconds=5)
    repository.collection.update_one({"_id": "c"}, {"$set": {"expires_at": past}})
    assert _raw(repository, "c")["messages"]
    assert repository.find_by_conversation_id("c") == []
    assert repository.find_conversation_ids() == []
    fresh = Message.user("new")
    result = repository.append_to_window("c", [fresh], MessageWindow(10))
    assert result.evicted_ids == []
    assert [m.content for m in repository.find_by_conversation_id("c")] == ["new"]
    document = _raw(repository, "c")
    assert document["next_seq"] == 1
    assert document["expires_at"] > datetime.now(UTC) + timedelta(minutes=59)


def test_mongodb_stand_in_every_write_slides_expires_at() -> None:
    repository = _repository(ttl=timedelta(seconds=30))
    repository.save_all("c", [Message.user("a")])
    first = _raw(repository, "c")["expires_at"]
    repository.append_to_window("c", [Message.assistant("b")], MessageWindow(5))
    assert _raw(repository, "c")["expires_at"] >= first
    plain = _repository()
    plain.save_all("c", [Message.user("a")])
    assert _raw(plain, "c")["expires_at"] is None


def test_mongodb_stand_in_window_emptied_keeps_the_record() -> None:
    # Only tool responses without their calls all go: a history with no user
    # message is otherwise kept whole (rules 3 and 4).
    repository = _repository()
    batch = [Message.tool(ToolResponse(id=call, name="f", data="{}")) for call in "ab"]
    result = repository.append_to_window("c", batch, MessageWindow(1))
    assert result.evicted_ids == [m.id for m in batch]
    document = _raw(repository, "c")
    assert document["messages"] == []
    assert document["evicted_ids"] == [m.id for m in batch]
    assert repository.find_conversation_ids() == []
    assert repository.find_conversation_ids_page().ids == []
    assert repository.count_messages("c") == 0
    retried = repository.append_to_window("c", batch, MessageWindow(1))
    assert (retried.appended, retried.evicted_ids) == ([], [])
    assert repository.find_by_conversation_id("c") == []


def test_mongodb_stand_in_record_keeps_the_newest_evicted_ids() -> None:
    repository = _repository()
    batch = [Message.user(f"U{i}") for i in range(EVICTED_IDS_KEPT + 6)]
    result = repository.append_to_window("c", batch, MessageWindow(1))
    dropped = [m.id for m in batch[:-1]]
    assert result.evicted_ids == dropped
    record = _raw(repository, "c")["evicted_ids"]
    assert record == kept_newest([], dropped) == dropped[-EVICTED_IDS_KEPT:]
    last = Message.user("last")
    result = repository.append_to_window("c", [last], MessageWindow(1))
    assert result.evicted_ids == [batch[-1].id]
    assert _raw(repository, "c")["evicted_ids"] == kept_newest(record, [batch[-1].id])
    assert len(_raw(repository, "c")["evicted_ids"]) == EVICTED_IDS_KEPT


@pytest.mark.parametrize("seed", range(4))
def test_mongodb_stand_in_record_follows_kept_newest(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    import random

    monkeypatch.setattr(steps, "EVICTED_IDS_KEPT", 5)
    rng = random.Random(seed)
    repository = _repository()
    reference = InMemoryChatMemoryRepository()
    record: list[str] = []
    for batch in random_turns(rng, 20):
        window = MessageWindow(rng.randint(1, 6))
        result = repository.append_to_window("c", batch, window)
        expected = reference.append_to_window("c", batch, window)
        assert result.evicted_ids == expected.evicted_ids
        record = kept_newest(record, result.evicted_ids, 5)
        assert _raw(repository, "c").get("evicted_ids", []) == record
        found = repository.find_by_conversation_id("c")
        assert found == reference.find_by_conversation_id("c")


def test_mongodb_stand_in_save_all_clears_the_record() -> None:
    repository = _repository()
    first = [Message.user("U1"), Message.assistant("A1")]
    repository.append_to_window("c", first, MessageWindow(2))
    repository.append_to_window("c", [Message.user("U2")], MessageWindow(2))
    assert _raw(repository, "c")["evicted_ids"] == [m.id for m in first]
    repository.save_all("c", [Message.user("fresh")])
    assert "evicted_ids" not in _raw(repository, "c")
    result = repository.append_to_window("c", first, MessageWindow(10))
    assert [m.id for m in result.appended] == [m.id for m in first]


def test_mongodb_stand_in_expired_record_is_forgotten() -> None:
    # No TTL index, as in the expiry test above: the document outlives expiry.
    repository = _repository(ttl=timedelta(hours=1), create_indexes=False)
    first = [Message.user("U1"), Message.assistant("A1")]
    repository.append_to_window("c", first, MessageWindow(2))
    repository.append_to_window("c", [Message.user("U2")], MessageWindow(2))
    past = datetime.now(UTC) - timedelta(seconds=5)
    repository.collection.update_one({"_id": "c"}, {"$set": {"expires_at": past}})
    result = repository.append_to_window("c", first, MessageWindow(10))
    assert [m.id for m in result.appended] == [m.id for m in first]
    assert _raw(repository, "c")["evicted_ids"] == []


def test_mongodb_pipeline_refuses_an_empty_record_bound() -> None:
    window = MessageWindow(2)
    element = encode_element(Message.user("a"), window)
    for kept in (0, -1, True):
        with pytest.raises(ValueError, match="evicted_ids_kept"):
            append_pipeline(
                [element],
                window,
                version="v",
                expires_at=None,
                now=datetime.now(UTC),
                evicted_ids_kept=kept,
            )


@pytest.mark.parametrize("seed", range(6))
def test_mongodb_stand_in_token_window_after_save_all_measures_once(
    seed: int,
) -> None:
    import random

    rng = random.Random(seed)
    repository = _repository()
    history = [m for batch in random_turns(rng, 6) for m in batch]
    repository.save_all("c", history)
    expected = repository.find_by_conversation_id("c")
    windows = [
        TokenWindow(rng.randint(20, 150), estimate_tokens, counter_id="a"),
        TokenWindow(rng.randint(20, 150), lambda m: len(m.content or "") + 1, "b"),
    ]
    for step, batch in enumerate(random_turns(rng, 12)):
        window = windows[step % 2]
        repository.append_to_window("c", batch, window)
        expected = apply_window(expected, batch, window).messages
        found = repository.find_by_conversation_id("c")
        assert [m.id for m in found] == [m.id for m in expected]
    for element in _raw(repository, "c")["messages"]:
        counters = [s["c"] for s in element["sizes"]]
        assert len(counters) == len(set(counters))


def test_mongodb_stand_in_backfill_gives_up_with_a_clear_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    repository = _repository()
    repository.save_all("c", [Message.user("a")])
    monkeypatch.setattr(repository, "_backfill_sizes", lambda *args: None)
    window = TokenWindow(50, estimate_tokens, "x")
    with pytest.raises(ContentionError, match="'c'"):
        repository.append_to_window("c", [Message.assistant("b")], window)
    assert [m.content for m in repository.find_by_conversation_id("c")] == ["a"]


def test_mongodb_stand_in_too_large_is_refused_before_any_write() -> None:
    repository = _repository()
    repository.save_all("c", [Message.user("small")])
    reached: list[str] = []
    repository.fault_points.on("before_commit", reached.append)
    huge = Message.user("x" * (MAX_DOCUMENT_BYTES + 1))
    with pytest.raises(MessageTooLargeError):
        repository.save_all("c", [huge])
    with pytest.raises(MessageTooLargeError):
        repository.append_to_window("c", [huge], MessageWindow(5))
    assert reached == []
    assert [m.content for m in repository.find_by_conversation_id("c")] == ["small"]


def test_mongodb_stand_in_batch_over_a_document_is_refused_before_any_write() -> None:
    # Each message fits a document; the three together, one conversation, do not.
    repository = _repository()
    before = [Message.user("small")]
    repository.save_all("c", before)
    reached: list[str] = []
    repository.fault_points.on("before_commit", reached.append)
    batch = [Message.user(letter * (6 * 1024 * 1024)) for letter in "abc"]
    limit = f"at most {MAX_DOCUMENT_BYTES} "
    with pytest.raises(MessageTooLargeError, match=limit):
        MessageWindowChatMemory(repository, max_messages=20).add("c", batch)
    with pytest.raises(MessageTooLargeError, match=limit):
        repository.save_all("c", [*before, *batch])
    assert reached == []
    assert repository.find_by_conversation_id("c") == before


def test_mongodb_stand_in_retry_after_a_lost_ack_is_a_noop() -> None:
    repository = _repository()
    batch = [Message.user("U1"), Message.assistant("A1")]

    def lose_ack(point: str) -> None:
        raise ConnectionError(point)

    repository.fault_points.on("after_commit", lose_ack)
    with pytest.raises(ConnectionError):
        repository.append_to_window("c", batch, MessageWindow(10))
    repository.fault_points.clear()
    result = repository.append_to_window("c", batch, MessageWindow(10))
    assert result.appended == []
    assert [m.content for m in repository.find_by_conversation_id("c")] == [
        "U1",
        "A1",
    ]


def test_mongodb_stand_in_failure_before_commit_writes_nothing() -> None:
    repository = _repository()

    def fail(point: str) -> None:
        raise ConnectionError(point)

    repository.fault_points.on("before_commit", fail)
    with pytest.raises(ConnectionError):
        repository.append_to_window("c", [Message.user("U1")], MessageWindow(10))
    with pytest.raises(ConnectionError):
        repository.save_all("d", [Message.user("U1")])
    assert repository.find_conversation_ids() == []


def test_mongodb_stand_in_token_memory_uses_the_cached_sizes() -> None:
    calls: list[str] = []

    def counting(message: Message) -> int:
        calls.append(message.id)
        return estimate_tokens(message)

    repository = _repository()
    memory = TokenWindowChatMemory(repository, 1000, counting)
    for turn in range(5):
        memory.add("c", [Message.user(f"q{turn}"), Message.assistant(f"a{turn}")])
    assert len(calls) == len(set(calls)) == 10


def test_mongodb_refuses_an_async_client() -> None:
    client: AsyncMongoClient[Any] = AsyncMongoClient("mongodb://127.0.0.1:1")
    with pytest.raises(TypeError, match="AsyncMongoDBChatMemoryRepository"):
        MongoDBChatMemoryRepository(client)  # type: ignore[arg-type]


def test_mongodb_stand_in_write_after_drop_schema_makes_the_ttl_index_again() -> None:
    repository = _repository(ttl=60)
    repository.drop_schema()
    assert "chatledger_expires_at" not in repository.collection.index_information()
    repository.save_all("c", [Message.user("a")])
    assert "chatledger_expires_at" in repository.collection.index_information()


def test_mongodb_stand_in_schema_calls() -> None:
    repository = _repository(create_indexes=False)
    repository.create_schema()
    assert "chatledger_expires_at" in repository.collection.index_information()
    repository.save_all("c", [Message.user("a")])
    repository.drop_schema()
    assert repository.find_conversation_ids() == []
    assert "chatledger_expires_at" not in repository.collection.index_information()
