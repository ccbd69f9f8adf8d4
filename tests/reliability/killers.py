"""Drop a repository's server connection from a second connection, mid-write.

Example:
    killer = killer_for(target)
    repository.fault_points.on("after_insert", lambda point: killer.kill(repository))

PostgreSQL and MariaDB: the pool's checkout event tells which connection the
current thread uses, and an admin connection ends that server session
(``pg_terminate_backend`` or ``KILL``). Redis: the repository's client names its
connections, and an admin client ends every one of them (``CLIENT KILL ID``).
Neo4j: the repository's driver sends a user agent of its own, and an admin
driver ends every Bolt connection that carries it (``dbms.killConnection``).
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


class _Neo4jKiller:
    """Ends every Bolt connection opened with the repository's user agent.

    Once per fault: the driver runs a transaction function again when its
    connection dies, and that run reaches the same fault point. Dropping the
    connection on every run would only spend the driver's retry budget; one
    drop is the fault, and the retry is what the test then checks.
    """

    def __init__(self, url: str, user_agent: str) -> None:
        self._url = url
        self._user_agent = user_agent
        self._struck = False
        self.killed = 0

    def arm(self, repository: Any) -> None:
        pass

    def kill(self, repository: Any) -> None:
        if self._struck:
            return
        from neo4j import GraphDatabase

        from chatledger_neo4j import parse_url

        settings = parse_url(self._url)
        with (
            GraphDatabase.driver(settings.uri, auth=settings.auth) as admin,
            admin.session() as session,
        ):
            ids = session.run(
                "CALL dbms.listConnections() YIELD connectionId, userAgent "
                "WHERE userAgent = $agent RETURN connectionId",
                agent=self._user_agent,
            ).value("connectionId")
            for connection in ids:
                session.run("CALL dbms.killConnection($id)", id=connection).consume()
        self._struck = True
        self.killed += len(ids)

    def after(self, repository: Any) -> None:
        self._struck = False


def killer_for(target: Target) -> Any:
    """A killer for the target's backend, or ``None`` if it has no server session."""
    url = str(target.args[0]) if target.args else ""
    if target.name == "postgresql":
        return _SqlKiller(url, "SELECT pg_terminate_backend({session})", "postgresql")
    if target.name in ("mariadb", "mysql"):
        return _SqlKiller(url, "KILL {session}", "mysql")
    if target.name == "redis":
        return _RedisKiller(url)
    if target.name == "neo4j":
        return _Neo4jKiller(url, target.kwargs["user_agent"])
    return None
