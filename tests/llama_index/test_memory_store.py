"""ChatLedgerMemoryStore under LlamaIndex's Memory, on SQLite and PostgreSQL.

Each case runs over an async repository and over a sync one (whose calls run
in threads); the sync repository of the database reads what was stored.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import pytest

pytest.importorskip("llama_index.core")

from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.llms import MockLLM
from llama_index.core.memory import (
    BaseMemoryBlock,
    FactExtractionMemoryBlock,
    Memory,
    StaticMemoryBlock,
)
from llama_index.core.storage.chat_store.base_db import AsyncDBChatStore, MessageStatus

from chatledger import (
    InMemoryChatMemoryRepository,
    InvalidConversationIdError,
    Message,
    Role,
    ToolCall,
    ToolResponse,
)
from chatledger.convert import UnsupportedContentError
from chatledger_llama_index import ChatLedgerMemoryStore
from chatledger_llama_index.archive import ARCHIVE_SUFFIX
from tests.llama_index.conftest import Database
from tests.llama_index.test_store import WithoutRemoval

T = TypeVar("T")
ACTIVE, ARCHIVED = MessageStatus.ACTIVE, MessageStatus.ARCHIVED


def chat(role: str, text: str) -> ChatMessage:
    return ChatMessage(role=role, content=text)


def texts(messages: list[ChatMessage]) -> list[str | None]:
    return [m.content for m in messages]


@pytest.fixture(params=["async", "sync"])
def on_store(
    request: pytest.FixtureRequest, database: Database
) -> Callable[[Callable[[ChatLedgerMemoryStore], Coroutine[Any, Any, T]]], T]:
    """Run ``scenario(store)`` in a fresh event loop, over either repository."""

    def run(scenario: Callable[[ChatLedgerMemoryStore], Coroutine[Any, Any, T]]) -> T:
        if request.param == "sync":
            store = ChatLedgerMemoryStore(database.new_repository())
            return asyncio.run(scenario(store))
        return database.run(
            lambda repository: scenario(ChatLedgerMemoryStore(repository))
        )

    return run


def test_memory_takes_it() -> None:
    store = ChatLedgerMemoryStore(InMemoryChatMemoryRepository())
    memory = Memory.from_defaults(session_id="user-42", chat_store=store)
    assert isinstance(store, AsyncDBChatStore)
    assert memory.sql_store is store
    assert ChatLedgerMemoryStore.class_name() == "ChatLedgerMemoryStore"


def test_archiving_moves_the_boundary_and_keeps_the_log(
    on_store: Any, database: Database
) -> None:
    async def scenario(store: ChatLedgerMemoryStore) -> dict[str, Any]:
        turns = [
            chat("user", f"q{n}") if n % 2 == 0 else chat("assistant", f"a{n}")
            for n in range(6)
        ]
        await store.add_messages("s1", turns[:4])
        await store.add_message("s1", turns[4])
        await store.add_message("s1", turns[5])
        seen: dict[Any, Any] = {"moved": await store.archive_oldest_messages("s1", 3)}
        for status in (ACTIVE, ARCHIVED, None):
            seen[status] = texts(await store.get_messages("s1", status=status))
            seen[f"count {status}"] = await store.count_messages("s1", status=status)
        seen["page"] = texts(await store.get_messages("s1", None, limit=2, offset=3))
        seen["offset"] = texts(await store.get_messages("s1", ARCHIVED, offset=1))
        seen["none left"] = await store.archive_oldest_messages("s1", 0)
        seen["keys"] = await store.get_keys()
        return seen

    seen = on_store(scenario)
    assert texts(seen["moved"]) == ["q0", "a1", "q2"]
    assert seen[ACTIVE] == ["a3", "q4", "a5"]
    assert seen[ARCHIVED] == ["q0", "a1", "q2"]
    assert seen[None] == ["q0", "a1", "q2", "a3", "q4", "a5"]
    assert [seen[f"count {s}"] for s in (ACTIVE, ARCHIVED, None)] == [3, 3, 6]
    assert seen["page"] == ["a3", "q4"]
    assert seen["offset"] == ["a1", "q2"]
    assert seen["none left"] == []
    assert seen["keys"] == ["s1"]
    # Nothing moved: the whole conversation is one log, in order.
    stored = database.repository.find_by_conversation_id("s1")
    assert [m.content for m in stored] == seen[None]
    assert sorted(database.repository.find_conversation_ids()) == [
        "s1",
        "s1" + ARCHIVE_SUFFIX,
    ]
    # Another process sees the same boundary.
    fresh = ChatLedgerMemoryStore(database.new_repository())
    assert texts(asyncio.run(fresh.get_messages("s1"))) == seen[ACTIVE]


def test_memory_flushes_to_its_blocks_once_and_the_log_keeps_all(
    on_store: Any, database: Database
) -> None:
    """Static, fact-extracting and recording blocks over the store, async and sync."""

    class Recorder(BaseMemoryBlock[str]):
        got: list[str] = []

        async def _aget(self, messages: Any = None, **kwargs: Any) -> str:
            return ""

        async def _aput(self, messages: list[ChatMessage]) -> None:
            self.got.extend(m.content or "" for m in messages)

    async def scenario(store: ChatLedgerMemoryStore) -> dict[str, Any]:
        # MockLLM answers with its prompt, which holds the flushed messages:
        # a fact written in them comes back as an extracted fact.
        facts = FactExtractionMemoryBlock(
            llm=MockLLM(),
            fact_extraction_prompt_template="List the facts.",  # type: ignore[arg-type]
        )
        recorder = Recorder(name="recorder")
        memory = Memory.from_defaults(
            session_id="alice",
            chat_store=store,
            token_limit=80,
            token_flush_size=10,
            chat_history_token_ratio=0.5,
            memory_blocks=[
                StaticMemoryBlock(
                    name="profile",
                    static_content="Alice, in Rome.",  # type: ignore[arg-type]
                ),
                facts,
                recorder,
            ],
        )
        await memory.aput(chat("user", "<fact>Alice likes tea</fact> hello there"))
        for number in range(12):
            await memory.aput(chat("assistant", f"answer {number} " + "word " * 4))
            await memory.aput(chat("user", f"question {number} " + "word " * 4))
        return {
            "facts": list(facts.facts),
            "recorded": list(recorder.got),
            "given": await memory.aget(),
            "active": texts(await store.get_messages("alice")),
            "archived": texts(await store.get_messages("alice", ARCHIVED)),
            "all": texts(await memory.aget_all()),
        }

    seen = on_store(scenario)
    assert "Alice likes tea" in seen["facts"]
    # Each flushed message reached the blocks once, oldest first, and they
    # are exactly the archived ones.
    assert seen["recorded"] == seen["archived"]
    assert seen["archived"] + seen["active"] == seen["all"]
    assert len(seen["all"]) == 25
    first = seen["given"][0]
    assert first.role == MessageRole.SYSTEM
    assert "Alice, in Rome." in (first.content or "")
    assert "<fact>Alice likes tea</fact>" in (first.content or "")
    assert texts(seen["given"][1:]) == seen["active"]
    stored = database.repository.find_by_conversation_id("alice")
    assert [m.content for m in stored] == seen["all"]


def test_the_sync_memory_api_over_the_store(database: Database) -> None:
    store = ChatLedgerMemoryStore(database.new_repository())
    memory = Memory.from_defaults(
        session_id="bob", chat_store=store, token_limit=40, token_flush_size=5
    )
    for number in range(6):
        memory.put(chat("user", f"question {number} " + "word " * 5))
    active = memory.get()
    assert 0 < len(active) < 6
    assert [m.content for m in memory.get_all()][-len(active) :] == texts(active)
    assert len(database.repository.find_by_conversation_id("bob")) == 6
    memory.reset()
    assert database.repository.find_conversation_ids() == []


def test_set_add_and_delete_by_status(on_store: Any) -> None:
    async def scenario(store: ChatLedgerMemoryStore) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        await store.set_messages(
            "s1", [chat("user", "old q"), chat("assistant", "old a")], ARCHIVED
        )
        await store.add_messages("s1", [chat("user", "q"), chat("assistant", "a")])
        seen["split"] = (
            texts(await store.get_messages("s1", ARCHIVED)),
            texts(await store.get_messages("s1")),
        )
        with pytest.raises(ValueError, match="has 2 active messages"):
            await store.add_message("s1", chat("user", "late"), status=ARCHIVED)
        await store.delete_messages("s1", ARCHIVED)
        seen["no archive"] = texts(await store.get_messages("s1", None))
        await store.archive_oldest_messages("s1", 1)
        await store.delete_messages("s1", ACTIVE)
        seen["no active"] = (
            texts(await store.get_messages("s1", None)),
            texts(await store.get_messages("s1")),
        )
        await store.add_message("s2", chat("user", "first"), status="archived")  # type: ignore[arg-type]
        seen["added archived"] = texts(await store.get_messages("s2", ARCHIVED))
        await store.set_messages("s2", [chat("user", "again")])
        seen["set active"] = (
            texts(await store.get_messages("s2")),
            await store.count_messages("s2", ARCHIVED),
        )
        await store.delete_messages("s1")
        await store.set_messages("s2", [])
        seen["keys"] = await store.get_keys()
        return seen

    seen = on_store(scenario)
    assert seen["split"] == (["old q", "old a"], ["q", "a"])
    assert seen["no archive"] == ["q", "a"]
    assert seen["no active"] == (["q"], [])
    assert seen["added archived"] == ["first"]
    assert seen["set active"] == (["again"], 0)
    assert seen["keys"] == []


def test_deletes_return_what_they_removed(on_store: Any, database: Database) -> None:
    async def scenario(store: ChatLedgerMemoryStore) -> dict[str, Any]:
        await store.add_messages("s1", [chat("user", f"m{n}") for n in range(6)])
        await store.archive_oldest_messages("s1", 2)
        return {
            "oldest": texts(await store.delete_oldest_messages("s1", 2)),
            "first": (await store.delete_message("s1", 0)).content,  # type: ignore[union-attr]
            "last": (await store.delete_message("s1", -1)).content,  # type: ignore[union-attr]
            "out of range": await store.delete_message("s1", 9),
            "none": await store.delete_oldest_messages("never", 3),
            "left": (
                texts(await store.get_messages("s1", ARCHIVED)),
                texts(await store.get_messages("s1")),
            ),
        }

    seen = on_store(scenario)
    # delete_oldest_messages takes the oldest active ones; delete_message
    # indexes the whole log, archived messages first.
    assert seen["oldest"] == ["m2", "m3"]
    assert (seen["first"], seen["last"]) == ("m0", "m5")
    assert seen["out of range"] is None
    assert seen["none"] == []
    assert seen["left"] == (["m1"], ["m4"])


def test_the_archive_holds_when_its_newest_message_is_removed(
    database: Database,
) -> None:
    """Removed by another program: the archive ends at the newest left."""
    store = ChatLedgerMemoryStore(database.new_repository())
    asyncio.run(store.add_messages("s1", [chat("user", f"m{n}") for n in range(5)]))
    asyncio.run(store.archive_oldest_messages("s1", 3))
    stored = database.repository.find_by_conversation_id("s1")
    database.repository.remove_messages("s1", [stored[2].id, stored[1].id])
    assert texts(asyncio.run(store.get_messages("s1", ARCHIVED))) == ["m0"]
    assert texts(asyncio.run(store.get_messages("s1"))) == ["m3", "m4"]
    # Every archived message gone: nothing is archived, all is shown.
    database.repository.remove_messages("s1", [stored[0].id])
    assert texts(asyncio.run(store.get_messages("s1"))) == ["m3", "m4"]
    assert asyncio.run(store.archive_oldest_messages("s1", 1))[0].content == "m3"


def test_a_split_tool_message_is_archived_whole(
    on_store: Any, database: Database
) -> None:
    calls = [ToolCall("a", "f", "{}"), ToolCall("b", "g", "{}")]
    both = Message.tool([ToolResponse("a", "f", "1"), ToolResponse("b", "g", "2")])
    database.repository.save_all(
        "s1",
        [
            Message.user("Both?"),
            Message.assistant(None, tool_calls=calls),
            both,
            Message.assistant("1 and 2"),
        ],
    )

    async def scenario(store: ChatLedgerMemoryStore) -> tuple[list[Any], int]:
        return await store.archive_oldest_messages("s1", 3), await store.count_messages(
            "s1"
        )

    archived, left = on_store(scenario)
    assert [m.role for m in archived] == [
        MessageRole.USER,
        MessageRole.ASSISTANT,
        MessageRole.TOOL,
        MessageRole.TOOL,
    ]
    assert left == 1


def test_bad_input_is_refused_before_any_io(database: Database) -> None:
    # Typed loosely: the calls pass what the signatures forbid.
    store: Any = ChatLedgerMemoryStore(database.new_repository())
    calls: list[tuple[type[Exception], str, Callable[[], Coroutine[Any, Any, Any]]]] = [
        (InvalidConversationIdError, "whitespace", lambda: store.get_messages(" s ")),
        (
            InvalidConversationIdError,
            "#llama-index-archive",
            lambda: store.add_message("s" + ARCHIVE_SUFFIX, chat("user", "x")),
        ),
        (
            InvalidConversationIdError,
            "too long here",
            lambda: store.count_messages("k" * 250),
        ),
        (
            ValueError,
            "'active' or 'archived'",
            lambda: store.get_messages("s", status="gone"),
        ),
        (
            TypeError,
            "a MessageStatus",
            lambda: store.add_messages("s", [], status=None),
        ),
        (
            TypeError,
            "limit must be an int",
            lambda: store.get_messages("s", limit=True),
        ),
        (
            ValueError,
            "offset must be 0 or more",
            lambda: store.get_messages("s", offset=-1),
        ),
        (
            ValueError,
            "n must be 0 or more",
            lambda: store.archive_oldest_messages("s", -1),
        ),
        (TypeError, "n must be an int", lambda: store.delete_oldest_messages("s", 1.5)),
        (TypeError, "idx must be an int", lambda: store.delete_message("s", "0")),
        (
            UnsupportedContentError,
            "role",
            lambda: store.add_message("s", ChatMessage(role="function", content="f")),
        ),
        (
            UnsupportedContentError,
            "ChatMessage",
            lambda: store.set_messages("s", ["text"]),
        ),
    ]
    for error, words, call in calls:
        with pytest.raises(error, match=words):
            asyncio.run(call())
    assert database.repository.find_conversation_ids() == []


def test_what_it_cannot_work_on_is_refused() -> None:
    with pytest.raises(TypeError, match="must be a chatledger repository"):
        ChatLedgerMemoryStore(object())

    class WithoutLog(WithoutRemoval):
        append_to_log = None  # type: ignore[assignment]

    with pytest.raises(TypeError, match=r"keeps no log \(SupportsLog"):
        ChatLedgerMemoryStore(WithoutLog())
    store = ChatLedgerMemoryStore(WithoutRemoval())
    asyncio.run(store.add_messages("s1", [chat("user", "q"), chat("assistant", "a")]))
    removals: list[Callable[[], Coroutine[Any, Any, Any]]] = [
        lambda: store.delete_message("s1", 0),
        lambda: store.delete_oldest_messages("s1", 1),
        lambda: store.delete_messages("s1", ACTIVE),
    ]
    for call in removals:
        with pytest.raises(TypeError, match=r"SupportsLogRemoval .*WithoutRemoval"):
            asyncio.run(call())
    assert asyncio.run(store.count_messages("s1")) == 2
    asyncio.run(store.delete_messages("s1"))  # the whole conversation: no removal
    assert asyncio.run(store.get_keys()) == []


def test_a_stored_message_llama_index_cannot_carry_is_named(database: Database) -> None:
    from chatledger import Media

    pdf = Message.user("Read this", media=[Media("application/pdf", b"%PDF-1.7")])
    database.repository.save_all("s1", [Message.user("Hi"), pdf])
    store = ChatLedgerMemoryStore(database.new_repository())
    reads: list[Callable[[], Coroutine[Any, Any, Any]]] = [
        lambda: store.get_messages("s1"),
        lambda: store.archive_oldest_messages("s1", 2),
        lambda: store.delete_oldest_messages("s1", 2),
    ]
    for call in reads:
        with pytest.raises(UnsupportedContentError, match=r"messages\[1\]\.media\[0\]"):
            asyncio.run(call())
    assert database.repository.find_by_conversation_id("s1") == [
        Message.user("Hi"),
        pdf,
    ]
    assert [m.role for m in database.repository.find_by_conversation_id("s1")] == [
        Role.USER,
        Role.USER,
    ]


def test_its_batches_fit_core_limits() -> None:
    from chatledger.validation import MAX_PAGE_SIZE
    from chatledger_llama_index.async_removal import REMOVAL_BATCH
    from chatledger_llama_index.async_split_log import LAST_PAGE, MARKERS_READ

    assert max(REMOVAL_BATCH, LAST_PAGE, MARKERS_READ) <= MAX_PAGE_SIZE
