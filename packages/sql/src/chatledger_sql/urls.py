"""What a URL given to ``from_url`` means, settled before an engine exists.

Example:
    from chatledger_sql.urls import database_file, engine_url

    url = engine_url("postgres://app@db/chat")   # postgresql+psycopg://app@db/chat
    database_file(engine_url("sqlite:///chat.db"))   # PosixPath('chat.db')

SQLAlchemy takes its URLs literally: ``SQLITE:///`` names no dialect,
``postgres://`` neither, ``sqlite://chat.db`` is refused with a list of forms,
and a driver-less URL asks for a driver the extras do not install. Here a URL
is normalised the way a reader of it means it, or refused with an error that
says what was meant, before any file, pool or connection exists.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sqlalchemy import exc
from sqlalchemy.engine import URL, make_url

from chatledger.adapters import (
    InvalidUrlError,
    MissingDriverError,
    StoreNotFoundError,
    install_hint,
    redact_url,
)

__all__ = [
    "async_engine_url",
    "check_database_file",
    "database_file",
    "engine_url",
    "missing_driver",
    "steady_pool",
]

#: Backends whose name SQLAlchemy does not know, and the one meant.
_ALIASES = {"postgres": "postgresql"}

#: For a URL without ``+driver``: SQLAlchemy's default driver module, and the
#: driver the package's extra installs, used when the default is missing.
_EXTRA_DRIVERS = {
    "postgresql": ("psycopg2", "psycopg"),
    "mysql": ("MySQLdb", "pymysql"),
    "mariadb": ("MySQLdb", "pymysql"),
    "oracle": ("cx_Oracle", "oracledb"),
}

#: For a URL given to the async repository without ``+driver``: the asyncio
#: drivers of each backend, in order of preference.
_ASYNC_DRIVERS = {
    "sqlite": ("aiosqlite",),
    "postgresql": ("psycopg", "asyncpg"),
    "mysql": ("asyncmy", "aiomysql"),
    "mariadb": ("asyncmy", "aiomysql"),
}
#: Drivers that speak asyncio only (psycopg speaks both).
_ASYNC_ONLY = {
    "aiosqlite",
    "asyncpg",
    "asyncmy",
    "aiomysql",
    "aioodbc",
    "oracledb_async",
}

#: Backends whose database is a local file, and the file ending they show.
_FILE_BACKENDS = {"sqlite": "db", "duckdb": "duckdb"}


def _module_present(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def engine_url(url: str | URL) -> URL:
    """Return ``url`` as ``create_engine`` should get it.

    The scheme's case is folded, ``postgres`` becomes ``postgresql``, and a
    URL without a driver gets the one the package's extra installs when
    SQLAlchemy's default driver is missing (``mysql://`` uses PyMySQL unless
    mysqlclient is installed).

    Raises:
        InvalidUrlError: the URL cannot be parsed, or names a SQLite or DuckDB
            host (``sqlite://chat.db``) where a path was meant.
    """
    parsed, backend, driver = _parse(url)
    if driver in _ASYNC_ONLY:
        raise InvalidUrlError(
            f"{redact_url(str(url))!r} names {driver}, an asyncio driver: open it "
            "with chatledger.connect_async (AsyncSqlChatMemoryRepository), or "
            f"give a sync URL such as {backend}:// here"
        )
    if not driver and backend in _EXTRA_DRIVERS:
        default_module, extra_driver = _EXTRA_DRIVERS[backend]
        if not _module_present(default_module) and _module_present(extra_driver):
            driver = extra_driver
    return _checked(url, parsed, backend, driver)


def async_engine_url(url: str | URL) -> URL:
    """Return ``url`` as ``create_async_engine`` should get it.

    As :func:`engine_url`, and a URL without a driver gets the backend's
    asyncio driver that is installed (``sqlite://`` uses aiosqlite,
    ``postgresql://`` psycopg, ``mysql://`` asyncmy, else the next one).

    Raises:
        InvalidUrlError: as :func:`engine_url`, or the URL names a sync-only
            driver (``mysql+pymysql``), or a backend the async repository does
            not run on.
    """
    parsed, backend, driver = _parse(url)
    choices = _ASYNC_DRIVERS.get(backend)
    if choices is None:
        raise InvalidUrlError(
            f"{redact_url(str(url))!r}: the async SQL repository runs on SQLite, "
            f"PostgreSQL, MySQL and MariaDB; open {backend} with chatledger.connect "
            "(SqlChatMemoryRepository)"
        )
    if driver and driver not in choices:
        raise InvalidUrlError(
            f"{redact_url(str(url))!r} names {driver}, a sync driver: an async "
            f"repository needs one of {', '.join(choices)} "
            f"({backend}+{choices[0]}://...), or open this URL with chatledger.connect"
        )
    if not driver:
        driver = next((d for d in choices if _module_present(d)), choices[0])
    return _checked(url, parsed, backend, driver)


def _parse(url: str | URL) -> tuple[URL, str, str]:
    """Parse ``url``: the URL, its backend (aliases resolved) and its driver."""
    try:
        parsed = make_url(url)
    except exc.ArgumentError as error:
        shown = redact_url(str(url))
        raise InvalidUrlError(f"{shown!r} is not a database URL: {error}") from None
    except ValueError:
        # SQLAlchemy's message quotes the port it read, which may be a piece
        # of a password holding an unencoded "/", "?", "#" or "@".
        shown = redact_url(str(url))
        raise InvalidUrlError(
            f"{shown!r} is not a database URL: its port is not a number "
            "(percent-encode any of : / ? # @ in the user name and password)"
        ) from None
    if parsed.host and "@" in parsed.host:
        # No host name holds "@": the password held an unencoded one.
        shown = redact_url(str(url))
        raise InvalidUrlError(
            f"{shown!r} names the host {parsed.host.rpartition('@')[2]!r} after "
            "an unencoded '@': write '@' in a user name or password as %40"
        )
    backend, _, driver = parsed.drivername.lower().partition("+")
    return parsed, _ALIASES.get(backend, backend), driver


def _checked(url: str | URL, parsed: URL, backend: str, driver: str) -> URL:
    """``parsed`` with its normalised driver name; a file backend's host refused."""
    parsed = parsed.set(drivername=backend + ("+" + driver if driver else ""))
    if backend in _FILE_BACKENDS and parsed.host:
        shown = redact_url(str(url))
        ending = _FILE_BACKENDS[backend]
        raise InvalidUrlError(
            f"{shown!r} names a host, not a file: a {backend} URL has three "
            f"slashes before a relative path ({backend}:///{parsed.host}) and "
            f"four before an absolute one ({backend}:////var/data/chat.{ending}); "
            f"{backend}:// alone is a database in memory"
        )
    return parsed


def database_file(url: URL) -> Path | None:
    """The local file a SQLite or DuckDB URL names; ``None`` for anything else.

    In-memory databases (no path, ``:memory:``, ``mode=memory``) and SQLite
    ``file:`` URIs (``?uri=true``), which SQLite resolves itself, name none.
    """
    backend = url.get_backend_name()
    if backend not in _FILE_BACKENDS:
        return None
    database = url.database
    if not database or database == ":memory:":
        return None
    if url.query.get("mode") == "memory" or url.query.get("uri") == "true":
        return None
    return Path(database)


def check_database_file(url: URL, *, must_exist: bool) -> None:
    """Refuse a file URL whose folder is missing, or whose file is, if it must exist.

    SQLite creates a missing file on connect; a reader that must not create
    one (``create_schema=False``) asks for ``must_exist``.

    Raises:
        StoreNotFoundError: naming the missing folder or file.
    """
    path = database_file(url)
    if path is None:
        return
    where = path.resolve()
    if not where.parent.is_dir():
        raise StoreNotFoundError(
            f"the folder {str(where.parent)!r} of the {url.get_backend_name()} "
            f"database {str(path)!r} does not exist; create it first"
        )
    if must_exist and not where.exists():
        raise StoreNotFoundError(
            f"no {url.get_backend_name()} database at {str(where)!r}: the file "
            "does not exist (a read never creates one)"
        )


def missing_driver(url: URL, error: Exception) -> MissingDriverError:
    """The error to raise when ``create_engine`` cannot load ``url``'s driver."""
    backend = url.get_backend_name()
    hint = install_hint(url.drivername) or install_hint(backend)
    detail = str(error).strip()
    advice = f"; install it with: {hint}" if hint else ""
    return MissingDriverError(
        f"the database driver for {url.drivername}:// URLs is not installed "
        f"({detail}){advice}"
    )


#: Connections the pool of an engine ``from_url`` makes keeps open, at most.
POOL_SIZE = 15
#: The backends served over connections worth keeping (not a file).
_SERVERS = frozenset({"postgresql", "mysql", "mariadb", "mssql", "oracle"})
#: Engine options that size or replace the pool: given one, none is added.
_POOL_OPTIONS = frozenset({"pool_size", "max_overflow", "poolclass", "pool"})


def steady_pool(url: URL, engine_options: Mapping[str, Any]) -> dict[str, Any]:
    """The pool options ``from_url`` adds for ``url``: 15 kept, none beyond.

    SQLAlchemy's default pool reaches as many connections (5 kept and 10
    more), but closes each of the 10 as it comes back and connects anew
    for the next call: past 5 concurrent calls, nearly every call pays a
    connect (on PostgreSQL a new server process), and 8 appending tasks
    made a third of the appends one task makes. Nothing is added for a
    database file, or when ``engine_options`` sizes the pool itself.
    """
    if url.get_backend_name() not in _SERVERS or _POOL_OPTIONS & engine_options.keys():
        return {}
    return {"pool_size": POOL_SIZE, "max_overflow": 0}
