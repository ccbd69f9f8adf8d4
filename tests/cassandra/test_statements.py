"""The CQL text of every statement the repository prepares (no server)."""

from __future__ import annotations

import re

import pytest

from chatledger import InvalidNameError
from chatledger_cassandra.statements import (
    ADDED_COLUMNS,
    LANE_EVICTED,
    LANE_IDS,
    LANE_OTHER,
    LANE_SYSTEM,
    Statements,
    create_keyspace,
)

CQL = Statements("chat_ks", "mem")
TABLE = '"chat_ks"."mem"'


def test_cassandra_table_is_one_partition_per_conversation() -> None:
    ddl = CQL.create_table
    assert ddl.startswith(f"CREATE TABLE IF NOT EXISTS {TABLE} (")
    assert "PRIMARY KEY ((conversation_id), lane, seq)" in ddl
    assert "next_seq bigint static" in ddl
    assert "emptied boolean static" in ddl
    assert "CLUSTERING ORDER BY (lane ASC, seq ASC)" in ddl


def test_cassandra_keyspace_is_created_only_if_missing() -> None:
    ddl = create_keyspace(
        "chat_ks", {"class": "NetworkTopologyStrategy", "dc1": 3, "dc2": 2}
    )
    assert ddl == (
        'CREATE KEYSPACE IF NOT EXISTS "chat_ks" WITH replication = '
        "{'class': 'NetworkTopologyStrategy', 'dc1': '3', 'dc2': '2'}"
    )
    with pytest.raises(InvalidNameError):
        create_keyspace("Bad", {"class": "SimpleStrategy", "replication_factor": 1})


def test_cassandra_names_are_validated_by_statements() -> None:
    with pytest.raises(InvalidNameError):
        Statements("ks", 'mem"; DROP TABLE x; --')
    with pytest.raises(InvalidNameError):
        Statements("ks ks", "mem")


@pytest.mark.parametrize("name", sorted(Statements("chat_ks", "mem").prepared()))
def test_cassandra_statements_bind_every_value(name: str) -> None:
    text = CQL.prepared()[name]
    assert TABLE in text or CQL.listing in text
    # No literal besides the documented conditions and LIMIT: values are markers.
    without_conditions = (
        text.replace("IF next_seq = null", "")
        .replace("IF next_seq >= 0", "")
        .replace("LIMIT 1", "")
    )
    assert not re.search(r"'|\d", without_conditions.replace(TABLE, ""))


def test_cassandra_every_write_carries_ttl_or_is_a_delete() -> None:
    for name in ("start", "advance", "insert", "insert_evicted", "mark", "insert_id"):
        assert "USING TTL ?" in CQL.prepared()[name]


def test_cassandra_every_conversation_write_is_conditional() -> None:
    assert CQL.start.endswith("IF next_seq = null")
    assert CQL.advance.endswith("IF next_seq = ?")
    assert CQL.delete_version.endswith("IF next_seq = ?")
    assert CQL.delete_any.endswith("IF next_seq >= 0")


def test_cassandra_conditional_deletes_touch_only_the_static_column() -> None:
    # Cassandra refuses a condition on a delete of whole rows or partitions.
    for name in ("delete_version", "delete_any"):
        assert CQL.prepared()[name].startswith(f"DELETE next_seq FROM {TABLE} ")
    assert CQL.delete_partition == f"DELETE FROM {TABLE} WHERE conversation_id = ?"


def test_cassandra_eviction_is_a_range_delete_within_one_lane() -> None:
    assert CQL.delete_before == (
        f"DELETE FROM {TABLE} WHERE conversation_id = ? AND lane = ? AND seq < ?"
    )


def test_cassandra_listing_is_distinct_partition_keys() -> None:
    assert CQL.list_ids == f"SELECT DISTINCT conversation_id, emptied FROM {TABLE}"
    for name in ("first_ids_page", "ids_page_after"):
        assert CQL.prepared()[name].startswith("SELECT DISTINCT conversation_id, ")
        assert "emptied FROM" in CQL.prepared()[name]


def test_cassandra_message_reads_and_counts_leave_the_record_out() -> None:
    # Bound with LANE_EVICTED: the lanes of messages are all below it.
    assert CQL.select_messages.endswith("WHERE conversation_id = ? AND lane < ?")
    assert CQL.count_messages.endswith("WHERE conversation_id = ? AND lane < ?")
    assert LANE_SYSTEM < LANE_EVICTED
    assert LANE_OTHER < LANE_EVICTED


def test_cassandra_record_row_holds_only_its_number_and_id() -> None:
    assert CQL.insert_evicted == (
        f"INSERT INTO {TABLE} (conversation_id, lane, seq, msg_id) "
        "VALUES (?, ?, ?, ?) USING TTL ?"
    )
    assert "SET next_seq = ?, emptied = ?" in CQL.start
    assert "SET next_seq = ?, emptied = ?" in CQL.advance


def test_cassandra_reads_are_single_partition() -> None:
    for name in ("select_messages", "select_index", "select_full", "select_lane"):
        assert "WHERE conversation_id = ?" in CQL.prepared()[name]
    assert "payload" not in CQL.select_index
    assert "AND lane = ?" in CQL.select_lane


def test_cassandra_log_reads_the_newest_rows_in_clustering_order() -> None:
    # Backwards through the clustering order, bounded: never the whole log.
    for name in ("select_newest", "select_before"):
        text = CQL.prepared()[name]
        assert text.endswith("ORDER BY lane DESC, seq DESC LIMIT ?")
    assert "AND lane < ?" in CQL.select_newest
    assert "AND lane = ? AND seq < ?" in CQL.select_before
    assert CQL.select_after.endswith(
        "AND lane = ? AND seq > ? ORDER BY lane ASC, seq ASC LIMIT ?"
    )
    # Every read of the log says which version it saw.
    for name in ("select_newest", "select_before", "select_after", "select_from"):
        assert CQL.prepared()[name].startswith(
            "SELECT next_seq, system_batch, indexed, "
        )


def test_cassandra_id_index_rows_are_conditions_of_the_batch() -> None:
    assert CQL.insert_id == (
        f"INSERT INTO {TABLE} (conversation_id, lane, seq, msg_id) "
        "VALUES (?, ?, ?, ?) IF NOT EXISTS USING TTL ?"
    )
    assert CQL.select_slots.endswith("AND lane = ? AND seq IN ?")
    assert "USING TTL ?" in CQL.mark
    assert CQL.delete_lane == (
        f"DELETE FROM {TABLE} WHERE conversation_id = ? AND lane = ?"
    )
    assert LANE_EVICTED < LANE_IDS


def test_cassandra_older_tables_get_the_log_columns() -> None:
    ddl = CQL.create_table
    for name, kind in ADDED_COLUMNS.items():
        assert f"{name} {kind}" in ddl
        assert CQL.add_column(name) == f"ALTER TABLE {TABLE} ADD {name} {kind}"
    # The window append's reads leave the id index out.
    for name in ("select_index", "select_full"):
        assert CQL.prepared()[name].endswith("WHERE conversation_id = ? AND lane < ?")
