"""Neo4j adapter tests that need no server.

They check what is decided before any I/O (labels, URLs, argument
validation), the Cypher text the repository sends, and the window plan it
computes from the rows it reads. Nothing here stands in for a server: the
driver points at a closed port, so any I/O would raise ``ServiceUnavailable``.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from importlib.metadata import entry_points
from typing import Any

import pytest
from neo4j import AsyncGraphDatabase, GraphDatabase

from chatledger import (
    AppendResult,
    InvalidConversationIdError,
    InvalidMessageError,
    InvalidNameError,
    InvalidPageError,
    Message,
    MessageWindow,
    Role,
    TokenWindow,
    UnknownBackendError,
)
from chatledger.append_plan import StoredEntry, StoredWindow, plan_append
from chatledger.testing import random_turns
from chatledger.testing.samples import BAD_CONVERSATION_IDS
from chatledger.tokens import estimate_tokens
from chatledger.validation import stamp_messages
from chatledger.window import Window, apply_window
from chatledger_neo4j import (
    Neo4jChatMemoryRepository,
    Statements,
    parse_url,
    validate_label,
)

# Port 1 on loopback: nothing listens, so a query would fail at once.
NOWHERE = "bolt://127.0.0.1:1"

HOSTILE_LABELS: list[Any] = [
    "",
    " ",
    "Message`) DETACH DELETE n //",
    "a`b",
    "`Message`",
    "Message:Admin",
    "Message {x: 1}",
    "a b",
    "a-b",
    "a.b",
    "1abc",
    "$label",
    "Msg;",
    "Msg\n",
    "\nMsg",
    "Msg\x00",
    "Mésage",
    "\uff2dessage",  # fullwidth M
    "A" * 65,
    None,
    42,
    b"Message",
]


@pytest.fixture
def offline_driver() -> Iterator[Any]:
    driver = GraphDatabase.driver(NOWHERE, auth=("neo4j", "unused"))
    try:
        yield driver
    finally:
        driver.close()


# -- labels ---------------------------------------------------------------------


@pytest.mark.parametrize("label", ["Message", "_x", "A1_b", "a" * 64, "Conversation"])
def test_neo4j_allowed_labels_pass(label: str) -> None:
    assert validate_label(label) == label


@pytest.mark.parametrize("label", HOSTILE_LABELS, ids=repr)
def test_neo4j_hostile_labels_are_rejected(label: Any) -> None:
    with pytest.raises(InvalidNameError):
        validate_label(label)
    with pytest.raises(InvalidNameError):
        Statements(label, "Message")
    with pytest.raises(InvalidNameError):
        Statements("Conversation", label)


@pytest.mark.parametrize("label", HOSTILE_LABELS, ids=repr)
def test_neo4j_hostile_label_fails_before_any_io(
    offline_driver: Any, label: Any
) -> None:
    """The constructor rejects the label before it creates the schema."""
    with pytest.raises(InvalidNameError):
        Neo4jChatMemoryRepository(offline_driver, message_label=label)
    with pytest.raises(InvalidNameError):
        Neo4jChatMemoryRepository.from_url(NOWHERE, conversation_label=label)


def test_neo4j_labels_must_differ() -> None:
    with pytest.raises(InvalidNameError):
        Statements("Same", "Same")


# -- URLs -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "uri", "user", "password", "database"),
    [
        ("neo4j://localhost", "neo4j://localhost", None, "", None),
        ("bolt://h:7687", "bolt://h:7687", None, "", None),
        ("neo4j://neo4j:secret@h:7687", "neo4j://h:7687", "neo4j", "secret", None),
        (
            "neo4j+s://app:p%40ss%3Aw%2Fd@db.example.com:7687/chat",
            "neo4j+s://db.example.com:7687",
            "app",
            "p@ss:w/d",
            "chat",
        ),
        ("bolt+ssc://u@h/", "bolt+ssc://h", "u", "", None),
        ("neo4j+ssc://u:@h:1", "neo4j+ssc://h:1", "u", "", None),
        ("NEO4J://h", "neo4j://h", None, "", None),
        ("bolt://[::1]:7687/db", "bolt://[::1]:7687", None, "", "db"),
        (
            "neo4j://u:pw-secret@h:7687/?policy=eu",
            "neo4j://h:7687?policy=eu",
            "u",
            "pw-secret",
            None,
        ),
    ],
)
def test_neo4j_url_parsing(
    url: str, uri: str, user: str | None, password: str, database: str | None
) -> None:
    settings = parse_url(url)
    assert settings.uri == uri
    assert settings.user == user
    assert settings.password == password
    assert settings.database == database
    assert settings.auth == (None if user is None else (user, password))
    assert "@" not in settings.uri
    if password:
        assert password not in repr(settings)


@pytest.mark.parametrize(
    "url", ["http://h:7474", "redis://h", "postgresql://h/db", "h:7687", ""]
)
def test_neo4j_url_with_another_scheme_is_refused(url: str) -> None:
    with pytest.raises(UnknownBackendError):
        parse_url(url)


def test_neo4j_url_without_host_is_refused() -> None:
    with pytest.raises(ValueError, match="host"):
        parse_url("neo4j://")


def test_neo4j_from_url_keeps_password_out_of_repr() -> None:
    repository = Neo4jChatMemoryRepository.from_url(
        "bolt://neo4j:hunter2-secret@127.0.0.1:1/chatdb", create_schema=False
    )
    try:
        assert repository.database == "chatdb"
        assert "hunter2" not in repr(repository)
        assert "hunter2" not in str(vars(repository))
    finally:
        repository.close()
        repository.close()


def test_neo4j_database_option_wins_over_url_path() -> None:
    with Neo4jChatMemoryRepository.from_url(
        "bolt://127.0.0.1:1/fromurl", database="explicit", create_schema=False
    ) as repository:
        assert repository.database == "explicit"


# -- import and entry points ---------------------------------------------------------


def test_neo4j_entry_points_resolve_to_from_url() -> None:
    found = {e.name: e for e in entry_points(group="chatledger.repositories")}
    for scheme in ("neo4j", "bolt"):
        assert (
            found[scheme].value == "chatledger_neo4j:Neo4jChatMemoryRepository.from_url"
        )
        assert found[scheme].load() == Neo4jChatMemoryRepository.from_url


def test_neo4j_repository_has_the_protocols(offline_driver: Any) -> None:
    from chatledger import ChatMemoryRepository, SupportsLog, SupportsWindowAppend

    repository = Neo4jChatMemoryRepository(offline_driver, create_schema=False)
    assert isinstance(repository, ChatMemoryRepository)
    assert isinstance(repository, SupportsWindowAppend)
    assert isinstance(repository, SupportsLog)


def test_neo4j_repository_shows_the_driver_it_was_given(offline_driver: Any) -> None:
    repository = Neo4jChatMemoryRepository(offline_driver, create_schema=False)
    assert repository.driver is offline_driver


def test_neo4j_refuses_an_async_driver_before_any_io() -> None:
    driver = AsyncGraphDatabase.driver(NOWHERE)
    # Refused before the schema is made: no I/O, so no event loop is needed.
    with pytest.raises(TypeError, match=r"neo4j\.Driver .*AsyncBoltDriver"):
        Neo4jChatMemoryRepository(driver)  # type: ignore[arg-type]


# -- validation before any I/O ---------------------------------------------------


@pytest.mark.parametrize("bad_id", BAD_CONVERSATION_IDS, ids=repr)
def test_neo4j_bad_ids_fail_before_any_io(offline_driver: Any, bad_id: Any) -> None:
    repository = Neo4jChatMemoryRepository(offline_driver, create_schema=False)
    with pytest.raises(InvalidConversationIdError):
        repository.find_by_conversation_id(bad_id)
    with pytest.raises(InvalidConversationIdError):
        repository.save_all(bad_id, [Message.user("x")])
    with pytest.raises(InvalidConversationIdError):
        repository.delete_by_conversation_id(bad_id)
    with pytest.raises(InvalidConversationIdError):
        repository.append_to_window(bad_id, [Message.user("x")], MessageWindow(3))
    with pytest.raises(InvalidConversationIdError):
        repository.append_to_log(bad_id, [Message.user("x")])
    with pytest.raises(InvalidConversationIdError):
        repository.find_window(bad_id, MessageWindow(3))
    with pytest.raises(InvalidConversationIdError):
        repository.find_messages_page(bad_id)


@pytest.mark.parametrize("bad_batch", [None, "text", [None], [Message.user("a"), 1]])
def test_neo4j_bad_batches_fail_before_any_io(
    offline_driver: Any, bad_batch: Any
) -> None:
    repository = Neo4jChatMemoryRepository(offline_driver, create_schema=False)
    with pytest.raises(InvalidMessageError):
        repository.save_all("c", bad_batch)
    with pytest.raises(InvalidMessageError):
        repository.append_to_window("c", bad_batch, MessageWindow(3))
    with pytest.raises(InvalidMessageError):
        repository.append_to_log("c", bad_batch)


def test_neo4j_empty_append_does_no_io(offline_driver: Any) -> None:
    repository = Neo4jChatMemoryRepository(offline_driver, create_schema=False)
    assert repository.append_to_window("c", [], MessageWindow(3)) == AppendResult()
    assert repository.append_to_log("c", []) == AppendResult()
    assert repository.append_to_log("c", [], MessageWindow(3)) == AppendResult()


@pytest.mark.parametrize("bad_window", [20, "20", object(), [MessageWindow(3)]])
def test_neo4j_log_refuses_a_window_that_is_not_one_before_any_io(
    offline_driver: Any, bad_window: Any
) -> None:
    repository = Neo4jChatMemoryRepository(offline_driver, create_schema=False)
    with pytest.raises(TypeError, match="window must be a Window"):
        repository.find_window("c", bad_window)
    with pytest.raises(TypeError, match="window must be a Window"):
        repository.append_to_log("c", [Message.user("x")], bad_window)


@pytest.mark.parametrize(
    ("cursor", "limit", "newest_first"),
    [
        (None, 0, True),
        (None, 10_001, True),
        (None, "5", True),
        ("not a cursor", 5, True),
        ("n:12", 5, False),
        ("o:12", 5, True),
        ("n:-1", 5, True),
        (None, 5, "yes"),
    ],
)
def test_neo4j_bad_page_requests_fail_before_any_io(
    offline_driver: Any, cursor: Any, limit: Any, newest_first: Any
) -> None:
    repository = Neo4jChatMemoryRepository(offline_driver, create_schema=False)
    with pytest.raises(InvalidPageError):
        repository.find_messages_page("c", cursor, limit, newest_first)


# -- Cypher text -------------------------------------------------------------------

CONVERSATION = "ChatConv"
MESSAGE = "ChatMsg"


def _statements() -> dict[str, str]:
    statements = Statements(CONVERSATION, MESSAGE)
    found: dict[str, str] = {}
    for name, value in vars(statements).items():
        if isinstance(value, tuple):
            found.update({f"{name}[{i}]": v for i, v in enumerate(value)})
        elif isinstance(value, str) and name not in {
            "conversation_label",
            "message_label",
        }:
            found[name] = value
    return found


@pytest.mark.parametrize("name", sorted(_statements()))
def test_neo4j_labels_only_appear_backquoted(name: str) -> None:
    text = _statements()[name]
    without_quoted = re.sub(r"`[^`]*`", "", text)
    assert CONVERSATION not in without_quoted
    assert MESSAGE not in without_quoted
    if name.startswith("drop_schema"):
        assert re.fullmatch(r"DROP (CONSTRAINT|INDEX) `chatledger_\w+` IF EXISTS", text)
    else:
        assert f":`{CONVERSATION}`" in text or f":`{MESSAGE}`" in text


@pytest.mark.parametrize(
    "name",
    [
        "probe",
        "read_page",
        "read_sizes",
        "read_all",
        "read_snapshot",
        "append",
        "replace",
        "delete_messages",
        "delete_conversation",
        "lock",
        "lock_existing",
    ],
)
def test_neo4j_conversation_id_is_always_a_parameter(name: str) -> None:
    text = _statements()[name]
    assert "$cid" in text
    assert "'" not in text.replace("''", "")  # no literal values but ''


@pytest.mark.parametrize("name", ["lock", "lock_existing", "probe"])
def test_neo4j_lock_statements_write_the_conversation_node(name: str) -> None:
    """The lock is a property write on the conversation node, found by id."""
    text = _statements()[name]
    assert re.search(r"(MERGE|MATCH) \(c:`ChatConv` \{id: \$cid\}\)", text)
    assert re.search(r"\bSET c\.version = randomUUID\(\)", text)


def test_neo4j_schema_has_constraints_and_the_read_indexes() -> None:
    schema = " | ".join(Statements(CONVERSATION, MESSAGE).schema)
    assert "FOR (c:`ChatConv`) REQUIRE c.id IS UNIQUE" in schema
    assert "FOR (m:`ChatMsg`) REQUIRE (m.conversation_id, m.id) IS UNIQUE" in schema
    assert "FOR (m:`ChatMsg`) ON (m.conversation_id, m.seq)" in schema
    assert "FOR (m:`ChatMsg`) ON (m.conversation_id, m.role, m.seq)" in schema
    # The records' listings: one owner's, and everyone's.
    assert "FOR (c:`ChatConv`) ON (c.owner, c.updated_at, c.id)" in schema
    assert "FOR (c:`ChatConv`) ON (c.updated_at, c.id)" in schema
    assert schema.count("IF NOT EXISTS") == 6


def _first_read(**request: Any) -> dict[str, Any]:
    from chatledger.adapters import check_find_conversations
    from chatledger_neo4j.steps import Listing

    query = check_find_conversations(**request)
    return Listing(Statements(CONVERSATION, MESSAGE), query).read()[1]


def test_neo4j_listing_bounds_are_the_requests_in_milliseconds() -> None:
    """updated_before keeps the whole milliseconds strictly before it; a
    cursor continues below its record, by id only where Neo4j orders ids as
    the listing does."""
    from datetime import UTC, datetime

    from chatledger.adapters import encode_conversation_cursor, filter_fingerprint

    at = datetime(2024, 1, 1, tzinfo=UTC)
    ms = int(at.timestamp() * 1000)
    assert _first_read()["top"] == 2**63 - 1
    assert _first_read(updated_before=at)["top"] == ms - 1
    later = at.replace(microsecond=1)
    assert _first_read(updated_before=later)["top"] == ms
    fingerprint = filter_fingerprint(None, {}, None)
    cursor = encode_conversation_cursor(at, "b", fingerprint)
    read = _first_read(cursor=cursor)
    assert (read["top"], read["after_id"]) == (ms, "b")
    odd = encode_conversation_cursor(at, "\ufffd", fingerprint)
    read = _first_read(cursor=odd)
    assert (read["top"], read["after_id"]) == (ms, None)
    # updated_before tighter than the cursor, and the other way round.
    both = filter_fingerprint(None, {}, at)
    cursor = encode_conversation_cursor(later, "b", both)
    read = _first_read(cursor=cursor, updated_before=at)
    assert (read["top"], read["after_id"]) == (ms - 1, None)


def test_neo4j_record_of_an_old_node_reads_its_messages_times() -> None:
    """No times stored: the oldest and newest message's, or the epoch."""
    from datetime import UTC, datetime

    from chatledger.adapters import codec
    from chatledger_neo4j.steps import record_info

    first = datetime(2024, 1, 1, 0, 0, 0, 5000, tzinfo=UTC)
    last = datetime(2024, 2, 1, tzinfo=UTC)
    row = {
        "id": "c",
        "created_at": None,
        "updated_at": None,
        "message_count": 2,
        "owner": None,
        "metadata": None,
        "oldest": [codec.to_json(Message.user("a").stamped(first))],
        "newest": [codec.to_json(Message.user("b").stamped(last))],
    }
    info, fill = record_info(row)
    assert (info.created_at, info.updated_at) == (first, last)
    assert fill == {
        "id": "c",
        "created_at": int(first.timestamp() * 1000),
        "updated_at": int(last.timestamp() * 1000),
    }
    info, fill = record_info({**row, "oldest": [], "newest": []})
    assert info.created_at == info.updated_at == datetime(1970, 1, 1, tzinfo=UTC)
    stored = {**row, "created_at": 5, "updated_at": 7, "metadata": '{"t":1}'}
    info, fill = record_info(stored)
    assert (fill, info.metadata) == (None, {"t": 1})


