"""Spring AI's JDBC table moves in: its own DDL, rows as its repository writes them.

The DDL is Spring AI 2.0's ``schema-<platform>.sql`` for each database
(``schema-postgresql.sql``, ``schema-mariadb.sql``, ``schema-sqlite.sql``),
the rows what ``saveAll`` inserts: ``sequence_id`` the index in the batch and
``timestamp`` the message's ``Instant`` through ``setTimestamp``, which
PostgreSQL keeps as the JVM's wall time (a ``TIMESTAMP`` without zone),
MariaDB as an instant (a ``TIMESTAMP``, here written from a session at
+05:00) and sqlite-jdbc as milliseconds since the epoch.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from chatledger import Role
from tests.move_in.conftest import Run, Source, conversation_ids, sqlalchemy, stored

#: The zone of the JVM that wrote the PostgreSQL rows.
JVM_ZONE = "Europe/Rome"

_DDL = {
    "postgresql": """
CREATE TABLE IF NOT EXISTS {t} (
    conversation_id VARCHAR(36) NOT NULL,
    content TEXT NOT NULL,
    type VARCHAR(10) NOT NULL CHECK (type IN ('USER', 'ASSISTANT', 'SYSTEM', 'TOOL')),
    "timestamp" TIMESTAMP NOT NULL,
    sequence_id BIGINT NOT NULL
    );
CREATE INDEX IF NOT EXISTS {t}_CONVERSATION_ID_TIMESTAMP_IDX
ON {t}(conversation_id, "timestamp");
CREATE INDEX IF NOT EXISTS {t}_CONVERSATION_ID_SEQUENCE_ID_IDX
ON {t}(conversation_id, sequence_id);
""",
    "mariadb": """
CREATE TABLE IF NOT EXISTS {t} (
    conversation_id VARCHAR(36) NOT NULL,
    content TEXT NOT NULL,
    type VARCHAR(10) NOT NULL,
    `timestamp` TIMESTAMP NOT NULL,
    sequence_id BIGINT NOT NULL,
    CONSTRAINT TYPE_CHECK CHECK (type IN ('USER', 'ASSISTANT', 'SYSTEM', 'TOOL'))
);
CREATE INDEX IF NOT EXISTS {t}_CONVERSATION_ID_TIMESTAMP_IDX
ON {t}(conversation_id, `timestamp`);
CREATE INDEX IF NOT EXISTS {t}_CONVERSATION_ID_SEQUENCE_ID_IDX
ON {t}(conversation_id, sequence_id);
""",
    "sqlite": """
CREATE TABLE IF NOT EXISTS {t} (
    conversation_id TEXT NOT NULL,
    content TEXT NOT NULL,
    type TEXT NOT NULL,
    timestamp INTEGER NOT NULL,
    sequence_id INTEGER NOT NULL,
    CHECK (type IN ('USER', 'ASSISTANT', 'SYSTEM', 'TOOL'))
);
CREATE INDEX IF NOT EXISTS {t}_CONVERSATION_ID_TIMESTAMP_IDX
ON {t}(conversation_id, timestamp);
CREATE INDEX IF NOT EXISTS {t}_CONVERSATION_ID_SEQUENCE_ID_IDX
ON {t}(conversation_id, sequence_id);
""",
}

#: Spring AI 1.x's SQLite table: no sequence_id, the order is the timestamp's.
_DDL_1X = """
CREATE TABLE {t} (
    conversation_id TEXT NOT NULL,
    content TEXT NOT NULL,
    type TEXT NOT NULL,
    timestamp INTEGER NOT NULL
);
"""

START = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)

Row = tuple[str, str, str, datetime, int]


def save_all(conversation_id: str, turns: list[tuple[str, str]]) -> list[Row]:
    """The rows ``saveAll`` inserts: one per message, in batch order."""
    return [
        (conversation_id, content, kind, START + timedelta(seconds=7 * i), i)
        for i, (kind, content) in enumerate(turns)
    ]


def write_spring(
    source: Source, table: str, rows: list[Row], *, ddl: str | None = None
) -> None:
    """Create the table with Spring's DDL; insert ``rows`` as its JDBC driver does."""
    engine = sqlalchemy.create_engine(source.url)
    quote = engine.dialect.identifier_preparer.quote
    stamp = quote("timestamp")
    with engine.begin() as connection:
        for statement in (ddl or _DDL[source.name]).format(t=table).split(";"):
            if statement.strip():
                connection.exec_driver_sql(statement)
        if source.name == "mariadb":
            connection.exec_driver_sql("SET time_zone = '+05:00'")
        with_sequence = ddl is None
        shuffled = list(rows)
        random.Random(7).shuffle(shuffled)  # stored out of order: the order is read
        for cid, content, kind, instant, sequence in shuffled:
            value: Any
            if source.name == "sqlite":
                value = int(instant.timestamp() * 1000)
            elif source.name == "postgresql":
                value = instant.astimezone(ZoneInfo(JVM_ZONE)).replace(tzinfo=None)
            else:
                at_plus_five = instant.astimezone(UTC) + timedelta(hours=5)
                value = at_plus_five.replace(tzinfo=None)
            columns = f"conversation_id, content, type, {stamp}"
            values = [cid, content, kind, value]
            if with_sequence:
                columns += ", sequence_id"
                values.append(sequence)
            marks = ", ".join(["%s" if source.name != "sqlite" else "?"] * len(values))
            connection.exec_driver_sql(
                f"INSERT INTO {quote(table)} ({columns}) VALUES ({marks})",
                tuple(values),
            )
    engine.dispose()


