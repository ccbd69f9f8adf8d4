"""The log on MongoDB's one-document layout, on the STAND-IN (not a server).

The conformance suite checks the log's behaviour; these tests check what is
particular to this adapter: one command per log append, view and page, the
same whatever the log holds; the log methods read conversations written by
the window append and by ``save_all`` (an older release's layout); the two
appends keep one document between them; and further view reads stop where
the row they continue from is gone.

They run on :class:`tests.mongodb.standin.StandInClient` (mongomock storage
plus a test-only evaluator of the pipelines' operators), which is NOT a
MongoDB server: it checks the adapter's code and the logic its pipelines
encode. ``tests/mongodb/test_server.py`` counts the commands a real server
receives, where one is reachable.
"""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import bson
import pytest

from chatledger import (
    Message,
    MessageTooLargeError,
    Role,
    ToolCall,
    ToolResponse,
)
from chatledger.adapters import TURN_SLACK, codec, system_key
from chatledger.testing import random_turns
from chatledger.tokens import estimate_tokens
from chatledger.validation import stamp_messages
from chatledger.window import MessageWindow, TokenWindow, Window, apply_window

pytest.importorskip("mongomock")

from chatledger_mongodb import MongoDBChatMemoryRepository
from chatledger_mongodb.log_reads import tail_pipeline
from tests.mongodb.standin import StandInClient


