"""Messages to LangChain messages and back, losing nothing either way.

Example:
    from langchain_core.messages import AIMessage, HumanMessage

    from chatledger import MessageWindowChatMemory
    from chatledger_langchain import from_langchain, to_langchain

    memory = MessageWindowChatMemory(max_messages=20)
    memory.add("c1", from_langchain([HumanMessage("Hi"), AIMessage("Hello")]))
    to_langchain(memory.get("c1"))   # what chat_model.invoke(...) takes

The mapping: a system message is a ``SystemMessage``, a user message a
``HumanMessage``, an assistant message an ``AIMessage`` (tool calls in
``tool_calls``, their arguments parsed), a tool message one ``ToolMessage``
per tool response, all sharing the message's ``id``. Text is ``content``;
with media, ``content`` is a list: a text block, then one standard block per
attachment (``image``, ``audio``, ``video`` or ``file``, with ``base64`` or
``url`` and ``mime_type``; a media ``id`` is the block's ``id``, its ``name``
``extras["filename"]``).

What one side has no field for travels in a field of the other, so both
round trips are exact: ``from_langchain(to_langchain(m)) == m`` and
``to_langchain(from_langchain(lc)) == lc``.

- Into LangChain, in ``response_metadata["chatledger"]`` (a field no chat
  model integration sends): the message's ``metadata``, a ``None`` content,
  a tool message's own content, and tool calls whose argument text is not
  the compact JSON of an object (kept exactly). ``created_at`` is storage's
  own and is not carried, so a stored LangChain message reads back equal to
  the one added.
- Into chatledger, in ``metadata["langchain"]``: ``additional_kwargs``, the
  rest of ``response_metadata``, ``name``, ``usage_metadata``, ``"id": None``
  for a message LangChain gave no ``id`` (it is stored under a new one, and
  comes back without one, as it was given),
  ``invalid_tool_calls``, a tool message's ``artifact`` and ``status``, and a
  ``content`` list other than the one this mapping makes (kept as given; its
  text blocks are also joined into the message's text and its standard media
  blocks read as media). The ``"langchain"`` metadata key is reserved for it.

LangChain message types other than system, human, AI (and their chunks) and
tool, and values that are not JSON, raise ``UnsupportedContentError`` naming
the message by its index and the field. So does hostile input: a set, bytes,
a non-str key, ``NaN`` or any other object in tool-call ``args``, a field of
the wrong type, and JSON nested deeper than
:data:`chatledger.messages.MAX_METADATA_DEPTH` levels, measured before
anything recurses through it. Stored argument text nested that deep is not
parsed: it goes to LangChain as an invalid tool call, kept exactly.
"""

from __future__ import annotations

import base64
import binascii
import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from chatledger import (
    ChatLedgerError,
    InvalidMessageError,
    Media,
    Message,
    Role,
    ToolCall,
    ToolResponse,
)
from chatledger.convert import (
    UnsupportedContentError,
    dumps_value,
    loads_value,
    thaw,
)

__all__ = ["from_langchain", "to_langchain"]

#: The key of ``response_metadata`` that carries what LangChain has no field for.
SIDE_KEY = "chatledger"
#: The key of ``metadata`` that carries what chatledger has no field for.
EXTRAS_KEY = "langchain"

_CHAT_ROLES = {"system": Role.SYSTEM, "user": Role.USER, "human": Role.USER}
_CHAT_ROLES |= {"assistant": Role.ASSISTANT, "ai": Role.ASSISTANT}
_LANGCHAIN_CLASS = {
    Role.SYSTEM: "SystemMessage",
    Role.USER: "HumanMessage",
    Role.ASSISTANT: "AIMessage",
}


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _parsed(arguments: str) -> Any:
    """The JSON value of argument text; ``None`` when chatledger would not keep it."""
    try:
        return loads_value(arguments)
    except ValueError:  # not JSON, or nested too deep to parse safely
        return None


