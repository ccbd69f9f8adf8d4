"""Build chatledger's stores where LlamaIndex's own tests build its chat stores.

A pytest plugin (``-p chatledger_llama_suite_plugin``) for a run of
LlamaIndex's chat-store and memory test files, by
``tests/llama_index/test_llama_suite.py``. Only the construction changes:

- ``SimpleChatStore(...)`` in a test, and the one ``ChatMemoryBuffer`` and
  ``ChatSummaryMemoryBuffer.from_defaults`` build when given none, give a
  ``ChatLedgerChatStore`` over a sync and an async repository on the same
  table (or Redis key prefix); ``store=`` seeds it.
- ``SQLAlchemyChatStore(...)`` in a test, and the one ``Memory`` builds when
  given none (``Memory(...)``, ``Memory.from_defaults(...)``), give a
  ``ChatLedgerMemoryStore`` over an async repository.

Both are made with ``from_url``, so they pickle as LlamaIndex's do. The
database is the one ``CHATLEDGER_LLAMA_SUITE_URL`` names (an asyncio URL:
``sqlite+aiosqlite:///...``, ``postgresql+psycopg://...``, ``redis://...``),
one table or key prefix per store LlamaIndex would have made: a
``SQLAlchemyChatStore`` on the same URI and table as another shares its
store, as it would share the table; every in-memory one, and every
``SimpleChatStore``, gets a store of its own. The stores are dropped after
each test. ``isinstance`` against the replaced name holds for what it built.

Only the tests that build one of those stores run: those whose code (the
test and its fixtures) builds a ``SimpleChatStore``, a
``SQLAlchemyChatStore``, a ``Memory`` or a buffer memory, and uses no store
class of its own module. :data:`NOT_APPLICABLE` names the tests of the
replaced classes' own machinery, each with the reason; they are skipped
with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import llama_index.core.memory.chat_memory_buffer
import llama_index.core.memory.chat_summary_memory_buffer
import llama_index.core.memory.memory
import llama_index.core.memory.types
import llama_index.core.storage.chat_store
import llama_index.core.storage.chat_store.simple_chat_store
import llama_index.core.storage.chat_store.sql
import pytest
from llama_index.core.storage.chat_store.base import BaseChatStore
from llama_index.core.storage.chat_store.base_db import AsyncDBChatStore

import chatledger
from chatledger_llama_index import ChatLedgerChatStore, ChatLedgerMemoryStore

if TYPE_CHECKING:
    from tests.suite_shared.framework_suite import select
else:
    # The suite's process may import LlamaIndex's own ``tests``; the runner
    # puts our shared module's folder on its PYTHONPATH instead.
    from framework_suite import select

URL_VARIABLE = "CHATLEDGER_LLAMA_SUITE_URL"

_SETTINGS = (
    "asserts SQLAlchemyChatStore's own settings (db_schema, table_name, "
    "async_database_uri, its MetaData, dump_store) or its table setup, which "
    "ChatLedgerMemoryStore does not have: its repository holds the table, and "
    "chatledger's own tests cover it"
)
_ROWS = (
    "reads SQLAlchemyChatStore's own table and session factory (_table, "
    "_async_session_factory) and deletes by its row id, which "
    "ChatLedgerMemoryStore does not use: its delete_message takes a position"
)
_PERSIST = (
    "persists SimpleChatStore to a JSON file (persist, from_persist_path), which "
    "ChatLedgerChatStore does not do: its messages are in the database already"
)
_INSERT = (
    "inserts at a position with add_message(key, message, idx=), an argument of "
    "SimpleChatStore only (BaseChatStore.add_message has none), which "
    "ChatLedgerChatStore does not offer: a conversation is an append-only log"
)
_LOAD = (
    "reloads the memory from its dict or JSON, whose store LlamaIndex's "
    "load_chat_store rebuilds only for SimpleChatStore (the one store that "
    "holds its messages in itself); ChatLedgerChatStore is rebuilt from its "
    "URL by pickling instead"
)

_SIMPLE = "tests/storage/chat_store/test_simple_chat_store.py::"
_SQL = "tests/storage/chat_store/test_sql.py::"
_SCHEMA = "tests/storage/chat_store/test_sql_schema.py::TestSQLAlchemyChatStoreSchema::"
_MEMORY_SCHEMA = "tests/memory/test_memory_schema.py::TestMemorySchema::"
_CUSTOM = "tests/memory/test_memory_custom_chat_store.py::"
_BUFFER = "tests/memory/test_chat_memory_buffer.py::"

#: ``file::test function`` -> why it does not apply to chatledger's stores.
NOT_APPLICABLE: dict[str, str] = {
    _SIMPLE + "test_persist_non_ascii_unescaped": _PERSIST,
    _SIMPLE + "test_add_messages": _INSERT,
    _SQL + "test_delete_message": _ROWS,
    **{
        _SCHEMA + name: _SETTINGS
        for name in [
            "test_schema_parameter_initialization",
            "test_schema_serialization",
            "test_postgresql_schema_creation",
            "test_sqlite_schema_behavior",
            "test_is_sqlite_database_with_custom_engine",
            "test_is_sqlite_database_with_sqlite_engine",
            "test_is_sqlite_database_without_engine",
            "test_custom_engine_with_schema_creates_schema",
            "test_basic_operations_with_schema",
        ]
    },
    **{
        _MEMORY_SCHEMA + name: _SETTINGS
        for name in [
            "test_from_defaults_schema_parameter",
            "test_schema_parameter_passing",
            "test_memory_operations_with_schema",
            "test_memory_reset_preserves_schema",
        ]
    },
    _CUSTOM + "test_from_defaults_without_chat_store_still_uses_sql_store": _SETTINGS,
    _BUFFER + "test_sting_save_load": _LOAD,
    _BUFFER + "test_dict_save_load": _LOAD,
}

#: What a test calls to build a store, itself or through a memory.
BUILDERS = (
    "SimpleChatStore(",
    "SQLAlchemyChatStore(",
    "Memory(",
    "Memory.from_defaults(",
    "MemoryBuffer.from_defaults(",
)


def _sync_url(url: str) -> str:
    """The sync URL of the asyncio ``url`` (the same for psycopg and Redis)."""
    return url.replace("sqlite+aiosqlite:", "sqlite:", 1)


class Stores:
    """The stores the tests asked for, each on a table or key prefix of its own."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.shared: dict[object, ChatLedgerMemoryStore] = {}
        self.opened: list[tuple[dict[str, Any], list[Any], list[Any]]] = []

    def _options(self) -> dict[str, Any]:
        name = f"li_{uuid.uuid4().hex[:16]}"
        if self.url.startswith("redis"):
            return {"key_prefix": f"{name}:"}
        return {"table_name": name}

    def chat_store(self) -> ChatLedgerChatStore:
        """A new ``ChatLedgerChatStore``, sync and async, on a new table."""
        options = self._options()
        store = ChatLedgerChatStore.from_url(
            _sync_url(self.url), async_url=self.url, **options
        )
        self.opened.append((options, [store.repository], [store.async_repository]))
        return store

    def memory_store(self, database: object) -> ChatLedgerMemoryStore:
        """The ``ChatLedgerMemoryStore`` of ``database``; new for an in-memory one."""
        if database is not None and database in self.shared:
            return self.shared[database]
        options = self._options()
        store = ChatLedgerMemoryStore.from_url(self.url, **options)
        self.opened.append((options, [], [store.repository]))
        if database is not None:
            self.shared[database] = store
        return store

    def drop(self) -> None:
        """Drop every store's table or keys, and close their connections."""
        for options, sync_ones, async_ones in self.opened:
            # Every built-in repository closes as a context manager; the
            # protocol connect() answers with does not say so.
            repository: Any = chatledger.connect(_sync_url(self.url), **options)
            with repository:
                repository.drop_schema()
            for sync_one in sync_ones:
                sync_one.close()
            for async_one in async_ones:
                # A repository used on a test's loop, now closed, may fail to
                # close its connections on this one: they are gone with it.
                with contextlib.suppress(Exception):
                    asyncio.run(async_one.aclose())


