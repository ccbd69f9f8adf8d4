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
dialect (:class:`chatledger_sql.compiled.CompiledStatement`): a ``pyformat``
driver such as PyMySQL, or a ``format`` one such as the async asyncmy and
aiomysql, whose parameters go by position.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.engine import Dialect
from sqlalchemy.sql.elements import ClauseElement

from chatledger_sql.compiled import CompiledStatement

__all__ = ["PARAMSTYLES", "CompoundStatement"]

#: The drivers' parameter styles a compound statement can be sent in.
PARAMSTYLES = ("pyformat", "format")


class CompoundStatement(CompiledStatement):
    """Statements compiled for one dialect, sent as one compound statement.

    Args:
        dialect: The engine's SQLAlchemy dialect (its paramstyle must be
            ``pyformat`` or ``format``).
        statements: The statements, in order.

    Raises:
        ValueError: two statements bind one constant name to different values.
    """

    __slots__ = ()

    def __init__(self, dialect: Dialect, statements: Sequence[ClauseElement]) -> None:
        """Compile ``statements`` for ``dialect``."""
        super().__init__(dialect, statements, PARAMSTYLES)
        self.sql = "BEGIN NOT ATOMIC " + "; ".join(self.parts) + "; END"
