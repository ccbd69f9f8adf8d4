"""A bounded log on MongoDB's one-document layout, on the STAND-IN (not a server).

The conformance suite checks what a bounded log keeps; these tests check
what is particular to this adapter: the trim's update pipeline keeps exactly
what core's in-memory repository keeps, with the same record of evicted ids;
only a due append sends a further command (and the view's aggregation,
given a window); a trim whose append was overtaken by ``save_all`` changes
nothing; a trim's error reaches the caller with the append stored; and
``from_url`` takes the retention as an option or in the URL's query.

They run on :class:`tests.mongodb.standin.StandInClient` (mongomock storage
plus a test-only evaluator of the pipelines' operators), which is NOT a
MongoDB server: it checks the adapter's code and the logic its pipelines
encode.
"""

from __future__ import annotations

import random
import warnings
from typing import Any

import pytest
from pymongo.errors import OperationFailure

from chatledger import InMemoryChatMemoryRepository, Message, Role, ToolCall
from chatledger.errors import InvalidOptionError, InvalidRetentionError
from chatledger.messages import ToolResponse
from chatledger.retention import Retention
from chatledger.testing import random_turns
from chatledger.tokens import estimate_tokens
from chatledger.validation import utc_now
from chatledger.window import MessageWindow, TokenWindow, Window

pytest.importorskip("mongomock")

from chatledger_mongodb import MongoDBChatMemoryRepository
from chatledger_mongodb.trim import trim_write
from tests.mongodb.test_log import _layout, _raw, _recorded, _repository


def _ids(messages: list[Message]) -> list[str]:
    return [m.id for m in messages]


def _turn(n: int) -> list[Message]:
    return [Message.user(f"q{n}"), Message.assistant(f"a{n}")]


@pytest.mark.parametrize("seed", range(4))
def test_a_trim_keeps_what_core_keeps(seed: int) -> None:
    """Random histories, windows and counters: the same log as in memory.

    Each append goes to a bounded log here and to core's in-memory one with
    the same window (or none); after each, both hold the same messages and
    the same evicted-id record, and the document stays consistent, its
    ``next_seq`` past the appended messages whatever a trim removed.
    """
    rng = random.Random(seed)
    retention = Retention.last(rng.randint(3, 8), slack=rng.randint(1, 4))
    mongo = _repository(retention=retention)
    memory = InMemoryChatMemoryRepository(retention=retention)
    windows: list[Window | None] = [
        None,
        MessageWindow(rng.randint(1, retention.keep or 1)),
        TokenWindow(rng.randint(10, 80), estimate_tokens),
        TokenWindow(rng.randint(10, 80), estimate_tokens, "other"),
    ]
    appended: list[str] = []
    trims = 0
    for batch in random_turns(rng, 30, agent=seed == 3):
        window = rng.choice(windows)
        before = _raw(mongo, "r") or {"messages": [], "next_seq": 0}
        result = mongo.append_to_log("r", batch, window)
        assert _ids(result.appended) == _ids(
            memory.append_to_log("r", batch, window).appended
        )
        appended += _ids(result.appended)
        stored = _ids(mongo.find_by_conversation_id("r"))
        assert stored == _ids(memory.find_by_conversation_id("r"))
        _layout(mongo, "r")
        after = _raw(mongo, "r")
        assert after.get("evicted_ids", []) == list(memory._evicted.get("r", []))
        if len(after["messages"]) < len(before["messages"]) + len(result.appended):
            trims += 1
            assert after["next_seq"] == before["next_seq"] + len(result.appended)
    assert trims > 0 or seed == 3
    assert len(stored) < len(appended) or seed == 3


