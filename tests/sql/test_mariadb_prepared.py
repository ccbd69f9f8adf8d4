"""MariaDB's log append and reads run as statements prepared once per connection.

The compound statement of a log append (``MariaDBDialect.log_append_statement``)
is prepared on a connection's first append of a batch size and run with
``EXECUTE ... USING`` after; a connection whose server forgot it prepares it
again, and a server that refuses to prepare gets the statement itself. Every
way, each message is stored once and in order.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import bindparam, text

from chatledger import Message, StoreNotFoundError
from chatledger_sql import SqlChatMemoryRepository
from chatledger_sql.compiled import CompiledStatement, fetch_all
from chatledger_sql.dialects.prepared import PreparedStatement
from tests.backends import backend_url
from tests.sql.conftest import unique_table


@pytest.fixture
def repository() -> Iterator[SqlChatMemoryRepository]:
    """A MariaDB repository on one pooled connection."""
    made = SqlChatMemoryRepository.from_url(
        backend_url("mariadb"),
        table_name=unique_table(),
        engine_options={"pool_size": 1, "max_overflow": 0},
    )
    try:
        yield made
    finally:
        made.drop_schema()
        made.close()


def _on_connection(repository: SqlChatMemoryRepository, sql: str) -> list[Any]:
    """Run ``sql`` on the repository's one pooled connection."""
    connection = repository.engine.raw_connection()
    try:
        cursor = connection.cursor()
        cursor.execute(sql)
        return list(cursor.fetchall())
    finally:
        connection.close()


def _status(repository: SqlChatMemoryRepository) -> dict[str, int]:
    """The connection's counts of PREPARE and EXECUTE statements."""
    rows = _on_connection(
        repository,
        "SHOW SESSION STATUS WHERE Variable_name IN "
        "('Com_prepare_sql', 'Com_execute_sql')",
    )
    return {name: int(value) for name, value in rows}


def _prepared_names(repository: SqlChatMemoryRepository) -> list[str]:
    return [
        statement.name
        for statement in repository._raw_statements.values()
        if isinstance(statement, PreparedStatement)
    ]


def _turn(index: int) -> list[Message]:
    return [Message.user(f"u{index}"), Message.assistant(f"a{index}")]


def _contents(repository: SqlChatMemoryRepository, cid: str) -> list[str | None]:
    return [m.content for m in repository.find_by_conversation_id(cid)]


def test_appends_prepare_once_then_execute(
    repository: SqlChatMemoryRepository,
) -> None:
    repository.append_to_log("c", _turn(0))
    before = _status(repository)
    for index in range(1, 6):
        repository.append_to_log("c", _turn(index))
    after = _status(repository)
    assert after["Com_prepare_sql"] == before["Com_prepare_sql"]
    assert after["Com_execute_sql"] - before["Com_execute_sql"] == 5
    assert _contents(repository, "c") == [
        text for index in range(6) for text in (f"u{index}", f"a{index}")
    ]


def test_a_forgotten_statement_is_prepared_again(
    repository: SqlChatMemoryRepository,
) -> None:
    repository.append_to_log("c", _turn(0))
    (name,) = _prepared_names(repository)
    _on_connection(repository, f"DEALLOCATE PREPARE {name}")
    before = _status(repository)
    result = repository.append_to_log("c", _turn(1))
    after = _status(repository)
    assert [m.content for m in result.appended] == ["u1", "a1"]
    assert after["Com_prepare_sql"] - before["Com_prepare_sql"] == 1
    assert _contents(repository, "c") == ["u0", "a0", "u1", "a1"]
    # Resent ids are still recognised through the prepared statement.
    again = repository.append_to_log("c", repository.find_by_conversation_id("c"))
    assert again.appended == []
    assert _contents(repository, "c") == ["u0", "a0", "u1", "a1"]


def test_a_server_that_refuses_to_prepare_gets_the_statement(
    repository: SqlChatMemoryRepository,
) -> None:
    (limit,) = _on_connection(repository, "SELECT @@GLOBAL.max_prepared_stmt_count")
    _on_connection(repository, "SET GLOBAL max_prepared_stmt_count = 0")
    try:
        for index in range(3):
            result = repository.append_to_log("c", _turn(index))
            assert len(result.appended) == 2
        status = _status(repository)
    finally:
        _on_connection(repository, f"SET GLOBAL max_prepared_stmt_count = {limit[0]}")
    assert _contents(repository, "c") == ["u0", "a0", "u1", "a1", "u2", "a2"]
    # Refused once, then the statement itself: no EXECUTE ran.
    assert status["Com_execute_sql"] == 0


def test_a_large_batch_is_not_prepared(repository: SqlChatMemoryRepository) -> None:
    batch = [Message.user(f"m{index}") for index in range(9)]
    before = _status(repository)
    repository.append_to_log("c", batch)
    after = _status(repository)
    assert after == before
    assert _contents(repository, "c") == [f"m{index}" for index in range(9)]


def test_reads_are_prepared_once_then_executed(
    repository: SqlChatMemoryRepository,
) -> None:
    repository.append_to_log("c", _turn(0))
    assert _contents(repository, "c") == ["u0", "a0"]
    before = _status(repository)
    for _ in range(4):
        assert _contents(repository, "c") == ["u0", "a0"]
    after = _status(repository)
    assert after["Com_prepare_sql"] == before["Com_prepare_sql"]
    assert after["Com_execute_sql"] - before["Com_execute_sql"] == 4


def test_a_question_mark_of_the_text_is_never_taken_for_a_placeholder(
    repository: SqlChatMemoryRepository,
) -> None:
    statement = text("SELECT '?' AS mark, :word AS word").bindparams(bindparam("word"))
    with repository.engine.connect() as connection:
        compiled = PreparedStatement(CompiledStatement(connection.dialect, [statement]))
        rows = fetch_all(connection, compiled, {"word": "hi"}, autocommit=False)
    assert [tuple(row) for row in rows] == [("?", "hi")]
    assert _status(repository)["Com_prepare_sql"] == 0


def test_a_missing_table_fails_as_before_and_is_prepared_once_made(
    repository: SqlChatMemoryRepository,
) -> None:
    repository.append_to_log("c", _turn(0))
    repository.drop_schema()
    with pytest.raises(StoreNotFoundError):
        repository.append_to_log("c", _turn(1))
    repository.create_schema()
    before = _status(repository)
    repository.append_to_log("c", _turn(2))
    after = _status(repository)
    assert after["Com_execute_sql"] - before["Com_execute_sql"] == 1
    assert _contents(repository, "c") == ["u2", "a2"]
