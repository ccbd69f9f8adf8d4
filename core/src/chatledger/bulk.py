"""Saving many conversations: in batches, atomic each, where the store can.

Example:
    from chatledger import InMemoryChatMemoryRepository, Message
    from chatledger.bulk import save_conversations

    target = InMemoryChatMemoryRepository()
    conversations = [("c1", [Message.user("hi")]), ("c2", [Message.user("yo")])]
    save_conversations(target, conversations)   # 2

A repository with :class:`~chatledger.repository.SupportsSaveMany` gets
batches of conversations, each written in one atomic step; any other gets one
``save_all`` per conversation, so a batch is then one conversation. Either
way each conversation is replaced whole, and a failure says which
conversations were not written and how many were before them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence

from chatledger.errors import ChatLedgerError
from chatledger.messages import Message
from chatledger.repository import ChatMemoryRepository, SupportsSaveMany

__all__ = [
    "MAX_BATCH_CONVERSATIONS",
    "MAX_BATCH_MESSAGES",
    "BulkSaveError",
    "save_conversations",
]

#: The most conversations one batch holds.
MAX_BATCH_CONVERSATIONS = 200
#: A batch closes once it holds this many messages (a long conversation is
#: never split).
MAX_BATCH_MESSAGES = 5000

Conversation = tuple[str, Sequence[Message]]


class BulkSaveError(ChatLedgerError):
    """A batch was refused or failed; none of its conversations was written.

    The cause is chained (``__cause__``) and its text is this error's.

    Attributes:
        conversation_ids: The ids of the batch, in the order given.
        saved: How many conversations, given before the batch, were written.
    """

    def __init__(self, cause: Exception, conversation_ids: list[str], saved: int):
        """Describe the failed batch by its cause."""
        text = str(cause) or type(cause).__name__
        if not isinstance(cause, ChatLedgerError):
            text = f"{type(cause).__name__}: {text}"
        super().__init__(text)
        self.conversation_ids = conversation_ids
        self.saved = saved


def _batches(
    conversations: Iterable[Conversation], batched: bool
) -> Iterator[list[Conversation]]:
    batch: list[Conversation] = []
    messages = 0
    for conversation in conversations:
        batch.append(conversation)
        messages += len(conversation[1])
        full = len(batch) >= MAX_BATCH_CONVERSATIONS or messages >= MAX_BATCH_MESSAGES
        if not batched or full:
            yield batch
            batch, messages = [], 0
    if batch:
        yield batch


def save_conversations(
    repository: ChatMemoryRepository,
    conversations: Iterable[Conversation],
    *,
    on_saved: Callable[[int], None] | None = None,
) -> int:
    """Replace each conversation of ``conversations`` in ``repository``.

    Args:
        repository: The target.
        conversations: ``(conversation_id, messages)`` pairs, read lazily;
            an id must not come twice.
        on_saved: Called after each batch with the number of conversations
            written so far.

    Returns:
        How many conversations were written.

    Raises:
        BulkSaveError: a batch failed; the conversations before it stay
            written, those of the batch and after it are not.
    """
    batched = isinstance(repository, SupportsSaveMany)
    saved = 0
    for batch in _batches(conversations, batched):
        try:
            if isinstance(repository, SupportsSaveMany):
                repository.save_many(dict(batch))
            else:
                [(conversation_id, messages)] = batch
                repository.save_all(conversation_id, messages)
        except Exception as exc:
            ids = [conversation_id for conversation_id, _ in batch]
            raise BulkSaveError(exc, ids, saved) from exc
        saved += len(batch)
        if on_saved is not None:
            on_saved(saved)
    return saved
