"""Open a repository from a URL: the one front door to every backend.

Example:
    from chatledger import MessageWindowChatMemory, connect

    repository = connect("sqlite:///chat.db")      # needs chatledger-sql
    memory = MessageWindowChatMemory(repository, max_messages=20)

The URL scheme names the backend. Adapters announce the schemes they handle in
the entry-point group ``chatledger.repositories``; an entry's value is a
callable ``"module:Class.from_url"`` that takes ``(url, **options)``. Core
never imports an adapter: installing one is enough. A scheme is looked up
exactly first (``postgresql+psycopg``), then by the part before ``+``
(``postgresql``), so SQLAlchemy driver suffixes and ``mongodb+srv`` or
``neo4j+s`` reach the adapter of their family.

A URL's password (and query parameters such as ``password=`` or ``token=``)
is never shown: every message here goes through :func:`redact_url`.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from chatledger.errors import UnknownBackendError
from chatledger.repository import ChatMemoryRepository

__all__ = [
    "ENTRY_POINT_GROUP",
    "adapter_parameters",
    "connect",
    "install_hint",
    "installed_schemes",
    "redact_text",
    "redact_url",
    "url_scheme",
]

#: The entry-point group adapters register their URL schemes in.
ENTRY_POINT_GROUP = "chatledger.repositories"

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

_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*)://")
_SECRET_KEY = re.compile(r"pass|pwd|secret|token|api_?key|credential", re.IGNORECASE)
_QUERY_PARAM = re.compile(r"([?&;])([^=&;#]*)=([^&;#]*)")
_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s'\"<>]+")
_MASK = "***"


def url_scheme(url: str) -> str:
    """Return the lower-cased scheme of ``url`` (``"postgresql+psycopg"``).

    Raises:
        UnknownBackendError: if ``url`` does not start with a scheme.
    """
    if not isinstance(url, str):
        raise TypeError(f"url must be a str, not {type(url).__name__}")
    match = _SCHEME.match(url)
    if match is None:
        raise UnknownBackendError(
            f"{redact_url(url)!r} is not a URL: expected scheme://..., for example "
            "sqlite:///chat.db, postgresql+psycopg://user@host/db, redis://host:6379/0 "
            "or memory://"
        )
    return match.group(1).lower()


def _redact_query(text: str) -> str:
    def mask(match: re.Match[str]) -> str:
        separator, key, value = match.groups()
        if value and _SECRET_KEY.search(key):
            value = _MASK
        return f"{separator}{key}={value}"

    return _QUERY_PARAM.sub(mask, text)


def redact_url(url: str) -> str:
    """Return ``url`` with its password and secret query values replaced by ``***``.

    ``postgresql://app:s3cret@db/chat`` becomes ``postgresql://app:***@db/chat``;
    ``redis://:s3cret@cache:6379/0?password=x`` becomes
    ``redis://:***@cache:6379/0?password=***``. A user name and the host stay
    visible, so the message still says where the connection went. A string
    that is not a URL is returned unchanged.
    """
    if not isinstance(url, str):
        return repr(type(url))
    scheme, separator, rest = url.partition("://")
    if not separator:
        # Not a URL, but "user:password@host" must not leak either.
        scheme, rest = "", url
    cut = len(rest)
    for stop in "?#":
        index = rest.find(stop)
        if index != -1:
            cut = min(cut, index)
    head, tail = rest[:cut], rest[cut:]
    authority_end = head.find("/")
    authority = head if authority_end == -1 else head[:authority_end]
    # A password may hold an unencoded "/" or "@": then the last "@" before the
    # query ends the user information.
    at = authority.rfind("@")
    if at == -1:
        at = head.rfind("@")
    if at != -1:
        user, colon, _ = head[:at].partition(":")
        if colon:
            head = f"{user}:{_MASK}{head[at:]}"
    return f"{scheme}{separator}{head}{_redact_query(tail)}"


def redact_text(text: str) -> str:
    """Redact every URL found in ``text`` (an error message, a log line)."""
    return _URL_IN_TEXT.sub(lambda match: redact_url(match.group(0)), text)


def _entry_points(group: str = ENTRY_POINT_GROUP) -> dict[str, EntryPoint]:
    found: dict[str, EntryPoint] = {}
    for entry in entry_points(group=group):
        found.setdefault(entry.name.lower(), entry)
    return found


def installed_schemes(group: str = ENTRY_POINT_GROUP) -> list[str]:
    """Return the URL schemes the installed adapters handle, sorted.

    ``group`` is the entry-point group to look in (the async adapters'
    is :data:`chatledger.async_connect.ASYNC_ENTRY_POINT_GROUP`).
    """
    return sorted(_entry_points(group))


def install_hint(scheme: str) -> str | None:
    """Return the ``pip install`` line of the adapter for ``scheme``, if known."""
    scheme = scheme.lower()
    distribution = _INSTALL.get(scheme) or _INSTALL.get(scheme.partition("+")[0])
    if distribution is None:
        return None
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


def _resolve(
    scheme: str, url: str, group: str = ENTRY_POINT_GROUP
) -> Callable[..., Any]:
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


def adapter_parameters(url: str) -> frozenset[str]:
    """Return the keyword options the installed adapter for ``url`` names.

    They are the keyword-only parameters of its ``from_url`` and, when that
    is a class's method, of the class's constructor: what a caller can rely
    on without knowing the adapter (``create_schema``, say). Options an
    adapter passes on to its driver are not among them.

    Raises:
        UnknownBackendError: as :func:`connect` does.
    """
    factory = _resolve(url_scheme(url), url)
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


def connect(url: str, **options: Any) -> ChatMemoryRepository:
    """Open the repository that ``url`` names, through its installed adapter.

    Args:
        url: A backend URL: ``memory://``, ``sqlite:///chat.db``,
            ``duckdb:///chat.duckdb``, ``postgresql+psycopg://user@host/db``,
            ``mysql+pymysql://...``, ``mariadb://...``, ``mssql+pyodbc://...``,
            ``oracle+oracledb://...``, ``redis://host:6379/0``, ``rediss://...``,
            ``mongodb://...``, ``mongodb+srv://...``,
            ``cassandra://host[,host][:port]/keyspace``, ``neo4j://...``,
            ``neo4j+s://...`` or ``bolt://...``.
        **options: Passed unchanged to the adapter's ``from_url`` (for example a
            table name or a key prefix; see the adapter's documentation).

    Returns:
        The adapter's repository.

    Raises:
        UnknownBackendError: if no installed adapter handles the scheme; the
            message names the ``pip install`` line that adds it.

    Errors of the adapter or its driver (a refused connection, a bad option)
    propagate unchanged.
    """
    scheme = url_scheme(url)
    factory = _resolve(scheme, url)
    repository: ChatMemoryRepository = factory(url, **options)
    return repository