def test_neo4j_drop_schema_drops_the_index_releases_before_the_log_made() -> None:
    """The (conversation_id, role) index nothing reads any more goes with the rest."""
    dropped = " | ".join(Statements(CONVERSATION, MESSAGE).drop_schema)
    assert "DROP INDEX `chatledger_message_ChatMsg_role` IF EXISTS" in dropped
    assert "DROP INDEX `chatledger_message_ChatMsg_system` IF EXISTS" in dropped


def test_neo4j_reads_filter_on_the_indexed_properties() -> None:
    """Each read has an equality on conversation_id and a predicate on seq or role."""
    s = _statements()
    for name in ("read_all", "read_page", "read_sizes", "delete_messages"):
        assert "m.conversation_id = $cid AND m.seq " in s[name]
    assert "m.conversation_id = $cid AND m.seq >= 0" in s["read_snapshot"]
    assert "old.conversation_id = $cid AND old.seq >= 0" in s["replace"]
    assert "s.conversation_id = $cid AND s.role = $system" in s["probe"]
    # Ordered as the (conversation_id, seq) index is, so the seek streams in order.
    assert "ORDER BY m.conversation_id, m.seq LIMIT $limit" in s["read_page"]
    assert s["read_all"].endswith("ORDER BY m.conversation_id, m.seq")