def test_a_trim_changes_version_and_nothing_but_the_log_and_record() -> None:
    """A trim is its own write: a size backfill read before it writes nothing.

    ``next_seq``, ``sb`` and ``expires_at`` stay; a trim that removes
    nothing (run again) changes nothing at all.
    """
    retention = Retention.last(4, slack=2)
    repository = _repository(ttl=3600)
    old = Message.system("be brief")
    repository.append_to_log("v", [old, *_turn(0)])
    for n in range(1, 5):
        repository.append_to_log("v", [Message.system(f"s{n}"), *_turn(n)])
    before = _raw(repository, "v")
    last = before["messages"][-1]
    query, update = trim_write(
        "v", retention, last["seq"] + 1, last["id"], None, utc_now()
    )
    assert repository.collection.update_one(query, update).modified_count == 1
    after = _raw(repository, "v")
    for field in ("next_seq", "sb", "expires_at"):
        assert after[field] == before[field]
    assert after["version"] != before["version"]
    # The first kept is number 12 (seq 11), the cut the user message after
    # it (seq 13); s4 (seq 12) is the current set.
    assert [e["seq"] for e in after["messages"]] == [12, 13, 14]
    assert after["evicted_ids"] == [e["id"] for e in before["messages"][:12]]
    assert repository.collection.update_one(query, update).modified_count == 0
    assert _raw(repository, "v") == after
    stale = {"_id": "v", "version": before["version"]}
    assert (
        repository.collection.update_one(stale, {"$set": {"x": 1}}).matched_count == 0
    )


@pytest.mark.parametrize("window", [None, MessageWindow(4)], ids=repr)
def test_only_a_due_append_sends_a_further_command(window: Window | None) -> None:
    """One ``findAndModify`` per append; a due one adds the trim's update.

    Given a window, the trim reads its view first: one aggregation.
    """
    retention = Retention.last(10, slack=5)
    repository = _repository(retention=retention)
    recorded = _recorded(repository)
    sent: list[list[str]] = []
    for n in range(10):  # numbers 1..20: due at 15 and 20
        recorded.clear()
        repository.append_to_log("rt", _turn(n), window)
        sent.append(recorded.names())
    due = [n for n in range(10) if retention.trim_due(2 * n + 1, 2 * n + 2)]
    assert due == [7, 9]
    trim = ["aggregate", "update_one"] if window is not None else ["update_one"]
    plain = ["find_one_and_update"]
    assert sent == [plain + trim if n in due else plain for n in range(10)]
    assert len(repository.find_by_conversation_id("rt")) == 10


def test_a_trim_after_save_all_replaced_the_log_changes_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The trim matches only a document holding the append's last message."""
    repository = _repository(retention=Retention.last(4, slack=2))
    window = MessageWindow(4)
    saved = [m for n in range(10) for m in _turn(100 + n)]
    read_view = repository._tail_view

    def save_first(*args: Any) -> Any:
        # Another writer replaces the conversation between append and trim.
        repository.save_all("raced", saved)
        return read_view(*args)

    repository.append_to_log("raced", _turn(0), window)
    repository.append_to_log("raced", _turn(1), window)
    monkeypatch.setattr(repository, "_tail_view", save_first)
    repository.append_to_log("raced", _turn(2), window)  # numbers 5, 6: due
    assert _ids(repository.find_by_conversation_id("raced")) == _ids(saved)


