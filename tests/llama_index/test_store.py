"""ChatLedgerChatStore on real databases: every method, sync and async."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from typing import Any

import pytest

pytest.importorskip("llama_index.core")

from llama_index.core.base.llms.types import (
    AudioBlock,
    ChatMessage,
    MessageRole,
    TextBlock,
)
from llama_index.core.storage.chat_store.base import BaseChatStore

from chatledger import (
    AppendResult,
    AsyncInMemoryChatMemoryRepository,
    InMemoryChatMemoryRepository,
    InvalidConversationIdError,
    Media,
    Message,
    Role,
    ToolCall,
    ToolResponse,
    Window,
)
from chatledger.convert import UnsupportedContentError
from chatledger.results import MessagePage
from chatledger_llama_index import ChatLedgerChatStore
from tests.llama_index.conftest import Database

CALL = {
    "id": "c1",
    "type": "function",
    "function": {"name": "weather", "arguments": '{"city":"Rome"}'},
}


class WithoutRemoval:
    """An in-memory repository seen through the log calls alone, no removal."""

    def __init__(self) -> None:
        self._inner = InMemoryChatMemoryRepository()

    def find_conversation_ids(self) -> list[str]:
        return self._inner.find_conversation_ids()

    def find_by_conversation_id(self, conversation_id: str) -> list[Message]:
        return self._inner.find_by_conversation_id(conversation_id)

    def save_all(self, conversation_id: str, messages: Sequence[Message]) -> None:
        self._inner.save_all(conversation_id, messages)

    def delete_by_conversation_id(self, conversation_id: str) -> None:
        self._inner.delete_by_conversation_id(conversation_id)

    def append_to_log(
        self, conversation_id: str, messages: Sequence[Message], window: Any = None
    ) -> AppendResult:
        return self._inner.append_to_log(conversation_id, messages, window)

    def find_window(self, conversation_id: str, window: Window) -> list[Message]:
        return self._inner.find_window(conversation_id, window)

    def find_messages_page(
        self,
        conversation_id: str,
        cursor: str | None = None,
        limit: int = 50,
        newest_first: bool = True,
    ) -> MessagePage:
        return self._inner.find_messages_page(
            conversation_id, cursor, limit, newest_first
        )


def chat(role: str, text: str | None, **kwargs: Any) -> ChatMessage:
    return ChatMessage(role=role, content=text, additional_kwargs=kwargs)


def tool_round() -> list[ChatMessage]:
    """A question, a tool call, its result and the answer, as LlamaIndex has them."""
    return [
        chat("user", "Weather in Rome?"),
        chat("assistant", None, tool_calls=[CALL]),
        chat("tool", "24", tool_call_id="c1"),
        chat("assistant", "24 °C."),
    ]


SYNC_CALLS: dict[str, tuple[Any, ...]] = {
    "set_messages": ("k", []),
    "get_messages": ("k",),
    "add_message": ("k", chat("user", "x")),
    "delete_messages": ("k",),
    "delete_message": ("k", 0),
    "delete_last_message": ("k",),
    "get_keys": (),
}
ASYNC_NAMES = {
    "set_messages": "aset_messages",
    "get_messages": "aget_messages",
    "add_message": "async_add_message",
    "delete_messages": "adelete_messages",
    "delete_message": "adelete_message",
    "delete_last_message": "adelete_last_message",
    "get_keys": "aget_keys",
}


# --- Construction, no database needed -----------------------------------------


def test_it_is_a_llama_index_chat_store() -> None:
    repository = InMemoryChatMemoryRepository()
    store = ChatLedgerChatStore(repository)
    assert isinstance(store, BaseChatStore)
    assert ChatLedgerChatStore.class_name() == "ChatLedgerChatStore"
    assert store.model_dump() == {"class_name": "ChatLedgerChatStore"}
    assert repr(store) == (
        f"ChatLedgerChatStore({repository!r}, async_repository=None)"
    )


def test_it_takes_a_repository_an_async_one_or_both() -> None:
    sync = InMemoryChatMemoryRepository()
    async_ = AsyncInMemoryChatMemoryRepository()
    only_sync = ChatLedgerChatStore(sync)
    assert (only_sync.repository, only_sync.async_repository) == (sync, None)
    only_async = ChatLedgerChatStore(async_)
    assert (only_async.repository, only_async.async_repository) == (None, async_)
    both = ChatLedgerChatStore(sync, async_repository=async_)
    assert (both.repository, both.async_repository) == (sync, async_)


def test_what_is_not_a_repository_is_refused() -> None:
    sync = InMemoryChatMemoryRepository()
    async_ = AsyncInMemoryChatMemoryRepository()
    with pytest.raises(TypeError, match=r"needs a repository.*connect_async"):
        ChatLedgerChatStore()
    with pytest.raises(TypeError, match="must be a chatledger repository"):
        ChatLedgerChatStore(object())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="pass the sync repository first"):
        ChatLedgerChatStore(async_, async_repository=async_)
    with pytest.raises(TypeError, match="async_repository must be an async"):
        ChatLedgerChatStore(sync, async_repository=sync)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", sorted(SYNC_CALLS))
def test_a_missing_repository_is_named(name: str) -> None:
    only_sync = ChatLedgerChatStore(InMemoryChatMemoryRepository())
    only_async = ChatLedgerChatStore(AsyncInMemoryChatMemoryRepository())
    arguments = SYNC_CALLS[name]
    with pytest.raises(TypeError, match=r"async methods .*ChatLedgerChatStore\("):
        getattr(only_async, name)(*arguments)
    with pytest.raises(TypeError, match=r"async_repository=connect_async\(url\)"):
        asyncio.run(getattr(only_sync, ASYNC_NAMES[name])(*arguments))


# --- Sync methods ----------------------------------------------------------------


def test_set_get_keys_and_delete_messages(repository: Any) -> None:
    store = ChatLedgerChatStore(repository)
    store.set_messages("c1", tool_round())
    store.set_messages("c2", [chat("user", "other")])
    assert store.get_messages("c1") == tool_round()
    assert sorted(store.get_keys()) == ["c1", "c2"]
    stored = repository.find_by_conversation_id("c1")
    assert [m.role for m in stored] == [
        Role.USER,
        Role.ASSISTANT,
        Role.TOOL,
        Role.ASSISTANT,
    ]
    assert stored[1].tool_calls == (ToolCall("c1", "weather", '{"city":"Rome"}'),)
    assert stored[2].tool_responses == (ToolResponse("c1", "weather", "24"),)
    assert store.delete_messages("c1") == tool_round()
    assert store.get_keys() == ["c2"]
    assert store.delete_messages("c1") is None
    assert store.get_messages("c1") == []
    store.set_messages("c2", [])
    assert store.get_keys() == []


def test_add_message_appends_each_message(repository: Any) -> None:
    store = ChatLedgerChatStore(repository)
    for message in tool_round():
        store.add_message("c1", message)
    assert store.get_messages("c1") == tool_round()
    stored = repository.find_by_conversation_id("c1")
    assert [m.content for m in stored] == ["Weather in Rome?", None, None, "24 °C."]
    # Added alone, the result has no call before it in its list to be named after.
    assert stored[2].tool_responses == (ToolResponse("c1", "", "24"),)


def test_delete_message_returns_it_and_keeps_the_rest(repository: Any) -> None:
    store = ChatLedgerChatStore(repository)
    turns = [chat("user", "U1"), chat("assistant", "A1")]
    turns += [chat("user", "U2"), chat("assistant", "A2")]
    store.set_messages("c1", turns)
    before = repository.find_by_conversation_id("c1")
    assert store.delete_message("c1", 1) == turns[1]
    assert store.delete_message("c1", -1) == turns[3]
    assert store.delete_message("c1", 2) is None
    assert store.delete_message("c1", -3) is None
    after = repository.find_by_conversation_id("c1")
    assert [(m.id, m.created_at) for m in after] == [
        (m.id, m.created_at) for m in (before[0], before[2])
    ]
    assert store.delete_last_message("c1") == turns[2]
    assert store.delete_last_message("c1") == turns[0]
    assert store.delete_last_message("c1") is None
    assert store.get_keys() == []
    assert store.delete_message("never", 0) is None


def test_each_tool_response_is_a_message_of_its_own(repository: Any) -> None:
    calls = [ToolCall("a", "f", "{}"), ToolCall("b", "g", "{}")]
    both = Message.tool([ToolResponse("a", "f", "1"), ToolResponse("b", "g", "2")])
    one = Message.tool([ToolResponse("c", "h", "3")])
    history = [Message.user("Both?"), Message.assistant(None, tool_calls=calls), both]
    repository.save_all("c1", [*history, one])
    store = ChatLedgerChatStore(repository)
    got = store.get_messages("c1")
    assert [(m.role, m.additional_kwargs, m.content) for m in got[2:4]] == [
        (MessageRole.TOOL, {"tool_call_id": "a"}, "1"),
        (MessageRole.TOOL, {"tool_call_id": "b"}, "2"),
    ]
    # Removing one response alone would rewrite the stored message: refused.
    for idx in (2, 3, -2):
        with pytest.raises(ValueError, match=f"one of the 2 tool responses.*{both.id}"):
            store.delete_message("c1", idx)
    assert repository.find_by_conversation_id("c1") == [*history, one]
    assert store.delete_last_message("c1") == got[4]
    with pytest.raises(ValueError, match="one of the 2 tool responses"):
        store.delete_last_message("c1")
    assert repository.find_by_conversation_id("c1") == history


def test_removals_need_a_repository_that_removes_messages() -> None:
    repository = WithoutRemoval()
    store = ChatLedgerChatStore(repository)
    store.set_messages("c1", [chat("user", "U1"), chat("assistant", "A1")])
    removals: list[Callable[[], object]] = [
        lambda: store.delete_message("c1", 0),
        lambda: store.delete_last_message("c1"),
    ]
    for call in removals:
        with pytest.raises(TypeError, match=r"SupportsLogRemoval .*WithoutRemoval"):
            call()
    assert len(repository.find_by_conversation_id("c1")) == 2
    # Without it, delete_messages deletes the conversation, as read just before.
    assert store.delete_messages("c1") == [chat("user", "U1"), chat("assistant", "A1")]
    assert repository.find_conversation_ids() == []


def test_set_messages_keeps_the_ids_of_unchanged_messages(repository: Any) -> None:
    store = ChatLedgerChatStore(repository)
    store.set_messages("c1", [chat("user", "U1"), chat("assistant", "A1")])
    before = repository.find_by_conversation_id("c1")
    store.set_messages("c1", [*store.get_messages("c1"), chat("user", "U2")])
    after = repository.find_by_conversation_id("c1")
    assert [(m.id, m.created_at) for m in after[:2]] == [
        (m.id, m.created_at) for m in before
    ]
    assert after[2].id not in {m.id for m in before}
    store.set_messages(
        "c1", [chat("user", "changed"), chat("assistant", "A1"), chat("user", "U2")]
    )
    again = repository.find_by_conversation_id("c1")
    assert [m.id for m in again] == [again[0].id, before[1].id, after[2].id]
    assert again[0].id != before[0].id


def test_add_message_keeps_the_log_and_set_messages_stores_as_given(
    repository: Any,
) -> None:
    """The log keeps every message added; only an equal system message is not
    stored twice (rule 1). ``set_messages`` stores exactly what it is given."""
    store = ChatLedgerChatStore(repository)
    orphan = chat("tool", "orphan", tool_call_id="x")
    store.add_message("c1", chat("system", "Be brief."))
    store.add_message("c1", chat("system", "Be brief."))  # equal: stored once
    store.add_message("c1", orphan)  # history: kept
    store.add_message("c1", chat("user", "Hi"))
    store.add_message("c1", chat("system", "Be verbose."))  # supersedes the other
    assert [(m.role, m.content) for m in store.get_messages("c1")] == [
        (MessageRole.SYSTEM, "Be brief."),
        (MessageRole.TOOL, "orphan"),
        (MessageRole.USER, "Hi"),
        (MessageRole.SYSTEM, "Be verbose."),
    ]
    given = [chat("system", "A"), chat("system", "A"), orphan]
    store.set_messages("c2", given)
    assert store.get_messages("c2") == given
    store.add_message("c2", chat("user", "Hi"))
    assert store.get_messages("c2") == [*given, chat("user", "Hi")]


def test_bad_input_is_refused_before_any_write(repository: Any) -> None:
    store = ChatLedgerChatStore(repository)
    for name, arguments in SYNC_CALLS.items():
        if arguments:
            with pytest.raises(InvalidConversationIdError):
                getattr(store, name)(" padded ", *arguments[1:])
    audio = ChatMessage(
        role="user",
        blocks=[TextBlock(text="listen"), AudioBlock(audio=b"RIFF", format="wav")],
    )
    with pytest.raises(UnsupportedContentError, match=r"\[1\]\.blocks\[1\]"):
        store.set_messages("c1", [chat("user", "kept out"), audio])
    with pytest.raises(UnsupportedContentError, match=r"^message\.blocks\[1\]"):
        store.add_message("c1", audio)
    with pytest.raises(UnsupportedContentError, match="ChatMessage"):
        store.add_message("c1", "text")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="idx"):
        store.delete_message("c1", "0")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="idx"):
        store.delete_message("c1", True)
    assert repository.find_conversation_ids() == []


def test_a_stored_message_llama_index_cannot_carry_is_named(repository: Any) -> None:
    pdf = Message.user("Read this", media=[Media("application/pdf", b"%PDF-1.7")])
    repository.save_all("c1", [Message.user("Hi"), pdf])
    store = ChatLedgerChatStore(repository)
    with pytest.raises(UnsupportedContentError, match=r"messages\[1\]\.media\[0\]"):
        store.get_messages("c1")
    with pytest.raises(UnsupportedContentError, match=r"messages\[1\]\.media\[0\]"):
        store.delete_messages("c1")
    assert repository.find_by_conversation_id("c1") == [Message.user("Hi"), pdf]


def test_concurrent_threads_lose_nothing(repository: Any) -> None:
    store = ChatLedgerChatStore(repository)
    writers, count = 8, 10
    start = threading.Barrier(writers)
    errors: list[BaseException] = []

    def write(writer: int) -> None:
        try:
            start.wait()
            for number in range(count):
                role = "user" if number % 2 == 0 else "assistant"
                store.add_message("shared", chat(role, f"{writer}-{number}"))
        except BaseException as exc:  # re-raised in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    _assert_every_write_once(store.get_messages("shared"), writers, count)


def _assert_every_write_once(
    messages: list[ChatMessage], writers: int, count: int
) -> None:
    texts = [m.content or "" for m in messages]
    assert len(texts) == writers * count
    for writer in range(writers):
        own = [t for t in texts if t.split("-")[0] == str(writer)]
        assert own == [f"{writer}-{number}" for number in range(count)]


# --- Async methods ---------------------------------------------------------------


def test_every_async_method(database: Database) -> None:
    async def scenario(async_repository: Any) -> dict[str, Any]:
        # No sync repository: no async method can fall back on a sync call.
        store = ChatLedgerChatStore(async_repository)
        history = tool_round()
        seen: dict[str, Any] = {}
        await store.aset_messages("c1", history[:2])
        await store.async_add_message("c1", history[2])
        await store.async_add_message("c1", history[3])
        await store.aset_messages("c2", [chat("user", "other")])
        seen["messages"] = await store.aget_messages("c1")
        seen["keys"] = sorted(await store.aget_keys())
        seen["first"] = await store.adelete_message("c1", 0)
        seen["out of range"] = await store.adelete_message("c1", 10)
        seen["last"] = await store.adelete_last_message("c1")
        seen["rest"] = await store.adelete_messages("c1")
        seen["again"] = await store.adelete_messages("c1")
        seen["no last"] = await store.adelete_last_message("c1")
        seen["keys after"] = await store.aget_keys()
        return seen

    seen = database.run(scenario)
    history = tool_round()
    assert seen["messages"] == history
    assert seen["keys"] == ["c1", "c2"]
    assert seen["first"] == history[0]
    assert seen["out of range"] is None
    assert seen["last"] == history[3]
    assert seen["rest"] == history[1:3]
    assert seen["again"] is None
    assert seen["no last"] is None
    assert seen["keys after"] == ["c2"]
    # What the async repository wrote, the sync one reads.
    assert [m.content for m in database.repository.find_by_conversation_id("c2")] == [
        "other"
    ]


def test_async_set_messages_keeps_ids_and_refuses_bad_input(database: Database) -> None:
    async def scenario(async_repository: Any) -> None:
        store = ChatLedgerChatStore(async_repository)
        await store.aset_messages("c1", [chat("user", "U1")])
        before = await async_repository.find_by_conversation_id("c1")
        await store.aset_messages(
            "c1", [*await store.aget_messages("c1"), chat("user", "U2")]
        )
        after = await async_repository.find_by_conversation_id("c1")
        assert after[0].id == before[0].id
        assert after[0].created_at == before[0].created_at
        for name, arguments in SYNC_CALLS.items():
            if arguments:
                with pytest.raises(InvalidConversationIdError):
                    await getattr(store, ASYNC_NAMES[name])("", *arguments[1:])
        bad = ChatMessage(role=MessageRole.FUNCTION, content="f")
        with pytest.raises(UnsupportedContentError, match=r"^message\.role"):
            await store.async_add_message("c2", bad)
        with pytest.raises(UnsupportedContentError, match=r"\[0\]\.role"):
            await store.aset_messages("c2", [bad])
        with pytest.raises(TypeError, match="idx"):
            await store.adelete_message("c1", 1.0)  # type: ignore[arg-type]
        assert await async_repository.find_conversation_ids() == ["c1"]

    database.run(scenario)


def test_async_delete_message_of_a_split_tool_message(database: Database) -> None:
    both = Message.tool([ToolResponse("a", "f", "1"), ToolResponse("b", "g", "2")])
    single = Message.tool([ToolResponse("c", "h", "3")])
    database.repository.save_all("c1", [Message.user("Both?"), both, single])

    async def scenario(async_repository: Any) -> ChatMessage | None:
        store = ChatLedgerChatStore(async_repository)
        with pytest.raises(ValueError, match="one of the 2 tool responses"):
            await store.adelete_message("c1", 2)
        return await store.adelete_message("c1", 3)

    # No call names the response here, so its name travels beside it.
    assert database.run(scenario) == chat(
        "tool", "3", tool_call_id="c", chatledger={"name": "h"}
    )
    [_, kept] = database.repository.find_by_conversation_id("c1")
    assert kept.id == both.id
    assert kept.tool_responses == both.tool_responses


def test_concurrent_tasks_lose_nothing(database: Database) -> None:
    writers, count = 8, 10

    async def scenario(async_repository: Any) -> list[ChatMessage]:
        store = ChatLedgerChatStore(async_repository)

        async def write(writer: int) -> None:
            for number in range(count):
                role = "user" if number % 2 == 0 else "assistant"
                await store.async_add_message(
                    "shared", chat(role, f"{writer}-{number}")
                )

        await asyncio.gather(*(write(w) for w in range(writers)))
        return await store.aget_messages("shared")

    _assert_every_write_once(database.run(scenario), writers, count)
