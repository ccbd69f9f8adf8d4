"""Column types shared by every dialect: a UTC timestamp with microseconds.

Example:
    from sqlalchemy import Column
    from chatledger_sql.types import UtcDateTime

    Column("created_at", UtcDateTime(), nullable=False)

Databases disagree on time zones: PostgreSQL keeps an instant, MySQL, SQL
Server, Oracle, SQLite and DuckDB keep a wall-clock value. The type below always
writes UTC and always reads back a timezone-aware UTC ``datetime``, whatever the
column underneath.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy.engine import Dialect
from sqlalchemy.types import DateTime, TypeDecorator, TypeEngine

__all__ = ["UtcDateTime"]


class UtcDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC ``datetime`` stored in a dialect-chosen column.

    Args:
        column_type: The column type to store into (for example
            ``DATETIME(fsp=6)`` on MySQL). It is naive (wall-clock UTC) unless
            ``aware`` is true.
        aware: The column keeps an instant (``TIMESTAMP WITH TIME ZONE``).
    """

    impl = DateTime
    cache_ok = True

    def __init__(
        self, column_type: TypeEngine[Any] | None = None, *, aware: bool = False
    ) -> None:
        """Store into ``column_type`` (a plain ``DateTime`` by default)."""
        super().__init__()
        self.column_type = column_type
        self.aware = aware

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        """Use the dialect-chosen column type."""
        if self.column_type is None:
            return dialect.type_descriptor(DateTime(timezone=self.aware))
        return dialect.type_descriptor(self.column_type)

    def process_bind_param(
        self, value: datetime | None, dialect: Dialect
    ) -> datetime | None:
        """Normalise to UTC; drop the zone for wall-clock columns."""
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("UtcDateTime needs a timezone-aware datetime")
        value = value.astimezone(UTC)
        return value if self.aware else value.replace(tzinfo=None)

    def process_result_value(
        self, value: datetime | None, dialect: Dialect
    ) -> datetime | None:
        """Read back a timezone-aware UTC ``datetime``."""
        if value is None:
            return None
        if isinstance(value, str):  # SQLite, when read through a raw column
            value = datetime.fromisoformat(value)
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)
