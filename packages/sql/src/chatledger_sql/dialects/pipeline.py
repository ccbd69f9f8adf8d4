"""One PostgreSQL write transaction in two round trips: psycopg 3's pipeline mode.

The same on psycopg's sync and async connections: on an ``AsyncEngine`` the
dialect's steps run in SQLAlchemy's ``run_sync`` greenlet, and each call
into psycopg's ``AsyncConnection`` is awaited there as SQLAlchemy's own
async adaptation awaits its statements.

Example (needs a PostgreSQL server; what :class:`PostgresDialect` does):
    write = PipelinedWrite.start(connection)  # None: not psycopg 3, or no pipelines
    state = write.lock(lock_sql, parameters)  # BEGIN and the lock: one round trip
    write.send(append_sql, parameters)        # sent, its answer not awaited
    write.commit()                            # COMMIT: one wait for both answers
    write.finish()                            # or write.abort() after an error

Through SQLAlchemy every statement waits for its answer, and psycopg sends
``BEGIN`` and ``COMMIT`` as commands of their own, so an append took four
round trips. Here the raw driver connection is switched to autocommit (so
that psycopg adds no ``BEGIN`` of its own), ``BEGIN`` goes in one pipeline
with the lock statement, and the write in one pipeline with ``COMMIT``.
Statements run through SQLAlchemy in between still run in that transaction.
The write is on the wire, and runs on the server, before ``COMMIT`` is sent:
anything failing in between (an error, a dropped connection) leaves it
uncommitted, as before.

Driver errors are raised as SQLAlchemy's (``DBAPIError`` subclasses, with
``connection_invalidated`` set when the server dropped the connection), so
the repository retries them like those of any other statement.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sqlalchemy import exc, util

if TYPE_CHECKING:
    from sqlalchemy import Connection

__all__ = ["PipelinedWrite"]

_supported: dict[int, bool] = {}


#: Waits for an awaitable inside SQLAlchemy's greenlet (its name since 2.1).
_await: Callable[[Any], Any] = getattr(util, "await_", None) or util.await_only


def _no_wait(value: Any) -> Any:
    return value


def _pipelines(connection: Connection) -> bool:
    """True for psycopg 3 (sync or async) on a libpq with pipeline mode (14+)."""
    dialect = connection.dialect
    if dialect.driver != "psycopg":
        return False
    module = dialect.loaded_dbapi
    known = _supported.get(id(module))
    if known is None:
        pipeline = getattr(module, "Pipeline", None)
        known = _supported[id(module)] = bool(
            pipeline is not None and pipeline.is_supported()
        )
    return known


class PipelinedWrite:
    """One write transaction on psycopg's own connection, in pipelines.

    Made by :meth:`start` per write; the dialect keeps it for the duration
    of :meth:`~chatledger_sql.dialects.base.SqlDialect.writing`.
    """

    __slots__ = (
        "_async",
        "_connection",
        "_cursor",
        "_dbapi",
        "_errors",
        "_pipeline",
        "_transaction",
        "_transaction_type",
        "_wait",
        "began",
    )

    def __init__(self, connection: Connection, dbapi: Any) -> None:
        """Use ``dbapi`` (psycopg's connection behind ``connection``)."""
        self._connection = connection
        self._dbapi = dbapi
        module = connection.dialect.loaded_dbapi
        self._errors: type[Exception] = module.Error
        self._async = bool(connection.dialect.is_async)
        self._wait = _await if self._async else _no_wait
        self._transaction_type: Any = (
            module.AsyncTransaction if self._async else module.Transaction
        )
        self._cursor: Any = None
        self._pipeline: Any = None
        self._transaction: Any = None
        #: The transaction was begun here (the raw connection is in autocommit).
        self.began = False

    @classmethod
    def start(cls, connection: Connection) -> PipelinedWrite | None:
        """A pipelined write on ``connection``, or ``None`` when it cannot have one.

        Only for psycopg 3 with pipeline mode, on a connection in no
        transaction and not in autocommit.
        """
        if not _pipelines(connection):
            return None
        dbapi = connection.connection.driver_connection
        if (
            dbapi is None
            or dbapi.autocommit
            or dbapi.info.transaction_status != 0  # not IDLE
        ):
            return None
        return cls(connection, dbapi)

    def lock(self, sql: str, parameters: dict[str, Any]) -> dict[str, Any] | None:
        """Begin and run ``sql`` in one round trip; return its first row by name.

        ``None`` when the transaction has already begun otherwise: the caller
        then runs the statement through SQLAlchemy.
        """
        dbapi = self._dbapi
        if self.began or dbapi.info.transaction_status != 0:
            return None
        try:
            self._wait(dbapi.set_autocommit(True))
            self.began = True
            cursor = self._cursor = dbapi.cursor()
            # psycopg's own transaction block: its BEGIN (with the
            # connection's isolation level, read-only and deferrable
            # settings) and COMMIT are queued in a pipeline, not each
            # sent and synced.
            transaction = self._transaction = self._transaction_type(dbapi)
            pipeline = dbapi.pipeline()
            self._enter(pipeline)
            try:
                self._enter(transaction)
                self._wait(cursor.execute(sql, parameters))
            except BaseException as error:
                self._exit(pipeline, error)
                raise
            self._exit(pipeline, None)
            row = self._wait(cursor.fetchone())
            names = [column.name for column in cursor.description]
        except self._errors as error:
            raise self._wrap(error, sql, parameters) from error
        return dict(zip(names, row, strict=True))

    def send(self, sql: str, parameters: dict[str, Any]) -> None:
        """Send ``sql`` without waiting: :meth:`commit` reads its answer."""
        if self._transaction is None or self._pipeline is not None:
            raise RuntimeError("send() needs a locked transaction and no pending write")
        try:
            self._pipeline = self._dbapi.pipeline()
            self._enter(self._pipeline)
            self._wait(self._cursor.execute(sql, parameters))
        except self._errors as error:
            raise self._wrap(error, sql, parameters) from error

    def commit(self) -> None:
        """Send ``COMMIT`` and wait for it and the pending write: one round trip."""
        transaction, self._transaction = self._transaction, None
        pipeline, self._pipeline = self._pipeline, None
        try:
            if transaction is not None:
                self._exit(transaction, None)
            if pipeline is not None:
                self._exit(pipeline, None)
        except self._errors as error:
            raise self._wrap(error, "COMMIT", None) from error

    def finish(self) -> None:
        """After a commit: give the connection back its own transaction settings."""
        if not self.began:
            return
        try:
            self._wait(self._dbapi.set_autocommit(False))
        except self._errors:
            # Nothing is left to lose (the write committed); a connection
            # that cannot be reset must not go back to the pool in autocommit.
            self._invalidate(None)

    def abort(self) -> None:
        """After an error: roll back and reset the connection, or discard it.

        The error being raised is what the caller sees; anything failing here
        on its way out discards the connection instead.
        """
        if not self.began:
            return
        try:
            pipeline, self._pipeline = self._pipeline, None
            if pipeline is not None:
                # Waits for the pending answers; their error is not the news.
                with contextlib.suppress(self._errors):
                    self._exit(pipeline, None)
            transaction, self._transaction = self._transaction, None
            if transaction is not None:
                transaction.force_rollback = True
                self._exit(transaction, None)
            if self._dbapi.info.transaction_status != 0:
                self._wait(self._dbapi.rollback())
            self._wait(self._dbapi.set_autocommit(False))
        except Exception as error:
            self._invalidate(error)
        self._discard_if_pipelined()

    def _discard_if_pipelined(self) -> None:
        """Discard the connection if psycopg's is still in pipeline mode.

        A pipeline whose exit was interrupted with answers unread can stay
        open: psycopg then raises its failure to leave pipeline mode in
        place of the interruption, and the rollback runs inside that
        pipeline. Pooled again, the connection would answer the next
        ``SELECT`` with no rows to read.
        """
        if not self._connection.invalidated and self._dbapi.pgconn.pipeline_status:
            self._invalidate(None)

    def _enter(self, block: Any) -> None:
        """Enter psycopg's ``block`` (a pipeline, a transaction), sync or async."""
        if self._async:
            self._wait(block.__aenter__())
        else:
            block.__enter__()

    def _exit(self, block: Any, error: BaseException | None) -> None:
        """Leave ``block`` as a ``with`` (``async with``) leaves it on ``error``."""
        details = (
            (None, None, None)
            if error is None
            else (type(error), error, error.__traceback__)
        )
        if self._async:
            self._wait(block.__aexit__(*details))
        else:
            block.__exit__(*details)

    def _invalidate(self, error: BaseException | None) -> None:
        with contextlib.suppress(Exception):
            self._connection.invalidate(error)

    def _wrap(
        self, error: Any, statement: str, parameters: dict[str, Any] | None
    ) -> exc.StatementError:
        """``error`` (the driver's) as SQLAlchemy raises it from its own statements."""
        dialect = self._connection.dialect
        invalidated = bool(dialect.is_disconnect(error, self._dbapi, None))
        if invalidated:
            self._invalidate(error)
        wrapped: exc.StatementError = exc.DBAPIError.instance(
            statement,
            parameters,
            error,
            self._errors,
            connection_invalidated=invalidated,
            dialect=dialect,
        )
        return wrapped
