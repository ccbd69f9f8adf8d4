# Written by tools/async_to_sync.py from async_removal.py: edit that one.
"""Removing what a LlamaIndex store shows, each time in one atomic removal.

Example:
    from llama_index.core.llms import ChatMessage

    from chatledger import InMemoryChatMemoryRepository, Message
    from chatledger_llama_index.removal import remove_at

    repository = InMemoryChatMemoryRepository()
    repository.append_to_log("c1", [Message.user("a"), Message.user("b")])
    remove_at(repository, "c1", -1)  # (its id, ChatMessage(... content='b'))

An index names a LlamaIndex message of the whole conversation, as
``get_messages(key)`` lists it. The conversation is read, the message at the
index found, and that stored message removed by its id
(``remove_messages``): a message appended meanwhile is never touched, and of
two calls that picked the same message one removes it and the other reads
again. A stored tool message with several responses is several LlamaIndex
messages; removing one of them alone would rewrite that message, so it is
refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.base.llms.types import ChatMessage

from chatledger import ContentionError, Message, SupportsLogRemoval
from chatledger_llama_index.convert import Part, to_llama_index, to_llama_index_parts

__all__ = [
    "ATTEMPTS",
    "REMOVAL_BATCH",
    "remove_all",
    "remove_at",
    "remove_ids",
    "require_removal",
]

#: How many times a removal reads again after another writer won, before it
#: gives up with ``ContentionError``.
ATTEMPTS = 64
#: How many ids go in one atomic removal: the most core's removals take
#: (``chatledger.validation.MAX_PAGE_SIZE``).
REMOVAL_BATCH = 10_000


def require_removal(repository: object, operation: str) -> None:
    """Raise unless ``repository`` removes single messages atomically.

    Raises:
        TypeError: naming the capability it lacks; call it before any I/O.
    """
    if not isinstance(repository, SupportsLogRemoval):
        raise TypeError(
            f"{operation} removes messages one atomic step at a time, with "
            "SupportsLogRemoval (remove_newest, remove_messages), which "
            f"{type(repository).__name__} does not have"
        )


def _pick(stored: Sequence[Message], idx: int) -> Part | None:
    parts = to_llama_index_parts(stored)
    if not -len(parts) <= idx < len(parts):
        return None
    part = parts[idx]
    responses = len(stored[part.source].tool_responses)
    if responses > 1:
        raise ValueError(
            f"message {idx} is one of the {responses} tool responses that message "
            f"{stored[part.source].id!r} holds: removing it alone would rewrite "
            "that message, so only the whole message can be removed"
        )
    return part


def remove_at(
    repository: Any,
    key: str,
    idx: int,
) -> tuple[str, ChatMessage] | None:
    """Remove the LlamaIndex message at ``idx`` of the conversation.

    Args:
        repository: A repository with ``remove_messages`` that can read the
            conversation.
        key: The conversation.
        idx: An index of the LlamaIndex messages, negative from the end.

    Returns:
        The id of the stored message removed and the LlamaIndex message it
        was, or ``None`` if there is none at ``idx``.

    Raises:
        ValueError: the message is one of several tool responses of one
            stored message.
        ContentionError: other writers removed the message picked
            :data:`ATTEMPTS` times running.
    """
    for _ in range(ATTEMPTS):
        stored: list[Message] = repository.find_by_conversation_id(key)
        part = _pick(stored, idx)
        if part is None:
            return None
        target = stored[part.source].id
        if repository.remove_messages(key, [target]):
            return target, part.message
    raise ContentionError(
        key, ATTEMPTS, f"message {idx} was removed by another writer each time"
    )


def remove_ids(repository: Any, key: str, ids: Sequence[str]) -> list[Message]:
    """Remove the messages of ``ids``; return those removed, oldest first.

    Up to :data:`REMOVAL_BATCH` ids go in one atomic removal; more go in
    one removal per that many.
    """
    removed: list[Message] = []
    for start in range(0, len(ids), REMOVAL_BATCH):
        removed += repository.remove_messages(
            key, list(ids[start : start + REMOVAL_BATCH])
        )
    return removed


def remove_all(repository: Any, key: str) -> list[ChatMessage] | None:
    """Remove every message of the conversation read; return those removed.

    A message appended after the read is kept. Returns ``None`` when nothing
    was removed.

    Raises:
        UnsupportedContentError: a message LlamaIndex cannot carry; nothing
            is removed.
    """
    stored: list[Message] = repository.find_by_conversation_id(key)
    to_llama_index(stored)  # what LlamaIndex cannot carry stops it before a write
    removed = remove_ids(repository, key, [m.id for m in stored])
    return to_llama_index(removed) if removed else None
