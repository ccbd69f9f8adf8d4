"""The rules of one model turn: what a turn block checks, collects and stores.

Example:
    from chatledger import Message
    from chatledger.turn_rules import open_turn

    history = [Message.system("Be brief."), Message.user("Hi")]
    turn = open_turn("c1", history, [Message.user("Weather in Rome?")])
    turn.messages                      # history and prompt, system first
    turn.reply(Message.assistant("Sunny"))
    turn.to_store(None, "discard")     # the prompt and the reply, in order

This is Spring AI's memory advisor without its defects: no user message left
without its reply when the call fails, every new prompt message stored (not
only the last user message), no synthetic empty user message, no reply that
repeats the tool calls of an earlier round, and "already stored" decided by
message id, never by equality (two equal "yes" answers are two messages).

:class:`Turn` holds the rules and does no I/O; :class:`TurnBlock` checks the
arguments and decides what to store. The ``with`` block of
:mod:`chatledger.turn` and the ``async with`` block of
:mod:`chatledger.async_turn` are a :class:`TurnBlock` plus their read on
entry and their write on exit, so both run these rules as one code path.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Generic, Literal, TypeVar, get_args

from chatledger.errors import ChatLedgerError, InvalidMessageError
from chatledger.messages import Message, Role
from chatledger.validation import validate_conversation_id, validate_messages
from chatledger.window import merge_system

__all__ = [
    "OnError",
    "StaleToolCallError",
    "Turn",
    "TurnBlock",
    "TurnClosedError",
    "open_turn",
    "validate_on_error",
]

#: The memory a turn block reads and writes through.
MemoryT = TypeVar("MemoryT")

#: What a turn stores when its block raises: nothing, or the prompt alone.
OnError = Literal["discard", "keep_prompt"]
_ON_ERROR: tuple[str, ...] = get_args(OnError)


class StaleToolCallError(InvalidMessageError):
    """A reply repeats a tool call that the conversation already holds.

    It is what a streamed reply aggregated across tool rounds (or turns) looks
    like: the text of the last round with the calls of the first. A model API
    rejects the history that holds it, so it is refused before it is stored.
    The message names each repeated call and the message that requested it:
    one of an earlier round of this turn, of its prompt, of the same reply, or
    of an earlier turn (with the user message that began that turn) still in
    the window.
    """


class TurnClosedError(ChatLedgerError, RuntimeError):
    """``reply`` was called on a turn whose block has ended."""


def validate_on_error(on_error: object) -> OnError:
    """Return ``on_error`` if it is ``"discard"`` or ``"keep_prompt"``, else raise.

    Raises:
        ValueError: naming the accepted values.
    """
    if not isinstance(on_error, str) or on_error not in _ON_ERROR:
        raise ValueError(
            f"on_error must be one of {', '.join(map(repr, _ON_ERROR))}, "
            f"not {on_error!r}"
        )
    return on_error  # type: ignore[return-value]


def _requested_in_history(history: Iterable[Message]) -> dict[str, str]:
    """Where each tool call of the history was requested, said for an error."""
    requested: dict[str, str] = {}
    asked: str | None = None
    for message in history:
        if message.role is Role.USER:
            asked = message.id
        turn = f", the turn of user message {asked!r}" if asked is not None else ""
        for call in message.tool_calls:
            requested[call.id] = (
                f"message {message.id!r} of an earlier turn{turn}, still in the window"
            )
    return requested


def _requested_by(messages: Iterable[Message], where: str) -> dict[str, str]:
    return {c.id: f"message {m.id!r} {where}" for m in messages for c in m.tool_calls}


class Turn:
    """The state of one turn: the history read, the new prompt and the replies.

    Made by :func:`open_turn` once the history is read. It does no I/O.

    Attributes:
        conversation_id: The conversation the turn belongs to.
        prompt: The prompt messages to store: those whose id the history does
            not hold, a system message equal to the stored one left out.
        replies: The replies collected so far, in order.
        closed: True once the turn's block has ended.
    """

    def __init__(
        self,
        conversation_id: str,
        history: Sequence[Message],
        prompt: Sequence[Message],
    ) -> None:
        """Use :func:`open_turn`, which checks the prompt against the history."""
        self.conversation_id = conversation_id
        stored_system = [m for m in history if m.role is Role.SYSTEM]
        merge = merge_system(stored_system, prompt)
        self._history = [
            m for m in history if not (merge.replace_stored and m.role is Role.SYSTEM)
        ]
        self.prompt: list[Message] = merge.new
        self.replies: list[Message] = []
        self.closed = False
        self._known = {m.id: m for m in (*history, *prompt)}
        #: Each tool call id the conversation holds, and where it was requested.
        self._calls = {
            **_requested_in_history(history),
            **_requested_by(prompt, "of this turn's prompt"),
        }

    def __repr__(self) -> str:
        return (
            f"Turn({self.conversation_id!r}, prompt={len(self.prompt)}, "
            f"replies={len(self.replies)}, closed={self.closed})"
        )

    @property
    def messages(self) -> list[Message]:
        """What the model should see now: history, prompt and replies, system first.

        A system message of the prompt shows as it will be stored: one that
        differs from the stored ones replaces them, an equal one is not
        shown twice.
        """
        ordered = [*self._history, *self.prompt, *self.replies]
        system = [m for m in ordered if m.role is Role.SYSTEM]
        return system + [m for m in ordered if m.role is not Role.SYSTEM]

    def reply(self, *messages: Message) -> None:
        """Collect the replies of one round: assistant and tool messages, in order.

        A message whose id the turn already holds is taken as a retry and not
        collected again. The call is all or nothing: when one message is
        refused, none of the call's messages is collected.

        Raises:
            TurnClosedError: the turn's block has ended.
            InvalidMessageError: a message is not a ``Message``, is a system
                or user message, or reuses the id of a different message.
            StaleToolCallError: an assistant message repeats a tool call
                requested in an earlier round (with or without text).
        """
        if self.closed:
            raise TurnClosedError(
                f"the turn of conversation {self.conversation_id!r} has ended; "
                "reply inside its with block"
            )
        batch = validate_messages(list(messages))
        fresh: list[Message] = []
        calls = dict(self._calls)
        for index, message in enumerate(batch):
            if message.role not in (Role.ASSISTANT, Role.TOOL):
                raise InvalidMessageError(
                    f"reply {index} is a {message.role} message; a reply holds "
                    "assistant and tool messages (put it in the next turn's prompt)"
                )
            known = self._known.get(message.id)
            if known is not None:
                if known != message:
                    raise InvalidMessageError(
                        f"reply {index} reuses the id {message.id!r} of a "
                        "different message of this conversation"
                    )
                continue
            stale = [c.id for c in message.tool_calls if c.id in calls]
            if stale:
                text = " beside its text" if message.content else ""
                where = "; ".join(f"{c!r} requested by {calls[c]}" for c in stale)
                raise StaleToolCallError(
                    f"reply {index} (message {message.id!r}) repeats tool "
                    f"calls{text}: {where}; reply with the messages of this "
                    "round only"
                )
            calls.update(_requested_by([message], "of this reply"))
            fresh.append(message)
        self.replies.extend(fresh)
        self._calls.update(_requested_by(fresh, "of an earlier round of this turn"))
        self._known.update((m.id, m) for m in fresh)

    def to_store(
        self, failed: BaseException | None, on_error: OnError
    ) -> list[Message]:
        """Close the turn and return the one batch to store.

        Args:
            failed: The exception that ended the block, or ``None``.
            on_error: What to keep when ``failed`` is set.
        """
        self.closed = True
        if failed is None:
            return [*self.prompt, *self.replies]
        if on_error == "keep_prompt":
            return list(self.prompt)
        return []


def open_turn(
    conversation_id: str, history: Sequence[Message], prompt: Sequence[Message]
) -> Turn:
    """Start a turn on ``history`` (as read) with the ``prompt`` messages.

    A prompt message whose id the history holds is already stored and is not
    stored again; it must equal the stored message.

    Raises:
        InvalidMessageError: a prompt message reuses the id of a different
            stored message.
    """
    stored = {m.id: m for m in history}
    fresh: list[Message] = []
    for index, message in enumerate(prompt):
        known = stored.get(message.id)
        if known is None:
            fresh.append(message)
        elif known != message:
            raise InvalidMessageError(
                f"prompt message {index} reuses the id {message.id!r} of a "
                "different stored message"
            )
    return Turn(conversation_id, history, fresh)


class TurnBlock(Generic[MemoryT]):
    """What every turn block does apart from I/O: check, open, decide what to store.

    :class:`~chatledger.turn.TurnContext` (``with``) and
    :class:`~chatledger.async_turn.AsyncTurnContext` (``async with``) are this
    class plus their reads and writes: each reads the history between
    :meth:`_enter` and :meth:`_open` and stores the batch :meth:`_close`
    returns, so the rules of a turn are one code path for both.

    Attributes:
        result: What the memory's ``add`` returned on exit (``None`` before,
            and when nothing was stored).
    """

    def __init__(
        self,
        memory: MemoryT,
        conversation_id: str,
        prompt: Sequence[Message],
        on_error: OnError = "discard",
    ) -> None:
        """Check the id, the prompt and ``on_error``; nothing is read yet.

        Raises:
            InvalidConversationIdError: for a bad id.
            InvalidMessageError: for a bad prompt message.
            ValueError: for an unknown ``on_error``.
        """
        self._on_error = validate_on_error(on_error)
        self._conversation_id = validate_conversation_id(conversation_id)
        self._prompt = validate_messages(list(prompt))
        self._memory = memory
        self._entered = False
        self._turn: Turn | None = None
        self.result: object = None

    def _enter(self) -> str:
        """Mark the block entered and return the conversation to read.

        Marked before the read, so that a block entered twice at once (two
        tasks sharing one context) is refused too.
        """
        if self._entered:
            raise TurnClosedError("a turn is entered once; call memory.turn again")
        self._entered = True
        return self._conversation_id

    def _open(self, history: Sequence[Message]) -> Turn:
        """Start the turn on ``history``, as read on entry."""
        self._turn = open_turn(self._conversation_id, history, self._prompt)
        return self._turn

    def _close(self, failed: BaseException | None) -> list[Message]:
        """Close the turn; return the batch to store (empty: store nothing)."""
        assert self._turn is not None
        return self._turn.to_store(failed, self._on_error)
