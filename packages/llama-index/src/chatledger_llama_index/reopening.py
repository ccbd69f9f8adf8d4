"""Pickling a store: reopened from its URL, or refused when unpickled.

Example:
    import pickle

    from chatledger_llama_index import ChatLedgerChatStore

    store = ChatLedgerChatStore.from_url("sqlite:///chat.db")
    again = pickle.loads(pickle.dumps(store))  # a new connection to chat.db
    again.repository.close()
    store.repository.close()

A store holds a live connection, which cannot be pickled. One made by
``from_url`` pickles as its URL and options and reconnects when unpickled
(the pickle holds the URL, password included, as LlamaIndex's own
``SQLAlchemyChatStore`` keeps its URI). One made from a repository object
cannot be rebuilt: unpickling it raises :class:`StoreNotPicklableError`,
naming ``from_url``.

Why the refusal waits for unpickling: LlamaIndex's memories (``Memory``,
``ChatMemoryBuffer``) pickle by trying each field and silently leaving out
one that refuses (with a logged warning), and come back with their default
store, an empty in-memory one. A store that refused to be pickled would be
swapped for that default without an error; one that refuses to be
unpickled makes the whole memory fail to load, saying why.
"""

from __future__ import annotations

from typing import Any

from chatledger import redact_url

__all__ = ["StoreNotPicklableError", "refuse", "reopen"]

#: Schemes whose stores live in one process: a URL of one reopens empty.
_PROCESS_LOCAL = frozenset({"memory"})


class StoreNotPicklableError(TypeError):
    """A pickled store cannot be rebuilt: it was not made from a URL."""


def reopen(store_class: Any, url: str | None, options: dict[str, Any]) -> Any:
    """Make a store again with ``store_class.from_url``, as unpickling does.

    Raises:
        StoreNotPicklableError: the URL names a store of one process
            (``memory://``), which another process cannot reach.
    """
    name = store_class.__name__
    for given in (url, options.get("async_url")):
        scheme = given.partition(":")[0].lower() if isinstance(given, str) else ""
        if isinstance(given, str) and scheme in _PROCESS_LOCAL:
            raise StoreNotPicklableError(
                f"this {name} was made from {redact_url(given)!r}, a store that "
                "lives in the process that made it: unpickled elsewhere it would "
                "be empty. Pickle a store of a database URL "
                f"({name}.from_url('sqlite:///chat.db'), ...)"
            )
    return store_class.from_url(url, **options)


def refuse(name: str) -> Any:
    """Raise, as unpickling a store made from a repository object does.

    Raises:
        StoreNotPicklableError: always, naming ``from_url``.
    """
    raise StoreNotPicklableError(
        f"this {name} was made from a repository object, whose connection "
        f"cannot be pickled: make it with {name}.from_url(url) and it reconnects "
        "to the same database when unpickled"
    )
