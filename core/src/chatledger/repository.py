# Written by tools/async_to_sync.py from async_repository.py: edit that one.
"""The storage contracts: what a repository of conversations must do.

Example:
    from chatledger import (
        ChatMemoryRepository,
        InMemoryChatMemoryRepository,
        Message,
    )

    repository: ChatMemoryRepository = InMemoryChatMemoryRepository()
    repository.save_all("c1", [Message.user("hi")])
    repository.find_by_conversation_id("c1")

Repositories do not subclass these protocols; the conformance suite in
:mod:`chatledger.testing` checks their behaviour. Each protocol comes twice,
with the same method names, arguments, results and contract: for sync code
(``ChatMemoryRepository``, plain methods) and for asyncio (the same name
with an ``Async`` prefix, every method a coroutine).

``isinstance`` checks of these protocols look at method names only, as for
every runtime-checkable protocol, so a sync and an async repository pass for
each other; :func:`is_repository` also checks the kind of the methods.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Literal, Protocol, runtime_checkable

from chatledger.conversation_info import (
    UNSET,
    ConversationInfo,
    ConversationInfoPage,
    Unset,
)
from chatledger.messages import JsonValue, Message
from chatledger.results import AppendResult, ConversationPage, MessagePage
from chatledger.window import Window

__all__ = [
    "ChatMemoryRepository",
    "SupportsConversationInfo",
    "SupportsConversationPages",
    "SupportsCountMessages",
    "SupportsLog",
    "SupportsLogRemoval",
    "SupportsSaveMany",
    "SupportsSchemaUpgrade",
    "SupportsWindowAppend",
    "is_repository",
]
# What the protocols return, importable from here as from chatledger.results.
__all__ += [
    "AppendResult",
    "ConversationInfo",
    "ConversationInfoPage",
    "ConversationPage",
    "MessagePage",
]

_OPERATIONS = (
    "find_conversation_ids",
    "find_by_conversation_id",
    "save_all",
    "delete_by_conversation_id",
)


@runtime_checkable
class ChatMemoryRepository(Protocol):
    """Spring AI's four repository operations, in Python names.

    Every method validates the conversation id (and the messages) with
    :mod:`chatledger.validation` before any I/O; a bad input raises and changes
    nothing. Messages come back oldest first, in the order they were saved,
    equal to what was saved, with ``created_at`` set.
    """

    def find_conversation_ids(self) -> list[str]:
        """Return the id of every stored conversation, in no particular order."""
        ...

    def find_by_conversation_id(self, conversation_id: str) -> list[Message]:
        """Return the messages of one conversation, oldest first (``[]`` if none)."""
        ...

    def save_all(self, conversation_id: str, messages: Sequence[Message]) -> None:
        """Replace the whole conversation with ``messages``, atomically.

        ``save_all(id, [])`` removes the conversation, exactly like
        :meth:`delete_by_conversation_id`. Messages without ``created_at`` are
        stamped with the time of the write; the others keep theirs.
        """
        ...

    def delete_by_conversation_id(self, conversation_id: str) -> None:
        """Remove a conversation; removing an unknown id does nothing."""
        ...


@runtime_checkable
class SupportsWindowAppend(Protocol):
    """Optional capability: add messages and trim the window in one atomic step.

    Memories use it when a repository has it and otherwise fall back to
    read-modify-write through ``save_all``. The contract:

    1. Before any I/O: validate the id and the batch with
       :func:`chatledger.validation.validate_conversation_id` and
       :func:`~chatledger.validation.validate_messages`. An empty batch is a
       no-op that touches nothing.
    2. In one atomic unit (a transaction holding a lock on this conversation
       only, a Lua script, a single-document update, a single-partition batch):

       a. skip every new message whose id the conversation already holds, so a
          retried append is a no-op, never a duplicate;
       b. read what :class:`chatledger.append_plan.StoredWindow` names and
          call :func:`chatledger.append_plan.plan_append` (or, where the rule
          runs inside the server, a translation listed in
          :mod:`chatledger.window`), which applies
          :func:`~chatledger.window.merge_system` and
          :func:`~chatledger.window.count_evictions`;
       c. write the plan: delete the replaced system messages and the evicted
          ones, append the rest after the last one, with the next gap-free
          sequence numbers and ``created_at`` stamped once. Sizes come from
          ``window.measure``; a store may keep them beside each message, keyed
          by ``window.counter_id``, and every message weighs 1 when that is
          ``None``;
       d. refresh the conversation's TTL, if it has one.
    3. Cost grows with what changed (new, evicted and system messages), not with
       the history: nothing else is read or rewritten. Without an overflow,
       ``count_evictions`` asks only for the head entry (a tool response there
       is evicted).

    The result equals what :func:`chatledger.window.apply_window` gives on the
    same history; the conformance suite checks it. A call interrupted or
    cancelled midway leaves the conversation as it was before the append or
    as it is after it, never in between.
    """

    def append_to_window(
        self, conversation_id: str, messages: Sequence[Message], window: Window
    ) -> AppendResult:
        """Append ``messages`` and evict by ``window`` in one atomic step."""
        ...


@runtime_checkable
class SupportsLog(Protocol):
    """Optional capability: each conversation kept whole as a log, windows as views.

    The log of a conversation is every message appended to it, in a gap-free
    per-conversation sequence; nothing leaves it but by ``save_all``,
    ``delete_by_conversation_id``, or the repository's retention and TTL.
    ``find_by_conversation_id`` returns the whole log, oldest first. The
    contract:

    1. Before any I/O, every method validates the id (and the batch, the
       window or the page request); bad input raises and changes nothing. An
       empty batch is a no-op that touches nothing.
    2. :meth:`append_to_log` is one atomic unit, in one round trip where the
       backend allows it: it skips every new message whose id the log holds
       or held (a retried append is a no-op, even after retention trimmed the
       message), and every system message equal to one the view shows or to
       an earlier one of the batch
       (:func:`chatledger.window.merge_system` against
       :func:`chatledger.window_view.current_system`); it stores the rest
       after the last message, with the next sequence numbers, ``created_at``
       stamped once, and the number of the append's first message as their
       batch. Given a window whose ``counter_id`` is set, it stores each
       message's size under that counter beside it. It refreshes the
       conversation's TTL, if it has one. Nothing already stored is read
       back, rewritten or removed: the result's ``evicted_ids`` is empty.
    3. :meth:`find_window` reads the newest rows only, newest first, and
       builds the view with :class:`chatledger.window_view.TailView` (or a
       translation of it named in that module): its cost grows with the
       window, not with the log.
    4. :meth:`find_messages_page` pages through the log with
       :mod:`chatledger.message_pages`: across the pages of one walk, every
       message stored when it began comes exactly once, in order, however
       many are appended meanwhile.

    A call interrupted or cancelled midway leaves the log as it was before
    the append or as it is after it, never in between.
    """

    def append_to_log(
        self,
        conversation_id: str,
        messages: Sequence[Message],
        window: Window | None = None,
    ) -> AppendResult:
        """Append ``messages`` to the conversation's log, atomically."""
        ...

    def find_window(self, conversation_id: str, window: Window) -> list[Message]:
        """Return the view of ``window`` on the log, oldest first."""
        ...

    def find_messages_page(
        self,
        conversation_id: str,
        cursor: str | None = None,
        limit: int = 50,
        newest_first: bool = True,
    ) -> MessagePage:
        """Return up to ``limit`` messages of the log after ``cursor``.

        Raises:
            InvalidPageError: ``limit`` is not an int from 1 to
                :data:`chatledger.validation.MAX_PAGE_SIZE`, or ``cursor`` is
                not one a page of this conversation, read in the same
                direction, gave; before any I/O.
        """
        ...


