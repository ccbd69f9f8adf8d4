"""The Neo4j log's own risks, on a real server.

One round trip per log call, the same on 20 and 2,000 stored messages; plans
that seek their indexes in order and read the conversation only after its
lock; a gap-free sequence under concurrent writers; views that read further
back only while the row they continue from is stored; the reads under the
lock when writes keep interleaving; and logs made of what the window append,
``save_all`` and releases before the log wrote.
"""

from __future__ import annotations

import random
import socket
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from neo4j.exceptions import DriverError, ServiceUnavailable

from chatledger import (
    InMemoryChatMemoryRepository,
    Message,
    MessageWindow,
    TokenWindow,
    ToolCall,
    ToolResponse,
)
from chatledger.testing import random_turns
from chatledger.tokens import estimate_tokens
from chatledger.window import Window, apply_window
from chatledger_neo4j import Neo4jChatMemoryRepository
from chatledger_neo4j.log_steps import NO_BOUND
from chatledger_neo4j.steps import SNAPSHOT_ATTEMPTS
from tests.backends import backend_url
from tests.conformance.test_neo4j import small_reads

#: Writers appending to one conversation at once, and appends each.
WRITERS = 6
APPENDS = 15


@pytest.fixture(scope="module")
def neo4j_url(required: set[str]) -> str:
    return backend_url("neo4j", required)


def _open(url: str) -> Neo4jChatMemoryRepository:
    tag = uuid.uuid4().hex[:12]
    return Neo4jChatMemoryRepository.from_url(
        url, conversation_label=f"ConversationL{tag}", message_label=f"MessageL{tag}"
    )


@pytest.fixture
def repository(neo4j_url: str) -> Iterator[Neo4jChatMemoryRepository]:
    repository = _open(neo4j_url)
    # The first call makes the schema: made here, what a test counts is its own.
    repository.find_conversation_ids()
    try:
        yield repository
    finally:
        repository.fault_points.clear()
        repository.drop_schema()
        repository.close()


def _ids(messages: list[Message]) -> list[str]:
    return [m.id for m in messages]


def _history(n: int) -> list[Message]:
    return [
        Message.user(f"u{i}") if i % 2 == 0 else Message.assistant(f"a{i}")
        for i in range(n)
    ]


def _message_nodes(
    repository: Neo4jChatMemoryRepository, cid: str
) -> list[dict[str, Any]]:
    with repository._session() as session:
        return [
            dict(record["p"])
            for record in session.run(
                "MATCH (m:`" + repository.statements.message_label + "`) "
                "WHERE m.conversation_id = $cid "
                "RETURN properties(m) AS p ORDER BY m.seq",
                cid=cid,
            )
        ]


# -- round trips and plans -------------------------------------------------------


class _SocketWrites:
    """Counts the writes of every socket of this process (the driver's only)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        sendall, send = socket.socket.sendall, socket.socket.send

        def counted_sendall(sock: socket.socket, *args: Any) -> Any:
            self.count += 1
            return sendall(sock, *args)

        def counted_send(sock: socket.socket, *args: Any) -> Any:
            self.count += 1
            return send(sock, *args)

        monkeypatch.setattr(socket.socket, "sendall", counted_sendall)
        monkeypatch.setattr(socket.socket, "send", counted_send)

    def during(self, call: Callable[[], object]) -> int:
        self.count = 0
        call()
        return self.count


def _log_calls(
    repository: Neo4jChatMemoryRepository, cid: str, tokens: Window
) -> list[Callable[[], object]]:
    """A log append (plain, and one holding a system message), views, pages."""
    return [
        lambda: repository.append_to_log(
            cid, [Message.user("q"), Message.assistant("a")], tokens
        ),
        lambda: repository.append_to_log(
            cid, [Message.system("Be brief."), Message.user("q2")]
        ),
        lambda: repository.find_window(cid, MessageWindow(20)),
        lambda: repository.find_window(cid, tokens),
        lambda: repository.find_messages_page(cid, limit=50),
        lambda: repository.find_messages_page(
            cid, "o:10", limit=50, newest_first=False
        ),
    ]


def test_each_log_call_is_one_round_trip_at_any_length(
    repository: Neo4jChatMemoryRepository, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A log append, a view and a page each send one request, on 20 or 2,000 rows.

    The driver sends a statement run on its own (RUN and PULL) in one write
    and reads its answer: one request, one round trip. A managed transaction
    would add a BEGIN and a COMMIT. (The token window fills within the 32
    rows a token view reads first.)
    """
    tokens = TokenWindow(60, estimate_tokens)
    for n in (20, 2000):
        repository.append_to_log(
            f"long-{n}", [Message.system("Be brief."), *_history(n)]
        )
    writes = _SocketWrites(monkeypatch)
    counts = {
        n: [writes.during(call) for call in _log_calls(repository, f"long-{n}", tokens)]
        for n in (20, 2000)
    }
    assert counts[20] == [1, 1, 1, 1, 1, 1]
    assert counts[2000] == counts[20]