class _StandIn(type):
    """The type of a stand-in: ``isinstance`` holds for what it built."""

    stores: Stores
    built: type

    def __instancecheck__(cls, instance: object) -> bool:
        return isinstance(instance, cls.built)


class _SimpleChatStore(_StandIn):
    def __call__(cls, store: dict[str, Any] | None = None, **_: Any) -> Any:
        built = cls.stores.chat_store()
        for key, messages in (store or {}).items():
            built.set_messages(key, list(messages))
        return built


class _SQLAlchemyChatStore(_StandIn):
    def __call__(
        cls,
        table_name: str = "llama_index_memory",
        async_database_uri: str | None = None,
        async_engine: Any = None,
        db_schema: str | None = None,
        **_: Any,
    ) -> Any:
        database: object = None
        if async_engine is not None:
            database = (id(async_engine), table_name, db_schema)
        elif async_database_uri is not None and ":memory:" not in async_database_uri:
            database = (async_database_uri, table_name, db_schema)
        return cls.stores.memory_store(database)


#: The name a test builds a store by -> its stand-in's type, what that builds,
#: and the modules that name it.
STAND_INS: dict[str, tuple[type[_StandIn], type, list[Any]]] = {
    "SimpleChatStore": (
        _SimpleChatStore,
        ChatLedgerChatStore,
        [
            llama_index.core.storage.chat_store,
            llama_index.core.storage.chat_store.simple_chat_store,
            llama_index.core.memory.chat_memory_buffer,
            llama_index.core.memory.chat_summary_memory_buffer,
            llama_index.core.memory.types,
        ],
    ),
    "SQLAlchemyChatStore": (
        _SQLAlchemyChatStore,
        ChatLedgerMemoryStore,
        [llama_index.core.storage.chat_store.sql, llama_index.core.memory.memory],
    ),
}


