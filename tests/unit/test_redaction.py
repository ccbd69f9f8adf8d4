"""No password in a URL is ever shown, however the URL spells it.

A password is what a driver would read as one: SQLAlchemy's ``make_url``
lets it hold ``?``, ``#`` and ``/``; ``urllib.parse`` (redis-py, the Neo4j
and Cassandra adapters) ends the host part at ``/``, ``?`` or ``#`` and the
user information at its last ``@``; pymongo ends it at ``/`` or ``?``. Every
URL below writes one password, ``Pw7<c>Zq9`` with ``c`` one character that
means something in a URL, raw or percent-encoded, and no output may show it
whole, decoded, or either half of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib.util
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import quote, quote_plus, unquote, unquote_plus

import pytest

from chatledger import connect, connect_async, redact_url
from chatledger.connect import redact_text

#: Characters that end or split a part of a URL, and ``%`` that encodes one.
SPECIAL = ["?", "#", "/", "@", ":", "%", "[", "]", "&", "=", "+", ";", " "]
HALVES = ("Pw7", "Zq9")
HOST = "db.example"

#: Every scheme the project knows (and one it does not), with what follows
#: the user information in a URL of it.
SCHEMES = {
    "sqlite": f"{HOST}/chat.db",
    "postgresql": f"{HOST}:5432/chat",
    "postgresql+psycopg": f"{HOST}:5432/chat",
    "postgresql+asyncpg": f"{HOST}:5432/chat",
    "postgresql+psycopg2": f"{HOST}:5432/chat",
    "mysql+pymysql": f"{HOST}:3306/chat",
    "mysql+asyncmy": f"{HOST}:3306/chat",
    "mysql+aiomysql": f"{HOST}:3306/chat",
    "mariadb+pymysql": f"{HOST}:3306/chat",
    "mariadb+asyncmy": f"{HOST}:3306/chat",
    "mariadb+aiomysql": f"{HOST}:3306/chat",
    "mssql+pyodbc": f"{HOST}:1433/chat?driver=ODBC+Driver+18",
    "oracle+oracledb": f"{HOST}:1521/?service_name=chat",
    "duckdb": f"{HOST}/chat.duckdb",
    "redis": f"{HOST}:6379/0",
    "rediss": f"{HOST}:6380/0",
    "redis+cluster": f"{HOST}:7000",
    "mongodb": f"{HOST}:27017/chat",
    "mongodb+srv": f"{HOST}/chat",
    "neo4j": f"{HOST}:7687",
    "neo4j+s": f"{HOST}:7687/chat",
    "bolt": f"{HOST}:7687",
    "cassandra": f"{HOST}:9042/chat",
    "memory": HOST,
    "nosuchdb": f"{HOST}:1234/x",
}


def _written(text: str, encoded: bool) -> str:
    return quote(text, safe="") if encoded else text


def _forms(written: str) -> set[str]:
    """A written password as it is written and as a driver decodes it."""
    return {written, unquote(written), unquote_plus(written)}


def _password(character: str) -> str:
    return f"{HALVES[0]}{character}{HALVES[1]}"


def _assert_hidden(text: str, written: str) -> None:
    for form in _forms(written) | set(HALVES):
        assert form not in text, f"{form!r} shown in {text!r}"


def _cases(scheme: str, after: str) -> Iterator[tuple[str, str, str]]:
    """(url, password as written, user as written): one special character in
    the password or the user name, raw or percent-encoded."""
    for character in [*SPECIAL, "".join(SPECIAL)]:
        for encoded in (False, True):
            password = _written(_password(character), encoded)
            yield f"{scheme}://app:{password}@{after}", password, "app"
            user = _written(f"ap{character}pu", encoded)
            password = _written(_password("-"), encoded)
            yield f"{scheme}://{user}:{password}@{after}", password, user


@pytest.mark.parametrize("scheme", SCHEMES)
def test_redact_url_shows_no_password_but_user_and_host(scheme: str) -> None:
    for url, password, user in _cases(scheme, SCHEMES[scheme]):
        shown = redact_url(url)
        _assert_hidden(shown, password)
        assert shown.startswith(f"{scheme}://"), url
        assert HOST in shown, url
        if ":" not in user:
            # A raw ":" in a user name ends it for every driver.
            assert shown.startswith(f"{scheme}://{user}:"), url


@pytest.mark.parametrize("scheme", SCHEMES)
def test_redact_text_shows_no_password_of_a_url_in_a_sentence(scheme: str) -> None:
    for url, password, _ in _cases(scheme, SCHEMES[scheme]):
        for sentence in (
            f"could not connect to {url}: connection refused",
            f"could not connect to {url!r} (timeout)",
            f"{url}",
        ):
            shown = redact_text(sentence)
            _assert_hidden(shown, password)
            assert HOST in shown, sentence


@pytest.mark.parametrize("character", SPECIAL)
@pytest.mark.parametrize("key", ["password", "token", "api_key", "sslpassword"])
def test_secret_query_values_stay_hidden(key: str, character: str) -> None:
    value = quote_plus(_password(character))
    for url in (
        f"redis://{HOST}:6379/0?{key}={value}",
        f"mssql+pyodbc://sa@{HOST}/db?driver=ODBC+18&{key}={value}&x=1",
        f"mongodb://app@{HOST}:27017/chat?{key}={value}#frag",
    ):
        shown = redact_url(url)
        _assert_hidden(shown, value)
        assert HOST in shown
        assert f"{key}=***" in shown


def test_the_reported_urls_are_redacted() -> None:
    assert (
        redact_url("postgresql+asyncpg://app:s3cr3t?PW@db/chat")
        == "postgresql+asyncpg://app:***@db/chat"
    )
    assert (
        redact_url("postgresql+psycopg://postgres:s3cr3t#PW@127.0.0.1:5499/test")
        == "postgresql+psycopg://postgres:***@127.0.0.1:5499/test"
    )
    # A user name with "@" stays whole: SQLAlchemy and urllib read it so.
    assert (
        redact_url("redis://me@corp:pw@cache:6379/0")
        == "redis://me@corp:***@cache:6379/0"
    )


# --- errors and repositories ---------------------------------------------------

#: What a repository made without a server is addressed at: a closed port.
UNREACHABLE = {
    "sqlite": "127.0.0.1/chat.db",
    "duckdb": "127.0.0.1/chat.duckdb",
    "postgresql+psycopg": "127.0.0.1:5499/chat",
    "postgresql+asyncpg": "127.0.0.1:5499/chat",
    "mysql+pymysql": "127.0.0.1:5499/chat",
    "mysql+asyncmy": "127.0.0.1:5499/chat",
    "mariadb+aiomysql": "127.0.0.1:5499/chat",
    "mssql+pyodbc": "127.0.0.1:5499/chat",
    "oracle+oracledb": "127.0.0.1:5499/?service_name=chat",
    "redis": "127.0.0.1:5499/0",
    "redis+cluster": "127.0.0.1:5499",
    "mongodb": "127.0.0.1:5499/chat",
    "neo4j": "127.0.0.1:5499",
    "bolt": "127.0.0.1:5499/chat",
    "cassandra": "127.0.0.1:5499/chat",
    "memory": "127.0.0.1",
    "nosuchdb": "127.0.0.1:5499/x",
}
#: Sync schemes whose ``from_url`` fails or returns at once without options
#: (the others would wait for their server; with a bad option they do not).
QUICK_WITHOUT_OPTIONS = {
    "sqlite",
    "duckdb",
    "postgresql+asyncpg",
    "mysql+asyncmy",
    "mariadb+aiomysql",
    "redis",
    "redis+cluster",
    "memory",
    "nosuchdb",
}
BAD_OPTION = {"no_such_option": 1}


def _unreachable_cases(scheme: str) -> Iterator[tuple[str, str]]:
    """(url, password as written) of every special character, raw; encoded, a
    password parses alike whatever it holds, so one stands for all."""
    every = "".join(SPECIAL)
    for url, password, user in _cases(scheme, UNREACHABLE[scheme]):
        if user == "app" and (
            password == unquote(password) or every in unquote(password)
        ):
            yield url, password


def _error_chain(error: BaseException) -> str:
    """Every message of ``error`` and of the errors a traceback shows with it."""
    texts: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        texts.append(f"{type(current).__name__}: {current}")
        texts.append(repr(current))
        current = current.__cause__ or (
            None if current.__suppress_context__ else current.__context__
        )
    return "\n".join(texts)


def _opened_or_failed_hidden(open_: Callable[[], Any], password: str) -> Any:
    """Call ``open_()``: its error, or the repository's repr, shows no password."""
    try:
        repository = open_()
    except Exception as error:
        _assert_hidden(_error_chain(error), password)
        return None
    _assert_hidden(repr(repository), password)
    return repository


