"""How the conformance cases, written once, drive an async repository.

Example (what :class:`chatledger.testing.AsyncChatMemoryRepositoryTests` does):

    from chatledger import AsyncInMemoryChatMemoryRepository, Message, MessageWindow
    from chatledger.testing.async_runner import (
        EventLoopThread,
        repository_facade,
        window_memory,
    )

    runner = EventLoopThread()
    repository = repository_facade(AsyncInMemoryChatMemoryRepository(), runner)
    repository.save_all("c1", [Message.user("hi")])    # awaited on runner's loop
    memory = window_memory(repository, MessageWindow(20))  # an async memory inside
    memory.add("c1", Message.assistant("hello"))
    memory.get("c1")                                     # both messages
    runner.close()

The suite's cases call repository methods and memories without ``await``. For
an async repository they get a facade whose every method runs the matching
coroutine on an event loop that the test owns, in a thread of its own, and
waits for its result or its exception. Cases that call from several threads
at once (the concurrency case) thereby run their coroutines concurrently on
that one loop, as tasks of one application would. This is test
infrastructure only: the repository under test awaits its driver on the
loop, and no library code runs in another thread.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Sequence
from typing import Any, TypeVar

from chatledger.async_memory import AsyncWindowChatMemory
from chatledger.async_repository import (
    AsyncSupportsConversationPages,
    AsyncSupportsCountMessages,
    AsyncSupportsWindowAppend,
)
from chatledger.memory import WindowChatMemory
from chatledger.messages import Message
from chatledger.repository import AppendResult, ConversationPage
from chatledger.window import Window

__all__ = [
    "EventLoopThread",
    "MemoryFacade",
    "RepositoryFacade",
    "repository_facade",
    "window_memory",
]

T = TypeVar("T")


class EventLoopThread:
    """An event loop running in a thread of its own, until :meth:`close`."""

    def __init__(self) -> None:
        """Start the loop and its thread."""
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="chatledger-test-loop", daemon=True
        )
        self._thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on the loop; return its result or raise its exception."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    def close(self) -> None:
        """Cancel what still runs, finalise async generators, stop the loop."""
        if self.loop.is_closed():
            return

        async def wind_down() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self.loop.shutdown_asyncgens()

        self.run(wind_down())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()


class RepositoryFacade:
    """The four operations of an async repository, each run on a runner's loop.

    Attributes:
        repository: The async repository.
        runner: The loop its coroutines run on.
    """

    def __init__(self, repository: Any, runner: EventLoopThread) -> None:
        """Drive ``repository`` on ``runner``."""
        self.repository = repository
        self.runner = runner

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.repository!r})"

    def find_conversation_ids(self) -> list[str]:
        """Await ``find_conversation_ids``."""
        found: list[str] = self.runner.run(self.repository.find_conversation_ids())
        return found

    def find_by_conversation_id(self, conversation_id: str) -> list[Message]:
        """Await ``find_by_conversation_id``."""
        found: list[Message] = self.runner.run(
            self.repository.find_by_conversation_id(conversation_id)
        )
        return found

    def save_all(self, conversation_id: str, messages: Sequence[Message]) -> None:
        """Await ``save_all``."""
        self.runner.run(self.repository.save_all(conversation_id, messages))

    def delete_by_conversation_id(self, conversation_id: str) -> None:
        """Await ``delete_by_conversation_id``."""
        self.runner.run(self.repository.delete_by_conversation_id(conversation_id))

    def window_memory(self, window: Window) -> MemoryFacade:
        """An :class:`~chatledger.AsyncWindowChatMemory` over the repository."""
        return MemoryFacade(AsyncWindowChatMemory(self.repository, window), self.runner)


class _WindowAppend(RepositoryFacade):
    def append_to_window(
        self, conversation_id: str, messages: Sequence[Message], window: Window
    ) -> AppendResult:
        """Await ``append_to_window``."""
        result: AppendResult = self.runner.run(
            self.repository.append_to_window(conversation_id, messages, window)
        )
        return result


class _CountMessages(RepositoryFacade):
    def count_messages(self, conversation_id: str) -> int:
        """Await ``count_messages``."""
        count: int = self.runner.run(self.repository.count_messages(conversation_id))
        return count


class _ConversationPages(RepositoryFacade):
    def find_conversation_ids_page(
        self, cursor: str | None = None, limit: int = 100
    ) -> ConversationPage:
        """Await ``find_conversation_ids_page``."""
        page: ConversationPage = self.runner.run(
            self.repository.find_conversation_ids_page(cursor, limit)
        )
        return page


_CAPABILITIES: list[tuple[type, type[RepositoryFacade]]] = [
    (AsyncSupportsWindowAppend, _WindowAppend),
    (AsyncSupportsCountMessages, _CountMessages),
    (AsyncSupportsConversationPages, _ConversationPages),
]
_FACADES: dict[tuple[type[RepositoryFacade], ...], type[RepositoryFacade]] = {}


def repository_facade(repository: Any, runner: EventLoopThread) -> RepositoryFacade:
    """A facade with exactly the optional capabilities ``repository`` has.

    The suite's capability checks (``isinstance(repository,
    SupportsWindowAppend)`` and the like) then see what the async repository
    offers, no more.
    """
    mixins = tuple(
        facade for protocol, facade in _CAPABILITIES if isinstance(repository, protocol)
    )
    cls = _FACADES.get(mixins)
    if cls is None:
        name = "RepositoryFacade" + "".join(m.__name__ for m in mixins)
        cls = _FACADES[mixins] = type(name, (*mixins, RepositoryFacade), {})
    return cls(repository, runner)


class MemoryFacade:
    """An async window memory, each call run on a runner's loop.

    Attributes:
        memory: The async memory.
        window: Its window.
    """

    def __init__(self, memory: AsyncWindowChatMemory, runner: EventLoopThread) -> None:
        """Drive ``memory`` on ``runner``."""
        self.memory = memory
        self.window = memory.window
        self._runner = runner

    def add(
        self, conversation_id: str, messages: Message | Sequence[Message]
    ) -> AppendResult:
        """Await ``add``."""
        return self._runner.run(self.memory.add(conversation_id, messages))

    def get(self, conversation_id: str) -> list[Message]:
        """Await ``get``."""
        return self._runner.run(self.memory.get(conversation_id))

    def clear(self, conversation_id: str) -> None:
        """Await ``clear``."""
        self._runner.run(self.memory.clear(conversation_id))


def window_memory(repository: Any, window: Window) -> WindowChatMemory | MemoryFacade:
    """The memory a suite case drives over ``repository``.

    A sync repository gets :class:`chatledger.WindowChatMemory` (what
    ``MessageWindowChatMemory`` and ``TokenWindowChatMemory`` are); a facade
    over an async repository gets :class:`chatledger.AsyncWindowChatMemory`,
    so both memories run every case.
    """
    if isinstance(repository, RepositoryFacade):
        return repository.window_memory(window)
    return WindowChatMemory(repository, window)