def _profile(
    repository: Neo4jChatMemoryRepository, query: str, **parameters: Any
) -> list[tuple[str, int, int]]:
    """(operator, rows, db hits) of each operator of a profiled run."""
    with repository._session() as session:
        summary = session.run("PROFILE " + query, parameters).consume()
    assert summary.profile is not None
    found: list[tuple[str, int, int]] = []

    def walk(plan: dict[str, Any]) -> None:
        arguments = plan.get("args", {})
        found.append(
            (
                str(plan["operatorType"]).split("@")[0],
                int(arguments.get("Rows", 0)),
                int(arguments.get("DbHits", 0)),
            )
        )
        for child in plan.get("children", []):
            walk(child)

    walk(summary.profile)
    return found


def test_views_and_pages_read_the_same_rows_at_20_and_2000(
    repository: Neo4jChatMemoryRepository,
) -> None:
    """PROFILE: the rows and db hits of a view or a page do not grow with the log.

    At 100 messages a log is already longer than what a view (28 rows) or a
    page (51) reads; from there on nothing changes.
    """
    statements = repository.statements
    profiles: dict[int, list[list[tuple[str, int, int]]]] = {}
    for n in (100, 2000):
        cid = f"long-{n}"
        # A system prompt at the start and one superseding it near the end.
        repository.append_to_log(cid, [Message.system("one"), *_history(n)])
        repository.append_to_log(cid, [Message.system("two"), *_history(4)])
        common = {"cid": cid, "system": "system", "counter": None}
        profiles[n] = [
            _profile(repository, statements.view, below=NO_BOUND, limit=28, **common),
            _profile(
                repository, statements.page_newest, cid=cid, below=NO_BOUND, limit=51
            ),
            _profile(repository, statements.page_oldest, cid=cid, after=5, limit=51),
        ]
    assert profiles[2000] == profiles[100]
    for plan in profiles[2000]:
        operators = {operator for operator, _, _ in plan}
        # Rows stream in the index's order: nothing sorts the log.
        assert not operators & {"Top", "PartialSort", "PartialTop"}, plan
        assert not operators & {"NodeByLabelScan", "AllNodesScan", "NodeIndexScan"}


def test_a_log_append_writes_the_same_at_20_and_2000(
    repository: Neo4jChatMemoryRepository,
) -> None:
    """PROFILE: an append's rows and db hits do not grow with the log."""
    from chatledger_neo4j.log_steps import log_append_parameters

    profiles = {}
    for n in (20, 2000):
        cid = f"long-{n}"
        repository.append_to_log(cid, [Message.system("one"), *_history(n)])
        batch = [Message.system("two"), Message.user("q"), Message.assistant("a")]
        parameters = log_append_parameters(cid, batch, None, {})
        profiles[n] = _profile(
            repository, repository.statements.log_append, **parameters
        )
    assert profiles[2000] == profiles[20]


