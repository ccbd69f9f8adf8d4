"""Real repositories seen through a narrower or a watched door.

``Recording(repository)`` passes every call on and notes its name and
arguments, so a test can say which reads a session made. ``Narrowed``
exposes only the operations it is given: a repository written against an
older contract (no log, or a log without removals), over a real one.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine
from typing import Any

#: The operations of the four-call repository contract.
BASIC = (
    "find_conversation_ids",
    "find_by_conversation_id",
    "save_all",
    "delete_by_conversation_id",
)
#: The operations of ``AsyncSupportsLog``.
LOG = ("append_to_log", "find_window", "find_messages_page")


class Recording:
    """Pass every call to ``repository`` on; ``calls`` lists (name, args, kwargs)."""

    def __init__(self, repository: Any) -> None:
        self.repository = repository
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.repository, name)
        if not callable(attribute):
            return attribute

        @functools.wraps(attribute)
        async def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append((name, args, kwargs))
            return await attribute(*args, **kwargs)

        return call

    def names(self) -> list[str]:
        """The names of the calls made so far, in order."""
        return [name for name, _, _ in self.calls]


class Narrowed:
    """Only ``operations`` of ``repository``, each an async method of this object."""

    def __init__(self, repository: Any, operations: tuple[str, ...]) -> None:
        self.repository = repository
        for name in operations:
            setattr(self, name, _forward(getattr(repository, name)))


def _forward(
    method: Callable[..., Coroutine[Any, Any, Any]],
) -> Callable[..., Coroutine[Any, Any, Any]]:
    @functools.wraps(method)
    async def forward(*args: Any, **kwargs: Any) -> Any:
        return await method(*args, **kwargs)

    return forward