@pytest.mark.parametrize("scheme", UNREACHABLE)
def test_connect_errors_show_no_password(scheme: str) -> None:
    attempts = [BAD_OPTION, {}] if scheme in QUICK_WITHOUT_OPTIONS else [BAD_OPTION]
    for url, password in _unreachable_cases(scheme):
        for options in attempts:
            repository = _opened_or_failed_hidden(
                functools.partial(connect, url, **options), password
            )
            close = getattr(repository, "close", None)
            if close is not None:
                with contextlib.suppress(Exception):
                    close()


@pytest.mark.parametrize("scheme", UNREACHABLE)
def test_connect_async_errors_and_reprs_show_no_password(scheme: str) -> None:
    for url, password in _unreachable_cases(scheme):
        for options in (BAD_OPTION, {}):
            repository = _opened_or_failed_hidden(
                functools.partial(connect_async, url, **options), password
            )
            aclose = getattr(repository, "aclose", None)
            if aclose is not None:
                with contextlib.suppress(Exception):
                    asyncio.run(aclose())


@pytest.mark.skipif(
    importlib.util.find_spec("chatledger_sql") is None, reason="needs chatledger-sql"
)
@pytest.mark.parametrize("character", ["-", "?", "#", "/", "@", "".join(SPECIAL)])
def test_a_sql_repository_made_by_from_url_shows_no_password(character: str) -> None:
    from chatledger_sql import AsyncSqlChatMemoryRepository, SqlChatMemoryRepository

    password = _password(character)
    url = f"postgresql+psycopg://app:{password}@127.0.0.1:5499/chat"
    # Without a server the sync constructor fails once it connects.
    sync = _opened_or_failed_hidden(
        functools.partial(SqlChatMemoryRepository.from_url, url, create_schema=False),
        password,
    )
    if sync is not None:
        sync.close()
    unsync = _opened_or_failed_hidden(
        functools.partial(AsyncSqlChatMemoryRepository.from_url, url), password
    )
    if unsync is not None:
        assert "127.0.0.1" in repr(unsync)
        asyncio.run(unsync.aclose())
