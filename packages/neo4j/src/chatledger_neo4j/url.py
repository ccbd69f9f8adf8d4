"""Split a Neo4j URL into what the driver takes: address, credentials, database.

Example:
    from chatledger_neo4j.url import parse_url

    settings = parse_url("neo4j+s://app:s%40cret@db.example.com:7687/chat")
    settings.uri        # "neo4j+s://db.example.com:7687"
    settings.user       # "app"
    settings.database   # "chat"

The driver takes credentials apart from the address, so they are cut out of the
URL's userinfo (percent-decoded) and never kept in the address or in ``repr``.
A path names the database; a query string (the routing context of
``neo4j://`` URLs) is passed on unchanged, less ``retention``, which is the
repository's (``?retention=100``: :mod:`chatledger.retention`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit, urlunsplit

from chatledger.adapters import UnknownBackendError, redact_url

__all__ = ["SCHEMES", "Neo4jSettings", "parse_url"]

#: The URL schemes of the Neo4j driver that this adapter accepts.
SCHEMES = frozenset({"neo4j", "neo4j+s", "neo4j+ssc", "bolt", "bolt+s", "bolt+ssc"})


@dataclass(frozen=True)
class Neo4jSettings:
    """A Neo4j URL taken apart.

    Attributes:
        uri: The address for ``GraphDatabase.driver``, without credentials.
        user: The user name, or ``None`` when the URL has none.
        password: The password (``""`` when only a user is given); not in ``repr``.
        database: The database named by the URL's path, or ``None``.
        retention: The ``retention`` of the URL's query, as text, or ``None``.
    """

    uri: str
    user: str | None
    password: str = field(repr=False)
    database: str | None
    retention: str | None = None

    @property
    def auth(self) -> tuple[str, str] | None:
        """``(user, password)`` for the driver, or ``None`` without a user."""
        return None if self.user is None else (self.user, self.password)


def parse_url(url: str) -> Neo4jSettings:
    """Take a ``neo4j://``, ``neo4j+s://`` or ``bolt://`` URL apart.

    Raises:
        UnknownBackendError: the scheme is not a Neo4j driver scheme.
        ValueError: the URL has no host or an invalid port, or names
            ``retention`` twice.
    """
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        raise UnknownBackendError(
            f"not a Neo4j URL scheme: {parts.scheme!r}; expected one of "
            f"{', '.join(sorted(SCHEMES))}"
        )
    host = parts.hostname
    if not host:
        raise ValueError("a Neo4j URL needs a host, e.g. neo4j://localhost:7687")
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        # urllib's message quotes what it read as the port: with an unencoded
        # "/", "?" or "#" in the password, that is a piece of the password.
        raise ValueError(
            f"{redact_url(url)!r}: the port is not a number in 0-65535 (percent-"
            "encode any of : / ? # @ in the user name and password)"
        ) from None
    address = host if port is None else f"{host}:{port}"
    user = None if parts.username is None else unquote(parts.username)
    password = unquote(parts.password) if parts.password is not None else ""
    database = unquote(parts.path.strip("/")) or None
    routing: list[str] = []
    retention: str | None = None
    for item in parts.query.split("&") if parts.query else []:
        key, _, value = item.partition("=")
        if unquote(key) != "retention":
            routing.append(item)
        elif retention is not None:
            raise ValueError(f"{redact_url(url)!r}: retention is given twice")
        else:
            retention = unquote(value)
    uri = urlunsplit((scheme, address, "", "&".join(routing), ""))
    return Neo4jSettings(
        uri=uri, user=user, password=password, database=database, retention=retention
    )
