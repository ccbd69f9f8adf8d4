"""An OpenAI Agents SDK session that keeps its items in a chatledger repository.

Example:
    import asyncio

    from chatledger import AsyncInMemoryChatMemoryRepository
    from chatledger_openai_agents import ChatLedgerSession

    async def main():
        repository = AsyncInMemoryChatMemoryRepository()  # or connect_async(url)
        session = ChatLedgerSession("user-42", repository)
        hello = {"role": "assistant", "content": "Hello!"}
        await session.add_items([{"role": "user", "content": "Hi"}, hello])
        assert await session.get_items(limit=1) == [hello]
        assert await session.pop_item() == hello
        await session.clear_session()

    asyncio.run(main())

The session is the conversation ``session_id`` of the repository, kept as its
log; each item is one message (see :mod:`chatledger_openai_agents.items` for
the mapping).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from agents import TResponseInputItem
from agents.memory import SessionSettings
from agents.memory.session_settings import coerce_session_settings

from chatledger import (
    AsyncChatMemoryRepository,
    AsyncSupportsLog,
    AsyncSupportsLogRemoval,
    Message,
    is_async_repository,
    validate_conversation_id,
)
from chatledger_openai_agents.items import (
    ForeignMessageError,
    items_to_messages,
    messages_to_items,
)

__all__ = ["ChatLedgerSession"]

#: The most messages ``get_items(limit)`` asks for in one page: chatledger's
#: largest page, so a limit up to it is one read.
TAIL_PAGE = 10_000

_ASYNC_REPOSITORIES = (
    "an async chatledger repository (AsyncSqlChatMemoryRepository, "
    "AsyncRedisChatMemoryRepository, AsyncInMemoryChatMemoryRepository, or "
    "chatledger.connect_async(url))"
)


def _settings(value: object) -> SessionSettings:
    """The session's settings, as the SDK's own sessions take them."""
    if value is None:
        return SessionSettings()
    if isinstance(value, SessionSettings):
        return value
    if isinstance(value, Mapping):
        # The SDK's own coercion, so an unknown key raises its
        # "TypeError: Unknown session settings: ..." as its sessions do.
        return coerce_session_settings(dict(value))
    raise TypeError(
        f"session_settings must be a SessionSettings, a dict or None, not "
        f"{type(value).__name__}"
    )


def _checked_limit(limit: object) -> int | None:
    if limit is None:
        return None
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise TypeError(f"limit must be an int or None, not {type(limit).__name__}")
    if limit < 0:
        raise ValueError(f"limit must be >= 0, not {limit}")
    return limit


def _checked_repository(repository: object) -> None:
    """Refuse, before any I/O, a repository the session cannot keep a log in."""
    if not is_async_repository(repository):
        why = (
            f"{type(repository).__name__} is a sync repository, whose calls "
            "would block the event loop"
            if callable(getattr(repository, "find_by_conversation_id", None))
            else f"not {type(repository).__name__}"
        )
        raise TypeError(f"repository must be {_ASYNC_REPOSITORIES}; {why}")
    if not isinstance(repository, AsyncSupportsLog):
        raise TypeError(
            f"{type(repository).__name__} does not keep conversations as logs "
            "(AsyncSupportsLog: append_to_log, find_messages_page), which the "
            "session appends to and reads the newest items of; every built-in "
            "async repository does"
        )


class ChatLedgerSession:
    """The Agents SDK ``Session`` protocol over a chatledger async repository.

    Args:
        session_id: The session, stored as the conversation of that id;
            checked before any I/O like every conversation id.
        repository: An async chatledger repository that keeps conversations
            as logs (``AsyncSupportsLog``): ``AsyncSqlChatMemoryRepository``,
            ``AsyncRedisChatMemoryRepository``,
            ``AsyncInMemoryChatMemoryRepository``, or what
            ``chatledger.connect_async(url)`` opens (every built-in one). A
            sync repository is refused: its calls would block the event loop.
            One repository serves any event loop, so ``Runner.run_sync`` in
            any thread and successive ``asyncio.run`` calls share it.
        session_settings: The SDK's ``SessionSettings`` or a dict of its
            fields; ``SessionSettings()`` when ``None``, as for the SDK's own
            sessions. Its ``limit`` applies when ``get_items`` is given none.

    What each operation guarantees:

    - ``add_items`` validates every item, then stores the batch in one atomic
      append to the log (``append_to_log``), so concurrent writers, in tasks
      or processes, lose no item and duplicate none, and the append writes
      the new items only. Each item gets a new message id when it is
      converted, so the driver's retry of that append (after a lost
      connection) is a no-op; calling ``add_items`` again with the same items
      stores them again.
    - ``get_items(limit)`` returns the newest ``limit`` items, oldest first,
      each ``==`` to the item as added; it reads only those, newest first, a
      page at a time (one page up to :data:`TAIL_PAGE` items). Without a
      limit it reads the whole log.
    - ``pop_item`` is one atomic removal of the newest message
      (``remove_newest``), which needs a repository with
      ``AsyncSupportsLogRemoval``: two concurrent pops never return the same
      item, and an item another writer appends meanwhile is either popped
      (and returned) or kept, never lost. On a repository without it,
      ``pop_item`` raises rather than read the conversation and write it
      back, which would lose the appends of other writers that land in
      between.
    - ``clear_session`` deletes the conversation in one step.

    The SDK's ``OpenAIResponsesCompactionSession`` replaces the history of
    the session it wraps with the compacted items. Over this session the
    replacement is one atomic ``save_all``, through the private hook
    ``_atomic_replace_items`` that the SDK (0.24) looks up, not a clear then
    an add: the history is the old one or the compacted one, never empty or
    half written, and items that cannot be stored leave it untouched. As for
    the SDK's Redis session, the replacement does not check that the history
    is still the one compacted, so an append of another process that lands
    during a compaction is replaced with the rest. This session offers no
    compaction snapshot (``_get_compaction_snapshot``): chatledger has no
    conditional replacement of the newest messages, so compaction after a
    turn runs when the turn's model call saw the whole stored history (no
    ``limit``), and is skipped, the history kept, when it saw only the
    newest items.

    Raises:
        InvalidConversationIdError: for a bad ``session_id``.
        TypeError: ``repository`` is not an async repository that keeps
            logs, or ``session_settings`` is neither settings, a dict nor
            ``None``, or a dict with a key ``SessionSettings`` does not have
            (``Unknown session settings``); all before any I/O.
    """

    # Typed as the SDK's protocol types it (a mutable attribute must match);
    # a session sets it to SessionSettings() when given None.
    session_settings: SessionSettings | None

    def __init__(
        self,
        session_id: str,
        repository: AsyncChatMemoryRepository,
        *,
        session_settings: SessionSettings | Mapping[str, Any] | None = None,
    ) -> None:
        """Keep the items of ``session_id`` in ``repository``."""
        self.session_id = validate_conversation_id(session_id)
        _checked_repository(repository)
        self.session_settings = _settings(session_settings)
        self.repository = repository

    def __repr__(self) -> str:
        return f"ChatLedgerSession({self.session_id!r}, {self.repository!r})"

    @property
    def _log(self) -> AsyncSupportsLog:
        return cast(AsyncSupportsLog, self.repository)

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """Return the newest ``limit`` items, oldest first; all when ``None``.

        Without ``limit``, ``session_settings.limit`` applies, if set; ``0``
        gives ``[]`` without any I/O.

        Raises:
            TypeError, ValueError: the limit is not ``None`` or an int >= 0;
                before any I/O. (The SDK's sessions disagree on a negative
                limit, from all items to an error: it is refused here.)
            ForeignMessageError: a message among those returned was not
                stored by a session.
        """
        if limit is None and self.session_settings is not None:
            limit = self.session_settings.limit
        count = _checked_limit(limit)
        if count == 0:
            return []
        if count is None:
            messages = await self.repository.find_by_conversation_id(self.session_id)
        else:
            messages = await self._newest(count)
        return cast(list[TResponseInputItem], messages_to_items(messages))

    async def _newest(self, count: int) -> list[Message]:
        """The newest ``count`` messages of the log, oldest first."""
        newest: list[Message] = []
        cursor: str | None = None
        while len(newest) < count:
            page = await self._log.find_messages_page(
                self.session_id,
                cursor,
                limit=min(count - len(newest), TAIL_PAGE),
                newest_first=True,
            )
            newest += page.messages
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        newest.reverse()
        return newest

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append ``items``, in order, in one atomic append to the log.

        Raises:
            TypeError, InvalidMessageError: before any I/O, for an item that
                is not a dict of JSON values (see
                :func:`~chatledger_openai_agents.items_to_messages`); nothing
                is stored then.
        """
        messages = items_to_messages(cast(list[Mapping[str, Any]], items))
        if messages:
            await self._log.append_to_log(self.session_id, messages)

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove the newest item and return it; ``None`` if there is none.

        One atomic ``remove_newest``: see the class docstring.

        Raises:
            TypeError: the repository has no ``AsyncSupportsLogRemoval``
                (``remove_newest``); before any I/O, nothing removed.
            ForeignMessageError: the newest message was not stored by a
                session. It is appended back, as the newest message, before
                this is raised; the error says if it could not be.
        """
        if not isinstance(self.repository, AsyncSupportsLogRemoval):
            raise TypeError(
                f"{type(self.repository).__name__} cannot remove messages from "
                "a log atomically (AsyncSupportsLogRemoval: remove_newest), "
                "which pop_item needs so that no concurrent append is lost"
            )
        removed = await self.repository.remove_newest(self.session_id, 1)
        if not removed:
            return None
        try:
            [item] = messages_to_items(removed)
        except ForeignMessageError as error:
            outcome = await self._put_back(removed[0])
            raise ForeignMessageError(f"{error}; {outcome}") from None
        return cast(TResponseInputItem, item)

    async def _put_back(self, message: Message) -> str:
        """Append a removed message of another client back; say what became of it."""
        # Removed ids are forgotten, so the same message is stored again.
        result = await self._log.append_to_log(self.session_id, [message])
        if result.appended:
            return "pop_item put it back as the newest message"
        return (
            "pop_item removed it and the log did not take it back (an equal "
            f"system message shows): {message!r}"
        )

    async def clear_session(self) -> None:
        """Delete every item of the session (the whole conversation)."""
        await self.repository.delete_by_conversation_id(self.session_id)

    async def _atomic_replace_items(self, items: list[TResponseInputItem]) -> bool:
        """Replace every item with ``items`` in one atomic write.

        The SDK's compaction session calls it, when it finds it on the
        session's type, instead of clearing the session and adding the
        compacted items. It returns ``False``, and the SDK then clears and
        adds through the public methods, for a subclass: one that changes how
        items are added or read must not be bypassed.

        Raises:
            TypeError, InvalidMessageError: before any I/O, for an item that
                is not a dict of JSON values; the history is untouched.
        """
        if type(self) is not ChatLedgerSession:
            return False
        messages = items_to_messages(cast(list[Mapping[str, Any]], items))
        await self.repository.save_all(self.session_id, messages)
        return True
