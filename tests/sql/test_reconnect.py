"""A connection the server dropped costs one retry, not an error (no pre-ping)."""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine, text

from chatledger import Message, MessageWindowChatMemory
from chatledger_sql import SqlChatMemoryRepository
from tests.backends import backend_url
from tests.sql.conftest import SERVERS, unique_table

_PID = {"postgresql": "SELECT pg_backend_pid()", "mariadb": "SELECT CONNECTION_ID()"}
_KILL = {"postgresql": "SELECT pg_terminate_backend({})", "mariadb": "KILL {}"}


@pytest.fixture(params=SERVERS)
def server(request: pytest.FixtureRequest) -> tuple[str, str]:
    return request.param, backend_url(request.param)


def _kill_pooled_connection(repository: SqlChatMemoryRepository, name: str) -> None:
    """Have the server end the one connection the repository's pool holds."""
    with repository.engine.connect() as connection:
        pid = connection.execute(text(_PID[name])).scalar_one()
        connection.rollback()
    killer = create_engine(repository.engine.url)
    try:
        with killer.connect() as connection:
            connection.execute(text(_KILL[name].format(int(pid))))
            connection.commit()
    finally:
        killer.dispose()


def test_from_url_does_not_pre_ping(server: tuple[str, str]) -> None:
    """The engine ``from_url`` makes spends no round trip on a ping."""
    repository = SqlChatMemoryRepository.from_url(server[1], table_name=unique_table())
    try:
        assert repository.engine.pool._pre_ping is False
    finally:
        repository.drop_schema()
        repository.close()


@pytest.mark.parametrize("operation", ["append", "save_all", "read", "list", "delete"])
def test_operation_after_server_dropped_the_connection(
    server: tuple[str, str], operation: str
) -> None:
    """Killing the pooled connection between two operations loses nothing."""
    name, url = server
    repository = SqlChatMemoryRepository.from_url(url, table_name=unique_table())
    try:
        memory = MessageWindowChatMemory(repository, max_messages=3)
        first = [Message.user("u1"), Message.assistant("a1")]
        memory.add("c", first)
        _kill_pooled_connection(repository, name)
        if operation == "append":
            second = Message.user("u2")
            result = memory.add("c", second)
            assert [m.id for m in result.appended] == [second.id]
            assert [m.content for m in memory.get("c")] == ["u1", "a1", "u2"]
        elif operation == "save_all":
            repository.save_all("c", [Message.user("replaced")])
            assert [m.content for m in memory.get("c")] == ["replaced"]
        elif operation == "read":
            assert [m.id for m in memory.get("c")] == [m.id for m in first]
        elif operation == "list":
            assert repository.find_conversation_ids() == ["c"]
        else:
            repository.delete_by_conversation_id("c")
            assert memory.get("c") == []
    finally:
        repository.drop_schema()
        repository.close()


def test_retried_append_after_lost_commit_is_a_noop(server: tuple[str, str]) -> None:
    """An append retried after it had committed stores its messages once."""
    name, url = server
    repository = SqlChatMemoryRepository.from_url(url, table_name=unique_table())
    try:
        memory = MessageWindowChatMemory(repository, max_messages=10)
        batch = [Message.user("u"), Message.assistant("a")]
        memory.add("c", batch)
        _kill_pooled_connection(repository, name)
        assert memory.add("c", batch).appended == []
        assert [m.id for m in memory.get("c")] == [m.id for m in batch]
    finally:
        repository.drop_schema()
        repository.close()
