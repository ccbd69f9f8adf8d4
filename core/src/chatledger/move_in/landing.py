"""Writing one moved-in conversation: whole, in one log append, or not at all.

Example:
    from chatledger import InMemoryChatMemoryRepository, Message
    from chatledger.move_in.conversation import SourceConversation, stable_id
    from chatledger.move_in.landing import land

    target = InMemoryChatMemoryRepository()
    conversation = SourceConversation("c1")
    conversation.add(Message.user("Hi", id=stable_id("demo", "c1", 0)), "row 1")
    land(target, conversation).added    # 1
    land(target, conversation).added    # 0: a re-run adds nothing

:func:`land` writes a conversation with one
:meth:`~chatledger.repository.SupportsLog.append_to_log`, so it arrives whole
or not at all. It writes nothing when a row cannot be carried (unless asked
to leave such rows out), and nothing when the target's conversation holds
messages that are not the source's first ones: those were written since an
earlier move-in, or the source changed under the derived ids, and appending
would put the source's messages after them, out of order. The target is read
first to find what an earlier run already wrote; only the messages after it
are appended.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from chatledger.errors import ChatLedgerError
from chatledger.messages import Role
from chatledger.move_in.conversation import SourceConversation, Uncarriable
from chatledger.repository import ChatMemoryRepository, SupportsLog
from chatledger.validation import validate_conversation_id
from chatledger.window import merge_system

__all__ = ["Landing", "land"]


@dataclass
class Landing:
    """What :func:`land` did with one conversation.

    Attributes:
        conversation_id: The conversation.
        added: How many messages it appended (0 when refused).
        already: How many of the source's messages the target held before.
        refused: Why nothing was written, or ``None``.
        uncarriable: The rows that were not carried: those that kept the
            conversation out when ``refused``, else those left out.
    """

    conversation_id: str
    added: int = 0
    already: int = 0
    refused: str | None = None
    uncarriable: list[Uncarriable] = field(default_factory=list)


def _repeated_system(conversation: SourceConversation) -> list[int]:
    """The positions of the system messages the log would skip as repeats."""
    kept = {id(m) for m in merge_system([], conversation.messages).new}
    return [
        index
        for index, message in enumerate(conversation.messages)
        if message.role is Role.SYSTEM and id(message) not in kept
    ]


def _left_out(conversation: SourceConversation, positions: list[int]) -> None:
    """Move the messages at ``positions`` to the conversation's uncarriable rows."""
    for index in reversed(positions):
        row = conversation.rows.pop(index)
        conversation.messages.pop(index)
        conversation.uncarriable.append(
            Uncarriable(
                row,
                "a system message equal to an earlier one of the conversation: "
                "the log keeps a system message once",
            )
        )


def _prefix_problem(stored_ids: list[str], source_ids: list[str]) -> str | None:
    if stored_ids == source_ids[: len(stored_ids)]:
        return None
    foreign = len(set(stored_ids) - set(source_ids))
    if foreign:
        return (
            f"the target's conversation holds {foreign} of its {len(stored_ids)} "
            "messages that are not rows of this source as they are now (they were "
            "written since an earlier move-in, or the source's rows changed), and "
            "the source's messages would come after them"
        )
    return (
        "the target's conversation holds this source's messages in another order "
        "than the source's"
    )


def land(
    repository: ChatMemoryRepository,
    conversation: SourceConversation,
    *,
    drop_uncarriable: bool = False,
) -> Landing:
    """Append ``conversation`` to its log in ``repository``, atomically.

    Args:
        repository: The target; it must keep logs
            (:class:`~chatledger.repository.SupportsLog`).
        conversation: The conversation read from the source.
        drop_uncarriable: Write the rows that can be carried when some cannot
            (each is still in the result); by default such a conversation is
            not written at all.

    A system message equal to an earlier one of the same conversation cannot
    be carried either: the log keeps it once.

    Raises:
        TypeError: ``repository`` does not keep logs.
        ChatLedgerError: the target refused or failed the append.
    """
    if not isinstance(repository, SupportsLog):
        raise TypeError(f"{type(repository).__name__} does not keep logs")
    landing = Landing(conversation.conversation_id)
    try:
        validate_conversation_id(conversation.conversation_id)
    except ChatLedgerError as exc:
        landing.refused = f"its id cannot be a chatledger conversation id: {exc}"
        return landing
    _left_out(conversation, _repeated_system(conversation))
    landing.uncarriable = list(conversation.uncarriable)
    if conversation.uncarriable and not drop_uncarriable:
        count = len(conversation.uncarriable)
        landing.refused = (
            f"{count} {'row' if count == 1 else 'rows'} cannot be carried "
            "(--drop-uncarriable imports the rest)"
        )
        return landing
    stored = repository.find_by_conversation_id(conversation.conversation_id)
    problem = _prefix_problem(
        [m.id for m in stored], [m.id for m in conversation.messages]
    )
    if problem is not None:
        landing.refused = problem
        return landing
    landing.already = len(stored)
    new = conversation.messages[len(stored) :]
    if not new:
        return landing
    result = repository.append_to_log(conversation.conversation_id, new)
    landing.added = len(result.appended)
    written = {m.id for m in result.appended}
    for message, row in zip(new, conversation.rows[len(stored) :], strict=True):
        if message.id not in written:
            landing.uncarriable.append(
                Uncarriable(row, "the target's log skipped it as a repeat")
            )
    return landing
