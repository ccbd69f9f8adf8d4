"""Oracle Database: ``CLOB``, ``FOR UPDATE`` and DDL that tolerates ORA-00955.

Example (needs an Oracle server):
    from chatledger_sql import SqlChatMemoryRepository

    repository = SqlChatMemoryRepository.from_url(
        "oracle+oracledb://user:pass@host:1521/?service_name=FREEPDB1"
    )

Oracle before 23ai has no ``CREATE TABLE IF NOT EXISTS``, so each table is
created by a PL/SQL block that runs the DDL and ignores only ORA-00955 (name
already used), which makes it idempotent and safe when two processes race.
Oracle stores ``''`` as ``NULL``; the repository keeps empty text in the JSON
payload, so ``""`` and ``None`` stay apart.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy import TIMESTAMP, String, exc
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.schema import CreateTable, ExecutableDDLElement
from sqlalchemy.types import TypeEngine

from chatledger_sql.dialects.base import SqlDialect
from chatledger_sql.types import UtcDateTime

if TYPE_CHECKING:
    from sqlalchemy import Table
    from sqlalchemy.sql.compiler import DDLCompiler

__all__ = ["OracleCreateTable", "OracleDialect"]

# ORA-00060 deadlock, ORA-08177 cannot serialize
_RETRYABLE = (60, 8177)
# ORA-00955 name already used, ORA-01408 column list already indexed, ORA-01430
# column already added (by a racing creator).
_EXISTS = (955, 1408, 1430)


def _ora_code(error: exc.DBAPIError) -> int | None:
    args = getattr(error.orig, "args", ())
    code = getattr(args[0], "code", None) if args else None
    return code if isinstance(code, int) else None


class OracleCreateTable(ExecutableDDLElement):
    """``CREATE TABLE`` in a PL/SQL block that ignores ORA-00955."""

    inherit_cache = False

    def __init__(self, table: Table) -> None:
        """Guard the creation of ``table``."""
        self.table = table


@compiles(OracleCreateTable)
def _compile_create(
    element: OracleCreateTable, compiler: DDLCompiler, **kw: Any
) -> str:
    create = compiler.process(CreateTable(element.table), **kw)
    literal = compiler.sql_compiler.render_literal_value(create, String())
    return (
        "BEGIN\n"
        f"  EXECUTE IMMEDIATE {literal};\n"
        "EXCEPTION\n"
        "  WHEN OTHERS THEN\n"
        "    IF SQLCODE != -955 THEN RAISE; END IF;\n"
        "END;"
    )


class OracleDialect(SqlDialect):
    """Oracle Database 19c and later, through ``oracledb``."""

    name = "oracle"

    def timestamp_type(self) -> TypeEngine[Any]:
        """``TIMESTAMP`` (6 fractional digits) holding UTC."""
        return UtcDateTime(TIMESTAMP())

    def create_statements(self, tables: list[Table]) -> list[ExecutableDDLElement]:
        """``CREATE TABLE`` inside a block that ignores ORA-00955."""
        return [OracleCreateTable(table) for table in tables]

    #: Oracle's form.
    add_column_template = "ALTER TABLE {table} ADD ({column} {type})"

    def is_already_exists(self, error: exc.DBAPIError) -> bool:
        """ORA-00955."""
        return _ora_code(error) in _EXISTS or "ora-00955" in str(error.orig).lower()

    def is_retryable(self, error: exc.DBAPIError) -> bool:
        """ORA-00060 (deadlock) or ORA-08177 (cannot serialize)."""
        text = str(error.orig).lower()
        return (
            _ora_code(error) in _RETRYABLE or "ora-00060" in text or "ora-08177" in text
        )
