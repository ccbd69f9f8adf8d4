"""Schema calls survive a pooled connection the server dropped, as writes do.

A repository is used (its pool keeps a connection), the server ends that
connection from a second one (PostgreSQL ``pg_terminate_backend``, MariaDB
``KILL``), and then ``drop_schema`` or ``create_schema`` runs: it must return
normally and leave the tables and the append routine (``<table>_append_v4``,
a PL/pgSQL function or a MariaDB procedure) all gone, or all there. Sync and
async, on every driver installed here.
"""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import Engine, create_engine, text

from chatledger import Message, MessageWindow
from chatledger_sql import AsyncSqlChatMemoryRepository, SqlChatMemoryRepository
from chatledger_sql.dialects.append_routine import ROUTINE_SUFFIX
from chatledger_sql.schema import CONVERSATION_SUFFIX, EVICTED_SUFFIX, derived_name
from tests.backends import backend_url
from tests.conformance.test_async_sql import with_driver
from tests.sql.conftest import unique_table

_PID = {"postgresql": "SELECT pg_backend_pid()", "mariadb": "SELECT CONNECTION_ID()"}
_KILL = {"postgresql": "SELECT pg_terminate_backend({})", "mariadb": "KILL {}"}
_TABLES = {
    "postgresql": "SELECT count(*) FROM pg_class WHERE relname = :name",
    "mariadb": (
        "SELECT count(*) FROM information_schema.tables "
        "WHERE table_schema = DATABASE() AND table_name = :name"
    ),
}
_ROUTINES = {
    "postgresql": "SELECT count(*) FROM pg_proc WHERE proname = :name",
    "mariadb": (
        "SELECT count(*) FROM information_schema.routines "
        "WHERE routine_schema = DATABASE() AND routine_name = :name"
    ),
}
WINDOW = MessageWindow(10)

CASES = [
    pytest.param("postgresql", None, id="postgresql-psycopg"),
    pytest.param("mariadb", None, id="mariadb-pymysql"),
    pytest.param("postgresql", "psycopg", id="postgresql-psycopg-async"),
    pytest.param("postgresql", "asyncpg", id="postgresql-asyncpg-async"),
    pytest.param("mariadb", "asyncmy", id="mariadb-asyncmy-async"),
    pytest.param("mariadb", "aiomysql", id="mariadb-aiomysql-async"),
]


def _kill(admin: Engine, server: str, pid: int) -> None:
    with admin.connect() as connection:
        connection.execute(text(_KILL[server].format(int(pid))))
        connection.commit()


def _objects(admin: Engine, server: str, table: str) -> tuple[int, int]:
    """How many of the repository's tables, and of its append routines, exist."""
    with admin.connect() as connection:
        tables = sum(
            connection.execute(text(_TABLES[server]), {"name": name}).scalar_one()
            for name in (
                table,
                derived_name(table, CONVERSATION_SUFFIX),
                derived_name(table, EVICTED_SUFFIX),
            )
        )
        routines = connection.execute(
            text(_ROUTINES[server]), {"name": derived_name(table, ROUTINE_SUFFIX)}
        ).scalar_one()
        connection.rollback()
    return int(tables), int(routines)


def _expected(call: str) -> tuple[int, int]:
    """The tables and routines left: none after a drop, all after a create."""
    return (0, 0) if call == "drop_schema" else (3, 1)


def _sync_scenario(server: str, url: str, call: str, admin: Engine) -> None:
    table = unique_table()
    repository = SqlChatMemoryRepository.from_url(url, table_name=table)
    try:
        repository.append_to_window("c", [Message.user("u")], WINDOW)
        if call == "create_schema":
            with SqlChatMemoryRepository.from_url(url, table_name=table) as other:
                other.drop_schema()
        with repository.engine.connect() as connection:
            pid = connection.execute(text(_PID[server])).scalar_one()
            connection.rollback()
        _kill(admin, server, pid)
        getattr(repository, call)()
        assert _objects(admin, server, table) == _expected(call)
        if call == "create_schema":
            repository.append_to_window("c", [Message.user("again")], WINDOW)
    finally:
        repository.drop_schema()
        repository.close()


async def _async_scenario(server: str, url: str, call: str, admin: Engine) -> None:
    table = unique_table()
    repository = AsyncSqlChatMemoryRepository.from_url(url, table_name=table)
    try:
        await repository.append_to_window("c", [Message.user("u")], WINDOW)
        if call == "create_schema":
            async with AsyncSqlChatMemoryRepository.from_url(
                url, table_name=table
            ) as other:
                await other.drop_schema()
        async with repository.engine.connect() as connection:
            pid = (await connection.execute(text(_PID[server]))).scalar_one()
            await connection.rollback()
        _kill(admin, server, pid)
        await getattr(repository, call)()
        assert _objects(admin, server, table) == _expected(call)
        if call == "create_schema":
            await repository.append_to_window("c", [Message.user("again")], WINDOW)
    finally:
        await repository.drop_schema()
        await repository.aclose()


@pytest.mark.parametrize("call", ["drop_schema", "create_schema"])
@pytest.mark.parametrize(("server", "driver"), CASES)
def test_schema_call_after_the_server_dropped_the_pooled_connection(
    server: str, driver: str | None, call: str
) -> None:
    url = backend_url(server)
    admin = create_engine(url)
    try:
        if driver is None:
            _sync_scenario(server, url, call, admin)
        else:
            asyncio.run(_async_scenario(server, with_driver(url, driver), call, admin))
    finally:
        admin.dispose()
