"""Open an async repository from a URL: the asyncio twin of :func:`chatledger.connect`.

Example:
    import asyncio

    from chatledger import AsyncMessageWindowChatMemory, Message, connect_async

    async def main():
        repository = connect_async("sqlite+aiosqlite:///chat.db")  # no I/O yet
        memory = AsyncMessageWindowChatMemory(repository, max_messages=20)
        await memory.add("c1", Message.user("Hello"))
        await memory.get("c1")
        await repository.aclose()

    asyncio.run(main())

Adapters announce the schemes their async repositories handle in the
entry-point group ``chatledger.async_repositories``, exactly as the sync ones
do in ``chatledger.repositories``; the lookup (the exact scheme, then the
part before ``+``), the errors and the redaction of passwords are
:func:`chatledger.connect`'s. Opening does no I/O: the repository connects
on its first call, so ``connect_async`` is a plain function.
"""

from __future__ import annotations

from typing import Any

from chatledger.async_repository import AsyncChatMemoryRepository
from chatledger.connect import _open, _resolve, url_scheme

__all__ = ["ASYNC_ENTRY_POINT_GROUP", "connect_async"]

#: The entry-point group adapters register their async URL schemes in.
ASYNC_ENTRY_POINT_GROUP = "chatledger.async_repositories"


def connect_async(url: str, **options: Any) -> AsyncChatMemoryRepository:
    """Open the async repository that ``url`` names, through its installed adapter.

    Args:
        url: A backend URL: ``memory://``; SQL with an asyncio driver,
            ``sqlite+aiosqlite:///chat.db``, ``postgresql+psycopg://...``
            (psycopg 3's async connection), ``postgresql+asyncpg://...``,
            ``mysql+asyncmy://...``, ``mysql+aiomysql://...`` (MariaDB
            too), or without a driver (``sqlite:///chat.db``, which takes
            the installed one); ``redis://host:6379/0``, ``rediss://...``,
            ``redis+cluster://...``; ``mongodb://...``,
            ``mongodb+srv://...``; ``neo4j://...``, ``bolt://...``;
            ``cassandra://...``.
        **options: Passed unchanged to the adapter's ``from_url``.

    Returns:
        The adapter's async repository; close it with ``await
        repository.aclose()`` or ``async with``.

    Raises:
        UnknownBackendError: if no installed adapter handles the scheme
            asynchronously; the message names the ``pip install`` line.

    Errors of the adapter (a bad option, a sync driver, a missing driver)
    propagate with their types unchanged; a secret of ``url`` in their
    messages is replaced by ``***``.
    """
    scheme = url_scheme(url)
    factory = _resolve(scheme, url, ASYNC_ENTRY_POINT_GROUP)
    repository: AsyncChatMemoryRepository = _open(factory, url, options)
    return repository