class _Recorded:
    """The collection, recording each command the repository sends through it.

    Each call is one command (``findAndModify``, ``aggregate`` answering one
    document, ...), so the calls are the round trips. An aggregation's answer
    is kept too, to see how many rows crossed.
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls: list[tuple[str, Any]] = []
        self.answers: list[list[Any]] = []

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.inner, name)
        if not callable(attribute):
            return attribute

        def recorded(*args: Any, **kwargs: Any) -> Any:
            sent = args[1] if name == "find_one_and_update" else args[:1]
            self.calls.append((name, sent))
            answer = attribute(*args, **kwargs)
            if name == "aggregate":
                found = answer.to_list()
                self.answers.append(found)
                return _Answered(found)
            return answer

        return recorded

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]

    def clear(self) -> None:
        self.calls.clear()
        self.answers.clear()


class _Answered:
    def __init__(self, found: list[Any]) -> None:
        self._found = found

    def to_list(self) -> list[Any]:
        return list(self._found)


def _repository(**options: Any) -> MongoDBChatMemoryRepository:
    repository = MongoDBChatMemoryRepository(
        StandInClient(),  # type: ignore[arg-type]
        collection=f"c_{uuid.uuid4().hex}",
        **options,
    )
    if options.get("create_indexes", True):
        # The first write would make the index: made here, what a test
        # records is its own commands.
        repository.create_schema()
    return repository


def _recorded(repository: MongoDBChatMemoryRepository) -> _Recorded:
    recorded = _Recorded(repository._collection)
    repository._collection = recorded  # type: ignore[assignment]
    return recorded


def _raw(repository: MongoDBChatMemoryRepository, conversation_id: str) -> Any:
    return repository.collection.find_one({"_id": conversation_id})


def _ids(messages: list[Message]) -> list[str]:
    return [m.id for m in messages]


def _pages(
    repository: MongoDBChatMemoryRepository, cid: str, limit: int, newest_first: bool
) -> list[str]:
    ids: list[str] = []
    cursor = None
    while True:
        page = repository.find_messages_page(cid, cursor, limit, newest_first)
        ids += _ids(page.messages)
        if page.next_cursor is None:
            return ids
        cursor = page.next_cursor


def _assert_pages_walk(repository: MongoDBChatMemoryRepository, cid: str) -> None:
    stored = _ids(repository.find_by_conversation_id(cid))
    for limit in (1, 3, 50):
        assert _pages(repository, cid, limit, newest_first=True) == stored[::-1]
        assert _pages(repository, cid, limit, newest_first=False) == stored


def _batch_of(element: dict[str, Any]) -> int:
    return int(element.get("b", 0))


def _layout(repository: MongoDBChatMemoryRepository, cid: str) -> dict[str, Any]:
    """Read a conversation's document and check what always holds.

    The elements are in ``seq`` order, below ``next_seq``, with unique ids;
    only system elements carry a batch, never above the document's ``sb``;
    and the current set (batch at least ``sb``) is empty only when no
    system message is stored.
    """
    document = _raw(repository, cid)
    if document is None:
        return {"elements": [], "current": []}
    elements = document["messages"]
    seqs = [e["seq"] for e in elements]
    assert seqs == sorted(set(seqs))
    assert not seqs or document["next_seq"] > seqs[-1]
    assert len({e["id"] for e in elements}) == len(elements)
    batch = int(document.get("sb", 0))
    system = [e for e in elements if e["role"] == Role.SYSTEM.value]
    assert all("b" not in e for e in elements if e["role"] != Role.SYSTEM.value)
    assert all(_batch_of(e) <= batch for e in system)
    current = [e for e in system if _batch_of(e) >= batch]
    assert bool(current) == bool(system)
    return {"elements": elements, "current": [e["id"] for e in current]}


def _stored_window(
    repository: MongoDBChatMemoryRepository, cid: str, layout: dict[str, Any]
) -> list[Message]:
    """What a window append works on: all but the superseded system messages."""
    current = set(layout["current"])
    return [
        m
        for m in repository.find_by_conversation_id(cid)
        if m.role is not Role.SYSTEM or m.id in current
    ]


def _filled(repository: MongoDBChatMemoryRepository, cid: str, count: int) -> None:
    repository.save_all(
        cid,
        [
            m
            for n in range(count // 2)
            for m in (Message.user(f"u{n:05d}"), Message.assistant(f"a{n:05d}"))
        ],
    )


def _size(sent: Any) -> int:
    return len(bson.encode({"sent": sent}))


@pytest.mark.parametrize("window", [MessageWindow(20), MessageWindow(200)], ids=repr)
def test_one_command_per_log_append_view_and_page_whatever_the_log_holds(
    window: Window,
) -> None:
    """A log of 20 messages and one of 2000 get the same commands, one per call.

    The append sends its batch and reads back the ids appended; the view
    sends one aggregation and gets the window's limit plus core's
    ``TURN_SLACK`` rows at most; a page gets one row more than it shows.
    """
    sent: dict[int, list[tuple[str, int]]] = {}
    rows: dict[int, list[int]] = {}
    at = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
    batch = stamp_messages([Message.user("next"), Message.assistant("reply")], at)
    for count in (20, 2000):
        repository = _repository()
        cid = f"c{count:04d}"
        _filled(repository, cid, count)
        recorded = _recorded(repository)
        result = repository.append_to_log(cid, batch, window)
        assert _ids(result.appended) == _ids(batch)
        assert len(repository.find_window(cid, window)) <= window.limit
        page = repository.find_messages_page(cid, limit=10)
        assert len(page.messages) == 10
        assert recorded.names() == ["find_one_and_update", "aggregate", "aggregate"]
        sent[count] = [(name, _size(command)) for name, command in recorded.calls]
        rows[count] = [
            len(recorded.answers[0][0]["tail"]),
            len(recorded.answers[1][0]["rows"]),
        ]
    assert sent[20] == sent[2000]
    assert rows[20] == [20 + 2, 11]
    assert rows[2000] == [min(2000 + 2, window.limit + TURN_SLACK), 11]


def test_an_empty_batch_and_bad_input_send_nothing() -> None:
    """Validation runs before any command: nothing is sent, nothing written."""
    repository = _repository()
    recorded = _recorded(repository)
    assert repository.append_to_log("c", []).appended == []
    with pytest.raises(TypeError, match="Window"):
        repository.append_to_log("c", [Message.user("x")], 20)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Window"):
        repository.append_to_log("c", [], "20")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Window"):
        repository.find_window("c", None)  # type: ignore[arg-type]
    assert recorded.calls == []


def test_a_log_batch_over_a_document_is_refused_before_any_write() -> None:
    """A batch that cannot fit one document raises, and sends nothing."""
    repository = _repository()
    repository.append_to_log("c", [Message.user("small")])
    recorded = _recorded(repository)
    batch = [Message.user(letter * (6 * 1024 * 1024)) for letter in "abc"]
    with pytest.raises(MessageTooLargeError):
        repository.append_to_log("c", batch)
    assert recorded.calls == []
    assert [m.content for m in repository.find_by_conversation_id("c")] == ["small"]


def test_a_system_set_is_recorded_by_batch_and_superseded_in_place() -> None:
    """Each system element records its append's batch; ``sb`` names the current."""
    repository = _repository()
    repository.append_to_log("c", [Message.system("A"), Message.user("u1")])
    repository.append_to_log("c", [Message.assistant("a1")])
    repository.append_to_log("c", [Message.user("u2"), Message.system("B")])
    document = _raw(repository, "c")
    marks = [(e["seq"], e["role"], e.get("b")) for e in document["messages"]]
    assert marks == [
        (0, "system", 0),
        (1, "user", None),
        (2, "assistant", None),
        (3, "user", None),
        (4, "system", 3),
    ]
    assert document["sb"] == 3
    assert document["evicted_ids"] == []
    assert [m.content for m in repository.find_window("c", MessageWindow(10))] == [
        "u1",
        "a1",
        "u2",
        "B",
    ]
    _layout(repository, "c")


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("kind", ["messages", "tokens"])
def test_a_window_written_conversation_reads_as_its_window(
    seed: int, kind: str
) -> None:
    """After window appends, the view is the stored window and pages walk it.

    Evictions leave the sequence without its head and replaced system
    messages leave holes in it: pages still give each stored message once.
    """
    rng = random.Random(seed)
    repository = _repository()
    window: Window
    if kind == "messages":
        limit = rng.randint(2, 10)
        window = MessageWindow(limit)
    else:
        limit = rng.randint(20, 120)
        window = TokenWindow(limit, estimate_tokens)
    for batch in random_turns(rng, 40):
        repository.append_to_window("w", batch, window)
        stored = repository.find_by_conversation_id("w")
        assert _ids(repository.find_window("w", window)) == _ids(stored)
        _layout(repository, "w")
    _assert_pages_walk(repository, "w")