def _object_arguments(arguments: str) -> dict[str, Any] | None:
    """The arguments as a dict when they are exactly the compact JSON of one."""
    value = _parsed(arguments)
    if isinstance(value, dict) and _compact(value) == arguments:
        return value
    return None


def _media_block(media: Media) -> dict[str, Any]:
    kind = media.mime_type.partition("/")[0]
    block: dict[str, Any] = {
        "type": kind if kind in ("image", "audio", "video") else "file"
    }
    if isinstance(media.data, bytes):
        block["base64"] = base64.b64encode(media.data).decode("ascii")
    else:
        block["url"] = media.data
    block["mime_type"] = media.mime_type
    if media.id is not None:
        block["id"] = media.id
    if media.name is not None:
        block["extras"] = {"filename": media.name}
    return block


def _content(
    text: str | None, media: Sequence[Media]
) -> str | list[str | dict[str, Any]]:
    """The ``content`` this mapping makes for a text and its media."""
    if not media:
        return text or ""
    blocks: list[str | dict[str, Any]] = []
    if text:
        blocks.append({"type": "text", "text": text})
    blocks.extend(_media_block(m) for m in media)
    return blocks


def _extras(message: Message, where: str) -> dict[str, Any]:
    extras = message.metadata.get(EXTRAS_KEY)
    if extras is None:
        return {}
    if not isinstance(extras, Mapping):
        raise UnsupportedContentError(
            f"{where}.metadata[{EXTRAS_KEY!r}] is reserved for LangChain fields "
            "and must be a dict"
        )
    thawed: dict[str, Any] = thaw(extras)
    return thawed


def _side(message: Message, **fields: Any) -> dict[str, Any]:
    side: dict[str, Any] = {}
    metadata = {k: thaw(v) for k, v in message.metadata.items() if k != EXTRAS_KEY}
    if metadata:
        side["metadata"] = metadata
    side.update(fields)
    return side


def _common(side: dict[str, Any], extras: Mapping[str, Any]) -> dict[str, Any]:
    response_metadata = dict(extras.get("response_metadata", {}))
    if side:
        response_metadata[SIDE_KEY] = side
    fields: dict[str, Any] = {
        "additional_kwargs": dict(extras.get("additional_kwargs", {})),
        "response_metadata": response_metadata,
    }
    if "name" in extras:
        fields["name"] = extras["name"]
    return fields


def _ai_calls(
    message: Message,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[list[str]] | None]:
    """LangChain's tool calls, its invalid ones, and the exact calls if needed."""
    calls: list[dict[str, Any]] = []
    invalid: list[dict[str, Any]] = []
    exact = True
    for call in message.tool_calls:
        args = _object_arguments(call.arguments)
        if args is None or call.type != "function":
            exact = False
        parsed = _parsed(call.arguments)
        if isinstance(parsed, dict):
            calls.append(
                {"name": call.name, "args": parsed, "id": call.id, "type": "tool_call"}
            )
        else:
            invalid.append(
                {
                    "name": call.name,
                    "args": call.arguments,
                    "id": call.id,
                    "error": "the arguments are not a JSON object",
                    "type": "invalid_tool_call",
                }
            )
    if exact:
        return calls, invalid, None
    kept = [[c.id, c.name, c.arguments, c.type] for c in message.tool_calls]
    return calls, invalid, kept


def _given_id(message: Message, extras: Mapping[str, Any], stored_ids: bool) -> Any:
    """The id LangChain gave (``None`` if none), or the store's when asked."""
    if not stored_ids and "id" in extras and extras["id"] is None:
        return None
    return message.id