def test_neo4j_evicted_ids_record_is_read_and_written_with_the_append() -> None:
    """The probe reads the record under the lock; append bounds it, replace clears."""
    s = _statements()
    probe = s["probe"]
    assert probe.index("SET c.version") < probe.index("c.evicted_ids")
    assert "[i IN $ids WHERE i IN coalesce(c.evicted_ids, [])] AS evicted" in probe
    assert "(coalesce(c.evicted_ids, []) + $evicted)[-$evicted_kept..]" in s["append"]
    assert "c.emptied = $emptied" in s["append"]
    assert "REMOVE c.evicted_ids, c.emptied" in s["replace"]
    # A node kept only for its record is never listed.
    for name in ("list_ids", "first_ids_page", "ids_page_after"):
        assert "c[$emptied] IS NULL" in s[name]


def test_neo4j_probe_takes_the_lock_before_it_reads_messages() -> None:
    """The probe starts with the lock; the message reads are subqueries after it."""
    probe = _statements()["probe"]
    assert probe.startswith(_statements()["lock"])
    assert probe.index("SET c.version = randomUUID()") < probe.index("COLLECT {")


@pytest.mark.parametrize(
    ("name", "variable", "properties"),
    [
        ("read_all", "m", "conversation_id, seq"),
        ("read_page", "m", "conversation_id, seq"),
        ("read_sizes", "m", "conversation_id, seq"),
        ("read_snapshot", "m", "conversation_id, seq"),
        ("delete_messages", "m", "conversation_id, seq"),
        ("replace", "old", "conversation_id, seq"),
        ("append", "d", "conversation_id, id"),
        ("probe", "k", "conversation_id, id"),
        ("probe", "l", "conversation_id, role, seq"),
        ("probe", "s", "conversation_id, role, seq"),
        ("probe", "m", "conversation_id, seq"),
        ("log_append", "k", "conversation_id, id"),
        ("log_append", "l", "conversation_id, role, seq"),
        ("log_append", "s", "conversation_id, role, seq"),
        ("view", "l", "conversation_id, role, seq"),
        ("view", "s", "conversation_id, role, seq"),
        ("view", "m", "conversation_id, seq"),
        ("view_older", "a", "conversation_id, id"),
        ("view_older", "m", "conversation_id, seq"),
        ("page_newest", "m", "conversation_id, seq"),
        ("page_oldest", "m", "conversation_id, seq"),
    ],
)
def test_neo4j_message_reads_name_their_index(
    name: str, variable: str, properties: str
) -> None:
    """The planner is told which index to seek, whatever its statistics say."""
    hint = f"USING INDEX SEEK {variable}:`{MESSAGE}`({properties})"
    assert hint in _statements()[name]