def _execution_order(plan: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """Operators in the order they first produce rows: children left to right."""
    for child in plan.get("children", []):
        yield from _execution_order(child)
    operator = str(plan["operatorType"]).split("@")[0]
    yield operator, str(plan.get("args", {}).get("Details", ""))


@pytest.mark.parametrize("ids", [1, 2, 5, 50])
def test_a_log_append_reads_the_conversation_only_after_its_lock(
    repository: Neo4jChatMemoryRepository, ids: int
) -> None:
    """In the plan, the SET that locks comes before every read of what it guards.

    The planner moves a property read down to the node's seek when it thinks
    that cheaper (it did here, for some batch sizes, before the aggregation
    that now stops it): the record of evicted ids or the sequence would then
    be read before the lock, and be stale.
    """
    from chatledger_neo4j.log_steps import log_append_parameters

    for c in range(5):
        repository.append_to_log(f"seed-{c}", [Message.system("s"), *_history(20)])
    batch = [Message.system("s"), *_history(ids - 1)]
    parameters = log_append_parameters("seed-1", batch, None, {})
    with repository._session() as session:
        summary = session.run(
            "EXPLAIN " + repository.statements.log_append, parameters
        ).consume()
    assert summary.plan is not None
    order = list(_execution_order(summary.plan))
    lock = next(
        i for i, (op, d) in enumerate(order) if op == "SetProperty" and "version" in d
    )
    message = repository.statements.message_label
    reads = [
        i
        for i, (op, d) in enumerate(order)
        if f":{message}(" in d or (op == "CacheProperties" and "c." in d)
    ]
    assert reads, order
    assert lock < min(reads), order


# -- concurrency -------------------------------------------------------------------


def test_concurrent_log_appends_keep_one_gap_free_sequence(neo4j_url: str) -> None:
    """Writers creating and appending to one conversation at once.

    Their first appends race to create the conversation (a deadlock on its
    uniqueness lock, retried); every append's messages end up adjacent,
    numbered from its batch, the whole log 0..n-1 with no gap or duplicate.
    """
    repository = _open(neo4j_url)
    start = threading.Barrier(WRITERS)
    failures: list[BaseException] = []
    sent: list[list[str]] = []

    def write(writer: int) -> None:
        try:
            start.wait()
            for n in range(APPENDS):
                batch = [Message.user(f"{writer}.{n}"), Message.assistant("a")]
                result = repository.append_to_log("busy", batch)
                assert _ids(result.appended) == _ids(batch)
                sent.append(_ids(batch))
        except BaseException as error:  # reported below
            failures.append(error)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(WRITERS)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert failures == []
        nodes = _message_nodes(repository, "busy")
        assert [node["seq"] for node in nodes] == list(range(2 * WRITERS * APPENDS))
        by_id = {node["id"]: node for node in nodes}
        assert len(by_id) == len(nodes)
        for ids in sent:
            first, second = by_id[ids[0]], by_id[ids[1]]
            assert second["seq"] == first["seq"] + 1
            assert first["batch"] == second["batch"] == first["seq"]
        assert repository.count_messages("busy") == len(nodes)
    finally:
        repository.drop_schema()
        repository.close()


# -- faults ---------------------------------------------------------------------


def test_a_log_append_failing_before_it_is_sent_writes_nothing(
    repository: Neo4jChatMemoryRepository,
) -> None:
    repository.append_to_log("c", [Message.user("u1")])

    def fail(reached: str) -> None:
        raise RuntimeError(reached)

    repository.fault_points.on("before_commit", fail)
    with pytest.raises(RuntimeError, match="before_commit"):
        repository.append_to_log("c", [Message.user("u2")])
    repository.fault_points.clear()
    assert [m.content for m in repository.find_by_conversation_id("c")] == ["u1"]


def test_a_log_append_retried_after_a_lost_answer_stores_once(
    repository: Neo4jChatMemoryRepository,
) -> None:
    batch = [Message.system("s"), Message.user("u"), Message.assistant("a")]

    def lose_answer(reached: str) -> None:
        raise ConnectionError(reached)

    repository.fault_points.on("after_commit", lose_answer)
    with pytest.raises(ConnectionError):
        repository.append_to_log("c", batch)
    repository.fault_points.clear()
    assert repository.append_to_log("c", batch).appended == []
    assert _ids(repository.find_by_conversation_id("c")) == _ids(batch)


# -- views read further back, and under the lock ------------------------------------


def _long_turn() -> list[Message]:
    """A user message and then an agent loop far longer than a small window."""
    messages = [Message.user("do it")]
    for step in range(12):
        call = ToolCall(id=f"t{step}", name="f", arguments="{}")
        messages.append(Message.assistant(None, tool_calls=[call]))
        messages.append(Message.tool(ToolResponse(id=call.id, name="f", data="ok")))
    return [*_history(6), *messages, Message.assistant("done")]


def test_a_turn_past_the_first_read_is_read_back_in_doubling_reads(
    repository: Neo4jChatMemoryRepository, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rule 3 reads back to the turn's user message, a few statements deep."""
    log = _long_turn()
    repository.append_to_log("turn", log)
    window = MessageWindow(3)
    expected = apply_window([], log, window).messages
    statements: list[str] = []
    read_alone = repository._read_alone

    def counted(query: Any, parameters: dict[str, Any]) -> Any:
        statements.append(query)
        return read_alone(query, parameters)

    monkeypatch.setattr(repository, "_read_alone", counted)
    repository._view_reads = small_reads
    assert _ids(repository.find_window("turn", window)) == _ids(expected)
    # One row, then two a read, back over the 26 messages of the turn.
    assert statements[0] == repository.statements.view
    assert set(statements[1:]) == {repository.statements.view_older}
    assert len(statements) == 1 + 13


def test_a_further_read_answers_nothing_once_its_row_was_renumbered(
    repository: Neo4jChatMemoryRepository, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A view is never stitched from two numberings of a conversation.

    Between a view's first read and the next, ``save_all`` rewrites the
    conversation without its oldest messages, which renumbers the rest: the
    row the view continues from has another sequence number now, so the
    further read answers nothing and the view ends with the rows it read.
    """
    log = _long_turn()
    repository.append_to_log("turn", log)
    window = MessageWindow(3)
    read_alone = repository._read_alone
    calls = 0

    def rewritten_after_the_first(query: Any, parameters: dict[str, Any]) -> Any:
        nonlocal calls
        calls += 1
        if calls == 2:
            repository.save_all("turn", log[2:])
        return read_alone(query, parameters)

    monkeypatch.setattr(repository, "_read_alone", rewritten_after_the_first)
    repository._view_reads = lambda _window: iter([4, 4, 4])
    view = repository.find_window("turn", window)
    assert calls == 2
    # The four newest rows, less the tool response leading them (rule 4).
    assert _ids(view) == _ids(log[-3:])


def _unsettled(record: Any) -> dict[str, Any]:
    """A view read as if a write had committed while it ran."""
    return {**dict(record), "after": ["another version"]}


def test_a_view_that_writes_keep_interleaving_with_is_read_under_the_lock(
    repository: Neo4jChatMemoryRepository, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(7)
    for batch in random_turns(rng, 12):
        repository.append_to_log("busy", batch)
    window = MessageWindow(5)
    expected = repository.find_window("busy", window)
    read_alone = repository._read_alone
    attempts = 0

    def interleaved(query: Any, parameters: dict[str, Any]) -> Any:
        nonlocal attempts
        attempts += 1
        return _unsettled(read_alone(query, parameters))

    monkeypatch.setattr(repository, "_read_alone", interleaved)
    assert repository.find_window("busy", window) == expected
    assert attempts == SNAPSHOT_ATTEMPTS
    assert repository.find_window("nobody", window) == []


def test_a_page_holding_a_message_being_deleted_is_read_again(
    repository: Neo4jChatMemoryRepository, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A row whose payload is gone (deleted while read) is never paged."""
    repository.append_to_log("c", _history(7))
    expected = repository.find_messages_page("c", limit=3)
    read_alone = repository._read_alone
    attempts = 0

    def deleting(query: Any, parameters: dict[str, Any]) -> Any:
        nonlocal attempts
        attempts += 1
        record = dict(read_alone(query, parameters))
        seq, _ = record["rows"][0]
        return {"rows": [[seq, None], *record["rows"][1:]]}

    monkeypatch.setattr(repository, "_read_alone", deleting)
    assert repository.find_messages_page("c", limit=3) == expected
    assert attempts == SNAPSHOT_ATTEMPTS


# -- what other writers stored ----------------------------------------------------


def _reference_view(messages: list[Message], window: Window) -> list[Message]:
    """The view core's in-memory log shows of ``messages`` saved whole."""
    reference = InMemoryChatMemoryRepository()
    reference.save_all("c", messages)
    return reference.find_window("c", window)


@pytest.mark.parametrize("seed", range(3))
def test_a_conversation_the_window_append_wrote_reads_as_a_log(
    repository: Neo4jChatMemoryRepository, seed: int
) -> None:
    """Its view is the window it holds; its pages walk what it holds."""
    rng = random.Random(seed)
    window = MessageWindow(rng.randint(2, 8))
    expected: list[Message] = []
    for batch in random_turns(rng, 20):
        repository.append_to_window("w", batch, window)
        fresh = [m for m in batch if m.id not in set(_ids(expected))]
        if fresh:
            expected = apply_window(expected, fresh, window).messages
        assert _ids(repository.find_window("w", window)) == _ids(expected)
    stored = repository.find_by_conversation_id("w")
    assert _ids(stored) == _ids(expected)
    pages = repository.find_messages_page("w", limit=10_000, newest_first=False)
    assert _ids(pages.messages) == _ids(stored)


@pytest.mark.parametrize("seed", range(3))
def test_a_conversation_save_all_wrote_reads_as_a_log(
    repository: Neo4jChatMemoryRepository, seed: int
) -> None:
    """Every row counts as batch 0: all its system messages show."""
    rng = random.Random(seed)
    messages = [m for batch in random_turns(rng, 25) for m in batch]
    repository.save_all("s", messages)
    for window in (MessageWindow(6), TokenWindow(120, estimate_tokens)):
        view = repository.find_window("s", window)
        assert _ids(view) == _ids(_reference_view(messages, window))


def _as_written_before_the_log(repository: Neo4jChatMemoryRepository, cid: str) -> None:
    """Strip what the log adds to each message: its batch and its system_key."""
    with repository._session() as session:
        session.run(
            "MATCH (m:`" + repository.statements.message_label + "`) "
            "WHERE m.conversation_id = $cid REMOVE m.batch, m.system_key",
            cid=cid,
        ).consume()


def test_a_store_written_before_the_log_opens_with_nothing_lost(
    repository: Neo4jChatMemoryRepository, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No batch recorded reads as batch 0; a missing system_key is computed once.

    The first log append whose batch holds a system message sends the
    statement twice: the first answers the stored system messages without a
    key, the second brings their keys, stores them, and appends.
    """
    window = MessageWindow(4)
    prompt = Message.system("Be brief.", metadata={"n": 1})
    for batch in ([prompt, Message.user("u1")], [Message.assistant("a1")]):
        repository.append_to_window("old", batch, window)
    _as_written_before_the_log(repository, "old")
    assert _ids(repository.find_window("old", window)) == _ids(
        repository.find_by_conversation_id("old")
    )
    writes = _SocketWrites(monkeypatch)
    # The same prompt (equal, by system_key: 1.0 == 1) is left out.
    again = Message.system("Be brief.", metadata={"n": 1.0})
    question = Message.user("u2")
    assert (
        writes.during(lambda: repository.append_to_log("old", [again, question])) == 2
    )
    nodes = _message_nodes(repository, "old")
    assert [n.get("system_key") is not None for n in nodes] == [
        True,
        False,
        False,
        False,
    ]
    assert [n.get("batch") for n in nodes] == [None, None, None, 3]
    # Keyed now: one round trip; a new prompt supersedes the old one.
    new_prompt = Message.system("Be thorough.")
    assert (
        writes.during(
            lambda: repository.append_to_log("old", [new_prompt, Message.user("u3")])
        )
        == 1
    )
    view = repository.find_window("old", MessageWindow(10))
    assert [m.content for m in view] == ["u1", "a1", "u2", "Be thorough.", "u3"]


def test_log_and_window_appends_take_turns_on_one_conversation(
    repository: Neo4jChatMemoryRepository,
) -> None:
    """The window append compares with and replaces the current system set only.

    A prompt the log superseded stays in the log: the window append neither
    counts it, nor compares with it, nor deletes it; and the counters it
    keeps on the conversation stay right across log appends.
    """
    window = MessageWindow(4)
    one, two = Message.system("one"), Message.system("two")
    repository.append_to_log("mix", [one, *_history(4)])
    repository.append_to_log("mix", [two, Message.user("u")])
    # Equal to the current set: left out, though "one" is in the log too.
    result = repository.append_to_window(
        "mix", [Message.system("two"), Message.assistant("a")], window
    )
    assert [m.content for m in result.appended] == ["a"]
    # It evicted the oldest turns down to the window, and left "one" alone.
    stored = repository.find_by_conversation_id("mix")
    assert [m.content for m in stored] == ["one", "two", "u", "a"]
    assert [m.content for m in repository.find_window("mix", window)] == [
        "two",
        "u",
        "a",
    ]
    # A new prompt through the window append replaces "two" alone.
    three = Message.system("three")
    result = repository.append_to_window("mix", [three, Message.user("v")], window)
    assert two.id in result.evicted_ids
    assert one.id not in result.evicted_ids
    stored = repository.find_by_conversation_id("mix")
    assert [m.content for m in stored] == ["one", "u", "a", "three", "v"]
    view = repository.find_window("mix", MessageWindow(10))
    assert [m.content for m in view if m.role.value == "system"] == ["three"]
    # And a log append after it compares with "three" alone.
    result = repository.append_to_log("mix", [Message.system("one"), Message.user("w")])
    assert [m.content for m in result.appended] == ["one", "w"]
    view = repository.find_window("mix", MessageWindow(10))
    assert [m.content for m in view if m.role.value == "system"] == ["one"]
    nodes = _message_nodes(repository, "mix")
    node = _conversation(repository, "mix")
    assert node["next_seq"] == max(n["seq"] for n in nodes) + 1
    assert node["message_count"] == len([n for n in nodes if n["role"] != "system"])


def _conversation(repository: Neo4jChatMemoryRepository, cid: str) -> dict[str, Any]:
    with repository._session() as session:
        record = session.run(
            "MATCH (c:`" + repository.statements.conversation_label + "` {id: $cid}) "
            "RETURN properties(c) AS p",
            cid=cid,
        ).single(strict=True)
    return dict(record["p"])


def test_a_token_window_append_after_log_appends_measures_what_it_must(
    repository: Neo4jChatMemoryRepository,
) -> None:
    """Sizes a log append stored in the window's measure keep its total; others not."""
    window = TokenWindow(60, estimate_tokens)
    repository.append_to_window("t", _history(4), window)
    assert _conversation(repository, "t")["size_total"] is not None
    repository.append_to_log("t", _history(2), window)
    total = sum(estimate_tokens(m) for m in repository.find_by_conversation_id("t"))
    assert _conversation(repository, "t")["size_total"] == total
    # Appended without sizes: the total is dropped, the next append measures.
    repository.append_to_log("t", [Message.user("unsized")])
    assert _conversation(repository, "t").get("size_total") is None
    repository.append_to_window("t", [Message.assistant("sized")], window)
    kept = repository.find_by_conversation_id("t")
    assert _conversation(repository, "t")["size_total"] == sum(
        estimate_tokens(m) for m in kept
    )
    assert sum(estimate_tokens(m) for m in kept) <= 60


# -- retries ----------------------------------------------------------------------


class _LosingSession:
    """A real session whose ``run`` fails as a lost connection does: before or
    after the statement reached the server."""

    def __init__(self, session: Any, sent: bool) -> None:
        self._session = session
        self._sent = sent

    def __enter__(self) -> _LosingSession:
        self._session.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._session.__exit__(*exc)

    def run(self, query: Any, parameters: Any = None) -> Any:
        if self._sent:
            self._session.run(query, parameters).consume()
        raise ServiceUnavailable("the connection was lost")


@pytest.mark.parametrize("sent", [False, True])
def test_a_statement_that_lost_its_connection_is_sent_again(
    repository: Neo4jChatMemoryRepository, monkeypatch: pytest.MonkeyPatch, sent: bool
) -> None:
    """A retryable error sends the statement again; an append lands once.

    Lost after it reached the server, the first append committed: the second
    finds its ids held, stores nothing and reports nothing appended.
    """
    batch = [Message.user("u"), Message.assistant("a")]
    session = repository._session
    opened = 0

    def losing_once(*args: Any) -> Any:
        nonlocal opened
        opened += 1
        return _LosingSession(session(*args), sent) if opened == 1 else session(*args)

    monkeypatch.setattr(repository, "_session", losing_once)
    result = repository.append_to_log("c", batch)
    assert opened == 2
    assert _ids(result.appended) == ([] if sent else _ids(batch))
    assert _ids(repository.find_by_conversation_id("c")) == _ids(batch)
    opened = 0
    assert _ids(repository.find_window("c", MessageWindow(5))) == _ids(batch)
    assert opened == 2


def test_an_error_that_is_not_retryable_is_raised_at_once(
    repository: Neo4jChatMemoryRepository, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened = 0

    def refusing(*args: Any) -> Any:
        nonlocal opened
        opened += 1
        raise DriverError("not retryable")

    monkeypatch.setattr(repository, "_session", refusing)
    with pytest.raises(DriverError, match="not retryable"):
        repository.append_to_log("c", [Message.user("u")])
    assert opened == 1
