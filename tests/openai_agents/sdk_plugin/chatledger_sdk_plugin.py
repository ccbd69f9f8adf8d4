"""Build ChatLedgerSession where the Agents SDK's own tests build its SQL sessions.

A pytest plugin (``-p chatledger_sdk_plugin``) for a run of the SDK's test
files, taken from its sdist into a temporary folder by
``tests/openai_agents/test_sdk_suite.py``. Only the construction changes:
``SQLiteSession(session_id, db_path, ...)``, ``AsyncSQLiteSession(...)``,
``SQLAlchemySession(session_id, engine=...)`` and
``SQLAlchemySession.from_url(session_id, url=...)`` in a test give a
``ChatLedgerSession`` over an async repository on the database
``CHATLEDGER_SDK_SUITE_URL`` names (SQL, or Redis for a ``redis`` URL), with
the settings given, one table (or Redis key prefix) per database the test
named (sessions on one file, URL or engine share a store, as they would
share the database; each in-memory database gets a store of its own), and
the ``close()`` or ``engine.dispose()`` the test calls when it is done (the
stores are dropped after each test). ``isinstance`` against the
name holds for what it built.

Only the tests that build one of those sessions run; the others do not test
a session. :data:`NOT_APPLICABLE` names the tests of those sessions' own
machinery (their connections, their tables, their ``close()``) or of a
capability ChatLedgerSession does not offer, each with the reason; they are
skipped with it.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import uuid
from collections.abc import Iterator
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import agents
import agents.extensions.memory
import agents.memory
import pytest

from chatledger_openai_agents import ChatLedgerSession
from chatledger_redis import AsyncRedisChatMemoryRepository
from chatledger_sql import AsyncSqlChatMemoryRepository

if TYPE_CHECKING:
    from tests.suite_shared.framework_suite import select
else:
    # The suite's process imports the framework's own ``tests``; the runner
    # puts our shared module's folder on its PYTHONPATH instead.
    from framework_suite import select

#: The store a run uses: SQL, or Redis when the URL is a Redis one.
AsyncRepository = AsyncSqlChatMemoryRepository | AsyncRedisChatMemoryRepository

URL_VARIABLE = "CHATLEDGER_SDK_SUITE_URL"

_INTERNALS = (
    "tests the SDK session's own connections, transactions, locks, engine or "
    "SQL (reached through its private attributes, or by patching or watching "
    "its driver), which ChatLedgerSession does not have: its repository holds "
    "them, and chatledger's own tests cover them"
)
_ROWS = (
    "writes or reads the SDK session's own tables directly (corrupt rows, "
    "equal timestamps, the stored text, dropped tables), which ChatLedgerSession "
    "does not use: its items are messages in chatledger's schema"
)
_CLOSE = (
    "tests the SDK session's close(); ChatLedgerSession has none: whoever "
    "opened the repository closes it"
)
_ENGINE = "tests SQLAlchemySession.engine, which ChatLedgerSession does not have"
_SNAPSHOT = (
    "compacts the newest items while older ones stay, through the SQL "
    "sessions' atomic suffix snapshot (_get_compaction_snapshot), which "
    "ChatLedgerSession does not offer: chatledger has no conditional "
    "replacement of the newest messages"
)
_SUBCLASS = (
    "subclasses SQLiteSession to pause its methods in the middle; a subclass "
    "of ChatLedgerSession gets the SDK's clear and add, which the test does "
    "not expect"
)

_SESSION = "tests/memory/test_session.py::"
_COMPACTION = (
    "tests/memory/test_openai_responses_compaction_session.py::"
    "TestOpenAIResponsesCompactionSession::"
)
_VISIBILITY = "tests/memory/test_compaction_model_visibility.py::"
_ASYNC_SQLITE = "tests/extensions/memory/test_async_sqlite_session.py::"
_SQLALCHEMY = "tests/extensions/memory/test_sqlalchemy_session.py::"

#: ``file::test function`` (``file::Class::test method``) -> why it does not
#: apply to ChatLedgerSession.
NOT_APPLICABLE: dict[str, str] = {
    **{
        _SESSION + name: _INTERNALS
        for name in [
            "test_sqlite_session_close_closes_worker_thread_connections",
            "test_sqlite_session_reaps_connections_from_exited_worker_threads",
            "test_sqlite_session_closes_retired_connections_before_the_next_allocation",
            "test_sqlite_session_keeps_connections_of_live_worker_threads",
            "test_sqlite_session_rollback_failure_evicts_connection",
            "test_sqlite_session_close_retries_quarantined_connection",
            "test_sqlite_session_file_lock_is_shared_across_instances",
            "test_sqlite_session_post_commit_cancellation_propagates_after_known_outcome",
        ]
    },
    **{
        _SESSION + name: _ROWS
        for name in [
            "test_sqlite_session_pop_item_skips_corrupt_most_recent",
            "test_sqlite_session_pop_item_returns_none_after_dropping_only_corrupt_rows",
            "test_sqlite_session_get_items_limit_skips_corrupt_newest_rows",
            "test_sqlite_session_get_items_session_settings_limit_skips_corrupt_rows",
            "test_sqlite_session_failed_add_items_releases_write_lock",
            "test_sqlite_session_failed_clear_session_rolls_back",
            "test_sqlite_session_failed_pop_item_releases_write_lock",
        ]
    },
    _SESSION + "test_sqlite_session_closed_rejects_empty_add_items": _CLOSE,
    _COMPACTION + "test_automatic_compaction_rollback_budget": _SNAPSHOT,
    _COMPACTION + "test_settled_pop_failure_invalidates_response_chain": _INTERNALS,
    _COMPACTION + "test_settled_clear_failure_invalidates_response_chain": _INTERNALS,
    _COMPACTION + "test_cancel_restore_waits_for_mutation_lock_before_newer_writes": (
        _SUBCLASS
    ),
    _COMPACTION + "test_exception_restore_drains_when_compaction_is_cancelled": (
        _SUBCLASS
    ),
    **{
        _VISIBILITY + name: _SNAPSHOT
        for name in [
            "test_backend_read_limit_cannot_hide_retained_history_from_compaction",
            "test_automatic_compaction_does_not_reload_unbounded_hidden_history",
            "test_expired_read_overhead_does_not_authorize_hidden_history",
        ]
    },
    **{
        _ASYNC_SQLITE + name: _INTERNALS
        for name in [
            "test_cancelled_add_items_rolls_back_write_transaction",
            "test_cancelled_wal_retry_closes_startup_connection",
            "test_close_retries_connection_quarantined_after_rollback_failure",
            "test_failed_add_items_rolls_back_and_reuses_connection",
            "test_initialization_does_not_retry_unrecoverable_wal_errors",
            "test_initialization_retries_transient_wal_lock",
            "test_operation_failure_then_cancellation_during_rollback",
            "test_rollback_failure_closes_and_evicts_connection",
            "test_post_commit_cancellation_propagates_after_known_mutation_outcome",
            "test_close_retries_quarantined_failed_initialization_candidate",
            "test_cancelled_initialization_finishes_candidate_close",
            "test_initialization_failure_then_cancellation_during_candidate_close",
            "test_cancelled_connect_closes_eventually_acquired_connection",
        ]
    },
    **{
        _ASYNC_SQLITE + name: _ROWS
        for name in [
            "test_async_sqlite_session_pop_item_skips_corrupt_most_recent",
            "test_async_sqlite_session_pop_item_returns_none_after_dropping_only_corrupt_rows",
            "test_async_sqlite_session_get_items_limit_skips_corrupt_newest_rows",
            "test_async_sqlite_session_get_items_same_timestamp_consistent_order",
            "test_async_sqlite_session_pop_item_same_timestamp_returns_latest",
            "test_failed_clear_session_rolls_back",
            "test_failed_pop_item_releases_write_lock",
        ]
    },
    **{
        _ASYNC_SQLITE + name: _CLOSE
        for name in [
            "test_async_sqlite_session_closed_operations_raise_runtime_error",
            "test_async_sqlite_session_closed_rejects_empty_add_items",
            "test_async_sqlite_session_close_before_use_is_terminal",
            "test_async_sqlite_session_close_is_idempotent",
            "test_cancelled_close_finishes_cleanup_and_propagates_cancellation",
        ]
    },
    **{
        _SQLALCHEMY + name: _INTERNALS
        for name in [
            "test_add_items_cancelled_waiter_does_not_strand_table_init_lock",
            "test_add_items_waits_for_transient_sqlite_write_lock",
            "test_create_tables_false_does_not_allocate_shared_init_lock",
            "test_mutation_cancellation_waits_for_transaction_exit",
            "test_pop_item_retries_returning_claim_lost_to_concurrent_delete",
            "test_pop_item_supports_unknown_delete_rowcount",
            "test_sqlite_configuration_registry_does_not_grow_unbounded",
            "test_sqlite_configuration_registry_releases_collected_engines",
            "test_sqlite_fallback_reserves_writer_before_tail_claim",
        ]
    },
    **{
        _SQLALCHEMY + name: _ROWS
        for name in [
            "test_get_items_limit_skips_corrupt_newest_rows",
            "test_pop_item_returns_none_after_dropping_only_corrupt_rows",
            "test_pop_item_skips_corrupt_most_recent",
            "test_get_items_orders_by_id_for_ties",
            "test_get_items_same_timestamp_consistent_order",
            "test_pop_item_same_timestamp_returns_latest",
            "test_sqlalchemy_session_can_store_non_ascii_without_escaping",
            "test_sqlalchemy_session_defaults_to_escaped_non_ascii_storage",
        ]
    },
    **{
        _SQLALCHEMY + name: _ENGINE
        for name in [
            "test_engine_property_from_external_engine",
            "test_engine_property_from_url",
            "test_engine_property_is_read_only",
        ]
    },
}


class Stores:
    """The repositories the SDK's tests asked for, one per database they named."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.by_name: dict[object, AsyncRepository] = {}
        self.opened: list[AsyncRepository] = []

    def repository(self, database: object) -> AsyncRepository:
        """The store of ``database``; a new one for each in-memory database."""
        if database in self.by_name:
            return self.by_name[database]
        name = f"sdk_{uuid.uuid4().hex[:16]}"
        repository: AsyncRepository
        if self.url.startswith("redis"):
            repository = AsyncRedisChatMemoryRepository.from_url(
                self.url, key_prefix=f"{name}:"
            )
        else:
            repository = AsyncSqlChatMemoryRepository.from_url(
                self.url, table_name=name
            )
        self.opened.append(repository)
        if ":memory:" not in str(database):
            self.by_name[database] = repository
        return repository

    async def drop(self) -> None:
        for repository in self.opened:
            await repository.drop_schema()
            await repository.aclose()


