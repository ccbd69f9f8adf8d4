"""The window policy: a pure function that decides what a chat memory keeps.

Example:
    from chatledger import Message
    from chatledger.window import MessageWindow, apply_window

    stored = [Message.system("Be brief."), Message.user("hi"), Message.assistant("yo")]
    update = apply_window(stored, [Message.user("next question")], MessageWindow(20))
    update.messages   # the whole window to store
    update.evicted    # what fell out of it

Nothing here does I/O. Every memory and every adapter uses these functions, so
the window has one meaning everywhere. The rules are Spring AI's
``MessageWindowChatMemory`` rules, kept exactly, with four fixes:

1. System messages. A new system message that is not equal to a stored one
   replaces every stored system message; a system message equal to a stored one
   (or to another in the same batch) is not stored twice. System messages stay
   where they were added and are never evicted.
2. Turns. When the window overflows, the cut (how many of the oldest non-system
   messages to drop) moves forward to the next user message, so the window
   always starts, after its system messages, on a whole turn, and a tool
   response is never kept without the assistant message that called it.
3. One turn larger than the window. If no user message follows the cut, the
   newest turn (from the last user message on) is kept whole, even though the
   window then holds more than its limit; only the older turns are dropped.
   Spring AI drops everything in that case, including the turn in progress.
   A history with no user message at all (an agent's conversation, say) is
   one turn in progress and is kept whole in the same way, where Spring AI
   drops all of it; rule 4 still drops its leading tool messages. So the
   window is a function of the history alone, whichever batches it came in.
4. No orphan tool response. The window never starts, after its system
   messages, on a tool message: a tool response whose call is not in the
   window (because the call was evicted, or never stored) is evicted too,
   even when the window has room for it. Model APIs reject a tool response
   that follows no tool call.

Translations. The rules also run where the data lives, written in the
server's language; each follows these functions and is checked against
:func:`apply_window` on random histories (metadata variants included) by the
conformance suite's ``test_window_matches_the_pure_policy`` on its backend:

- Redis: the Lua script in ``chatledger_redis.scripts`` (rules 1-4, system
  messages compared by :func:`system_key`).
- MongoDB: the aggregation pipeline in ``chatledger_mongodb.pipeline``
  (rules 1-4, system messages compared by :func:`system_key`).
- PostgreSQL: the PL/pgSQL function in
  ``chatledger_sql.dialects.postgresql_routine``, and MariaDB: the stored
  procedure in ``chatledger_sql.dialects.mariadb_routine`` (rules 2-4,
  :func:`count_evictions`; a batch holding a system message is planned in
  Python). Their tests also compare every row they write with the
  Python-planned append's.

Every other adapter (SQL, Cassandra, Neo4j, in memory), and PostgreSQL and
MariaDB for what their routines leave to them, plans in Python with
:func:`chatledger.append_plan.plan_append`, which calls the functions here.

Sizes are counted by a :class:`Window`: one per message for
:class:`MessageWindow`, tokens for :class:`TokenWindow`. The limit counts
system messages too; if they alone exceed it, the system messages all stay and
only the newest turn is kept with them (rule 3): the whole history, less its
leading tool messages, when it holds no user message.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from chatledger import codec
from chatledger.errors import ChatLedgerError
from chatledger.messages import Message, Role
from chatledger.tokens import counter_name

__all__ = [
    "MessageWindow",
    "SystemMerge",
    "TokenWindow",
    "Window",
    "WindowUpdate",
    "apply_window",
    "count_evictions",
    "merge_system",
    "system_key",
]


class InvalidWindowError(ChatLedgerError, ValueError):
    """A window limit is not a positive integer."""


def _positive(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InvalidWindowError(f"{name} must be a positive int, not {value!r}")
    return value


@runtime_checkable
class Window(Protocol):
    """How a window measures messages and how much it holds."""

    @property
    def limit(self) -> int:
        """The most a window holds, in the unit of :meth:`measure`."""
        ...

    @property
    def counter_id(self) -> str | None:
        """Names the measure, so a stored size can be reused; ``None`` means 1 each."""
        ...

    def measure(self, message: Message) -> int:
        """Return the size of one message."""
        ...


@dataclass(frozen=True, slots=True)
class MessageWindow:
    """A window of at most ``max_messages`` messages (Spring AI's default is 20)."""

    max_messages: int = 20

    def __post_init__(self) -> None:
        _positive(self.max_messages, "max_messages")

    @property
    def limit(self) -> int:
        """The most messages the window holds."""
        return self.max_messages

    @property
    def counter_id(self) -> str | None:
        """Always ``None``: every message counts as one."""
        return None

    def measure(self, message: Message) -> int:
        """Every message counts as one."""
        return 1


class TokenWindow:
    """A window of at most ``max_tokens`` tokens, as counted by ``token_counter``.

    Sizes measured once are stored beside the messages and reused while the
    same counter measures them (see :attr:`counter_id`).

    Args:
        max_tokens: The budget.
        token_counter: ``Message -> int``.
        counter_id: A stable name for the counter. Leave it out for a
            module-level function (named by its module and qualified name) or a
            counter with a ``counter_id`` attribute (chatledger's own); give
            one for a lambda, closure or ``functools.partial`` that several
            processes build alike, so they share stored sizes. Without it such
            a counter is named per object and per process: two counters never
            share sizes, and a new process measures the stored history again
            once per conversation.
    """

    __slots__ = ("_counter_id", "max_tokens", "token_counter")

    def __init__(
        self,
        max_tokens: int,
        token_counter: Callable[[Message], int],
        counter_id: str | None = None,
    ) -> None:
        """Check the budget and the counter, and name the counter."""
        self.max_tokens = _positive(max_tokens, "max_tokens")
        if not callable(token_counter):
            raise InvalidWindowError("token_counter must be callable")
        if counter_id is not None and (
            not isinstance(counter_id, str) or not counter_id
        ):
            raise InvalidWindowError(
                f"counter_id must be a non-empty str, not {counter_id!r}"
            )
        self.token_counter = token_counter
        self._counter_id = "tokens:" + (counter_id or counter_name(token_counter))

    def __repr__(self) -> str:
        return f"TokenWindow({self.max_tokens}, counter_id={self._counter_id!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TokenWindow):
            return NotImplemented
        return (self.max_tokens, self._counter_id) == (
            other.max_tokens,
            other._counter_id,
        )

    def __hash__(self) -> int:
        return hash((self.max_tokens, self._counter_id))

    @property
    def limit(self) -> int:
        """The most tokens the window holds."""
        return self.max_tokens

    @property
    def counter_id(self) -> str | None:
        """Names the counter: stored sizes are reused only under the same name."""
        return self._counter_id

    def measure(self, message: Message) -> int:
        """Count the tokens of one message with the configured counter."""
        size = self.token_counter(message)
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise InvalidWindowError(
                f"token_counter returned {size!r}; it must return an int >= 0"
            )
        return size


@dataclass(frozen=True, slots=True)
class SystemMerge:
    """The outcome of rule 1 for one batch of new messages.

    Attributes:
        replace_stored: Drop every stored system message.
        new: The new messages to append, with redundant system messages removed.
    """

    replace_stored: bool
    new: list[Message]


def _normalise(value: Any) -> Any:
    # Python equality says True == 1 == 1.0; JSON text does not. Integral
    # numbers are written as ints so equal messages get equal text.
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: _normalise(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_normalise(item) for item in value]
    return value


def system_key(message: Message) -> str:
    """Return a text two messages share exactly when they are equal (rule 1).

    Equality is :class:`~chatledger.Message` equality, which ignores ``id`` and
    ``created_at`` and compares metadata as Python does (``1 == 1.0 == True``).
    This is its string form: the codec's encoding without those fields nor the
    codec version, keys sorted, integral numbers written as ints. Server-side
    translations of rule 1 (see "Translations" at the top of this module)
    compare these texts instead of decoding messages.
    """
    encoded = codec.to_dict(message)
    for field in ("v", "id", "created_at"):
        encoded.pop(field, None)
    return json.dumps(
        _normalise(encoded), ensure_ascii=False, separators=(",", ":"), sort_keys=True
    )


def merge_system(
    stored_system: Sequence[Message], new: Sequence[Message]
) -> SystemMerge:
    """Apply the system-message rule to a batch.

    Args:
        stored_system: The system messages already stored, in order.
        new: The batch being added.
    """
    new_system = [m for m in new if m.role is Role.SYSTEM]
    if not new_system:
        return SystemMerge(False, list(new))
    replace = any(m not in stored_system for m in new_system)
    kept: list[Message] = []
    seen: list[Message] = [] if replace else list(stored_system)
    for message in new:
        if message.role is Role.SYSTEM:
            if message in seen:
                continue
            seen.append(message)
        kept.append(message)
    return SystemMerge(replace, kept)


def count_evictions(
    limit: int,
    system_size: int,
    total_size: int,
    entries: Iterable[tuple[Role, int]],
) -> int:
    """Return how many of the oldest non-system messages the window drops.

    The function reads ``entries`` lazily and stops as soon as the answer is
    known, so an adapter can stream the oldest rows of a conversation and read
    only about as many as it evicts.

    Args:
        limit: The window's limit.
        system_size: The size of the system messages that stay.
        total_size: The size of every non-system message, stored and new.
        entries: ``(role, size)`` of the non-system messages, oldest first,
            stored ones followed by the new ones.
    """
    excess = system_size + total_size - limit
    if excess <= 0:
        # Rule 4 alone: only leading tool messages go. Rules 2 and 3 never
        # leave a tool message first after a cut, so they need no such step.
        leading = 0
        for role, _ in entries:
            if role is not Role.TOOL:
                break
            leading += 1
        return leading
    dropped = 0
    last_user: int | None = None
    leading = 0
    for index, (role, size) in enumerate(entries):
        if role is Role.TOOL and leading == index:
            leading += 1
        if dropped >= excess:
            if role is Role.USER:
                return index
        else:
            if role is Role.USER:
                last_user = index
            dropped += size
    # No user message follows the cut. The newest turn stays whole (rule 3);
    # with no user message at all the history is that turn, less its leading
    # tool messages (rule 4).
    return leading if last_user is None else last_user


@dataclass(frozen=True, slots=True)
class WindowUpdate:
    """The result of adding a batch to a window.

    Attributes:
        messages: The whole window after the add, in order.
        appended: The new messages that were added (redundant system messages
            are left out).
        evicted: The messages that left the window: replaced system messages
            first, then the dropped ones, oldest first.
    """

    messages: list[Message]
    appended: list[Message]
    evicted: list[Message]


def apply_window(
    stored: Sequence[Message], new: Sequence[Message], window: Window
) -> WindowUpdate:
    """Add ``new`` to ``stored`` and trim the result to ``window``.

    This is the read-modify-write form of the policy, used by repositories
    without an atomic window append and by adapters that hold the whole window.
    """
    merge = merge_system([m for m in stored if m.role is Role.SYSTEM], new)
    evicted: list[Message] = []
    history: list[Message] = []
    for message in stored:
        if merge.replace_stored and message.role is Role.SYSTEM:
            evicted.append(message)
        else:
            history.append(message)
    history.extend(merge.new)
    sized = [(m, window.measure(m)) for m in history]
    system_size = sum(size for m, size in sized if m.role is Role.SYSTEM)
    others = [(m.role, size) for m, size in sized if m.role is not Role.SYSTEM]
    cut = count_evictions(window.limit, system_size, sum(s for _, s in others), others)
    kept: list[Message] = []
    dropped = 0
    for message in history:
        if message.role is not Role.SYSTEM and dropped < cut:
            dropped += 1
            evicted.append(message)
        else:
            kept.append(message)
    return WindowUpdate(kept, merge.new, evicted)
