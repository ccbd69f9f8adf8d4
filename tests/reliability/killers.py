"""Drop a repository's server connection from a second connection, mid-write.

Example:
    killer = killer_for(target)
    repository.fault_points.on("after_insert", lambda point: killer.kill(repository))

PostgreSQL and MariaDB: the pool's checkout event tells which connection the
current thread uses, and an admin connection ends that server session
(``pg_terminate_backend`` or ``KILL``). Redis: the repository's client names its
connections, and an admin client ends every one of them (``CLIENT KILL ID``).
"""

from __future__ import annotations

import threading
from typing import Any, Protocol

from tests.reliability.workload import Target

__all__ = ["Killer", "killer_for"]


class Killer(Protocol):
    """Ends the server session a repository is using."""

    #: Sessions ended since the counter was last reset.
    killed: int

    def arm(self, repository: Any) -> None:
        """Start watching the repository's connections; call before writing."""
        ...

    def kill(self, repository: Any) -> None:
        """End the repository's current connection now."""
        ...

    def after(self, repository: Any) -> None:
        """Release what :meth:`kill` set up."""
        ...


class _SqlKiller:
    """Kills the session of the connection this thread checked out last."""

    def __init__(self, url: str, statement: str, session_id: str) -> None:
        self._url = url
        self._statement = statement
        self._session_id = session_id
        self._current = threading.local()
        self._engines: set[int] = set()
        self.killed = 0

    def _watch(self, engine: Any) -> None:
        if id(engine) in self._engines:
            return
        from sqlalchemy import event

        def checkout(dbapi_connection: Any, record: Any, proxy: Any) -> None:
            self._current.connection = dbapi_connection

        event.listen(engine, "checkout", checkout)
        self._engines.add(id(engine))

    def arm(self, repository: Any) -> None:
        """Start tracking the repository's connections (call before writing)."""
        self._watch(repository.engine)

    def kill(self, repository: Any) -> None:
        from sqlalchemy import create_engine, text

        connection = getattr(self._current, "connection", None)
        assert connection is not None, "no connection checked out on this thread"
        session = _session_of(connection, self._session_id)
        admin = create_engine(self._url, poolclass=_null_pool())
        try:
            with admin.begin() as conn:
                conn.execute(text(self._statement.format(session=int(session))))
        finally:
            admin.dispose()
        self.killed += 1

    def after(self, repository: Any) -> None:
        self._current.connection = None


def _null_pool() -> Any:
    from sqlalchemy.pool import NullPool

    return NullPool


def _session_of(dbapi_connection: Any, kind: str) -> int:
    if kind == "postgresql":
        return int(dbapi_connection.info.backend_pid)
    return int(dbapi_connection.thread_id())


class _RedisKiller:
    """Kills every connection of the repository's client (they share a name)."""

    def __init__(self, url: str) -> None:
        self._url = url
        self.killed = 0

    def arm(self, repository: Any) -> None:
        pass

    def kill(self, repository: Any) -> None:
        from redis import Redis

        name = repository.client.connection_pool.connection_kwargs["client_name"]
        admin = Redis.from_url(self._url)
        try:
            for client in admin.client_list():
                if client.get("name") == name:
                    admin.client_kill_filter(_id=client["id"])
                    self.killed += 1
        finally:
            admin.close()

    def after(self, repository: Any) -> None:
        pass


def killer_for(target: Target) -> Any:
    """A killer for the target's backend, or ``None`` if it has no server session."""
    url = str(target.args[0]) if target.args else ""
    if target.name == "postgresql":
        return _SqlKiller(url, "SELECT pg_terminate_backend({session})", "postgresql")
    if target.name in ("mariadb", "mysql"):
        return _SqlKiller(url, "KILL {session}", "mysql")
    if target.name == "redis":
        return _RedisKiller(url)
    return None