def test_neo4j_schema_names_differ_per_label_pair() -> None:
    a = Statements("ConvA", "MsgA").index_names
    b = Statements("MsgA", "ConvA").index_names
    assert not set(a.values()) & set(b.values())


# -- the window plan ---------------------------------------------------------------


def _windows(rng: random.Random) -> list[Window]:
    return [
        MessageWindow(rng.randint(1, 12)),
        TokenWindow(rng.randint(10, 120), estimate_tokens, "estimate_tokens"),
    ]


@pytest.mark.parametrize("seed", range(40))
def test_neo4j_plan_matches_the_pure_policy(seed: int) -> None:
    """Applying each plan as the repository does gives apply_window's result,
    and the plan pulls no more stored entries than the eviction needs."""
    rng = random.Random(seed)
    for window in _windows(rng):
        stored: list[Message] = []
        for batch in random_turns(rng, 30):
            known = {m.id for m in stored}
            fresh = stamp_messages(m for m in batch if m.id not in known)
            if not fresh:
                continue
            others = [m for m in stored if m.role is not Role.SYSTEM]
            pulled = 0

            def entries(
                others: list[Message] = others, window: Window = window
            ) -> Iterator[StoredEntry]:
                nonlocal pulled
                for m in others:
                    pulled += 1
                    yield StoredEntry(m.id, m.role, window.measure(m))

            system = [m for m in stored if m.role is Role.SYSTEM]
            state = StoredWindow(
                system_count=len(system),
                system_size=sum(window.measure(m) for m in system),
                count=len(others),
                total=sum(window.measure(m) for m in others),
                read_oldest=lambda _expected: entries(),
                system=system,
            )
            plan = plan_append(state, fresh, window)
            expected = apply_window(stored, fresh, window)
            after = [m for m in stored if m.id not in set(plan.delete_ids)]
            after += plan.insert
            assert [m.id for m in after] == [m.id for m in expected.messages]
            assert [m.id for m in plan.appended] == [m.id for m in expected.appended]
            assert plan.evicted_ids == [m.id for m in expected.evicted]
            kept_others = [m for m in after if m.role is not Role.SYSTEM]
            assert plan.message_count == len(kept_others)
            assert plan.size_total == sum(window.measure(m) for m in kept_others)
            assert plan.empty == (after == [])
            assert plan.insert_sizes == [window.measure(m) for m in plan.insert]
            cut = len([i for i in plan.delete_ids if i in {m.id for m in others}])
            assert pulled <= cut + 1 or pulled == len(others)
            stored = after
