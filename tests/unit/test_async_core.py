"""The async twins in core: connect_async, the async memories and the async planner."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import random
import textwrap
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path

import pytest

import chatledger
from chatledger import (
    AsyncChatMemoryRepository,
    AsyncInMemoryChatMemoryRepository,
    AsyncMessageWindowChatMemory,
    AsyncSupportsWindowAppend,
    AsyncTokenWindowChatMemory,
    InMemoryChatMemoryRepository,
    InvalidConversationIdError,
    InvalidMessageError,
    Message,
    MessageWindowChatMemory,
    Role,
    TokenWindowChatMemory,
    UnknownBackendError,
    connect_async,
)
from chatledger.adapters import (
    AsyncStoredWindow,
    StoredEntry,
    StoredWindow,
    is_async_repository,
    needs_stored_system,
    plan_append,
    plan_append_async,
)
from chatledger.async_connect import ASYNC_ENTRY_POINT_GROUP
from chatledger.connect import installed_schemes
from chatledger.testing import random_turns
from chatledger.tokens import estimate_tokens
from chatledger.validation import stamp_messages
from chatledger.window import MessageWindow, TokenWindow, Window, apply_window

SECRET = "s3cr3t-pa55"


def test_connect_async_opens_a_new_async_in_memory_repository() -> None:
    first = connect_async("memory://")
    second = connect_async("MEMORY://")
    assert isinstance(first, AsyncInMemoryChatMemoryRepository)
    assert first is not second
    assert is_async_repository(first)
    with pytest.raises(TypeError, match="only the retention option"):
        connect_async("memory://", table_name="x")


def test_connect_async_refuses_what_connect_refuses() -> None:
    with pytest.raises(UnknownBackendError, match="not a URL"):
        connect_async("chat.db")
    with pytest.raises(UnknownBackendError) as caught:
        connect_async(f"nosuchdb://admin:{SECRET}@host/x")
    assert "unknown URL scheme 'nosuchdb' (nosuchdb://admin:***@host/x)" in str(
        caught.value
    )
    assert SECRET not in str(caught.value)


@pytest.fixture
def only_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hide every installed adapter, as on a machine with the core alone."""
    module = importlib.import_module("chatledger.backends")
    everything = module.entry_points
    monkeypatch.setattr(
        module,
        "entry_points",
        lambda group: [e for e in everything(group=group) if e.name == "memory"],
    )


@pytest.mark.usefixtures("only_memory")
@pytest.mark.parametrize(
    ("url", "hint"),
    [
        ("postgresql+asyncpg://u@h/db", "pip install 'chatledger-sql[asyncpg]'"),
        ("postgresql+psycopg://u@h/db", "pip install 'chatledger-sql[postgres]'"),
        ("sqlite+aiosqlite:///x.db", "pip install 'chatledger-sql[aiosqlite]'"),
        ("mysql+asyncmy://root@h/db", "pip install 'chatledger-sql[asyncmy]'"),
        ("mysql+aiomysql://root@h/db", "pip install 'chatledger-sql[aiomysql]'"),
        ("redis://h:6379/0", "pip install chatledger-redis"),
    ],
)
def test_a_missing_async_adapter_names_its_pip_install_line(
    url: str, hint: str
) -> None:
    assert installed_schemes(ASYNC_ENTRY_POINT_GROUP) == ["memory"]
    scheme, _, rest = url.partition("://")
    with pytest.raises(UnknownBackendError) as caught:
        connect_async(f"{scheme}://user:{SECRET}@{rest.rpartition('@')[2]}")
    assert f"install it with: {hint}" in str(caught.value)
    assert SECRET not in str(caught.value)