def test_a_trim_cuts_by_its_own_append_not_by_a_later_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A user message appended after the trim's append is not where it cuts.

    Another writer's turn lands between an agent's append and its trim: the
    view (read after it) starts at that turn, but the trim looks for a user
    message only among its own append's numbers, finds none, and cuts at
    the first of the newest n: the append's own messages stay.
    """
    repository = _repository(retention=Retention.last(4, slack=2))
    # The other writer keeps everything: its own appends trim nothing.
    other = MongoDBChatMemoryRepository(
        repository._client, collection=repository.collection.name
    )
    window = MessageWindow(4)
    late = [Message.user("late"), Message.assistant("sure")]
    read_view = repository._tail_view

    def append_first(*args: Any) -> Any:
        other.append_to_log("race", late)
        return read_view(*args)

    repository.append_to_log("race", [Message.user("go")], window)
    steps = [_step(n) for n in range(2)]
    repository.append_to_log("race", steps[0], window)
    monkeypatch.setattr(repository, "_tail_view", append_first)
    repository.append_to_log("race", steps[1], window)  # numbers 4, 5: due
    # The first kept is number 2: only the user message before it goes.
    stored = repository.find_by_conversation_id("race")
    assert _ids(stored) == _ids([*steps[0], *steps[1], *late])


def _step(n: int) -> list[Message]:
    call = ToolCall(id=f"c{n}", name="f", arguments="{}")
    return [
        Message.assistant(None, tool_calls=[call]),
        Message.tool(ToolResponse(id=call.id, name="f", data="ok")),
    ]


def test_a_failed_trim_raises_and_leaves_the_append_stored() -> None:
    """No write error is swallowed: the append stays, the next trim catches up."""
    repository = _repository(retention=Retention.last(4, slack=2))
    collection = repository._collection
    recorded = _recorded(repository)

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise OperationFailure("not primary", 10107)

    sent: list[Message] = []
    for n in range(2):
        sent += repository.append_to_log("f", _turn(n)).appended
    last = _turn(2)
    recorded.update_one = refuse  # type: ignore[attr-defined]
    with pytest.raises(OperationFailure, match="not primary"):
        repository.append_to_log("f", last)
    sent += last
    assert _ids(repository.find_by_conversation_id("f")) == _ids(sent)
    assert repository.append_to_log("f", last).appended == []  # a retry: no-op
    repository._collection = collection
    for n in range(3, 5):  # numbers 7..10: due at 8 and 10
        sent += repository.append_to_log("f", _turn(n)).appended
    assert _ids(repository.find_by_conversation_id("f")) == _ids(sent[-4:])


def test_a_trim_keeps_the_current_system_set_and_drops_a_superseded_one() -> None:
    """Below the cutoff only the current set stays; the record gets the rest."""
    repository = _repository(retention=Retention.last(4, slack=2))
    old, new = Message.system("be brief"), Message.system("be kind")
    repository.append_to_log("s", [old, *_turn(0)])
    repository.append_to_log("s", [new, *_turn(1)])
    for n in range(2, 6):
        repository.append_to_log("s", _turn(n))
    document = _raw(repository, "s")
    assert [e["id"] for e in document["messages"] if e["role"] == "system"] == [new.id]
    assert old.id in document["evicted_ids"]
    assert new.id not in document["evicted_ids"]
    assert document["sb"] == 3


def test_an_agent_turn_is_cut_at_the_newest_n() -> None:
    """Without a user message among the newest n, the cut falls at the n-th newest."""
    repository = _repository(retention=Retention.last(3, slack=2))
    for n in range(3):
        call = ToolCall(id=f"c{n}", name="f", arguments="{}")
        repository.append_to_log(
            "agent",
            [
                Message.assistant(None, tool_calls=[call]),
                Message.tool(ToolResponse(id=call.id, name="f", data="ok")),
            ],
        )
    stored = repository.find_by_conversation_id("agent")
    assert [m.role for m in stored] == [Role.TOOL, Role.ASSISTANT, Role.TOOL]


def test_from_url_takes_retention_as_an_option_or_in_the_query() -> None:
    """``retention=`` or ``?retention=``; the client never sees the latter."""
    for url, options in (
        ("mongodb://127.0.0.1:1/app", {"retention": 4}),
        ("mongodb://127.0.0.1:1/app?retention=4", {}),
        ("mongodb://127.0.0.1:1/app?appname=x&retention=4", {}),
    ):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # pymongo warns of an unknown option
            repository = MongoDBChatMemoryRepository.from_url(
                url, create_indexes=False, **options
            )
        try:
            assert repository.retention == Retention.last(4)
            assert "retention=Retention.last(4, slack=10)" in repr(repository)
            assert repository.collection.database.name == "app"
        finally:
            repository.close()


@pytest.mark.parametrize(
    ("url", "options", "error"),
    [
        ("mongodb://127.0.0.1:1/app", {"retention": 0}, InvalidRetentionError),
        ("mongodb://127.0.0.1:1/app", {"retention": "some"}, InvalidRetentionError),
        ("mongodb://127.0.0.1:1/app?retention=-3", {}, InvalidRetentionError),
        ("mongodb://127.0.0.1:1/?retention=4", {"retention": 4}, InvalidOptionError),
        ("mongodb://127.0.0.1:1/?retention=4&retention=5", {}, InvalidOptionError),
    ],
)
def test_a_bad_retention_is_refused_before_a_client_exists(
    url: str, options: dict[str, Any], error: type[Exception]
) -> None:
    """Nothing listens on port 1, and nothing is made: the error comes first."""
    with pytest.raises(error):
        MongoDBChatMemoryRepository.from_url(url, **options)


def test_an_unbounded_repository_never_trims() -> None:
    """The default keeps every message, and says nothing of retention."""
    repository = _repository()
    assert "retention" not in repr(repository)
    sent: list[Message] = []
    for n in range(40):
        sent += repository.append_to_log("all", _turn(n)).appended
    assert _ids(repository.find_by_conversation_id("all")) == _ids(sent)