def _session(stores: Stores, session_id: str, database: object, settings: Any) -> Any:
    return ChatLedgerSession(
        session_id, stores.repository(database), session_settings=settings
    )


async def _nothing() -> None:
    """What closing a stand-in's engine or session does: the store closes after
    the test."""


class _StandIn(type):
    """The type of a stand-in: ``isinstance`` holds for what it built."""

    stores: Stores

    def __instancecheck__(cls, instance: object) -> bool:
        return isinstance(instance, ChatLedgerSession)


class _SQLiteSession(_StandIn):
    def __call__(
        cls,
        session_id: str,
        db_path: object = ":memory:",
        sessions_table: str = "agent_sessions",
        messages_table: str = "agent_messages",
        session_settings: Any = None,
    ) -> Any:
        session = _session(cls.stores, session_id, str(db_path), session_settings)
        setattr(session, "close", lambda: None)  # noqa: B010
        return session


class _AsyncSQLiteSession(_StandIn):
    def __call__(
        cls,
        session_id: str,
        db_path: object = ":memory:",
        sessions_table: str = "agent_sessions",
        messages_table: str = "agent_messages",
        session_settings: Any = None,
    ) -> Any:
        session = _session(cls.stores, session_id, str(db_path), session_settings)
        setattr(session, "close", _nothing)  # noqa: B010
        return session


