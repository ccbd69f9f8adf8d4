"""What repository calls return beyond messages: an append's outcome, a page of ids.

Example:
    from chatledger import InMemoryChatMemoryRepository, Message, MessageWindow

    repository = InMemoryChatMemoryRepository()
    result = repository.append_to_window("c1", [Message.user("hi")], MessageWindow(20))
    result.appended      # the message written, with created_at set
    page = repository.find_conversation_ids_page(limit=10)
    page.ids, page.next_cursor   # (['c1'], None)

The sync and the async repositories return the same values, so they live
here, apart from either protocol module.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from chatledger.messages import Message

__all__ = ["AppendResult", "ConversationPage", "MessagePage"]


@dataclass(frozen=True, slots=True)
class AppendResult:
    """What an atomic window append did.

    Attributes:
        appended: The messages written, with ``created_at`` set. Messages whose
            id the conversation already held, and redundant system messages,
            are not in it.
        evicted_ids: The ids of the messages removed from the conversation.
    """

    appended: list[Message] = field(default_factory=list)
    evicted_ids: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ConversationPage:
    """One page of conversation ids.

    Attributes:
        ids: The ids on this page, in the repository's paging order.
        next_cursor: Pass it to get the next page; ``None`` on the last page.
    """

    ids: list[str]
    next_cursor: str | None


@dataclass(frozen=True, slots=True)
class MessagePage:
    """One page of a conversation's log.

    Attributes:
        messages: The messages on this page, in the order asked for (newest
            first by default).
        next_cursor: Pass it to get the next page; ``None`` on the last page.
    """

    messages: list[Message]
    next_cursor: str | None
