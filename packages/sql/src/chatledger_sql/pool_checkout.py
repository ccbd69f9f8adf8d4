"""Check an asyncio engine's pooled connection out and in without a greenlet.

``AsyncEngine.connect()`` runs the pool's checkout in a greenlet of its own, and
the connection's return in another behind a shielded task, so that whatever
I/O they may need (connecting a new or stale connection, a pre-ping, a
``ROLLBACK``) can be awaited. On an engine :meth:`from_url
<chatledger_sql.AsyncSqlChatMemoryRepository.from_url>` made, most checkouts
and returns need none: the pool holds an idle connection that is connected
and not stale, nothing listens to the checkout, and the connection comes back
with no transaction open, to a pool whose reset rolls back only an open one.
:func:`pooled_connection` runs those as plain calls, and everything else as
``AsyncEngine.connect()`` does. Either way the caller gets SQLAlchemy's own
``AsyncConnection``.

A pool is watched by a :class:`QuietPool`. A connection invalidated alone
(a statement cancelled mid-way, a failed statement's cleanup, an explicit
``invalidate()``) reconnects at its next checkout, so the pool's checkouts
await until it has connected again, then are quiet again. A lost connection
(a disconnect error) makes SQLAlchemy mark every connection of the pool made
before it to reconnect, and only its private state says which have not yet:
from then on every checkout of that pool takes the awaiting path, as before
there was this module. A new pool (after ``dispose()``) starts quiet again.
SQLAlchemy's asyncio pool hands over an idle connection without awaiting
from releases 2.0.55 and 2.1.5 on (before, a pool without overflow awaited
its queue even then): on older releases every checkout awaits, as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import weakref
from collections.abc import AsyncIterator, Mapping
from typing import Any

import sqlalchemy
from sqlalchemy import Connection, Engine, event, exc
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.pool import Pool, QueuePool

from chatledger_sql.compiled import transaction_open

__all__ = ["QuietPool", "pooled_connection", "takes_idle_without_awaiting"]


def takes_idle_without_awaiting(version: str) -> bool:
    """Whether SQLAlchemy ``version``'s asyncio pool hands over an idle
    connection without awaiting: 2.0.55 and later 2.0 releases, 2.1.5 and
    later (a pre-release counts as its release's ``.0``)."""
    numbers = tuple(int(part) for part in re.findall(r"\d+", version)[:3])
    if numbers[:2] == (2, 0):
        return numbers >= (2, 0, 55)
    return numbers >= (2, 1, 5)


_QUIET_RELEASE = takes_idle_without_awaiting(sqlalchemy.__version__)


class _PoolState:
    """Whether one pool may still be checked out from without I/O."""

    __slots__ = ("_is_disconnect", "loud", "reconnecting", "resets")

    def __init__(self, pool: Pool, dialect: Dialect) -> None:
        #: Whether every checkout awaits from now on.
        self.loud = False
        #: The pool's records invalidated one by one since they last
        #: connected: each reconnects, awaiting, at its next checkout. (Gone
        #: from here when they connect again, or are dropped.)
        self.reconnecting: weakref.WeakSet[Any] = weakref.WeakSet()
        #: The reset listeners the pool had when first watched: the one
        #: ``from_url`` adds. Another one added later might do I/O.
        self.resets = len(pool.dispatch.reset)
        self._is_disconnect = dialect.is_disconnect
        event.listen(pool, "invalidate", self._invalidated)
        event.listen(pool, "soft_invalidate", self._invalidated)
        event.listen(pool, "connect", self._connected)

    @property
    def quiet(self) -> bool:
        """Whether a checkout of an idle connection needs no I/O."""
        return not self.loud and not self.reconnecting

    def _invalidated(
        self, dbapi_connection: Any, record: Any, error: BaseException | None
    ) -> None:
        if self._may_invalidate_the_pool(dbapi_connection, error):
            # SQLAlchemy then marks every connection of the pool made before
            # now to reconnect at its next checkout, and says which in its
            # private state only: checkouts await for good.
            self.loud = True
        else:
            self.reconnecting.add(record)

    def _may_invalidate_the_pool(
        self, dbapi_connection: Any, error: BaseException | None
    ) -> bool:
        # The pool as a whole is invalidated for a lost connection only (a
        # disconnect error of a statement, a disconnection at checkout); a
        # cancellation, a failed statement or an explicit invalidate() take
        # their own connection alone.
        if error is None or isinstance(error, asyncio.CancelledError):
            return False
        if isinstance(error, exc.DisconnectionError):
            return True
        original: Any = getattr(error, "orig", error)
        try:
            return bool(self._is_disconnect(original, dbapi_connection, None))
        except Exception:  # an error the dialect cannot judge: assume the worst
            return True

    def _connected(self, dbapi_connection: Any, record: Any) -> None:
        self.reconnecting.discard(record)


class QuietPool:
    """Says when an engine's pool checks a connection out, or in, without I/O.

    One serves every engine made with the same options (a repository's, one
    per event loop); it keeps no engine alive.

    Args:
        engine_options: The options the engines were made with, by
            ``from_url``, whose pool reset rolls back only an open
            transaction: a pre-ping or a recycle time makes checkouts
            await, always.
    """

    def __init__(self, engine_options: Mapping[str, Any]) -> None:
        """Watch the pools of the engines it is asked about from then on."""
        self._never = (
            not _QUIET_RELEASE
            or bool(engine_options.get("pool_pre_ping"))
            or engine_options.get("pool_recycle", -1) > -1
        )
        self._pools: weakref.WeakKeyDictionary[Pool, _PoolState] = (
            weakref.WeakKeyDictionary()
        )

    def connect(self, engine: Engine) -> Connection | None:
        """A connection of ``engine`` checked out without I/O, or ``None``
        where it would await.

        Quiet when the pool is a queue pool holding an idle connection, none
        of its connections waits to reconnect (see the module), and neither
        the pool's checkout nor the engine's connect has a listener.
        """
        if self._never:
            return None
        pool = engine.pool
        if not isinstance(pool, QueuePool) or pool.checkedin() == 0:
            return None
        state = self._pools.get(pool)
        if state is None:
            state = self._pools[pool] = _PoolState(pool, engine.dialect)
        if not state.quiet or pool.dispatch.checkout or engine.dispatch.engine_connect:
            return None
        try:
            return engine.connect()
        except exc.MissingGreenlet:
            # A checkout that needed I/O after all: the pool has put the
            # record back; this pool's checkouts await from now on.
            state.loud = True
            return None

    def returns_quietly(self, engine: Engine, connection: Connection) -> bool:
        """Whether ``connection`` goes back to its pool without I/O.

        It does when it holds no transaction, neither SQLAlchemy's nor the
        driver's, no isolation level of its own to restore, the pool has
        room to keep it (a connection past the pool's size is closed as it
        comes back), and nothing listens to the pool's checkin or was added
        to its reset.
        """
        if connection.closed or connection.invalidated or connection.in_transaction():
            return False
        if "isolation_level" in connection.get_execution_options():
            return False
        pool = engine.pool
        if not isinstance(pool, QueuePool) or pool.checkedin() >= pool.size():
            return False
        state = self._pools.get(pool)
        if state is None or len(pool.dispatch.reset) != state.resets:
            return False
        if pool.dispatch.checkin:
            return False
        return not transaction_open(connection.connection.driver_connection)


@contextlib.asynccontextmanager
async def pooled_connection(
    engine: AsyncEngine, quiet: QuietPool | None
) -> AsyncIterator[AsyncConnection]:
    """``engine.connect()``, checked out and in without a greenlet where ``quiet``
    says nothing awaits (see :class:`QuietPool`); ``None``: as it is."""
    sync = None if quiet is None else quiet.connect(engine.sync_engine)
    if sync is None:
        async with engine.connect() as connection:
            yield connection
        return
    assert quiet is not None
    connection = AsyncConnection(engine, sync)
    try:
        yield connection
    finally:
        if quiet.returns_quietly(engine.sync_engine, sync):
            sync.close()
        else:
            # As AsyncConnection's own exit: the close runs to its end even
            # when the caller is cancelled meanwhile.
            await asyncio.shield(connection.close())