def _one_to_langchain(
    message: Message, where: str, stored_ids: bool
) -> list[BaseMessage]:
    extras = _extras(message, where)
    content = extras.get("content", _content(message.content, message.media))
    given_id = _given_id(message, extras, stored_ids)
    if message.role is Role.SYSTEM:
        return [SystemMessage(content, id=given_id, **_common(_side(message), extras))]
    if message.role is Role.USER:
        return [HumanMessage(content, id=given_id, **_common(_side(message), extras))]
    if message.role is Role.ASSISTANT:
        calls, invalid, kept = _ai_calls(message)
        side = _side(message)
        if message.content is None:
            side["content"] = None
        if kept is not None:
            side["tool_calls"] = kept
        fields = _common(side, extras)
        if "usage_metadata" in extras:
            fields["usage_metadata"] = extras["usage_metadata"]
        return [
            AIMessage(
                content,
                id=given_id,
                tool_calls=calls,
                invalid_tool_calls=[*extras.get("invalid_tool_calls", []), *invalid],
                **fields,
            )
        ]
    if not message.tool_responses:
        raise UnsupportedContentError(
            f"{where}: tool message {message.id} has no tool response, so it has "
            "no tool_call_id for LangChain"
        )
    parts: list[Mapping[str, Any]] = extras.get("parts") or [{}] * len(
        message.tool_responses
    )
    converted: list[BaseMessage] = []
    for index, response in enumerate(message.tool_responses):
        part = parts[index] if index < len(parts) else {}
        side = {}
        if index == 0:
            side = _side(message)
            if message.content is not None:
                side["content"] = message.content
        fields = _common(side, part)
        fields.setdefault("name", response.name or None)
        if "artifact" in part:
            fields["artifact"] = part["artifact"]
        converted.append(
            ToolMessage(
                part.get("content", response.data),
                tool_call_id=response.id,
                id=given_id,
                status=part.get("status", "success"),
                **fields,
            )
        )
    return converted


def to_langchain(
    messages: Sequence[Message], *, stored_ids: bool = False
) -> list[BaseMessage]:
    """Convert messages to LangChain messages, in order (see the module docs).

    Args:
        messages: The messages, as a memory or repository returns them.
        stored_ids: Give every message the id it is stored under, also one
            whose LangChain message had none (by default it comes back
            without one, equal to the message given). A LangGraph state
            needs them: it tells stored messages from new ones by id.

    Raises:
        UnsupportedContentError: for a tool message without tool responses,
            and for a ``metadata["langchain"]`` that is not a dict.
    """
    converted: list[BaseMessage] = []
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if not isinstance(message, Message):
            raise UnsupportedContentError(
                f"{where} must be a Message, not {type(message).__name__}"
            )
        try:
            converted.extend(_one_to_langchain(message, where, stored_ids))
        except (AttributeError, LookupError, TypeError, ValueError) as exc:
            if isinstance(exc, ChatLedgerError):
                raise
            # Only a reserved metadata key written by something else gets here.
            raise UnsupportedContentError(
                f"{where}.metadata[{EXTRAS_KEY!r}] does not hold the LangChain "
                f"fields this mapping keeps there: {type(exc).__name__}: {exc}"
            ) from exc
    return converted


# --- From LangChain -----------------------------------------------------------


def _b64(data: str, where: str) -> bytes:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise UnsupportedContentError(f"{where}.base64 is not valid base64") from exc


def _read_media(block: Mapping[str, Any], where: str) -> Media | None:
    """A standard media block as media; ``None`` for any other block."""
    kind = block.get("type")
    if kind not in ("image", "audio", "video", "file"):
        return None
    mime = block.get("mime_type")
    if "base64" in block and isinstance(block["base64"], str) and isinstance(mime, str):
        data: bytes | str = _b64(block["base64"], where)
    elif isinstance(block.get("url"), str) and isinstance(mime, str):
        data = block["url"]
    else:
        return None
    extras = block.get("extras") or {}
    name = extras.get("filename") if isinstance(extras, Mapping) else None
    block_id = block.get("id")
    return Media(
        mime,
        data,
        name=name if isinstance(name, str) else None,
        id=block_id if isinstance(block_id, str) else None,
    )