def test_a_conversation_saved_whole_is_one_batch() -> None:
    """``save_all`` (and 0.2) records no batch: every system message is shown."""
    repository = _repository()
    saved = [
        Message.system("A"),
        Message.user("u1"),
        Message.assistant("a1"),
        Message.system("B"),
        Message.user("u2"),
    ]
    repository.save_all("s", saved)
    document = _raw(repository, "s")
    assert "sb" not in document
    assert all("b" not in e for e in document["messages"])
    window = MessageWindow(10)
    assert _ids(repository.find_window("s", window)) == _ids(saved)
    # Equal to one of the batch-0 set: not stored again.
    assert repository.append_to_log("s", [Message.system("A")]).appended == []
    assert repository.append_to_log("s", [Message.system("B")]).appended == []
    new = Message.system("C")
    assert repository.append_to_log("s", [new, Message.user("u3")]).appended
    view = repository.find_window("s", window)
    assert [m.content for m in view] == ["u1", "a1", "u2", "C", "u3"]
    assert [m.content for m in repository.find_by_conversation_id("s")] == [
        "A",
        "u1",
        "a1",
        "B",
        "u2",
        "C",
        "u3",
    ]
    _layout(repository, "s")
    _assert_pages_walk(repository, "s")
    repository.save_all("s", saved)
    assert "sb" not in _raw(repository, "s")
    assert _ids(repository.find_window("s", window)) == _ids(saved)


def test_a_0_2_document_reads_as_a_log() -> None:
    """A document as release 0.2 wrote it (no ``b``, no ``sb``) opens whole.

    Its window append left the current system set only, and the log reads
    every stored message, shows that set, and appends after it.
    """
    repository = _repository()
    old = stamp_messages(
        [Message.system("S"), Message.user("u"), Message.assistant("a")]
    )
    elements: list[dict[str, Any]] = [
        {
            "seq": 7 + n,
            "id": m.id,
            "role": m.role.value,
            "sizes": [],
            "p": codec.to_json(m),
            **({"k": system_key(m)} if m.role is Role.SYSTEM else {}),
        }
        for n, m in enumerate(old)
    ]
    repository.collection.insert_one(
        {
            "_id": "old",
            "messages": elements,
            "next_seq": 10,
            "version": "v",
            "expires_at": None,
            "evicted_ids": ["gone"],
        }
    )
    assert repository.find_by_conversation_id("old") == old
    assert repository.find_window("old", MessageWindow(10)) == old
    gone = Message.user("again", id="gone")
    retried = repository.append_to_log("old", [gone, Message.system("S")])
    assert retried.appended == []
    appended = repository.append_to_log("old", [Message.user("u2")]).appended
    assert [(e["seq"], e["id"]) for e in _raw(repository, "old")["messages"]][-1] == (
        10,
        appended[0].id,
    )
    _assert_pages_walk(repository, "old")


