# sync twin: memory.py
"""Chat memories: the policy layer between an application and a repository.

Example:
    from chatledger import AsyncMessageWindowChatMemory, Message

    memory = AsyncMessageWindowChatMemory(max_messages=20)  # in-memory repository
    await memory.add("c1", [Message.system("Be brief."), Message.user("Hi")])
    prompt = await memory.get("c1")  # system first, then the window

Data flows one way: caller -> memory (what the model sees) -> repository
(where it lives). On a repository that keeps each conversation as a log
(:class:`~chatledger.AsyncSupportsLog`: every built-in one), ``add`` appends to
the log and ``get`` reads the window as a view of it: the whole conversation
stays stored, for a transcript (``find_messages_page``) or an audit. On one
that stores only a window, a memory uses its atomic window append
(:class:`~chatledger.AsyncSupportsWindowAppend`), or else reads the
conversation, applies :func:`~chatledger.window_rewrite.rewrite_window` and
writes it back with ``save_all``, which is not safe against concurrent
writers. ``memory.turn(...)`` takes one model turn (:mod:`chatledger.async_turn`).

The sync memories and the async ones (the same names with an ``Async``
prefix) keep the same window by the same rules: only their I/O differs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, cast, runtime_checkable

from chatledger.async_in_memory import AsyncInMemoryChatMemoryRepository
from chatledger.async_repository import (
    AsyncChatMemoryRepository,
    AsyncSupportsLog,
    AsyncSupportsWindowAppend,
    is_async_repository,
)
from chatledger.async_turn import AsyncTurnContext
from chatledger.errors import InvalidRetentionError
from chatledger.messages import Message
from chatledger.results import AppendResult
from chatledger.retention import Retention
from chatledger.tokens import estimate_tokens
from chatledger.turn_rules import OnError
from chatledger.validation import validate_conversation_id, validate_messages
from chatledger.window import MessageWindow, TokenWindow, Window
from chatledger.window_rewrite import rewrite_window

__all__ = [
    "CONVERSATION_ID",
    "AsyncChatMemory",
    "AsyncMessageWindowChatMemory",
    "AsyncTokenWindowChatMemory",
    "AsyncWindowChatMemory",
]
# The read-modify-write step, importable from here as from window_rewrite.
__all__ += ["rewrite_window"]

#: The context key that carries the conversation id (Spring AI's name).
CONVERSATION_ID = "chat_memory_conversation_id"


@runtime_checkable
class AsyncChatMemory(Protocol):
    """What an application talks to: add, get and clear one conversation."""

    async def add(
        self, conversation_id: str, messages: Message | Sequence[Message]
    ) -> object:
        """Add one message or a batch to a conversation."""
        ...

    async def get(self, conversation_id: str) -> list[Message]:
        """Return what the model should see, oldest first."""
        ...

    async def clear(self, conversation_id: str) -> None:
        """Forget a conversation."""
        ...


class AsyncWindowChatMemory:
    """A memory that keeps a :class:`~chatledger.window.Window` of each conversation.

    Raises:
        TypeError: ``repository`` is ``None`` or a repository of the other
            kind (sync memories take sync repositories, async memories async
            ones), or ``window`` is not a :class:`~chatledger.window.Window`.
        InvalidRetentionError: a message window larger than what the
            repository's :class:`~chatledger.retention.Retention` keeps.
    """

    def __init__(self, repository: AsyncChatMemoryRepository, window: Window) -> None:
        """Keep ``window`` of each conversation stored in ``repository``."""
        if repository is None:
            raise TypeError("repository must not be None")
        if not is_async_repository(repository):
            if True:  # async
                kind = "an async repository (its methods must be coroutine functions)"
            else:
                kind = "a sync repository (its methods must not be coroutine functions)"
            raise TypeError(
                f"{type(repository).__name__} is not {kind}, as "
                f"{type(self).__name__} needs; a sync repository goes with "
                "MessageWindowChatMemory or TokenWindowChatMemory, an async one "
                "with their Async twins"
            )
        if not isinstance(window, Window):
            raise TypeError(f"window must be a Window, not {type(window).__name__}")
        retention = getattr(repository, "retention", None)
        if (
            isinstance(retention, Retention)
            and retention.keep is not None
            and window.counter_id is None
            and window.limit > retention.keep
        ):
            raise InvalidRetentionError(
                f"a window of {window.limit} messages does not fit in a log that "
                f"keeps {retention.keep} ({retention!r}): keep at least the "
                "window's size, or make the window smaller"
            )
        self.repository = repository
        self.window = window
        self._checked: object = None
        self._log: AsyncSupportsLog | None = None
        self._window_append = False

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.repository!r}, {self.window!r})"

    async def add(
        self, conversation_id: str, messages: Message | Sequence[Message]
    ) -> AppendResult:
        """Add messages; returns what was written (and, on a store that keeps
        only the window, what the window evicted).

        On a log, nothing is removed: ``evicted_ids`` is empty, and the window
        is applied when it is read. A message whose id the conversation holds
        or held, and a system message equal to the current one, are not
        stored again.

        Raises:
            InvalidConversationIdError: before any I/O, for a bad id.
            InvalidMessageError: before any I/O, for a bad batch.
        """
        validate_conversation_id(conversation_id)
        batch = validate_messages(messages)
        if not batch:
            return AppendResult()
        repository = self.repository
        self._check(repository)
        if self._log is not None:
            return await self._log.append_to_log(conversation_id, batch, self.window)
        if self._window_append:
            appender = cast(AsyncSupportsWindowAppend, repository)
            return await appender.append_to_window(conversation_id, batch, self.window)
        stored = await repository.find_by_conversation_id(conversation_id)
        update = rewrite_window(stored, batch, self.window)
        if update is None:
            return AppendResult()
        await repository.save_all(conversation_id, update.messages)
        return AppendResult(update.appended, [m.id for m in update.evicted])

    async def get(self, conversation_id: str) -> list[Message]:
        """Return the window, oldest first.

        On a repository that keeps logs, the window is a view of the log
        (``find_window``); on one that stores only the window, the stored
        conversation as it is.
        """
        validate_conversation_id(conversation_id)
        self._check(self.repository)
        if self._log is not None:
            return await self._log.find_window(conversation_id, self.window)
        return await self.repository.find_by_conversation_id(conversation_id)

    def _check(self, repository: AsyncChatMemoryRepository) -> None:
        if repository is not self._checked:
            # A runtime protocol check costs microseconds; do it once per repository.
            is_log = isinstance(repository, AsyncSupportsLog)
            self._log = cast(AsyncSupportsLog, repository) if is_log else None
            self._window_append = isinstance(repository, AsyncSupportsWindowAppend)
            self._checked = repository

    async def clear(self, conversation_id: str) -> None:
        """Delete the conversation from the repository."""
        validate_conversation_id(conversation_id)
        await self.repository.delete_by_conversation_id(conversation_id)

    def turn(
        self,
        conversation_id: str,
        *prompt: Message,
        on_error: OnError = "discard",
    ) -> AsyncTurnContext:
        """Open one model turn; see :mod:`chatledger.async_turn`.

        ``async with memory.turn("c1", Message.user("Hi")) as turn:`` reads
        the history on entry (``turn.messages``: history and prompt, system
        first), collects ``turn.reply(...)`` once per round and, on a normal
        exit, stores the new prompt messages and the replies in one append.
        When the block raises (or, with asyncio, its task is cancelled),
        nothing is stored (``on_error="discard"``) or the prompt alone
        (``"keep_prompt"``), and the exception propagates. ``memory.turn``
        and ``turn.reply`` are plain calls.

        Raises:
            InvalidConversationIdError, InvalidMessageError, ValueError: for a
                bad id, prompt or ``on_error``, here, before any I/O.
        """
        return AsyncTurnContext(self, conversation_id, prompt, on_error)


class AsyncMessageWindowChatMemory(AsyncWindowChatMemory):
    """Keep at most ``max_messages`` messages per conversation, on whole turns.

    The trimming rules are documented in :mod:`chatledger.window`.
    """

    def __init__(
        self,
        repository: AsyncChatMemoryRepository | None = None,
        max_messages: int = 20,
    ) -> None:
        """Use ``repository`` (a new in-memory one by default)."""
        super().__init__(
            AsyncInMemoryChatMemoryRepository() if repository is None else repository,
            MessageWindow(max_messages),
        )

    @property
    def max_messages(self) -> int:
        """The window's message limit."""
        return self.window.limit


class AsyncTokenWindowChatMemory(AsyncWindowChatMemory):
    """Keep at most ``max_tokens`` tokens per conversation, on whole turns.

    The newest turn is kept whole even when it alone is larger than the budget
    (a single message larger than the whole budget included): the memory never
    drops the turn in progress; older turns go first. See :mod:`chatledger.window`.
    """

    def __init__(
        self,
        repository: AsyncChatMemoryRepository,
        max_tokens: int,
        token_counter: Callable[[Message], int] = estimate_tokens,
        counter_id: str | None = None,
    ) -> None:
        """Count with ``token_counter`` (a dependency-free estimate by default).

        ``counter_id`` names the counter so that stored sizes are reused: see
        :class:`chatledger.TokenWindow`.
        """
        super().__init__(repository, TokenWindow(max_tokens, token_counter, counter_id))

    @property
    def max_tokens(self) -> int:
        """The window's token budget."""
        return self.window.limit