def _read_content(
    content: object, where: str
) -> tuple[str, list[Media], list[Any] | None]:
    """The text, the media and, when not this mapping's own, the list as given."""
    if isinstance(content, str):
        return content, [], None
    if not isinstance(content, list):
        raise UnsupportedContentError(
            f"{where}.content must be a str or a list, not {type(content).__name__}"
        )
    texts: list[str] = []
    media: list[Media] = []
    for index, block in enumerate(content):
        if isinstance(block, str):
            texts.append(block)
        elif isinstance(block, Mapping):
            if block.get("type") == "text" and isinstance(block.get("text"), str):
                texts.append(block["text"])
            else:
                found = _read_media(block, f"{where}.content[{index}]")
                if found is not None:
                    media.append(found)
        else:
            raise UnsupportedContentError(
                f"{where}.content[{index}] must be a str or a dict, "
                f"not {type(block).__name__}"
            )
    text = "\n\n".join(texts)
    own = _content(text, media) == content
    return text, media, None if own else list(content)


def _split_side(message: BaseMessage, extras: dict[str, Any]) -> dict[str, Any]:
    response_metadata = dict(message.response_metadata)
    side = response_metadata.pop(SIDE_KEY, None)
    if response_metadata:
        extras["response_metadata"] = response_metadata
    if message.additional_kwargs:
        extras["additional_kwargs"] = dict(message.additional_kwargs)
    return dict(side) if isinstance(side, Mapping) else {}


def _metadata(
    side: Mapping[str, Any], extras: Mapping[str, Any], where: str
) -> dict[str, Any]:
    kept = side.get("metadata") or {}
    if not isinstance(kept, Mapping):
        raise UnsupportedContentError(
            f"{where}.response_metadata[{SIDE_KEY!r}]['metadata'] must be a dict, "
            f"not {type(kept).__name__}"
        )
    metadata = dict(kept)
    if extras:
        metadata[EXTRAS_KEY] = dict(extras)
    return metadata


def _role_of(message: BaseMessage, where: str) -> Role:
    if isinstance(message, SystemMessage):
        return Role.SYSTEM
    if isinstance(message, HumanMessage):
        return Role.USER
    if isinstance(message, AIMessage):
        return Role.ASSISTANT
    if isinstance(message, ToolMessage):
        return Role.TOOL
    if isinstance(message, ChatMessage) and message.role in _CHAT_ROLES:
        raise UnsupportedContentError(
            f"{where}: a ChatMessage with role {message.role!r}; use a "
            f"{_LANGCHAIN_CLASS[_CHAT_ROLES[message.role]]}"
        )
    raise UnsupportedContentError(
        f"{where}.type: a {type(message).__name__} has no chatledger role"
    )


def _read_calls(
    message: AIMessage, side: Mapping[str, Any], extras: dict[str, Any], where: str
) -> list[ToolCall]:
    kept = side.get("tool_calls")
    if isinstance(kept, list):
        # Made by to_langchain: the exact calls, its invalid ones among them.
        if not all(isinstance(c, list) and len(c) == 4 for c in kept):
            raise UnsupportedContentError(
                f"{where}.response_metadata[{SIDE_KEY!r}]['tool_calls'] must be "
                "a list of [id, name, arguments, type] lists"
            )
        return [ToolCall(c[0], c[1], c[2], c[3]) for c in kept]
    if message.invalid_tool_calls:
        extras["invalid_tool_calls"] = [dict(c) for c in message.invalid_tool_calls]
    calls = []
    for index, call in enumerate(message.tool_calls):
        call_where = f"{where}.tool_calls[{index}]"
        call_id = call.get("id")
        if not isinstance(call_id, str):
            raise UnsupportedContentError(
                f"{call_where}.id is a {type(call_id).__name__}; a stored tool "
                "call needs an id its response can name"
            )
        name = call.get("name")
        if not isinstance(name, str):
            raise UnsupportedContentError(
                f"{call_where}.name must be a str, not {type(name).__name__}"
            )
        try:
            arguments = dumps_value(call.get("args"), f"{call_where}.args")
        except ChatLedgerError as exc:
            raise UnsupportedContentError(str(exc)) from exc
        calls.append(ToolCall(call_id, name, arguments))
    return calls


