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

The memories a case makes come from :func:`memory_over` (or
:func:`window_memory`): the sync memory over a sync repository, its async
twin behind a :class:`MemoryFacade` over an async one. The facade's ``turn``
returns a :class:`TurnFacade`, which awaits the async block's
``__aenter__`` and ``__aexit__`` on the loop, so the turn cases written with
``with memory.turn(...)`` run ``async with`` for async repositories.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, Generic, Literal, TypeVar

from chatledger.async_memory import AsyncWindowChatMemory
from chatledger.async_repository import (
    AsyncSupportsConversationInfo,
    AsyncSupportsConversationPages,
    AsyncSupportsCountMessages,
    AsyncSupportsLog,
    AsyncSupportsLogRemoval,
    AsyncSupportsSaveMany,
    AsyncSupportsWindowAppend,
)
from chatledger.async_turn import AsyncTurnContext
from chatledger.conversation_info import (
    DEFAULT_CONVERSATION_PAGE_SIZE,
    UNSET,
    ConversationInfo,
    ConversationInfoPage,
    Unset,
)
from chatledger.memory import WindowChatMemory
from chatledger.messages import JsonValue, Message
from chatledger.repository import AppendResult, ConversationPage, MessagePage
from chatledger.turn import OnError, Turn
from chatledger.window import Window

__all__ = [
    "EventLoopThread",
    "MemoryFacade",
    "RepositoryFacade",
    "TurnFacade",
    "memory_over",
    "repository_facade",
    "window_memory",
]

T = TypeVar("T")
A = TypeVar("A", bound=AsyncWindowChatMemory)


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


class _Log(RepositoryFacade):
    def append_to_log(
        self,
        conversation_id: str,
        messages: Sequence[Message],
        window: Window | None = None,
    ) -> AppendResult:
        """Await ``append_to_log``."""
        result: AppendResult = self.runner.run(
            self.repository.append_to_log(conversation_id, messages, window)
        )
        return result

    def find_window(self, conversation_id: str, window: Window) -> list[Message]:
        """Await ``find_window``."""
        found: list[Message] = self.runner.run(
            self.repository.find_window(conversation_id, window)
        )
        return found

    def find_messages_page(
        self,
        conversation_id: str,
        cursor: str | None = None,
        limit: int = 50,
        newest_first: bool = True,
    ) -> MessagePage:
        """Await ``find_messages_page``."""
        page: MessagePage = self.runner.run(
            self.repository.find_messages_page(
                conversation_id, cursor, limit, newest_first
            )
        )
        return page


class _LogRemoval(RepositoryFacade):
    def remove_newest(self, conversation_id: str, count: int = 1) -> list[Message]:
        """Await ``remove_newest``."""
        removed: list[Message] = self.runner.run(
            self.repository.remove_newest(conversation_id, count)
        )
        return removed

    def remove_messages(
        self, conversation_id: str, message_ids: Sequence[str]
    ) -> list[Message]:
        """Await ``remove_messages``."""
        removed: list[Message] = self.runner.run(
            self.repository.remove_messages(conversation_id, message_ids)
        )
        return removed


class _SaveMany(RepositoryFacade):
    def save_many(self, conversations: Mapping[str, Sequence[Message]]) -> None:
        """Await ``save_many``."""
        self.runner.run(self.repository.save_many(conversations))