def test_a_window_append_replaces_only_the_current_system_set() -> None:
    """A prompt the log superseded is history: a window append leaves it there."""
    repository = _repository()
    window = MessageWindow(10)
    repository.append_to_log("p", [Message.system("A"), Message.user("u1")])
    repository.append_to_log("p", [Message.system("B"), Message.user("u2")])
    # A is not in the current set (B): it replaces B, and is stored again.
    result = repository.append_to_window("p", [Message.system("A")], window)
    assert [m.content for m in result.appended] == ["A"]
    assert len(result.evicted_ids) == 1  # B
    assert [m.content for m in repository.find_by_conversation_id("p")] == [
        "A",
        "u1",
        "u2",
        "A",
    ]
    assert [m.content for m in repository.find_window("p", window)] == [
        "u1",
        "u2",
        "A",
    ]
    # The superseded A counts nowhere in a window: two messages fit beside A.
    result = repository.append_to_window("p", [Message.user("u3")], MessageWindow(3))
    assert [m.content for m in repository.find_by_conversation_id("p")] == [
        "A",
        "u2",
        "A",
        "u3",
    ]
    _layout(repository, "p")


@pytest.mark.parametrize("seed", range(6))
def test_log_and_window_appends_share_one_document(seed: int) -> None:
    """Mixed appends, windows and counters keep the document consistent.

    A window append acts on the current system set and every non-system
    message (what :func:`apply_window` is given); a log append adds after
    them and removes nothing; every view and page reads what is stored.
    """
    rng = random.Random(seed)
    repository = _repository()
    windows: list[Window | None] = [
        None,
        MessageWindow(rng.randint(3, 12)),
        TokenWindow(rng.randint(40, 200), estimate_tokens),
        TokenWindow(rng.randint(40, 200), estimate_tokens, "other"),
    ]
    held: set[str] = set()
    for batch in random_turns(rng, 40):
        before = _layout(repository, "mix")
        fresh = [m for m in batch if m.id not in held]
        held.update(m.id for m in batch)
        window = rng.choice(windows)
        if window is not None and rng.random() < 0.5:
            stored = _stored_window(repository, "mix", before)
            result = repository.append_to_window("mix", batch, window)
            after = _layout(repository, "mix")
            if fresh:
                expected = apply_window(stored, fresh, window)
                found = _stored_window(repository, "mix", after)
                assert _ids(found) == _ids(expected.messages)
                assert sorted(result.evicted_ids) == sorted(_ids(expected.evicted))
        else:
            stored_ids = _ids(repository.find_by_conversation_id("mix"))
            result = repository.append_to_log("mix", batch, window)
            assert result.evicted_ids == []
            _layout(repository, "mix")
            logged = _ids(repository.find_by_conversation_id("mix"))
            assert logged == stored_ids + _ids(result.appended)
        for view_window in windows[1:]:
            assert view_window is not None
            repository.find_window("mix", view_window)
    _assert_pages_walk(repository, "mix")


class _CountingCounter:
    """A token counter that counts the messages it measures."""

    counter_id = "log-test-counting"

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, message: Message) -> int:
        self.calls += 1
        return estimate_tokens(message)


def test_sizes_are_stored_under_the_counter_of_the_append() -> None:
    """A log append stores sizes for its own rows; a view measures only the rest.

    The window append then measures the rows without a size once (its
    backfill), as it does for any new counter.
    """
    repository = _repository()
    repository.save_all("c", [Message.user("u0"), Message.assistant("a0")])
    counter = _CountingCounter()
    window = TokenWindow(10_000, counter)
    repository.append_to_log("c", [Message.user("u1")], window)
    assert counter.calls == 1
    sizes = [e["sizes"] for e in _raw(repository, "c")["messages"]]
    assert [len(s) for s in sizes] == [0, 0, 1]
    assert sizes[2][0]["c"] == window.counter_id
    counter.calls = 0
    assert len(repository.find_window("c", window)) == 3
    assert counter.calls == 2  # the two saved rows, not the appended one
    repository.append_to_log("c", [Message.assistant("a1")])  # no window: no size
    repository.append_to_window("c", [Message.user("u2")], window)
    counter.calls = 0
    assert len(repository.find_window("c", window)) == 5
    assert counter.calls == 0