@pytest.fixture
def async_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Register a test adapter in both groups, as an installed distribution does."""
    (tmp_path / "cl_async_plugin.py").write_text(
        textwrap.dedent(
            """
            def sync_family(url, **options):
                return ("sync", url, options)

            def async_family(url, **options):
                return ("async", url, options)

            def async_exact(url, **options):
                return ("async exact", url, options)
            """
        ),
        encoding="utf-8",
    )
    info = tmp_path / "cl_async_plugin-0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: cl-async-plugin\nVersion: 0\n", encoding="utf-8"
    )
    (info / "entry_points.txt").write_text(
        "[chatledger.repositories]\n"
        "clasync = cl_async_plugin:sync_family\n"
        "clsynconly = cl_async_plugin:sync_family\n"
        "[chatledger.async_repositories]\n"
        "clasync = cl_async_plugin:async_family\n"
        "clasync+fast = cl_async_plugin:async_exact\n",
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


@pytest.mark.usefixtures("async_plugin")
def test_connect_async_looks_in_its_own_group_exact_scheme_first() -> None:
    found: object = connect_async("clasync+fast://h", key="v")
    assert found == ("async exact", "clasync+fast://h", {"key": "v"})
    other: object = connect_async("clasync+other://h")
    assert other == ("async", "clasync+other://h", {})
    with pytest.raises(UnknownBackendError, match="clsynconly"):
        connect_async("clsynconly://h")
    assert "clasync+fast" in installed_schemes(ASYNC_ENTRY_POINT_GROUP)
    assert "clasync+fast" not in installed_schemes()


def test_an_async_memory_refuses_a_sync_repository_before_any_io() -> None:
    with pytest.raises(TypeError, match="not an async repository"):
        AsyncMessageWindowChatMemory(InMemoryChatMemoryRepository())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must not be None"):
        AsyncTokenWindowChatMemory(None, 10)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_messages"):
        AsyncMessageWindowChatMemory(max_messages=0)


def test_a_sync_memory_refuses_an_async_repository_before_any_io() -> None:
    # Its calls would return coroutines nobody awaits: nothing stored, no error.
    repository = AsyncInMemoryChatMemoryRepository()
    for make in (
        lambda: MessageWindowChatMemory(repository),  # type: ignore[arg-type]
        lambda: TokenWindowChatMemory(repository, 100),  # type: ignore[arg-type]
    ):
        with pytest.raises(TypeError, match="not a sync repository"):
            make()
    with pytest.raises(TypeError, match="must not be None"):
        TokenWindowChatMemory(None, 10)  # type: ignore[arg-type]


class ReadModifyWrite:
    """An async repository with the four operations only (no window append)."""

    def __init__(self) -> None:
        self.store = AsyncInMemoryChatMemoryRepository()
        self.saves = 0

    async def find_conversation_ids(self) -> list[str]:
        return await self.store.find_conversation_ids()

    async def find_by_conversation_id(self, conversation_id: str) -> list[Message]:
        return await self.store.find_by_conversation_id(conversation_id)

    async def save_all(self, conversation_id: str, messages: Sequence[Message]) -> None:
        self.saves += 1
        await self.store.save_all(conversation_id, messages)

    async def delete_by_conversation_id(self, conversation_id: str) -> None:
        await self.store.delete_by_conversation_id(conversation_id)


def test_without_window_append_the_memory_reads_modifies_and_writes() -> None:
    async def scenario() -> None:
        repository = ReadModifyWrite()
        assert isinstance(repository, AsyncChatMemoryRepository)
        assert not isinstance(repository, AsyncSupportsWindowAppend)
        memory = AsyncMessageWindowChatMemory(repository, max_messages=2)
        first = Message.user("U1")
        result = await memory.add(
            "c", [first, Message.assistant("A1"), Message.user("U2")]
        )
        assert [m.content for m in await memory.get("c")] == ["U2"]
        assert result.evicted_ids[0] == first.id
        saves = repository.saves
        await memory.add("c", first)  # stored? no: evicted, so it comes back
        await memory.add("c", first)  # now stored: a retry writes nothing
        assert repository.saves == saves + 1
        with pytest.raises(InvalidConversationIdError):
            await memory.add(" ", Message.user("x"))
        with pytest.raises(InvalidMessageError):
            await memory.add("c", [None])  # type: ignore[list-item]
        await memory.clear("c")
        assert await repository.find_conversation_ids() == []

    asyncio.run(scenario())


class PlannedStore:
    """One conversation planned twice: by plan_append and by plan_append_async."""

    def __init__(self, window: Window) -> None:
        self.window = window
        self.messages: list[Message] = []
        self.async_reads = 0

    def _parts(self, batch: list[Message]) -> tuple[list[Message], list[Message]]:
        system = [m for m in self.messages if m.role is Role.SYSTEM]
        others = [m for m in self.messages if m.role is not Role.SYSTEM]
        return system, others

    def _entries(self, others: list[Message]) -> Iterator[StoredEntry]:
        for position, message in enumerate(others):
            yield StoredEntry(
                message.id, message.role, self.window.measure(message), position
            )

    def append(self, batch: list[Message]) -> None:
        known = {m.id for m in self.messages}
        fresh = stamp_messages(m for m in batch if m.id not in known)
        if not fresh:
            return
        system, others = self._parts(fresh)
        measure = self.window.measure
        fields = {
            "system_count": len(system),
            "system_size": sum(measure(m) for m in system),
            "count": len(others),
            "total": sum(measure(m) for m in others),
            "system": system if needs_stored_system(fresh) else None,
        }

        async def oldest(expected: int) -> AsyncIterator[StoredEntry]:
            assert expected >= 1
            for entry in self._entries(others):
                self.async_reads += 1
                yield entry

        expected = plan_append(
            StoredWindow(read_oldest=lambda _: self._entries(others), **fields),  # type: ignore[arg-type]
            fresh,
            self.window,
        )
        planned = asyncio.run(
            plan_append_async(
                AsyncStoredWindow(read_oldest=oldest, **fields),  # type: ignore[arg-type]
                fresh,
                self.window,
            )
        )
        assert planned == expected
        gone = set(planned.delete_ids)
        self.messages = [m for m in self.messages if m.id not in gone] + planned.insert


@pytest.mark.parametrize("seed", range(30))
@pytest.mark.parametrize(
    "make_window",
    [
        lambda rng: MessageWindow(rng.randint(1, 12)),
        lambda rng: TokenWindow(rng.randint(10, 120), estimate_tokens),
    ],
)
def test_the_async_planner_plans_what_the_planner_plans(
    seed: int, make_window: object
) -> None:
    rng = random.Random(seed)
    window: Window = make_window(rng)  # type: ignore[operator]
    store = PlannedStore(window)
    expected: list[Message] = []
    for batch in random_turns(rng, 30):
        store.append(batch)
        fresh = [m for m in batch if m.id not in {e.id for e in expected}]
        if fresh:
            expected = apply_window(expected, fresh, window).messages
        assert [m.id for m in store.messages] == [m.id for m in expected]


def test_the_async_planner_reads_further_when_a_turn_runs_long() -> None:
    # Thirty stored messages, one user message first: the cut can only snap to
    # the new user message, so every stored entry is read, past the first hint.
    window = MessageWindow(3)
    store = PlannedStore(window)
    store.messages = stamp_messages(
        [Message.user("U0")] + [Message.assistant(f"A{i}") for i in range(29)]
    )
    store.append([Message.user("U1")])
    assert store.async_reads == 30
    assert [m.content for m in store.messages] == ["U1"]


def test_every_repository_protocol_has_an_async_twin_with_the_same_calls() -> None:
    sync_module = importlib.import_module("chatledger.repository")
    async_module = importlib.import_module("chatledger.async_repository")
    protocols = [
        name
        for name in sync_module.__all__
        if name == "ChatMemoryRepository" or name.startswith("Supports")
    ]
    assert "SupportsSaveMany" in protocols
    for name in protocols:
        sync_protocol = getattr(sync_module, name)
        async_protocol = getattr(async_module, f"Async{name}")
        assert getattr(chatledger, f"Async{name}") is async_protocol
        calls = [n for n in vars(sync_protocol) if not n.startswith("_")]
        assert calls
        for call in calls:
            assert inspect.iscoroutinefunction(getattr(async_protocol, call)), call
