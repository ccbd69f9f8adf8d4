"""A statement MariaDB keeps parsed per connection: PREPARE once, EXECUTE after.

Example (needs a MariaDB server and PyMySQL):
    append = PreparedStatement(CompiledStatement(engine.dialect, [block]))
    rows = fetch_all(connection, append, values, autocommit=False, commits_itself=True)

MariaDB parses a compound statement (``BEGIN NOT ATOMIC ... END``) again every
time it is sent, and for the log append that parse is a good part of the
server's work. A prepared statement is parsed once per connection; ``EXECUTE
name USING value, ...`` (MariaDB 10.2 and later take any expression after
``USING``) then runs it, in one statement and one round trip, with the values
the client inlines exactly as it inlines them in the statement itself.

Which connection holds which statement is kept in the pool's record of the
DBAPI connection, so a statement is prepared on the first call on each
connection. A server that forgot it (a session reset) answers "unknown
statement" before running anything, and the statement is prepared again.
A server that refuses to prepare (``max_prepared_stmt_count`` reached) gets
the statement itself, as it would without this module, on that connection
from then on.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Generator, MutableMapping
from typing import Any

from chatledger_sql.compiled import CompiledStatement

__all__ = ["PreparedStatement"]

#: Where a DBAPI connection's record keeps its prepared statements' names.
_PREPARED = "chatledger.prepared"
#: Where it keeps the names the server refused to prepare.
_REFUSED = "chatledger.not_prepared"
#: ER_UNKNOWN_STMT_HANDLER, ER_NEED_REPREPARE: nothing ran; prepare again.
_FORGOTTEN = {1243, 1615}
#: ER_MAX_PREPARED_STMT_COUNT_REACHED, ER_UNSUPPORTED_PS: this connection
#: sends the statement itself from then on.
_REFUSING = {1461, 1295}
#: Error numbers from here on are the client's (a lost connection), not
#: the server's answer.
_CLIENT_ERRORS = 2000
#: A ``pyformat`` or ``format`` placeholder, or the escaped percent sign.
_PLACEHOLDER = re.compile(r"%\(\w+\)s|%s|%%")


class PreparedStatement(CompiledStatement):
    """A statement compiled for a ``pyformat`` driver, run through ``EXECUTE``.

    :attr:`sql` is the ``EXECUTE`` (what :meth:`send` normally sends), which
    binds the same values as the statement; :attr:`statement_sql` is the
    statement itself, sent where the server does not prepare it.

    Args:
        compiled: The statement, compiled for the engine's dialect (a
            :class:`chatledger_sql.dialects.compound.CompoundStatement`
            too), in the ``pyformat`` (PyMySQL) or ``format`` (asyncmy
            through SQLAlchemy) parameter style.
    """

    __slots__ = ("_preparable", "_prepare", "_prepare_values", "name", "statement_sql")

    def __init__(self, compiled: CompiledStatement) -> None:
        """Derive the ``PREPARE`` and the ``EXECUTE`` of ``compiled``."""
        # The compiled statement's values, bound the same way.
        self._order = compiled._order
        self._constants = compiled._constants
        self._processors = compiled._processors
        self.parts = compiled.parts
        self.statement_sql = compiled.sql
        used: list[str] = []

        def placeholder(match: re.Match[str]) -> str:
            if match.group(0) == "%%":
                return "%"
            used.append(match.group(0))
            return "?"

        text = _PLACEHOLDER.sub(placeholder, compiled.sql)
        # A question mark of the text's own would be taken for a
        # placeholder: such a statement is never prepared.
        self._preparable = "?" not in compiled.sql
        digest = hashlib.sha256(text.encode()).hexdigest()[:24]
        #: The name the statement is prepared under: its text's digest, so
        #: two repositories (other tables) never share one.
        self.name = f"chatledger_{digest}"
        # The same values as the statement's, in the same order: by name
        # (pyformat) or by position (format).
        self._prepare = f"PREPARE {self.name} FROM " + (
            "%s" if self._order is not None else "%(statement)s"
        )
        self._prepare_values: Any = (
            (text,) if self._order is not None else {"statement": text}
        )
        using = ", ".join(used)
        self.sql = f"EXECUTE {self.name}" + (f" USING {using}" if used else "")

    def steps(
        self, parameters: Any, kept: MutableMapping[Any, Any]
    ) -> Generator[tuple[str, Any], None, None]:
        """The statement, preparing it on this connection first.

        ``kept`` is the DBAPI connection's record (the pool's ``info``).
        """
        prepared: set[str] = kept.setdefault(_PREPARED, set())
        refused: set[str] = kept.setdefault(_REFUSED, set())
        if not self._preparable or self.name in refused:
            yield self.statement_sql, parameters
            return
        known = self.name in prepared
        if not known and not (yield from self._prepared(prepared, refused)):
            yield self.statement_sql, parameters
            return
        try:
            yield self.sql, parameters
        except Exception as error:
            if _errno(error) not in _FORGOTTEN:
                raise
            prepared.discard(self.name)
            if not (yield from self._prepared(prepared, refused)):
                yield self.statement_sql, parameters
                return
            yield self.sql, parameters

    def _prepared(
        self, prepared: set[str], refused: set[str]
    ) -> Generator[tuple[str, Any], None, bool]:
        """Prepare on the connection; whether the server did."""
        try:
            yield self._prepare, self._prepare_values
        except Exception as error:
            number = _errno(error)
            if number is None or number >= _CLIENT_ERRORS:
                raise  # the connection failed, not the statement
            if number in _REFUSING:
                refused.add(self.name)
            # Otherwise the statement itself fails the same way (a missing
            # table), and says so.
            return False
        prepared.add(self.name)
        return True


def _errno(error: BaseException) -> int | None:
    """The server's error number of a DBAPI error, if it has one."""
    args = getattr(error, "args", ())
    return args[0] if args and isinstance(args[0], int) else None