def _one_from_langchain(message: BaseMessage, where: str) -> Message:
    role = _role_of(message, where)
    extras: dict[str, Any] = {}
    side = _split_side(message, extras)
    text, media, given = _read_content(message.content, where)
    if given is not None:
        extras["content"] = given
    if message.name is not None and role is not Role.TOOL:
        extras["name"] = message.name
    if message.id is None:
        extras["id"] = None
    content: str | None = text
    tool_calls: list[ToolCall] = []
    if isinstance(message, AIMessage):
        if "content" in side and side["content"] is None and not text:
            content = None
        tool_calls = _read_calls(message, side, extras, where)
        if message.usage_metadata is not None:
            extras["usage_metadata"] = dict(message.usage_metadata)
    try:
        return Message(
            role=role,
            content=content,
            tool_calls=tool_calls,
            media=media,
            metadata=_metadata(side, extras, where),
            id=message.id or str(uuid.uuid4()),
        )
    except InvalidMessageError as exc:
        raise UnsupportedContentError(f"{where}: {exc}") from exc


def _tool_part(message: ToolMessage, where: str) -> tuple[ToolResponse, dict[str, Any]]:
    part: dict[str, Any] = {}
    side = _split_side(message, part)
    text, _, given = _read_content(message.content, where)
    if given is not None:
        part["content"] = given
    if message.name == "":
        part["name"] = ""
    if message.artifact is not None:
        part["artifact"] = message.artifact
    if message.status != "success":
        part["status"] = message.status
    part["side"] = side
    return ToolResponse(message.tool_call_id, message.name or "", text), part


def _tool_from_langchain(group: list[ToolMessage], where: str) -> Message:
    responses = []
    parts = []
    for message in group:
        response, part = _tool_part(message, where)
        responses.append(response)
        parts.append(part)
    side = parts[0].pop("side")
    for part in parts[1:]:
        part.pop("side")
    extras: dict[str, Any] = {"parts": parts} if any(parts) else {}
    if group[0].id is None:
        extras["id"] = None
    try:
        return Message(
            role=Role.TOOL,
            content=side.get("content"),
            tool_responses=responses,
            metadata=_metadata(side, extras, where),
            id=group[0].id or str(uuid.uuid4()),
        )
    except InvalidMessageError as exc:
        raise UnsupportedContentError(f"{where}: {exc}") from exc


def from_langchain(messages: Sequence[BaseMessage]) -> list[Message]:
    """Convert LangChain messages to messages, in order (see the module docs).

    A message without ``id`` gets a new one, and ``metadata["langchain"]``
    records that LangChain gave none, so :func:`to_langchain` gives it back
    without one. Consecutive ``ToolMessage`` objects that share an ``id``
    become one tool message.

    Raises:
        UnsupportedContentError: naming the message (``messages[2]``) and the
            field, for a message type without a chatledger role, a tool call
            without an id, and values that are not JSON (an ``artifact``, say).
    """
    converted: list[Message] = []
    group: list[ToolMessage] = []
    group_where = ""
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if not isinstance(message, BaseMessage):
            raise UnsupportedContentError(
                f"{where} must be a LangChain message, not {type(message).__name__}"
            )
        if isinstance(message, ToolMessage):
            if group and (message.id is None or message.id != group[0].id):
                converted.append(_tool_from_langchain(group, group_where))
                group = []
            if not group:
                group_where = where
            group.append(message)
            continue
        if group:
            converted.append(_tool_from_langchain(group, group_where))
            group = []
        converted.append(_one_from_langchain(message, where))
    if group:
        converted.append(_tool_from_langchain(group, group_where))
    return converted
