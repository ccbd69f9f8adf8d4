"""asyncpg's ``InternalClientError`` after a killed backend counts as a lost connection.

When PostgreSQL ends an idle connection (``pg_terminate_backend``, a restart),
its FATAL message reaches asyncpg while no operation runs; asyncpg's protocol
takes it as unexpected and waits for a sync point that never comes, so the
next statement fails with ``InternalClientError: cannot switch to state 15;
another operation (2) is in progress`` instead of a connection error. asyncpg
aborts the connection before raising it, so SQLAlchemy marks the error
``connection_invalidated`` and the repository runs the call once more on a
fresh connection, as it does for any lost connection. Each append here meets
a connection killed just before it, and every one must go through.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from sqlalchemy import event, text
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine

from chatledger import Message, MessageWindow
from chatledger_sql import AsyncSqlChatMemoryRepository
from tests.backends import backend_url
from tests.conformance.test_async_sql import with_driver
from tests.sql.conftest import unique_table

APPENDS = 30
WINDOW = MessageWindow(1000)

pytest.importorskip("asyncpg")


def test_appends_after_terminated_backends_all_go_through() -> None:
    url = backend_url("postgresql")
    name = f"chatledger-test-{uuid.uuid4().hex[:12]}"
    seen: list[str] = []

    def record(context: Any) -> None:
        seen.append(type(context.original_exception).__name__)

    async def kill_every_connection(admin: AsyncConnection) -> None:
        # Returns once the signal is sent: the backend's FATAL message and
        # its close reach the repository's connection while the next append
        # starts, in every order, as they do when a server stops.
        await admin.execute(
            text(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = :name"
            ),
            {"name": name},
        )

    async def scenario() -> list[str]:
        admin_engine = create_async_engine(with_driver(url, "asyncpg"))
        admin = await admin_engine.connect()
        await admin.execution_options(isolation_level="AUTOCOMMIT")
        settings = {"application_name": name}
        repository = AsyncSqlChatMemoryRepository.from_url(
            with_driver(url, "asyncpg"),
            table_name=unique_table(),
            engine_options={"connect_args": {"server_settings": settings}},
        )
        try:
            # The first append connects, makes the tables and learns the limits.
            sent = [Message.user("first")]
            await repository.append_to_window("c", sent, WINDOW)
            event.listen(repository.engine.sync_engine, "handle_error", record)
            sent += [Message.user(f"m{n}") for n in range(APPENDS)]
            for message in sent[1:]:
                await kill_every_connection(admin)
                await repository.append_to_window("c", [message], WINDOW)
            stored = await repository.find_by_conversation_id("c")
            assert [m.id for m in stored] == [m.id for m in sent]
            return seen
        finally:
            await repository.drop_schema()
            await repository.aclose()
            await admin.close()
            await admin_engine.dispose()

    errors = asyncio.run(scenario())
    # The kills did reach the appends, in asyncpg's unexpected-message form too
    # (about half of them on the test machine).
    assert len(errors) == APPENDS, errors
    assert "InternalClientError" in errors, errors