def _source(function: object) -> str:
    try:
        return inspect.getsource(function)  # type: ignore[arg-type]
    except (OSError, TypeError):
        return ""


def _own_store_classes(module: object) -> list[str]:
    """The chat store classes a test module defines for itself."""
    return [
        name
        for name, value in vars(module).items()
        if isinstance(value, type)
        and issubclass(value, (BaseChatStore, AsyncDBChatStore))
        and getattr(value, "__module__", None) == getattr(module, "__name__", None)
    ]


def _builds_a_store(item: pytest.Item) -> bool:
    """Whether the test, or a fixture it uses, builds a store we replace."""
    functions = [getattr(item, "function", None)]
    info = getattr(item, "_fixtureinfo", None)
    for definitions in getattr(info, "name2fixturedefs", {}).values():
        functions.extend(definition.func for definition in definitions)
    source = "\n".join(_source(function) for function in functions if function)
    module = getattr(item, "module", None)
    if any(name in source for name in _own_store_classes(module)):
        return False
    return any(builder in source for builder in BUILDERS)


def pytest_collection_modifyitems(
    config: pytest.Config, items: list[pytest.Item]
) -> None:
    select(config, items, _builds_a_store, NOT_APPLICABLE)


@pytest.fixture(autouse=True)
def chatledger_stores(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """Make each store class, wherever the test finds it, build chatledger's."""
    stores = Stores(os.environ[URL_VARIABLE])
    for name, (kind, built, modules) in STAND_INS.items():
        stand_in = kind(name, (), {})
        stand_in.stores = stores
        stand_in.built = built
        for module in [*modules, request.module]:
            if hasattr(module, name):
                monkeypatch.setattr(module, name, stand_in)
    yield
    stores.drop()