def _move(chatledger: Any, source: Source, table: str, target: str, *more: str) -> Run:
    named = [] if table == "SPRING_AI_CHAT_MEMORY" else ["--table", table]
    run: Run = chatledger(
        "import", "--from", "spring-ai-jdbc", source.url, target, *named,
        "--source-timezone", JVM_ZONE, "--no-progress", *more,
    )  # fmt: skip
    return run


CHAT = [
    ("USER", "What is the weather in Rome?"),
    ("ASSISTANT", "Sunny, 24 °C."),
    ("USER", "And tomorrow?"),
    ("ASSISTANT", "Rain."),
]
WITH_SYSTEM = [("SYSTEM", "Be brief."), ("USER", "Hi"), ("ASSISTANT", "Hello!")]
LEGACY_TOOL = [("USER", "Weather?"), ("TOOL", ""), ("ASSISTANT", "24 °C")]


def test_every_conversation_moves_in_whole_and_in_order(
    chatledger: Any, source: Source, target: str
) -> None:
    table = (
        "SPRING_AI_CHAT_MEMORY"
        if source.name == "sqlite"
        else source.table("spring_ai_chat_memory")
    )
    rows = save_all("c1", CHAT) + save_all("c2", WITH_SYSTEM)
    rows += save_all("c3", LEGACY_TOOL)
    write_spring(source, table, rows)

    done = _move(chatledger, source, table, target)

    assert done.code == 1
    assert "imported 7 messages in 2 conversations" in done.out
    assert "conversation 'c3': not imported: 1 row cannot be carried" in done.err
    assert "row 2 (sequence_id 1): a TOOL row" in done.err
    assert conversation_ids(target) == ["c1", "c2"]
    for cid, turns in [("c1", CHAT), ("c2", WITH_SYSTEM)]:
        messages = stored(target, cid)
        assert [(m.role.value.upper(), m.content) for m in messages] == turns
        assert [m.created_at for m in messages] == [
            START + timedelta(seconds=7 * i) for i in range(len(turns))
        ]

    again = _move(chatledger, source, table, target)
    assert again.code == 1
    assert "imported 0 messages in 0 conversations" in again.out
    assert "2 conversations already there" in again.out
    assert [len(stored(target, c)) for c in ("c1", "c2", "c3")] == [4, 3, 0]

    dropped = _move(chatledger, source, table, target, "--drop-uncarriable")
    assert dropped.code == 1
    assert "conversation 'c3': imported, 1 row left out:" in dropped.err
    assert [(m.role, m.content) for m in stored(target, "c3")] == [
        (Role.USER, "Weather?"),
        (Role.ASSISTANT, "24 °C"),
    ]


def test_a_1x_sqlite_table_is_read_in_timestamp_order(
    chatledger: Any, tmp_path: Path, target: str
) -> None:
    source = Source("sqlite", f"sqlite:///{tmp_path / 'spring.db'}")
    write_spring(source, "SPRING_AI_CHAT_MEMORY", save_all("old", CHAT), ddl=_DDL_1X)
    done = _move(chatledger, source, "SPRING_AI_CHAT_MEMORY", target)
    assert done.code == 0, done.err
    assert [m.content for m in stored(target, "old")] == [c for _, c in CHAT]


def test_sqlite_re_runs_add_new_turns_and_report_a_renumbered_conversation(
    chatledger: Any, tmp_path: Path, target: str
) -> None:
    source = Source("sqlite", f"sqlite:///{tmp_path / 'spring.db'}")
    table = "SPRING_AI_CHAT_MEMORY"
    write_spring(source, table, save_all("c1", CHAT[:2]))
    assert _move(chatledger, source, table, target).code == 0
    first = [m.id for m in stored(target, "c1")]

    # saveAll replaces the conversation: the same two rows and two new ones.
    engine = sqlalchemy.create_engine(source.url)
    with engine.begin() as connection:
        connection.exec_driver_sql(f"DELETE FROM {table}")
    engine.dispose()
    write_spring(source, table, save_all("c1", CHAT))
    grown = _move(chatledger, source, table, target)
    assert grown.code == 0, grown.err
    assert "imported 2 messages in 1 conversation" in grown.out
    assert [m.id for m in stored(target, "c1")][:2] == first
    assert [m.content for m in stored(target, "c1")] == [c for _, c in CHAT]

    # The window dropped the first turn: every row moved up by two.
    with engine.begin() as connection:
        connection.exec_driver_sql(f"DELETE FROM {table}")
    engine.dispose()
    write_spring(source, table, save_all("c1", [*CHAT[2:], ("USER", "Thanks")]))
    shifted = _move(chatledger, source, table, target)
    assert shifted.code == 1
    assert "conversation 'c1': not imported: the target's conversation holds" in (
        shifted.err
    )
    assert len(stored(target, "c1")) == 4
