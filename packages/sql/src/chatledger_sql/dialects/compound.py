"""Several statements in one round trip: MariaDB's ``BEGIN NOT ATOMIC ... END``.

Example (needs a MariaDB server):
    block = CompoundStatement(engine.dialect, [upsert, read])
    row = connection.exec_driver_sql(block.sql, block.parameters(values)).one()

MariaDB runs a compound statement sent as one query (no multi-statement
client flag needed) and answers with the result set of a ``SELECT`` inside
it, if any. Each statement in it is still atomic on its own, not the block:
a failing statement leaves the ones before it done, in the transaction the
caller then rolls back, exactly as if they had been sent one by one.

The statements are SQLAlchemy constructs compiled once for the engine's
dialect (a ``pyformat`` driver such as PyMySQL). Their bound parameters keep
their names, so a name used by several statements (``cid``) takes one value;
constants SQLAlchemy would bind (``'system'``, ``version + 1``) come along,
and values go through their column types' bind processing, as through
SQLAlchemy.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy.engine import Dialect
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.elements import ClauseElement

__all__ = ["CompoundStatement"]


class CompoundStatement:
    """Statements compiled for one dialect, sent as one compound statement.

    Args:
        dialect: The engine's SQLAlchemy dialect (its paramstyle must be
            ``pyformat``).
        statements: The statements, in order.

    Raises:
        ValueError: two statements bind one constant name to different values.
    """

    __slots__ = ("_constants", "_processors", "sql")

    def __init__(self, dialect: Dialect, statements: Sequence[ClauseElement]) -> None:
        """Compile ``statements`` for ``dialect``."""
        if dialect.paramstyle != "pyformat":
            raise ValueError(f"needs a pyformat driver, not {dialect.paramstyle!r}")
        parts: list[str] = []
        constants: dict[str, Any] = {}
        processors: dict[str, Callable[[Any], Any]] = {}
        for statement in statements:
            compiled = statement.compile(dialect=dialect)
            assert isinstance(compiled, SQLCompiler)
            parts.append(str(compiled))
            for name, bind in compiled.binds.items():
                processor = bind.type.bind_processor(dialect)
                if processor is not None:
                    processors[name] = processor
                if bind.required:
                    continue
                value = bind.effective_value
                if processor is not None:
                    value = processor(value)
                if name in constants and constants[name] != value:
                    raise ValueError(f"bound parameter {name!r} has two values")
                constants[name] = value
        #: The compound statement's text, for ``exec_driver_sql``.
        self.sql = "BEGIN NOT ATOMIC " + "; ".join(parts) + "; END"
        self._constants = constants
        self._processors = processors

    def parameters(self, values: dict[str, Any]) -> dict[str, Any]:
        """The driver's parameters: the constants, then ``values`` processed."""
        parameters = dict(self._constants)
        processors = self._processors
        for name, value in values.items():
            processor = processors.get(name)
            parameters[name] = value if processor is None else processor(value)
        return parameters