class _SQLAlchemySession(_StandIn):
    def __call__(
        cls,
        session_id: str,
        *,
        engine: Any,
        create_tables: bool = False,
        sessions_table: str = "agent_sessions",
        messages_table: str = "agent_messages",
        session_settings: Any = None,
        ensure_ascii: bool = True,
    ) -> Any:
        database = f"{engine.url}" if ":memory:" in f"{engine.url}" else engine
        return cls._with_engine(session_id, database, session_settings)

    def from_url(
        cls,
        session_id: str,
        *,
        url: str,
        engine_kwargs: Any = None,
        session_settings: Any = None,
        **options: Any,
    ) -> Any:
        return cls._with_engine(session_id, url, session_settings)

    def _with_engine(cls, session_id: str, database: object, settings: Any) -> Any:
        session = _session(cls.stores, session_id, database, settings)
        setattr(session, "engine", SimpleNamespace(dispose=_nothing))  # noqa: B010
        return session


#: The name a test builds a session by -> the type of its stand-in.
STAND_INS: dict[str, type[_StandIn]] = {
    "SQLiteSession": _SQLiteSession,
    "AsyncSQLiteSession": _AsyncSQLiteSession,
    "SQLAlchemySession": _SQLAlchemySession,
}


def _stand_in(name: str, stores: Stores) -> type:
    """A class named ``name`` whose calls build ChatLedgerSessions over ``stores``."""
    stand_in = STAND_INS[name](name, (), {})
    stand_in.stores = stores
    return stand_in


def _builds_a_session(item: pytest.Item) -> bool:
    function = getattr(item, "function", None)
    try:
        source = inspect.getsource(function) if function is not None else ""
    except (OSError, TypeError):
        return False
    return any(
        f"{name}(" in source or f"{name}.from_url(" in source for name in STAND_INS
    )


def pytest_collection_modifyitems(
    config: pytest.Config, items: list[pytest.Item]
) -> None:
    select(config, items, _builds_a_session, NOT_APPLICABLE)


@pytest.fixture(autouse=True)
def chatledger_sessions(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """Make each session class, wherever the test finds it, build ChatLedgerSessions."""
    stores = Stores(os.environ[URL_VARIABLE])
    for name in STAND_INS:
        stand_in = _stand_in(name, stores)
        if hasattr(request.module, name):
            monkeypatch.setattr(request.module, name, stand_in)
        for module in (agents, agents.memory, agents.extensions.memory):
            monkeypatch.setattr(module, name, stand_in, raising=False)
    yield
    asyncio.run(stores.drop())
