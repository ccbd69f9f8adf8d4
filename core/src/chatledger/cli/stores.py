"""Opening, reading and closing the stores a command works on."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote

from chatledger.connect import adapter_parameters, connect, redact_url, url_scheme
from chatledger.errors import ChatLedgerError
from chatledger.messages import Message
from chatledger.repository import ChatMemoryRepository

__all__ = [
    "close",
    "closed_after",
    "database_files",
    "drop_namespace",
    "local_database_file",
    "open_store",
    "read_conversation",
]

#: The constructor flags with which adapters create their tables, indexes or
#: constraints on opening; commands that only read turn them off.
_CREATE_FLAGS = ("create_schema", "create_indexes")


#: Client settings the command gives, unless -o does, by scheme family: it
#: should fail in seconds when a server does not answer (pymongo waits 30 s).
_CLIENT_DEFAULTS: dict[str, dict[str, Any]] = {
    "mongodb": {"serverSelectionTimeoutMS": 3000},
}


def open_store(
    url: str,
    options: dict[str, Any],
    *,
    create: bool = True,
    closing: list[object] | None = None,
) -> ChatMemoryRepository:
    """Open ``url``; with ``create=False`` the adapter creates no storage.

    Put in ``closing`` (the command's :func:`closed_after` list), the
    repository is closed when the command ends, whether it succeeded or not.
    """
    options = dict(options)
    query = url.partition("?")[2].partition("#")[0]
    given = {name.lower() for name in [*options, *parse_qs(query)]}
    family = url_scheme(url).partition("+")[0]
    for name, value in _CLIENT_DEFAULTS.get(family, {}).items():
        # Given as -o or in the URL's query, in any case (as pymongo reads it).
        if name.lower() not in given:
            options[name] = value
    if not create:
        declared = adapter_parameters(url)
        for flag in _CREATE_FLAGS:
            if flag in declared:
                options.setdefault(flag, False)
    repository = connect(url, **options)
    if closing is not None:
        closing.append(repository)
    return repository


def read_conversation(
    repository: ChatMemoryRepository, url: str, cid: str
) -> list[Message]:
    """The messages of conversation ``cid``; an error when it has none."""
    messages = repository.find_by_conversation_id(cid)
    if not messages:
        raise ChatLedgerError(f"no conversation {cid!r} in {redact_url(url)}")
    return messages


@contextmanager
def closed_after() -> Iterator[list[object]]:
    """A list to put repositories in; each is closed, newest first, on leaving.

    A close that fails after the command succeeded is the command's error;
    after it failed, the command's own error is the one reported.
    """
    opened: list[object] = []
    try:
        yield opened
    except BaseException:
        for repository in reversed(opened):
            with suppress(Exception):
                close(repository)
        raise
    for repository in reversed(opened):
        close(repository)


def close(repository: object) -> None:
    """Close ``repository`` if it can be closed."""
    closer = getattr(repository, "close", None)
    if callable(closer):
        closer()


#: Files SQLite and DuckDB keep beside a database file while it is open.
_COMPANIONS = ("-journal", "-wal", "-shm", ".wal")


def local_database_file(url: str) -> Path | None:
    """The file a ``sqlite://`` or ``duckdb://`` URL names; ``None`` for others.

    A database in memory (no path, ``:memory:``, ``mode=memory``) and a SQLite
    ``file:`` URI (``?uri=true``) name none.
    """
    if url_scheme(url).partition("+")[0] not in ("sqlite", "duckdb"):
        return None
    path, _, query = url.partition("://")[2].partition("?")
    options = parse_qs(query)
    if "memory" in options.get("mode", []) or "true" in options.get("uri", []):
        return None
    # sqlite:///chat.db is relative, sqlite:////var/chat.db absolute.
    name = unquote(path.removeprefix("/"))
    return Path(name) if name and name != ":memory:" else None


def database_files(path: Path) -> list[Path]:
    """The database file ``path`` and the journal files kept beside it."""
    return [path, *(Path(f"{path}{ending}") for ending in _COMPANIONS)]


def drop_namespace(repository: object) -> None:
    """Remove the run's table, label set or key space, if the adapter can."""
    drop = getattr(repository, "drop_schema", None)
    if callable(drop):
        drop()
