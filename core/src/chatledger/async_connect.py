# sync twin: connect.py
# sync rename: ASYNC_ENTRY_POINT_GROUP -> ENTRY_POINT_GROUP
"""Open a repository from a URL: the one front door to every backend.

Example:
    from chatledger import AsyncMessageWindowChatMemory, Message, connect_async

    repository = connect_async("sqlite:///chat.db")  # needs chatledger-sql
    memory = AsyncMessageWindowChatMemory(repository, max_messages=20)
    await memory.add("c1", Message.user("Hello"))
    await repository.aclose()

The URL scheme names the backend. Adapters announce the schemes they handle
in the entry-point group ``chatledger.async_repositories``; the lookup (the
exact scheme, then the part before ``+``) is :mod:`chatledger.backends`'.
Core never imports an adapter: installing one is enough.

A URL's password (and query parameters such as ``password=`` or ``token=``)
is never shown: every message here goes through
:func:`~chatledger.redaction.redact_url`. The helpers of both modules are
importable from here too.
"""

from __future__ import annotations

from typing import Any

from chatledger.async_repository import AsyncChatMemoryRepository
from chatledger.backends import (
    ASYNC_ENTRY_POINT_GROUP,
    adapter_parameters,
    install_hint,
    installed_schemes,
    open_repository,
    resolve,
    url_scheme,
)
from chatledger.redaction import hide_secrets, redact_text, redact_url, url_secrets

__all__ = ["ASYNC_ENTRY_POINT_GROUP", "connect_async"]
# What callers of this module use beside it, importable from here too.
__all__ += [
    "adapter_parameters",
    "hide_secrets",
    "install_hint",
    "installed_schemes",
    "redact_text",
    "redact_url",
    "url_scheme",
    "url_secrets",
]


def connect_async(url: str, **options: Any) -> AsyncChatMemoryRepository:
    """Open the repository that ``url`` names, through its installed adapter.

    Args:
        url: A backend URL: ``memory://``, ``sqlite:///chat.db``,
            ``postgresql+psycopg://user@host/db``, ``mysql://...``,
            ``mariadb://...``, ``redis://host:6379/0``, ``rediss://...``,
            ``mongodb://...``, ``mongodb+srv://...``,
            ``cassandra://host[,host][:port]/keyspace``, ``neo4j://...``,
            ``neo4j+s://...`` or ``bolt://...``. A SQL URL may name its
            driver, sync or asyncio as the repository is (``mysql+pymysql``,
            ``mysql+asyncmy``, ``sqlite+aiosqlite``, ``postgresql+asyncpg``;
            ``postgresql+psycopg`` is both): see each adapter's documentation.
        **options: Passed unchanged to the adapter's ``from_url`` (for example a
            table name or a key prefix; see the adapter's documentation).

    Returns:
        The adapter's repository; close it with ``await repository.aclose()``
        or use it in an ``async with`` block.

    Raises:
        UnknownBackendError: if no installed adapter handles the scheme; the
            message names the ``pip install`` line that adds it.

    Errors of the adapter or its driver (a refused connection, a bad option,
    a driver of the other kind) propagate with their types unchanged; a
    secret of ``url`` in their messages is replaced by ``***``.
    """
    scheme = url_scheme(url)
    factory = resolve(scheme, url, ASYNC_ENTRY_POINT_GROUP)
    repository: AsyncChatMemoryRepository = open_repository(factory, url, options)
    return repository
