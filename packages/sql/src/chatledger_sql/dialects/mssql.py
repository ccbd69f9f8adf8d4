"""Microsoft SQL Server: ``UPDLOCK, HOLDLOCK`` and guarded DDL.

Example (needs a SQL Server):
    from chatledger_sql import SqlChatMemoryRepository

    repository = SqlChatMemoryRepository.from_url(
        "mssql+pyodbc://user:pass@host/db?driver=ODBC+Driver+18+for+SQL+Server"
    )

The locking read takes an update lock on the conversation row, or a key-range
lock where it is missing, so two creators of one conversation queue instead of
both inserting. ``CREATE TABLE`` runs under ``IF OBJECT_ID(...) IS NULL``; a
creator that loses the race to another process gets error 2714, which is
ignored. Ids use a binary collation, as the default collations ignore case.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy import Select, String, exc
from sqlalchemy.dialects.mssql import DATETIME2, NVARCHAR
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.schema import CreateTable, ExecutableDDLElement
from sqlalchemy.types import TypeEngine

from chatledger_sql.dialects.base import SqlDialect
from chatledger_sql.types import UtcDateTime

if TYPE_CHECKING:
    from sqlalchemy import Table
    from sqlalchemy.sql.compiler import DDLCompiler

__all__ = ["SQLServerCreateTable", "SQLServerDialect"]

# 1205 deadlock victim (SQLSTATE 40001)
_RETRYABLE = ("40001", "1205")
# 2714 object exists, 1913 index exists, 2705 column exists (a racing creator)
_EXISTS = ("2714", "1913", "2705", "already an object")


class SQLServerCreateTable(ExecutableDDLElement):
    """``IF OBJECT_ID(N'<table>', N'U') IS NULL CREATE TABLE ...``."""

    inherit_cache = False

    def __init__(self, table: Table) -> None:
        """Guard the creation of ``table``."""
        self.table = table


@compiles(SQLServerCreateTable)
def _compile_create(
    element: SQLServerCreateTable, compiler: DDLCompiler, **kw: Any
) -> str:
    name = compiler.preparer.format_table(element.table)
    literal = compiler.sql_compiler.render_literal_value(name, String())
    create = compiler.process(CreateTable(element.table), **kw)
    return f"IF OBJECT_ID(N{literal}, N'U') IS NULL\n{create}"


class SQLServerDialect(SqlDialect):
    """SQL Server 2017 and later, Azure SQL."""

    name = "mssql"
    #: Binary collation: ids compare exactly, case and accents included.
    id_collation = "Latin1_General_100_BIN2"

    def id_type(self) -> TypeEngine[Any]:
        """``NVARCHAR(255)`` with a binary collation."""
        return NVARCHAR(255, collation=self.id_collation)

    def role_type(self) -> TypeEngine[Any]:
        """``NVARCHAR(16)``."""
        return NVARCHAR(16, collation=self.id_collation)

    def text_type(self) -> TypeEngine[Any]:
        """``NVARCHAR(max)`` (up to 2 GB), never the deprecated ``NTEXT``."""
        return NVARCHAR()

    def timestamp_type(self) -> TypeEngine[Any]:
        """``DATETIME2(6)`` holding UTC."""
        return UtcDateTime(DATETIME2(precision=6))  # type: ignore[no-untyped-call]

    def id_pair_key_options(self) -> dict[str, Any]:
        """A nonclustered key: two ``NVARCHAR(255)`` take 1020 bytes, past the
        900 a clustered index key may have (a nonclustered one: 1700)."""
        return {"mssql_clustered": False}

    def create_statements(self, tables: list[Table]) -> list[ExecutableDDLElement]:
        """``CREATE TABLE`` guarded by ``OBJECT_ID``."""
        return [SQLServerCreateTable(table) for table in tables]

    #: SQL Server has no ``COLUMN`` keyword there.
    add_column_template = "ALTER TABLE {table} ADD {column} {type}"

    def is_already_exists(self, error: exc.DBAPIError) -> bool:
        """Error 2714 (a concurrent creator won)."""
        text = str(error.orig)
        return any(code in text for code in _EXISTS)

    def is_retryable(self, error: exc.DBAPIError) -> bool:
        """Chosen as a deadlock victim."""
        args = getattr(error.orig, "args", ())
        state = args[0] if args else ""
        text = str(error.orig)
        return state in _RETRYABLE or "deadlock" in text.lower()

    def lock_rows(self, statement: Select[Any], table: Table) -> Select[Any]:
        """``WITH (UPDLOCK, HOLDLOCK)``: lock the row, or the key range if missing."""
        return statement.with_hint(table, "WITH (UPDLOCK, HOLDLOCK)", "mssql")
