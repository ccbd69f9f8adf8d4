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
dialect: a ``pyformat`` driver such as PyMySQL, or a ``format`` one such as
the async asyncmy and aiomysql, whose parameters go by position. Their bound
parameters keep their names, so a name used by several statements (``cid``)
takes one value;
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

__all__ = ["PARAMSTYLES", "CompoundStatement"]

#: The drivers' parameter styles a compound statement can be sent in.
PARAMSTYLES = ("pyformat", "format")


class CompoundStatement:
    """Statements compiled for one dialect, sent as one compound statement.

    Args:
        dialect: The engine's SQLAlchemy dialect (its paramstyle must be
            ``pyformat`` or ``format``).
        statements: The statements, in order.

    Raises:
        ValueError: two statements bind one constant name to different values.
    """

    __slots__ = ("_constants", "_order", "_processors", "sql")

    def __init__(self, dialect: Dialect, statements: Sequence[ClauseElement]) -> None:
        """Compile ``statements`` for ``dialect``."""
        if dialect.paramstyle not in PARAMSTYLES:
            raise ValueError(
                f"needs a pyformat or format driver, not {dialect.paramstyle!r}"
            )
        #: The parameters' names in placeholder order (``format``), or None.
        self._order: list[str] | None = [] if dialect.paramstyle == "format" else None
        parts: list[str] = []
        constants: dict[str, Any] = {}
        processors: dict[str, Callable[[Any], Any]] = {}
        for statement in statements:
            compiled = statement.compile(dialect=dialect)
            assert isinstance(compiled, SQLCompiler)
            parts.append(str(compiled))
            if self._order is not None:
                assert compiled.positiontup is not None
                self._order.extend(compiled.positiontup)
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

    def parameters(self, values: dict[str, Any]) -> dict[str, Any] | tuple[Any, ...]:
        """The driver's parameters: the constants, then ``values`` processed;
        by name, or in placeholder order for a ``format`` driver."""
        parameters = dict(self._constants)
        processors = self._processors
        for name, value in values.items():
            processor = processors.get(name)
            parameters[name] = value if processor is None else processor(value)
        if self._order is None:
            return parameters
        return tuple([parameters[name] for name in self._order])
