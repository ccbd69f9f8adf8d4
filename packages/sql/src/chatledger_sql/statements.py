"""Every SQL statement the repository runs, built once per repository.

Example:
    statements = Statements(tables, dialect)
    connection.execute(statements.read, {"cid": "c1"})

Statements are SQLAlchemy Core constructs with bound parameters, built once, so
SQLAlchemy caches their compiled form (and drivers that prepare statements,
such as psycopg, reuse their plans). Tests compile them with every SQLAlchemy
dialect to check the SQL each database gets.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    Delete,
    Insert,
    Select,
    Update,
    bindparam,
    delete,
    insert,
    select,
    update,
)

from chatledger.messages import Role

if TYPE_CHECKING:
    from chatledger_sql.dialects.base import SqlDialect
    from chatledger_sql.schema import Tables

__all__ = ["Statements"]

SYSTEM = Role.SYSTEM.value


class Statements:
    """The statements of one repository (tables plus dialect).

    Bound parameters: ``cid`` (conversation id), ``now``, ``ids`` (message
    ids, expanding), ``after`` (a sequence number), ``upto`` (the last sequence
    number to evict) and the ``p_*`` values of the conversation update.
    """

    def __init__(self, tables: Tables, dialect: SqlDialect) -> None:
        """Build every statement for ``tables`` as ``dialect`` wants them."""
        m = tables.messages.c
        c = tables.conversations.c
        cid: Any = bindparam("cid")
        self.tables = tables
        message_columns = (m.message_id, m.role, m.content, m.payload, m.created_at)
        state_columns = (
            c.next_seq,
            c.system_count,
            c.other_count,
            c.weight_counter,
            c.system_weight,
            c.other_weight,
        )
        self.state_columns = state_columns

        #: One ordered query over the primary key: the whole conversation.
        self.read: Select[Any] = (
            select(*message_columns).where(m.conversation_id == cid).order_by(m.seq)
        )
        self.list_ids: Select[Any] = select(c.conversation_id).where(
            c.system_count + c.other_count > 0
        )
        self.lock_select: Select[Any] = dialect.lock_rows(
            select(*state_columns).where(c.conversation_id == cid),
            tables.conversations,
        )
        self.insert_conversation: Insert = insert(tables.conversations).values(
            conversation_id=cid,
            next_seq=0,
            version=0,
            system_count=0,
            other_count=0,
            weight_counter=None,
            system_weight=0,
            other_weight=0,
            updated_at=bindparam("now"),
            expires_at=None,
        )
        self.known_ids: Select[Any] = select(m.message_id).where(
            m.conversation_id == cid, m.message_id.in_(bindparam("ids", expanding=True))
        )
        self.system_rows: Select[Any] = (
            select(*message_columns)
            .where(m.conversation_id == cid, m.role == SYSTEM)
            .order_by(m.seq)
        )
        #: The oldest non-system rows after ``after``; the caller adds a limit.
        self.oldest: Select[Any] = (
            select(m.seq, m.message_id, m.role, m.weight)
            .where(
                m.conversation_id == cid,
                m.role != SYSTEM,
                m.seq > bindparam("after"),
            )
            .order_by(m.seq)
        )
        self.all_rows: Select[Any] = (
            select(m.seq, *message_columns)
            .where(m.conversation_id == cid)
            .order_by(m.seq)
        )
        self.set_weight: Update = (
            update(tables.messages)
            .where(m.conversation_id == cid, m.seq == bindparam("p_seq"))
            .values(weight=bindparam("p_weight"))
        )
        self.insert_messages: Insert = insert(tables.messages)
        self.delete_system: Delete = delete(tables.messages).where(
            m.conversation_id == cid, m.role == SYSTEM
        )
        self.delete_oldest: Delete = delete(tables.messages).where(
            m.conversation_id == cid,
            m.role != SYSTEM,
            m.seq <= bindparam("upto"),
        )
        self.delete_messages: Delete = delete(tables.messages).where(
            m.conversation_id == cid
        )
        self.delete_conversation: Delete = delete(tables.conversations).where(
            c.conversation_id == cid
        )
        self.update_conversation: Update = (
            update(tables.conversations)
            .where(c.conversation_id == cid)
            .values(
                next_seq=bindparam("p_next_seq"),
                version=c.version + 1,
                system_count=bindparam("p_system_count"),
                other_count=bindparam("p_other_count"),
                weight_counter=bindparam("p_weight_counter"),
                system_weight=bindparam("p_system_weight"),
                other_weight=bindparam("p_other_weight"),
                updated_at=bindparam("now"),
                expires_at=bindparam("p_expires_at"),
            )
        )

        #: The dialect's single-statement lock-or-create, if it has one.
        self.upsert_conversation: Any = dialect.upsert_conversation(self)

    def all(self) -> dict[str, Any]:
        """Every statement by name (tests compile them all)."""
        return {
            name: value
            for name, value in vars(self).items()
            if name not in ("tables", "state_columns") and value is not None
        }