@runtime_checkable
class SupportsLogRemoval(Protocol):
    """Optional capability: remove messages from a log on request, atomically.

    For a caller that takes back what it stored: the OpenAI Agents SDK's
    ``pop_item``, LlamaIndex's ``delete_message``. The contract:

    1. Before any I/O, the id, ``count`` (an int from 1 to
       :data:`chatledger.validation.MAX_PAGE_SIZE`) and ``message_ids`` (a
       list of str) are checked; bad input raises and changes nothing.
    2. Each call is one atomic unit, concurrent with appends and with other
       removals: two calls never remove (nor return) the same message, and a
       message appended meanwhile is either removed whole or kept.
    3. What is removed is gone from the log, its pages and every view; the
       view's system messages are then those rule 1 finds in what is left
       (:func:`chatledger.window_view.current_system`). Removed ids are
       forgotten, not recorded as evicted: appending one again stores it
       again. Sequence numbers are not reused. A removal refreshes the
       conversation's TTL, like any write; a conversation left empty leaves
       ``find_conversation_ids``.
    """

    def remove_newest(self, conversation_id: str, count: int = 1) -> list[Message]:
        """Remove the newest ``count`` messages (fewer if the log holds
        fewer) and return them, oldest first."""
        ...

    def remove_messages(
        self, conversation_id: str, message_ids: Sequence[str]
    ) -> list[Message]:
        """Remove the messages of ``message_ids`` the log holds and return
        them, oldest first; ids it does not hold are ignored."""
        ...


