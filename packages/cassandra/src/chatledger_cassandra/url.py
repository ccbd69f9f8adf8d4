"""Parsing of ``cassandra://`` URLs.

Example:
    from chatledger_cassandra.url import parse_url

    url = parse_url("cassandra://app:secret@db1,db2:9142/chat?local_dc=dc1")
    url.contact_points   # [("db1", 9042), ("db2", 9142)]
    url.keyspace         # "chat"

The form is ``cassandra://[user[:password]@]host[:port][,host[:port]...]
[/keyspace][?option=value&...]``. A host without a port uses 9042; IPv6
addresses go in brackets (``[::1]:9042``). User, password and keyspace are
percent-decoded. The query options are listed in :data:`URL_OPTIONS`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import parse_qsl, unquote, urlsplit

from chatledger.adapters import redact_url
from chatledger_cassandra.errors import InvalidURLError

__all__ = ["DEFAULT_PORT", "URL_OPTIONS", "CassandraURL", "parse_url"]

#: The CQL native protocol port used when a host has none.
DEFAULT_PORT = 9042

#: Query options a URL may carry, and what each one sets:
#: ``local_dc`` (the driver's local data centre), ``protocol_version`` (int),
#: ``connect_timeout`` and ``control_connection_timeout`` (seconds) configure
#: the driver; ``table``, ``ttl``
#: (seconds), ``retention`` (``all`` or a number of messages),
#: ``create_schema``, ``create_keyspace`` (booleans) and
#: ``replication_factor`` (SimpleStrategy) configure the repository.
URL_OPTIONS = frozenset(
    {
        "local_dc",
        "protocol_version",
        "connect_timeout",
        "control_connection_timeout",
        "table",
        "ttl",
        "retention",
        "create_schema",
        "create_keyspace",
        "replication_factor",
    }
)


@dataclass(frozen=True)
class CassandraURL:
    """The parts of a ``cassandra://`` URL.

    Attributes:
        contact_points: ``(host, port)`` pairs, in the order given.
        keyspace: The keyspace in the path, or ``None``.
        username: The user, or ``None``.
        password: The password, or ``None``.
        options: The query options, as text, each from :data:`URL_OPTIONS`.
    """

    contact_points: list[tuple[str, int]]
    keyspace: str | None = None
    username: str | None = None
    password: str | None = None
    options: dict[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:
        secret = None if self.password is None else "***"
        return (
            f"CassandraURL(contact_points={self.contact_points!r}, "
            f"keyspace={self.keyspace!r}, username={self.username!r}, "
            f"password={secret!r}, options={self.options!r})"
        )


def _quoted(piece: str, shown: str) -> str:
    """``piece`` quoted, if the redacted URL ``shown`` shows it too.

    A piece the redaction hides is a password's, read as a host or port
    because the password held an unencoded "/", "?" or "#".
    """
    return repr(piece) if piece in shown else "(hidden: part of the password)"


def _parse_port(text: str, shown: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        port = _quoted(text, shown)
        raise InvalidURLError(f"{shown!r}: port {port} is not a number in 1-65535")
    return int(text)


def _parse_host(item: str, shown: str) -> tuple[str, int]:
    if not item:
        raise InvalidURLError(f"{shown!r}: empty host in the host list")
    if item.startswith("["):
        end = item.find("]")
        if end < 0:
            host = _quoted(item, shown)
            raise InvalidURLError(f"{shown!r}: unclosed '[' in host {host}")
        host, rest = item[1:end], item[end + 1 :]
        if rest and not rest.startswith(":"):
            raise InvalidURLError(
                f"{shown!r}: unexpected text after ']' in {_quoted(item, shown)}"
            )
        port = rest[1:]
    else:
        host, _, port = item.partition(":")
    if not host:
        raise InvalidURLError(f"{shown!r}: empty host in {_quoted(item, shown)}")
    return host, DEFAULT_PORT if not port else _parse_port(port, shown)


def parse_url(url: str) -> CassandraURL:
    """Split a ``cassandra://`` URL into contact points, keyspace and options.

    Errors show the URL with its password hidden (:func:`chatledger.redact_url`).

    Raises:
        InvalidURLError: for another scheme, no host, a bad port, a nested path
            or an unknown or repeated query option.
    """
    if not isinstance(url, str):
        raise InvalidURLError(f"url must be a str, not {type(url).__name__}")
    shown = redact_url(url)
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise InvalidURLError(f"{shown!r}: {exc}") from None
    if parts.scheme != "cassandra":
        raise InvalidURLError(f"{shown!r}: the scheme must be 'cassandra'")
    if parts.fragment:
        raise InvalidURLError(f"{shown!r}: a URL fragment is not allowed")
    userinfo, at, hostlist = parts.netloc.rpartition("@")
    username = password = None
    if at:
        user, colon, secret = userinfo.partition(":")
        username = unquote(user) or None
        password = unquote(secret) if colon else None
    if not hostlist:
        raise InvalidURLError(f"{shown!r}: no host")
    contact_points = [_parse_host(item, shown) for item in hostlist.split(",")]
    path = unquote(parts.path.lstrip("/"))
    if "/" in path:
        raise InvalidURLError(f"{shown!r}: the path holds one keyspace name only")
    options: dict[str, str] = {}
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key not in URL_OPTIONS:
            known = ", ".join(sorted(URL_OPTIONS))
            raise InvalidURLError(f"{shown!r}: unknown option {key!r} (known: {known})")
        if key in options:
            raise InvalidURLError(f"{shown!r}: option {key!r} is given twice")
        options[key] = value
    return CassandraURL(contact_points, path or None, username, password, options)