class _ConversationInfo(RepositoryFacade):
    def set_conversation_info(
        self,
        conversation_id: str,
        *,
        owner: str | Literal[Unset.UNSET] | None = UNSET,
        metadata: Mapping[str, Any] | Literal[Unset.UNSET] = UNSET,
    ) -> ConversationInfo:
        """Await ``set_conversation_info``."""
        info: ConversationInfo = self.runner.run(
            self.repository.set_conversation_info(
                conversation_id, owner=owner, metadata=metadata
            )
        )
        return info

    def get_conversation_info(self, conversation_id: str) -> ConversationInfo | None:
        """Await ``get_conversation_info``."""
        info: ConversationInfo | None = self.runner.run(
            self.repository.get_conversation_info(conversation_id)
        )
        return info

    def find_conversations(
        self,
        *,
        owner: str | None = None,
        metadata: Mapping[str, JsonValue] | None = None,
        updated_before: datetime | None = None,
        cursor: str | None = None,
        limit: int = DEFAULT_CONVERSATION_PAGE_SIZE,
    ) -> ConversationInfoPage:
        """Await ``find_conversations``."""
        page: ConversationInfoPage = self.runner.run(
            self.repository.find_conversations(
                owner=owner,
                metadata=metadata,
                updated_before=updated_before,
                cursor=cursor,
                limit=limit,
            )
        )
        return page


_CAPABILITIES: list[tuple[type, type[RepositoryFacade]]] = [
    (AsyncSupportsSaveMany, _SaveMany),
    (AsyncSupportsLog, _Log),
    (AsyncSupportsLogRemoval, _LogRemoval),
    (AsyncSupportsWindowAppend, _WindowAppend),
    (AsyncSupportsCountMessages, _CountMessages),
    (AsyncSupportsConversationPages, _ConversationPages),
    (AsyncSupportsConversationInfo, _ConversationInfo),
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


class MemoryFacade(Generic[A]):
    """An async window memory, each call run on a runner's loop.

    Attributes:
        memory: The async memory.
        window: Its window.
    """

    def __init__(self, memory: A, runner: EventLoopThread) -> None:
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

    def turn(
        self, conversation_id: str, *prompt: Message, on_error: OnError = "discard"
    ) -> TurnFacade:
        """``memory.turn(...)``, not awaited: it checks its arguments at once."""
        context = self.memory.turn(conversation_id, *prompt, on_error=on_error)
        return TurnFacade(context, self._runner)


class TurnFacade:
    """An ``async with`` turn block driven by a plain ``with`` block.

    Entering awaits ``__aenter__`` on the runner's loop and exiting awaits
    ``__aexit__`` with the block's exception, so a case's body runs between
    the two awaits as it would inside ``async with``.

    Attributes:
        context: The async turn block.
    """

    def __init__(self, context: AsyncTurnContext, runner: EventLoopThread) -> None:
        """Drive ``context`` on ``runner``."""
        self.context = context
        self._runner = runner

    @property
    def result(self) -> object:
        """What the memory's ``add`` returned on exit."""
        return self.context.result

    def __enter__(self) -> Turn:
        return self._runner.run(self.context.__aenter__())

    def __exit__(
        self,
        kind: type[BaseException] | None,
        failed: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._runner.run(self.context.__aexit__(kind, failed, traceback))


def memory_over(
    repository: Any,
    make: Callable[[Any], T],
    make_async: Callable[[Any], A],
) -> T | MemoryFacade[A]:
    """The memory a suite case drives: ``make``'s, or ``make_async``'s in a facade.

    A sync repository gets ``make(repository)``; a facade over an async
    repository gets a :class:`MemoryFacade` over ``make_async`` of the async
    repository. A case written once thereby runs a sync memory and its twin.
    """
    if isinstance(repository, RepositoryFacade):
        return MemoryFacade(make_async(repository.repository), repository.runner)
    return make(repository)


def window_memory(
    repository: Any, window: Window
) -> WindowChatMemory | MemoryFacade[AsyncWindowChatMemory]:
    """The memory a suite case drives over ``repository``.

    A sync repository gets :class:`chatledger.WindowChatMemory` (what
    ``MessageWindowChatMemory`` and ``TokenWindowChatMemory`` are); a facade
    over an async repository gets :class:`chatledger.AsyncWindowChatMemory`,
    so both memories run every case.
    """
    return memory_over(
        repository,
        lambda sync: WindowChatMemory(sync, window),
        lambda async_: AsyncWindowChatMemory(async_, window),
    )
