"""Which backend a URL names: its scheme, the adapters installed, how to add one.

Example:
    from chatledger.backends import install_hint, installed_schemes, url_scheme

    url_scheme("postgresql+psycopg://app@db/chat")   # 'postgresql+psycopg'
    install_hint("postgresql+psycopg")   # "pip install 'chatledger-sql[postgres]'"
    "memory" in installed_schemes()      # True: core serves memory://

Adapters announce the schemes they handle in an entry-point group
(:data:`ENTRY_POINT_GROUP` for sync repositories,
:data:`ASYNC_ENTRY_POINT_GROUP` for async ones); an entry's value is a
callable ``"module:Class.from_url"`` that takes ``(url, **options)``. Core
never imports an adapter: installing one is enough. A scheme is looked up
exactly first (``postgresql+psycopg``), then by the part before ``+``
(``postgresql``), so SQLAlchemy driver suffixes and ``mongodb+srv`` or
``neo4j+s`` reach the adapter of their family. Every URL in a message here
goes through :func:`chatledger.redaction.redact_url`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from chatledger.errors import UnknownBackendError
from chatledger.redaction import (
    URL_SCHEME,
    hide_in_error,
    redact_text,
    redact_url,
    url_secrets,
)

__all__ = [
    "ASYNC_ENTRY_POINT_GROUP",
    "ENTRY_POINT_GROUP",
    "adapter_parameters",
    "install_hint",
    "installed_schemes",
    "open_repository",
    "resolve",
    "url_scheme",
]

#: The entry-point group adapters register their URL schemes in.
ENTRY_POINT_GROUP = "chatledger.repositories"
#: The entry-point group adapters register their async URL schemes in.
ASYNC_ENTRY_POINT_GROUP = "chatledger.async_repositories"

_SQL = "chatledger-sql"
# Only for error messages: which distribution serves a scheme. Lookup itself
# goes through entry points, so a scheme missing here still works when installed.
_INSTALL: dict[str, str] = {
    "memory": "chatledger",
    "sqlite": _SQL,
    "duckdb": f"{_SQL}[duckdb]",
    "postgresql": f"{_SQL}[postgres]",
    "postgres": f"{_SQL}[postgres]",
    "mysql": f"{_SQL}[mysql]",
    "mariadb": f"{_SQL}[mysql]",
    "mssql": f"{_SQL}[mssql]",
    "oracle": f"{_SQL}[oracle]",
    "postgresql+asyncpg": f"{_SQL}[asyncpg]",
    "sqlite+aiosqlite": f"{_SQL}[aiosqlite]",
    "mysql+asyncmy": f"{_SQL}[asyncmy]",
    "mysql+aiomysql": f"{_SQL}[aiomysql]",
    "mariadb+asyncmy": f"{_SQL}[asyncmy]",
    "mariadb+aiomysql": f"{_SQL}[aiomysql]",
    "redis": "chatledger-redis",
    "rediss": "chatledger-redis",
    "mongodb": "chatledger-mongodb",
    "cassandra": "chatledger-cassandra",
    "neo4j": "chatledger-neo4j",
    "bolt": "chatledger-neo4j",
}
#: SQLAlchemy drivers that none of chatledger-sql's extras installs, and the
#: distribution that does: ``mysql+mysqldb`` needs mysqlclient, while the
#: ``mysql`` extra installs PyMySQL.
_SQL_DRIVERS: dict[str, str] = {
    "mysqldb": "mysqlclient",
    "mysqlconnector": "mysql-connector-python",
    "mariadbconnector": "mariadb",
    "psycopg2": "psycopg2-binary",
    "pg8000": "pg8000",
    "pymssql": "pymssql",
}


def url_scheme(url: str) -> str:
    """Return the lower-cased scheme of ``url`` (``"postgresql+psycopg"``).

    Raises:
        UnknownBackendError: if ``url`` does not start with a scheme.
    """
    if not isinstance(url, str):
        raise TypeError(f"url must be a str, not {type(url).__name__}")
    match = URL_SCHEME.match(url)
    if match is None:
        raise UnknownBackendError(
            f"{redact_url(url)!r} is not a URL: expected scheme://..., for example "
            "sqlite:///chat.db, postgresql+psycopg://user@host/db, redis://host:6379/0 "
            "or memory://"
        )
    return match.group(1).lower()


def _entry_points(group: str = ENTRY_POINT_GROUP) -> dict[str, EntryPoint]:
    found: dict[str, EntryPoint] = {}
    for entry in entry_points(group=group):
        found.setdefault(entry.name.lower(), entry)
    return found


def installed_schemes(group: str = ENTRY_POINT_GROUP) -> list[str]:
    """Return the URL schemes the installed adapters handle, sorted.

    ``group`` is the entry-point group to look in (the async adapters'
    is :data:`ASYNC_ENTRY_POINT_GROUP`).
    """
    return sorted(_entry_points(group))


def install_hint(scheme: str) -> str | None:
    """Return the ``pip install`` line of the adapter for ``scheme``, if known."""
    scheme = scheme.lower()
    family, _, driver = scheme.partition("+")
    distribution = _INSTALL.get(scheme) or _INSTALL.get(family)
    if distribution is None:
        return None
    if driver in _SQL_DRIVERS and distribution.startswith(_SQL):
        return f"pip install {_SQL} {_SQL_DRIVERS[driver]}"
    if "[" in distribution:
        return f"pip install '{distribution}'"
    return f"pip install {distribution}"


def _known_backends() -> str:
    by_distribution: dict[str, list[str]] = {}
    for scheme, distribution in _INSTALL.items():
        if "+" in scheme:
            continue  # a driver of a family already listed
        by_distribution.setdefault(distribution.partition("[")[0], []).append(scheme)
    parts = []
    for distribution, schemes in by_distribution.items():
        where = (
            "built in"
            if distribution == "chatledger"
            else f"pip install {distribution}"
        )
        parts.append(f"{'/'.join(schemes)}:// ({where})")
    return ", ".join(parts)


def resolve(
    scheme: str, url: str, group: str = ENTRY_POINT_GROUP
) -> Callable[..., Any]:
    """Return the ``from_url`` the adapter for ``scheme`` registered in ``group``.

    Raises:
        UnknownBackendError: no installed adapter handles ``scheme`` (the
            message names its ``pip install`` line, or the known backends),
            or the adapter cannot be imported, or its entry is not callable.
    """
    available = _entry_points(group)
    entry = available.get(scheme) or available.get(scheme.partition("+")[0])
    shown = redact_url(url)
    hint = install_hint(scheme)
    if entry is None:
        if hint is not None:
            raise UnknownBackendError(
                f"no installed chatledger adapter handles {scheme}:// URLs "
                f"({shown}); install it with: {hint}"
            )
        here = ", ".join(sorted(available)) or "none"
        raise UnknownBackendError(
            f"unknown URL scheme {scheme!r} ({shown}); chatledger backends are "
            f"{_known_backends()}; installed here: {here}"
        )
    try:
        factory = entry.load()
    except ImportError as exc:
        again = hint or f"pip install --force-reinstall {entry.value.partition(':')[0]}"
        raise UnknownBackendError(
            f"the adapter for {scheme}:// URLs ({entry.value}) is installed but cannot "
            f"be imported: {redact_text(str(exc))}; reinstall it with: {again}"
        ) from exc
    if not callable(factory):
        raise UnknownBackendError(
            f"the entry point {entry.name} = {entry.value!r} in group "
            f"{group} is not callable"
        )
    return factory  # type: ignore[no-any-return]


def open_repository(
    factory: Callable[..., Any], url: str, options: dict[str, Any]
) -> Any:
    """Return ``factory(url, **options)``; its errors show no secret of ``url``."""
    try:
        return factory(url, **options)
    except Exception as error:
        hide_in_error(error, url_secrets(url))
        raise


def adapter_parameters(url: str, group: str = ENTRY_POINT_GROUP) -> frozenset[str]:
    """Return the keyword options the installed adapter for ``url`` names.

    They are the keyword-only parameters of its ``from_url`` and, when that
    is a class's method, of the class's constructor: what a caller can rely
    on without knowing the adapter (``create_schema``, say). Options an
    adapter passes on to its driver are not among them. ``group`` is the
    entry-point group to look in (the async adapters' is
    :data:`ASYNC_ENTRY_POINT_GROUP`).

    Raises:
        UnknownBackendError: as :func:`chatledger.connect` does.
    """
    factory = resolve(url_scheme(url), url, group)
    callables: list[Callable[..., Any]] = [factory]
    owner = getattr(factory, "__self__", None)
    if isinstance(owner, type):
        callables.append(owner)
    names: set[str] = set()
    for function in callables:
        try:
            parameters = inspect.signature(function).parameters.values()
        except (TypeError, ValueError):
            continue
        names.update(p.name for p in parameters if p.kind is p.KEYWORD_ONLY)
    return frozenset(names)
