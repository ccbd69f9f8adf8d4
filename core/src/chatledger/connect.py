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
from collections.abc import Callable, Iterable
from importlib.metadata import EntryPoint, entry_points
from typing import Any
from urllib.parse import unquote, unquote_plus

from chatledger.errors import UnknownBackendError
from chatledger.repository import ChatMemoryRepository

__all__ = [
    "ENTRY_POINT_GROUP",
    "adapter_parameters",
    "connect",
    "hide_secrets",
    "install_hint",
    "installed_schemes",
    "redact_text",
    "redact_url",
    "url_scheme",
    "url_secrets",
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
# A value runs to the next parameter: pymongo reads a "#" as part of it.
_QUERY_PARAM = re.compile(r"([?&;])([^=&;#]*)=([^&;]*)")
_QUERY_PARAM_IN_TEXT = re.compile(r"([?&;])([^=&;#\s'\"]*)=([^&;\s'\"]*)")
# What may follow the "@" that ends user information: hosts as drivers list
# them (names or [IPv6] addresses, each with an optional port, comma
# separated), then the path, query or fragment, the end of the URL, or the
# punctuation of the sentence it stands in.
_HOST = r"(?:\[[^\]/?#@\s]*\]|[^\[\]/?#@:,\s'\"]+)(?::[0-9]*)?"
_HOST_LIST = re.compile(rf"{_HOST}(?:,{_HOST})*(?=[/?#\s'\"<>),;:.]|$)")
# Where each driver's reading of the host part stops: urllib.parse (redis-py,
# the Neo4j and Cassandra adapters) at "/", "?" or "#", pymongo at "/" or "?".
_HOST_PART_ENDS = ("/?#", "/?")
# Where a driver that misreads a password may cut it (a port, a host, a path).
_CUTS = "/?#@:[]"
_MASK = "***"
# Shorter pieces of a password are not hidden in free text: they would
# garble the message and say next to nothing.
_SHORTEST_HIDDEN = 3


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


def _password_span(rest: str) -> tuple[int, int] | None:
    """Where in ``rest`` (a URL after ``scheme://``) any driver may read a password.

    Every driver takes the text after the first ``:`` of the user information
    as the password; they differ in where it ends, so the span runs to the
    furthest end any of them (or a reader of the URL) would take:

    - SQLAlchemy's ``make_url``: the first ``@`` after that ``:`` (its user
      name holds no ``/``; its password holds ``?``, ``#``, ``/``);
    - ``urllib.parse`` and pymongo: the last ``@`` of the host part;
    - a password written with a raw ``/`` or ``@`` in it: the last ``@``
      that a host list follows.
    """
    colon = rest.find(":")
    if colon == -1:
        return None
    ends = []
    if "/" not in rest[:colon]:
        at = rest.find("@", colon)
        if at != -1:
            ends.append(at)
    for stops in _HOST_PART_ENDS:
        host_part_end = min(
            (i for i in map(rest.find, stops) if i != -1), default=len(rest)
        )
        at = rest.rfind("@", colon, host_part_end)
        if at != -1:
            ends.append(at)
    at = len(rest)
    while (at := rest.rfind("@", colon, at)) != -1:
        if _HOST_LIST.match(rest, at + 1):
            ends.append(at)
            break
    if not ends:
        return None
    return colon + 1, max(ends)


def _redact_query(text: str, pattern: re.Pattern[str] = _QUERY_PARAM) -> str:
    def mask(match: re.Match[str]) -> str:
        separator, key, value = match.groups()
        if value and _SECRET_KEY.search(key):
            value = _MASK
        return f"{separator}{key}={value}"

    return pattern.sub(mask, text)


def _redact_rest(rest: str, query: re.Pattern[str]) -> str:
    # Query secrets first: an "@" inside one must not pass for a host.
    rest = _redact_query(rest, query)
    span = _password_span(rest)
    if span is None:
        return rest
    start, end = span
    return f"{rest[:start]}{_MASK}{rest[end:]}"


def _split(url: str) -> tuple[str, str]:
    """``url`` as ``scheme://`` and the rest; a string without one is all rest."""
    scheme, separator, rest = url.partition("://")
    if not separator:
        # Not a URL, but "user:password@host" must not leak either.
        return "", url
    return scheme + separator, rest


def redact_url(url: str) -> str:
    """Return ``url`` with its password and secret query values replaced by ``***``.

    ``postgresql://app:s3cret@db/chat`` becomes ``postgresql://app:***@db/chat``;
    ``redis://:s3cret@cache:6379/0?password=x`` becomes
    ``redis://:***@cache:6379/0?password=***``. The password is read as every
    driver reads it: ``postgresql://app:s3cr3t?PW@db/chat`` (SQLAlchemy's
    password ``s3cr3t?PW``) becomes ``postgresql://app:***@db/chat``. Where
    the readings differ, the most is hidden. A user name and the host stay
    visible, so the message still says where the connection went. A string
    that is not a URL is redacted as the rest of one.
    """
    if not isinstance(url, str):
        return repr(type(url))
    head, rest = _split(url)
    return head + _redact_rest(rest, _QUERY_PARAM)


def redact_text(text: str) -> str:
    """Redact every URL found in ``text`` (an error message, a log line).

    A URL runs from its ``scheme://`` to the end of its line or the next
    URL: a password may hold a space or a quote, so nothing shorter is safe.
    """
    starts = list(_SCHEME.finditer(text))
    if not starts:
        return text
    parts = [text[: starts[0].start()]]
    for index, match in enumerate(starts):
        following = starts[index + 1].start() if index + 1 < len(starts) else len(text)
        line_end = text.find("\n", match.end(), following)
        end = following if line_end == -1 else line_end
        parts.append(match.group(0))
        parts.append(_redact_rest(text[match.end() : end], _QUERY_PARAM_IN_TEXT))
        parts.append(text[end:following])
    return "".join(parts)


def url_secrets(url: str) -> frozenset[str]:
    """Every text in ``url`` a driver may read as a secret, as written and decoded.

    That is the password :func:`redact_url` hides, each piece of it a driver
    may misread as a port, host or path (``s3cr3t`` of ``app:s3cr3t#PW@db``,
    which ``urllib.parse`` takes for a port), and the values of secret query
    parameters. :func:`hide_secrets` hides them in any text.
    """
    if not isinstance(url, str):
        return frozenset()
    _, rest = _split(url)
    found: set[str] = set()
    for match in _QUERY_PARAM.finditer(rest):
        _, key, value = match.groups()
        if value and _SECRET_KEY.search(key):
            found.add(value)
    for text in (rest, _redact_query(rest)):
        span = _password_span(text)
        if span is None:
            continue
        password = text[span[0] : span[1]]
        found.add(password)
        for index, character in enumerate(password):
            if character in _CUTS:
                found.update((password[:index], password[index + 1 :]))
    decoded = {
        form for value in found for form in (unquote(value), unquote_plus(value))
    }
    return frozenset(value for value in found | decoded if value and value != _MASK)


def hide_secrets(text: str, secrets: Iterable[str]) -> str:
    """Return ``text`` with its URLs redacted and each secret replaced by ``***``.

    ``secrets`` are texts such as :func:`url_secrets` finds; the longest are
    replaced first, and those shorter than three characters are left alone.
    """
    text = redact_text(text)
    for value in sorted(set(secrets), key=len, reverse=True):
        if len(value) >= _SHORTEST_HIDDEN:
            text = text.replace(value, _MASK)
    return text


def _hide_in_error(error: BaseException, secrets: frozenset[str]) -> None:
    """Hide ``secrets`` in the messages of ``error`` and the errors behind it.

    A driver that misreads a URL may quote a piece of its password (a port
    it could not parse); the error keeps its type and traceback.
    """
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        current.args = tuple(
            hide_secrets(argument, secrets) if isinstance(argument, str) else argument
            for argument in current.args
        )
        current = current.__cause__ or current.__context__


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


def _open(factory: Callable[..., Any], url: str, options: dict[str, Any]) -> Any:
    """``factory(url, **options)``, its errors showing no secret of ``url``."""
    try:
        return factory(url, **options)
    except Exception as error:
        _hide_in_error(error, url_secrets(url))
        raise


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
    propagate with their types unchanged; a secret of ``url`` in their
    messages is replaced by ``***``.
    """
    scheme = url_scheme(url)
    factory = _resolve(scheme, url)
    repository: ChatMemoryRepository = _open(factory, url, options)
    return repository
