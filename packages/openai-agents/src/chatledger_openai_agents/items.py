"""Agents SDK items as chatledger messages, one message per item, and back.

Example:
    from chatledger_openai_agents import ITEM_KEY, items_to_messages, messages_to_items

    call = {"type": "function_call", "call_id": "c1", "name": "weather",
            "arguments": '{"city": "Rome"}'}
    items = [
        {"role": "user", "content": "Weather in Rome?"},
        call,
        {"type": "function_call_output", "call_id": "c1", "output": "24 C"},
        {"type": "reasoning", "id": "rs_1", "summary": []},
    ]
    messages = items_to_messages(items)
    [m.role.value for m in messages]     # user, assistant, tool, assistant
    messages[2].tool_responses[0].name   # "weather"
    messages[1].metadata[ITEM_KEY]       # the function_call item, as given
    assert messages_to_items(messages) == items

Each item becomes one message that keeps the exact item, as plain JSON, in
its metadata under :data:`ITEM_KEY`; :func:`messages_to_items` returns those
items, so what comes back is what went in (``==`` on the dicts). The rest of
the message is a readable copy for every other reader of the conversation
(``chatledger show``, ``to_openai``, another framework's bridge), made by
:func:`chatledger.convert.from_openai` where the item maps:

- a ``message`` item of role ``user`` or ``assistant`` (with or without
  ``"type": "message"``): a message of that role with its text (parts joined
  by a blank line) and, for a user, its media. When ``from_openai`` cannot
  read the item whole (a refusal part, a file by ``file_id``, a field it does
  not know), the message keeps the role and the text parts alone;
- ``function_call``: an assistant message with one tool call (``call_id``,
  ``name``, the exact ``arguments`` text);
- ``function_call_output``: a tool message with one tool response (``call_id``,
  the function's name when its ``function_call`` comes earlier in the same
  batch, else ``""``, and the output text), provided an item before it in the
  same batch is stored as a message of another role; otherwise it takes the
  form below;
- everything else (``system`` and ``developer`` messages, ``reasoning``,
  hosted and computer tool calls, and every type this module does not know):
  an assistant message with ``content=None`` and nothing but the item.

Two rules of chatledger are why no item becomes a system message and why a
batch never starts with a tool message: an append to a conversation's log
skips a system message equal to one its view shows, and a window view shows
only the newest system messages and never opens with a tool message. A
session keeps every item as added, and other readers see the conversation
through windows, so no item is stored in a form those rules act on.

The item is stored twice in effect (readable copy and exact item), so a
conversation takes about twice the space of its items.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from chatledger import ChatLedgerError, InvalidMessageError, Message, Role
from chatledger.convert import from_openai, thaw

__all__ = ["ITEM_KEY", "ForeignMessageError", "items_to_messages", "messages_to_items"]

#: The metadata key of the message under which the exact item is kept.
ITEM_KEY = "openai_agents_item"

_ROLES_WITH_TEXT = ("user", "assistant")
_TEXT_PARTS = ("input_text", "output_text", "text")


class ForeignMessageError(ChatLedgerError, ValueError):
    """A stored message holds no Agents SDK item: something else wrote it."""


def _read(items: list[Mapping[str, Any]]) -> Message | None:
    """The last message ``from_openai`` reads from ``items``, or ``None``."""
    try:
        return from_openai(items)[-1]
    except ChatLedgerError:
        return None


def _text_only(item: Mapping[str, Any]) -> Message | None:
    """A user or assistant message item reduced to its role and text parts."""
    role = item.get("role")
    if item.get("type") not in (None, "message") or role not in _ROLES_WITH_TEXT:
        return None
    content = item.get("content")
    if not isinstance(content, str):
        parts = content if isinstance(content, list) else []
        content = [
            {"type": part["type"], "text": part["text"]}
            for part in parts
            if isinstance(part, Mapping)
            and part.get("type") in _TEXT_PARTS
            and isinstance(part.get("text"), str)
        ]
    return _read([{"role": role, "content": content}])


def _readable(
    item: Mapping[str, Any],
    calls: Mapping[str, Mapping[str, Any]],
    after_other_role: bool,
) -> Message:
    """The readable copy of ``item``: role, content, tool calls and responses."""
    message: Message | None = None
    call_id = item.get("call_id")
    call = calls.get(call_id) if isinstance(call_id, str) else None
    if item.get("type") == "function_call_output" and call is not None:
        message = _read([call, item])
    if message is None:
        message = _read([item])
    if (
        message is None
        or message.role is Role.SYSTEM
        or (message.role is Role.TOOL and not after_other_role)
    ):
        message = _text_only(item)
    return Message.assistant() if message is None else message


def items_to_messages(items: Sequence[Mapping[str, Any]]) -> list[Message]:
    """Turn Agents SDK input items into messages, one each, in order.

    Each message gets a new id and keeps its item under :data:`ITEM_KEY`;
    the module docstring says what the rest of the message holds.

    Raises:
        InvalidMessageError: ``items`` is not a list, or an item is not a dict
            (an SDK object goes in as ``item.model_dump(exclude_unset=True)``);
            or an item holds something that is not JSON (a set, bytes, a
            non-string key, a non-finite float, an object) or nests too deep
            to be kept in metadata (:data:`chatledger.messages.MAX_METADATA_DEPTH`
            levels, the item itself the second), found before anything
            recurses through it; the error
            names the item by its index. It is a ``TypeError`` and a
            ``ValueError``.
    """
    if isinstance(items, str | bytes | Mapping) or not isinstance(items, Sequence):
        raise InvalidMessageError(
            f"items must be a list of dicts, not {type(items).__name__}"
        )
    messages: list[Message] = []
    calls: dict[str, Mapping[str, Any]] = {}
    after_other_role = False
    for index, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise InvalidMessageError(
                f"items[{index}] must be a dict (a Responses input item), not "
                f"{type(item).__name__}"
            )
        readable = _readable(item, calls, after_other_role)
        after_other_role = after_other_role or readable.role is not Role.TOOL
        call_id = item.get("call_id")
        if item.get("type") == "function_call" and isinstance(call_id, str):
            calls[call_id] = item
        try:
            message = Message(
                role=readable.role,
                content=readable.content,
                tool_calls=readable.tool_calls,
                tool_responses=readable.tool_responses,
                media=readable.media,
                metadata={ITEM_KEY: item},
            )
        except InvalidMessageError as exc:
            raise InvalidMessageError(f"items[{index}]: {exc}") from None
        messages.append(message)
    return messages


def messages_to_items(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Return the item each message keeps, as plain ``dict`` and ``list`` values.

    Raises:
        ForeignMessageError: a message has no item under :data:`ITEM_KEY`
            (something other than :func:`items_to_messages` made it).
    """
    items: list[dict[str, Any]] = []
    for message in messages:
        item = message.metadata.get(ITEM_KEY)
        if not isinstance(item, Mapping):
            raise ForeignMessageError(
                f"message {message.id} ({message.role.value}) has no Agents SDK "
                f"item in metadata[{ITEM_KEY!r}]: it was not stored through "
                "ChatLedgerSession"
            )
        items.append(thaw(item))
    return items
