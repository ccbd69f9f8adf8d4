"""MariaDB through PyMySQL: the pool rolls back only an open transaction.

``SqlChatMemoryRepository.from_url`` replaces the pool's unconditional
ROLLBACK on return by one that asks the server's last status first. These
tests run on the real server and count the ROLLBACKs PyMySQL really sends.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import text

from chatledger import Message, MessageWindow, MessageWindowChatMemory
from chatledger_sql import SqlChatMemoryRepository
from tests.backends import backend_url
from tests.sql.conftest import unique_table

pymysql = pytest.importorskip("pymysql")


@pytest.fixture
def rollbacks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record every ROLLBACK PyMySQL sends (the real one still runs)."""
    sent: list[str] = []
    real = pymysql.connections.Connection.rollback

    def counting(self: Any) -> None:
        sent.append("ROLLBACK")
        real(self)

    monkeypatch.setattr(pymysql.connections.Connection, "rollback", counting)
    return sent


@pytest.fixture
def repository() -> Iterator[SqlChatMemoryRepository]:
    made = SqlChatMemoryRepository.from_url(
        backend_url("mariadb"), table_name=unique_table()
    )
    made.create_schema()  # the tests name its tables before any call
    try:
        yield made
    finally:
        made.drop_schema()
        made.close()


def test_a_committed_append_is_not_rolled_back_again(
    repository: SqlChatMemoryRepository, rollbacks: list[str]
) -> None:
    memory = MessageWindowChatMemory(repository, max_messages=4)
    memory.add("c", [Message.user("first")])
    rollbacks.clear()
    for turn in range(6):  # some of them evict
        memory.add("c", [Message.user(f"u{turn}"), Message.assistant(f"a{turn}")])
    assert rollbacks == []
    assert [m.content for m in memory.get("c")] == ["u4", "a4", "u5", "a5"]


def test_a_read_ends_the_transaction_it_opened(
    repository: SqlChatMemoryRepository, rollbacks: list[str]
) -> None:
    """InnoDB opens a transaction for a read without flagging it in the status
    the pool checks: the read ends it itself, in the compound statement it
    is sent in, so no ROLLBACK follows it and none is left open."""
    engine = repository.engine
    repository.save_all("c", [Message.user("u")])
    rollbacks.clear()
    repository.find_by_conversation_id("c")
    repository.find_window("c", MessageWindow(4))
    assert rollbacks == []
    assert engine.pool.checkedin() == 1  # type: ignore[attr-defined]
    raw = engine.raw_connection()  # the one connection the reads used
    try:
        cursor = raw.cursor()
        cursor.execute(
            "SELECT COUNT(*) FROM information_schema.innodb_trx "
            "WHERE trx_mysql_thread_id = CONNECTION_ID()"
        )
        assert cursor.fetchone() == (0,)
        cursor.close()
    finally:
        raw.close()


def test_an_open_transaction_is_still_rolled_back_on_return(
    repository: SqlChatMemoryRepository, rollbacks: list[str]
) -> None:
    """Work left uncommitted on a returned connection never leaks."""
    table = repository.tables.conversations.name
    engine = repository.engine
    raw = engine.raw_connection()
    try:
        cursor = raw.cursor()
        cursor.execute(
            f"INSERT INTO {table} (conversation_id, next_seq, version, "
            "system_count, other_count, updated_at) "
            "VALUES ('leak', 0, 0, 0, 0, NOW(6))"
        )
        cursor.close()
    finally:
        raw.close()  # back to the pool, transaction still open
    assert rollbacks == ["ROLLBACK"]
    with engine.connect() as connection:
        found = connection.execute(
            text(f"SELECT COUNT(*) FROM {table} WHERE conversation_id = 'leak'")
        ).scalar_one()
    assert found == 0


def test_an_explicit_reset_setting_is_kept(rollbacks: list[str]) -> None:
    made = SqlChatMemoryRepository.from_url(
        backend_url("mariadb"),
        table_name=unique_table(),
        engine_options={"pool_reset_on_return": "rollback"},
    )
    try:
        made.save_all("c", [Message.user("u")])  # first write also reads limits
        rollbacks.clear()
        made.save_all("c", [Message.user("v")])
        assert rollbacks == ["ROLLBACK"]  # the pool's own, after the COMMIT
    finally:
        made.drop_schema()
        made.close()
