"""MariaDB drops the connection on a statement over ``max_allowed_packet``.

The repository reads the limit once and refuses such a message with
``MessageTooLargeError`` before it writes anything, instead of surfacing a
"server has gone away" from the middle of a transaction.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine

from chatledger import Message, MessageTooLargeError
from chatledger.window import MessageWindow
from chatledger_sql import SqlChatMemoryRepository
from chatledger_sql.rows import STATEMENT_OVERHEAD_BYTES
from tests.backends import backend_url
from tests.sql.conftest import unique_table


@pytest.fixture
def mariadb() -> Iterator[SqlChatMemoryRepository]:
    engine = create_engine(backend_url("mariadb"), pool_pre_ping=True)
    repository = SqlChatMemoryRepository(engine, table_name=unique_table())
    yield repository
    repository.drop_schema()
    engine.dispose()


def _limit(repository: SqlChatMemoryRepository) -> int:
    with repository.engine.connect() as connection:
        limit = connection.exec_driver_sql("SELECT @@max_allowed_packet").scalar()
    assert limit is not None
    return int(limit)


@pytest.mark.parametrize("how", ["append", "save_all"])
def test_mariadb_refuses_a_message_over_the_packet_limit_before_writing(
    mariadb: SqlChatMemoryRepository, how: str
) -> None:
    before = [Message.user("kept")]
    mariadb.save_all("c", before)
    # Quotes are escaped to two bytes on the wire: the estimate counts them.
    text = "'" * (_limit(mariadb) // 2)
    huge = Message.user(text)

    def write() -> None:
        if how == "append":
            mariadb.append_to_window("c", [huge], MessageWindow(10))
        else:
            mariadb.save_all("c", [*before, huge])

    with pytest.raises(MessageTooLargeError, match="max_allowed_packet"):
        write()
    assert [m.id for m in mariadb.find_by_conversation_id("c")] == [before[0].id]


def test_mariadb_stores_a_message_just_under_the_packet_limit(
    mariadb: SqlChatMemoryRepository,
) -> None:
    size = _limit(mariadb) - STATEMENT_OVERHEAD_BYTES - 64
    text = "x" * size
    mariadb.append_to_window("c", [Message.user(text)], MessageWindow(10))
    assert mariadb.find_by_conversation_id("c")[0].content == text