@runtime_checkable
class SupportsConversationInfo(Protocol):
    """Optional capability: each conversation a record, listed newest first.

    For an app's list of chats: who a conversation belongs to, its title and
    other metadata, how many messages it holds and when it last moved,
    without reading its messages. The records are in
    :mod:`chatledger.conversation_info`. The contract:

    1. Before any I/O, every method checks its arguments with that module
       (:func:`~chatledger.conversation_info.check_conversation_info`,
       :func:`~chatledger.conversation_info.check_find_conversations`); bad
       input raises and changes nothing.
    2. A conversation's first write makes its record: the first append
       (owner ``None``, metadata ``{}``) or :meth:`set_conversation_info` on a
       new id (``message_count`` 0, ``updated_at`` equal to ``created_at``).
       Every write to its messages (an append that stores something,
       ``save_all``, a window's eviction, a removal) sets ``updated_at`` to
       the time of that write and keeps ``message_count`` equal to the
       messages held, in the same atomic unit as the write; ``save_all`` keeps
       the owner, the metadata and ``created_at``. Times are UTC, kept to the
       millisecond at least.
    3. ``delete_by_conversation_id`` and ``save_all(id, [])`` remove the
       record with the messages; so does the TTL, if the repository has one,
       which every write (:meth:`set_conversation_info` included) refreshes.
       A record whose messages were all removed, or that never had one,
       stays, and is listed by :meth:`find_conversations` but not by
       ``find_conversation_ids`` (nor its pages), which list the
       conversations holding messages.
    4. :meth:`find_conversations` lists newest ``updated_at`` first, ties by
       id descending, a keyset page at a time: a walk from ``cursor=None``
       until ``next_cursor`` is ``None`` gives every conversation that
       matched and was not written to during the walk exactly once, one
       written meanwhile at most once, and no record twice. An owner filter
       never lets another owner's record through (owners are compared
       exactly: case and spaces count).
    """

    def set_conversation_info(
        self,
        conversation_id: str,
        *,
        owner: str | Literal[Unset.UNSET] | None = UNSET,
        metadata: Mapping[str, Any] | Literal[Unset.UNSET] = UNSET,
    ) -> ConversationInfo:
        """Set the owner or the metadata of a conversation, atomically.

        Left out, each is kept; ``owner=None`` clears the owner, and
        ``metadata`` replaces the whole metadata (``{}`` clears it): to change
        one key, read the record, change its copy and set it. A new id gets a
        record without messages. It does not move ``updated_at``, and it
        refreshes the conversation's TTL like any write.

        Returns:
            The record as stored after the call.

        Raises:
            InvalidConversationIdError: the id is not valid.
            InvalidConversationInfoError: ``owner`` is not ``None`` nor a str
                of 1 to 255 characters without NUL, or ``metadata`` is not a
                JSON object of at most 64 KiB; before any I/O.
        """
        ...

    def get_conversation_info(self, conversation_id: str) -> ConversationInfo | None:
        """Return the record of a conversation; ``None`` when it has none."""
        ...

    def find_conversations(
        self,
        *,
        owner: str | None = None,
        metadata: Mapping[str, JsonValue] | None = None,
        updated_before: datetime | None = None,
        cursor: str | None = None,
        limit: int = 100,
    ) -> ConversationInfoPage:
        """Return up to ``limit`` records, newest ``updated_at`` first.

        Args:
            owner: Only this owner's conversations; ``None`` for all (with an
                owner or without).
            metadata: Only conversations whose metadata holds each of these
                top-level keys with an equal JSON scalar.
            updated_before: Only conversations last written before this
                timezone-aware moment.
            cursor: The ``next_cursor`` of the previous page, given with the
                same filter; ``None`` for the first page.
            limit: The page's size, from 1 to
                :data:`chatledger.validation.MAX_PAGE_SIZE`.

        Raises:
            InvalidConversationInfoError: a bad ``owner``, ``metadata`` filter
                or ``updated_before``; before any I/O.
            InvalidPageError: a bad ``limit``, or a ``cursor`` that a page of
                this filter did not give; before any I/O.
        """
        ...


