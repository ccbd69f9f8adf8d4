"""Hide the secrets of a URL in what is shown: messages, logs, errors.

Example:
    from chatledger.redaction import redact_url

    redact_url("postgresql://app:s3cret@db/chat")   # 'postgresql://app:***@db/chat'

A URL's password (and query parameters such as ``password=`` or ``token=``)
is read as every driver reads it and replaced by ``***``; where the drivers'
readings differ, the most is hidden. :func:`chatledger.connect` and the
``chatledger`` command show every URL through here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import unquote, unquote_plus

__all__ = [
    "URL_SCHEME",
    "hide_in_error",
    "hide_secrets",
    "redact_text",
    "redact_url",
    "url_secrets",
]

#: Where a URL starts: its scheme and ``://``.
URL_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*)://")
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
    starts = list(URL_SCHEME.finditer(text))
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


def hide_in_error(error: BaseException, secrets: frozenset[str]) -> None:
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