def test_a_log_append_skips_ids_a_window_evicted() -> None:
    """The record of evicted ids counts as held: a late retry stores nothing."""
    repository = _repository()
    first = [Message.user("u1"), Message.assistant("a1")]
    repository.append_to_window("c", first, MessageWindow(2))
    repository.append_to_window("c", [Message.user("u2")], MessageWindow(2))
    assert _raw(repository, "c")["evicted_ids"] == _ids(first)
    assert repository.append_to_log("c", first).appended == []
    assert [m.content for m in repository.find_by_conversation_id("c")] == ["u2"]


def test_a_retried_log_append_after_a_lost_answer_is_a_no_op() -> None:
    """The update landed, its answer was lost: the retry appends nothing."""
    repository = _repository()
    batch = [Message.user("U1"), Message.assistant("A1")]

    def lose_answer(point: str) -> None:
        raise ConnectionError(point)

    repository.fault_points.on("after_commit", lose_answer)
    with pytest.raises(ConnectionError):
        repository.append_to_log("c", batch)
    repository.fault_points.clear()
    assert repository.append_to_log("c", batch).appended == []
    assert _ids(repository.find_by_conversation_id("c")) == _ids(batch)


def test_a_log_append_on_an_expired_document_starts_a_new_log() -> None:
    """An expired conversation counts as empty: numbers and record start again."""
    # No TTL index: mongomock would delete the document at once, whereas a
    # server's TTL monitor leaves it for up to a minute, which is the case here.
    repository = _repository(ttl=timedelta(hours=1), create_indexes=False)
    old = [Message.user("u1"), Message.assistant("a1")]
    repository.append_to_window("c", old, MessageWindow(2))
    repository.append_to_window("c", [Message.system("S")], MessageWindow(2))
    past = datetime.now(UTC) - timedelta(seconds=5)
    repository.collection.update_one({"_id": "c"}, {"$set": {"expires_at": past}})
    assert repository.find_window("c", MessageWindow(5)) == []
    assert repository.find_messages_page("c").messages == []
    result = repository.append_to_log("c", [*old, Message.system("S")])
    assert [m.content for m in result.appended] == ["u1", "a1", "S"]
    document = _raw(repository, "c")
    assert [e["seq"] for e in document["messages"]] == [0, 1, 2]
    assert (document["sb"], document["evicted_ids"]) == (0, [])
    assert document["expires_at"] > datetime.now(UTC) + timedelta(minutes=59)


def _long_turn() -> list[Message]:
    call = ToolCall(id="t", name="f", arguments="{}")
    steps = [
        m
        for _ in range(40)
        for m in (
            Message.assistant(None, tool_calls=[call]),
            Message.tool(ToolResponse(id="t", name="f", data="ok")),
        )
    ]
    return [Message.user("go"), *steps, Message.assistant("done")]


def test_a_turn_longer_than_the_first_read_is_read_back_in_pages() -> None:
    """Rule 3 reaches back past the first read: the view reads older rows."""
    repository = _repository()
    turn = _long_turn()
    repository.append_to_log("long", [Message.user("earlier"), Message.assistant("x")])
    repository.append_to_log("long", turn)
    recorded = _recorded(repository)
    assert _ids(repository.find_window("long", MessageWindow(2))) == _ids(turn)
    # 82 rows of the turn: 10 first, then 20, 40, 80 (which reaches "go").
    assert recorded.names() == ["aggregate"] * 4
    assert [len(a[0]["tail"]) for a in recorded.answers] == [10, 20, 40, 14]


def test_a_further_read_after_its_row_is_gone_reads_nothing() -> None:
    """A further read answers only while the row it continues from is stored.

    After a window append evicted that row, or ``save_all`` renumbered the
    conversation (the same ``seq`` now holds another message), it answers
    nothing: a view never mixes two states of a conversation.
    """
    repository = _repository()
    history = [Message.user(f"m{n}") for n in range(6)]
    repository.append_to_log("c", history)
    oldest = {"s": 4, "i": history[4].id}
    window = MessageWindow(3)
    now = datetime.now(UTC)

    def further() -> list[Any]:
        return list(
            repository.collection.aggregate(tail_pipeline("c", window, oldest, 2, now))
        )

    assert [r["s"] for r in further()[0]["tail"]] == [2, 3]
    repository.save_all("c", [Message.user(f"new{n}") for n in range(6)])
    assert further() == []
    repository.save_all("c", history)
    assert [r["s"] for r in further()[0]["tail"]] == [2, 3]
    repository.append_to_window("c", [Message.user("last")], MessageWindow(1))
    assert further() == []