@runtime_checkable
class SupportsCountMessages(Protocol):
    """Optional capability: count a conversation's messages without loading them."""

    def count_messages(self, conversation_id: str) -> int:
        """Return how many messages the conversation holds (0 if none)."""
        ...


@runtime_checkable
class SupportsConversationPages(Protocol):
    """Optional capability: list conversation ids a page at a time.

    Paging from ``cursor=None`` until ``next_cursor`` is ``None`` yields every
    conversation that existed throughout exactly once, at any size; one
    created or deleted meanwhile may or may not appear. A cursor is opaque
    text, valid for the repository (and namespace) that gave it.
    """

    def find_conversation_ids_page(
        self, cursor: str | None = None, limit: int = 100
    ) -> ConversationPage:
        """Return up to ``limit`` ids after ``cursor`` (from the start if ``None``).

        Raises:
            InvalidPageError: ``limit`` is not an int from 1 to
                :data:`chatledger.validation.MAX_PAGE_SIZE`, or ``cursor`` is
                not one this repository gave; before any I/O.
        """
        ...


@runtime_checkable
class SupportsSaveMany(Protocol):
    """Optional capability: replace several conversations in one atomic step.

    For bulk loads (``chatledger copy`` and ``import`` use it when a target
    has it): a store whose every write pays a commit or a round trip (DuckDB,
    a distant server) then pays it once per batch. The contract:

    1. Before any I/O: validate every id and every batch as
       :meth:`ChatMemoryRepository.save_all` does; a bad one raises and
       nothing is written.
    2. The effect is that of ``save_all(id, messages)`` for each item, in one
       atomic unit: each conversation is replaced whole (``[]`` removes it),
       and either every conversation of the call is written or none is.
    """

    def save_many(self, conversations: Mapping[str, Sequence[Message]]) -> None:
        """Replace each conversation in ``conversations``, all in one step."""
        ...


@runtime_checkable
class SupportsSchemaUpgrade(Protocol):
    """Optional capability: bring a store an earlier release made to this one's schema.

    For a backend whose schema grew between releases (a column, a table, an
    index, a server-side routine). Opening a repository with its creation
    flag on (``create_schema=True``, the default) makes the same changes
    without a word; this call makes them when asked and says what it
    changed. ``chatledger migrate URL`` calls it. The contract:

    1. It adds what the store lacks and changes nothing else: no message,
       no conversation and nothing an earlier release still uses is
       rewritten or removed, so processes of that release keep working.
    2. It is idempotent: on a current store it changes nothing and returns
       ``[]``. It is safe while other processes open, write to or upgrade the
       same store: a change another one made first is not made again.
    3. A store that does not exist (no table, no schema of this repository's
       names) raises :class:`~chatledger.errors.StoreNotFoundError` and
       nothing is created: there is nothing to upgrade, and a mistyped name
       must not become a new empty store.

    A backend whose stores every release reads as they are, with no schema
    of its own (Redis, MongoDB, the in-memory repository), does not have it.
    """

    def upgrade_schema(self) -> list[str]:
        """Make the schema changes the store lacks; return what changed.

        Returns:
            One line per change this call made, in the order made (``added
            column system_batch to table chat_memory_conversation``); ``[]``
            when the store was already current.

        Raises:
            StoreNotFoundError: the store does not exist; nothing is created.
        """
        ...


def is_repository(repository: object) -> bool:
    """True when ``repository`` has the four :class:`ChatMemoryRepository` calls.

    A sync and an async repository have the same method names, so
    ``isinstance`` alone cannot tell them apart: this also checks that each
    operation is a coroutine function on an async repository and a plain
    method on a sync one. A memory refuses a repository of the other kind
    with this check, before any I/O.
    """
    methods = [getattr(repository, name, None) for name in _OPERATIONS]
    return all(
        callable(method) and not inspect.iscoroutinefunction(method)
        for method in methods
    )
