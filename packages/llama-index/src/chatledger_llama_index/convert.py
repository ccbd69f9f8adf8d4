"""Messages to LlamaIndex chat messages and back, losing nothing either way.

Example:
    from llama_index.core.llms import ChatMessage

    from chatledger import Message, MessageWindowChatMemory
    from chatledger_llama_index import from_llama_index, to_llama_index

    memory = MessageWindowChatMemory(max_messages=20)
    memory.add("c1", from_llama_index([ChatMessage(role="user", content="Hi")]))
    memory.add("c1", Message.assistant("Hello!"))
    to_llama_index(memory.get("c1"))   # what llm.chat(...) takes

The mapping, message by message:

- Roles: system, user, assistant and tool are LlamaIndex's ``MessageRole``
  of the same name.
- Text: one ``TextBlock`` holding ``content``; none when ``content`` is
  ``None``, nor for the empty text of a system or user message that has
  images. Several ``TextBlock`` objects read as one text, joined by a newline
  as ``ChatMessage.content`` joins them.
- Media: images only, one ``ImageBlock`` each: bytes as ``image`` (base64, as
  LlamaIndex keeps it), a URL as ``url``, the MIME type as ``image_mimetype``.
- Tool calls: ``additional_kwargs["tool_calls"]``, OpenAI's shape
  (``{"id", "type", "function": {"name", "arguments"}}``, the argument text
  exact), where LlamaIndex's OpenAI-style integrations keep them. On the way
  in, SDK objects there are read with ``model_dump`` (they come back as
  dicts), and ``ToolCallBlock`` blocks are read too: a ``tool_kwargs`` dict
  becomes compact JSON argument text, a ``str`` is the text.
- Tool messages: LlamaIndex carries one result per message, so a tool
  message becomes one ``ChatMessage`` per tool response, its data as text and
  its call's id in ``additional_kwargs["tool_call_id"]``. A tool
  ``ChatMessage`` reads back as a tool message with one response, named after
  the call with that id earlier in the list (else ``""``); without a
  ``tool_call_id`` it is a tool message without responses.

What one side has no field for travels in a field of the other:

- Into LlamaIndex, in ``additional_kwargs["chatledger"]``, only when there is
  something to carry: the message's ``metadata``, a media ``name`` or ``id``
  (or a URL that pydantic would spell otherwise), a tool message's own
  ``content``, and a tool response's name when it is not its call's. A
  LlamaIndex integration that sends ``additional_kwargs`` to its API as they
  are would send this key too: keep such data out of messages sent to one.
- Into chatledger, in ``metadata["llama_index"]`` (a reserved key): the rest
  of ``additional_kwargs`` (JSON values only), blocks laid out otherwise than
  this mapping lays them out (several text blocks, their order, tool call
  blocks), an image's ``detail`` or missing MIME type, and tool calls given
  otherwise than OpenAI's shape (kept as given).
- Not carried: ``id`` and ``created_at``, which LlamaIndex has no field for.
  A message read from LlamaIndex gets a new id.

Round trips. ``from_llama_index(to_llama_index(history)) == history``
(``Message`` equality) for every history whose media are images, whose tool
messages carry at most one response, whose metadata has no ``"llama_index"``
key it did not get here, and whose unnamed tool responses answer no call in
the history (they come back named after it). ``to_llama_index(from_llama_index(chat))
== chat`` for every list ``from_llama_index`` takes, SDK tool call objects
coming back as dicts.

Refusals raise ``UnsupportedContentError`` naming the item and field, such as
``chat_messages[2].blocks[1]``: LlamaIndex roles other than the four, blocks
other than text, image and tool call blocks (audio, video, documents,
thinking, citations, cache points), an image given by path or stream, a tool
call without an id, values in ``additional_kwargs`` or tool arguments that
are not JSON (a set, bytes, a non-str key, ``NaN``, any other object) or nest
deeper than :data:`chatledger.messages.MAX_METADATA_DEPTH` levels, measured
before anything recurses through them; and, into LlamaIndex (naming
``messages[2].media[0]``), media other than images and image URLs that
pydantic cannot parse. Stored argument text nested that deep is not parsed
into a tool call block.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from llama_index.core.base.llms.types import (
    ChatMessage,
    ContentBlock,
    ImageBlock,
    MessageRole,
    TextBlock,
    ToolCallBlock,
)
from pydantic import ValidationError

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
    to_openai,
)

__all__ = [
    "Part",
    "from_llama_index",
    "read_chat_message",
    "to_llama_index",
    "to_llama_index_parts",
]

#: The ``additional_kwargs`` key that carries what LlamaIndex has no field for.
SIDE_KEY = "chatledger"
#: The ``metadata`` key that carries what chatledger has no field for.
EXTRAS_KEY = "llama_index"

_TO_ROLE = {
    Role.SYSTEM: MessageRole.SYSTEM,
    Role.USER: MessageRole.USER,
    Role.ASSISTANT: MessageRole.ASSISTANT,
    Role.TOOL: MessageRole.TOOL,
}
_FROM_ROLE = {value: key for key, value in _TO_ROLE.items()}

# Layout entries: a text block is its length; the others name the block.
_IMAGE = "image"
_CALL = "tool_call"  # a ToolCallBlock whose tool_kwargs is a dict
_CALL_TEXT = "tool_call_text"  # a ToolCallBlock whose tool_kwargs is the text
_SIDE_FIELDS = {"metadata", "media", "content", "name"}
_MEDIA_SIDE_FIELDS = {"name", "id", "url"}


class Part(NamedTuple):
    """One LlamaIndex message and the stored message it comes from.

    Attributes:
        source: The index of the chatledger message.
        response: For a tool message, the index of the tool response this
            message carries; ``None`` otherwise.
        message: The LlamaIndex message.
    """

    source: int
    response: int | None
    message: ChatMessage


def _compact(value: object, where: str) -> str:
    """Compact JSON text of ``value``, refused unless it is JSON chatledger keeps."""
    try:
        return dumps_value(value, where)
    except ChatLedgerError as exc:
        raise UnsupportedContentError(str(exc)) from exc


def _openai_calls(calls: Sequence[ToolCall]) -> list[dict[str, Any]]:
    """The calls in OpenAI's shape, as chatledger's OpenAI converter writes them."""
    converted: list[dict[str, Any]] = to_openai(
        [Message(Role.ASSISTANT, tool_calls=calls)]
    )[0]["tool_calls"]
    return converted


def _canonical_layout(role: Role, text: str | None, images: int) -> list[Any]:
    """The blocks this mapping makes: the text (if any), then the images."""
    layout: list[Any] = []
    if text is not None and (text or not images or role is Role.ASSISTANT):
        layout.append(len(text))
    layout.extend([_IMAGE] * images)
    return layout


# --- To LlamaIndex ------------------------------------------------------------


def _extras(message: Message, where: str) -> dict[str, Any]:
    extras = message.metadata.get(EXTRAS_KEY)
    if extras is None:
        return {}
    if not isinstance(extras, Mapping):
        raise UnsupportedContentError(
            f"{where}.metadata[{EXTRAS_KEY!r}] is reserved for LlamaIndex fields "
            "and must be a dict"
        )
    thawed: dict[str, Any] = thaw(extras)
    return thawed


def _mismatch(where: str, what: str) -> UnsupportedContentError:
    return UnsupportedContentError(
        f"{where}.metadata[{EXTRAS_KEY!r}]: {what} does not match the message"
    )


def _split_text(text: str | None, lengths: list[int], where: str) -> list[str]:
    """Cut ``text`` into the pieces a layout's text lengths name."""
    if not lengths:
        if text:
            raise _mismatch(where, "a layout without text")
        return []
    if text is None or sum(lengths) + len(lengths) - 1 != len(text):
        raise _mismatch(where, "the text lengths of the layout")
    pieces = []
    start = 0
    for length in lengths:
        pieces.append(text[start : start + length])
        start += length
        if start < len(text) and text[start] != "\n":
            raise _mismatch(where, "the text lengths of the layout")
        start += 1
    return pieces


def _call_block(call: ToolCall, kind: str, where: str) -> ToolCallBlock:
    if call.type != "function":
        raise _mismatch(where, f"a tool call block for a {call.type!r} call")
    if kind == _CALL_TEXT:
        return ToolCallBlock(
            tool_call_id=call.id, tool_name=call.name, tool_kwargs=call.arguments
        )
    try:
        arguments = loads_value(call.arguments)
    except ValueError:  # not JSON, or nested too deep to parse safely
        arguments = None
    if not isinstance(arguments, dict):
        raise _mismatch(where, "a tool call block whose arguments are not an object")
    return ToolCallBlock(
        tool_call_id=call.id, tool_name=call.name, tool_kwargs=arguments
    )


def _build_blocks(
    layout: Any,
    text: str | None,
    images: list[ImageBlock],
    calls: Sequence[ToolCall],
    where: str,
) -> list[ContentBlock]:
    """The blocks a layout describes, filled with the message's parts."""
    if not isinstance(layout, list):
        raise _mismatch(where, "the block layout")
    lengths = [e for e in layout if isinstance(e, int) and not isinstance(e, bool)]
    call_entries = [e for e in layout if e in (_CALL, _CALL_TEXT)]
    if layout.count(_IMAGE) != len(images) or (
        call_entries and len(call_entries) != len(calls)
    ):
        raise _mismatch(where, "the block layout")
    texts = iter(_split_text(text, lengths, where))
    image_blocks = iter(images)
    remaining_calls = iter(calls)
    blocks: list[ContentBlock] = []
    for entry in layout:
        if isinstance(entry, int) and not isinstance(entry, bool):
            blocks.append(TextBlock(text=next(texts)))
        elif entry == _IMAGE:
            blocks.append(next(image_blocks))
        elif entry in (_CALL, _CALL_TEXT):
            blocks.append(_call_block(next(remaining_calls), entry, where))
        else:
            raise _mismatch(where, f"the layout entry {entry!r}")
    return blocks


def _image_block(
    media: Media, extra: Mapping[str, Any], where: str
) -> tuple[ImageBlock, dict[str, Any]]:
    """The image block of one attachment, and what only chatledger has of it."""
    if not media.mime_type.lower().startswith("image/"):
        raise UnsupportedContentError(
            f"{where}: a {media.mime_type!r} attachment; LlamaIndex messages carry "
            "images here, not other media"
        )
    fields: dict[str, Any] = {
        "image_mimetype": None
        if "image_mimetype" in extra and extra["image_mimetype"] is None
        else media.mime_type,
        "detail": extra.get("detail"),
    }
    side: dict[str, Any] = {}
    try:
        if isinstance(media.data, bytes):
            block = ImageBlock(image=base64.b64encode(media.data), **fields)
        else:
            block = ImageBlock(url=media.data, **fields)
            if str(block.url) != media.data:
                side["url"] = media.data
    except ValidationError as exc:
        problem = exc.errors()[0]["msg"] if exc.errors() else str(exc)
        raise UnsupportedContentError(f"{where}: {problem}") from exc
    if media.name is not None:
        side["name"] = media.name
    if media.id is not None:
        side["id"] = media.id
    return block, side


def _side_of(message: Message) -> dict[str, Any]:
    metadata = {
        key: thaw(value) for key, value in message.metadata.items() if key != EXTRAS_KEY
    }
    return {"metadata": metadata} if metadata else {}


def _tool_parts(
    message: Message,
    index: int,
    where: str,
    extras: dict[str, Any],
    call_names: Mapping[str, str],
) -> list[Part]:
    side = _side_of(message)
    kwargs = dict(extras.get("additional_kwargs") or {})
    layout = extras.get("blocks")
    if not message.tool_responses:
        if layout is None:
            layout = _canonical_layout(Role.TOOL, message.content, 0)
        blocks = _build_blocks(layout, message.content, [], [], where)
        if side:
            kwargs[SIDE_KEY] = side
        chat = ChatMessage(
            role=MessageRole.TOOL, blocks=blocks, additional_kwargs=kwargs
        )
        return [Part(index, None, chat)]
    parts = []
    for number, response in enumerate(message.tool_responses):
        first = number == 0
        part_side = dict(side) if first else {}
        if first and message.content is not None:
            part_side["content"] = message.content
        if response.name and response.name != call_names.get(response.id, ""):
            part_side["name"] = response.name
        part_kwargs = dict(kwargs) if first else {}
        part_kwargs["tool_call_id"] = response.id
        if part_side:
            part_kwargs[SIDE_KEY] = part_side
        part_layout = layout if first and layout is not None else [len(response.data)]
        blocks = _build_blocks(part_layout, response.data, [], [], where)
        chat = ChatMessage(
            role=MessageRole.TOOL, blocks=blocks, additional_kwargs=part_kwargs
        )
        parts.append(Part(index, number, chat))
    return parts


def _one_to_llama_index(
    message: Message, index: int, call_names: dict[str, str]
) -> list[Part]:
    where = f"messages[{index}]"
    extras = _extras(message, where)
    if message.role is Role.TOOL:
        return _tool_parts(message, index, where, extras, call_names)
    side = _side_of(message)
    kwargs = dict(extras.get("additional_kwargs") or {})
    image_extras = extras.get("images") or []
    images = []
    media_side = []
    for number, media in enumerate(message.media):
        extra = image_extras[number] if number < len(image_extras) else {}
        block, entry = _image_block(media, extra, f"{where}.media[{number}]")
        images.append(block)
        media_side.append(entry)
    if any(media_side):
        side["media"] = media_side
    for call in message.tool_calls:
        call_names[call.id] = call.name
    if message.tool_calls and extras.get("tool_calls_in") != "blocks":
        kwargs["tool_calls"] = extras.get("tool_calls") or _openai_calls(
            message.tool_calls
        )
    layout = extras.get("blocks")
    if layout is None:
        layout = _canonical_layout(message.role, message.content, len(images))
    blocks = _build_blocks(layout, message.content, images, message.tool_calls, where)
    if side:
        kwargs[SIDE_KEY] = side
    chat = ChatMessage(
        role=_TO_ROLE[message.role], blocks=blocks, additional_kwargs=kwargs
    )
    return [Part(index, None, chat)]


def to_llama_index_parts(messages: Sequence[Message]) -> list[Part]:
    """Convert messages as :func:`to_llama_index` does, saying where each comes from.

    Raises:
        UnsupportedContentError: as :func:`to_llama_index`.
    """
    if isinstance(messages, str | bytes | Mapping) or not isinstance(
        messages, Sequence
    ):
        raise UnsupportedContentError(
            f"messages must be a list of Message, not {type(messages).__name__}"
        )
    call_names: dict[str, str] = {}
    parts: list[Part] = []
    for index, message in enumerate(messages):
        if not isinstance(message, Message):
            raise UnsupportedContentError(
                f"messages[{index}] must be a Message, not {type(message).__name__}"
            )
        parts.extend(_one_to_llama_index(message, index, call_names))
    return parts


def to_llama_index(messages: Sequence[Message]) -> list[ChatMessage]:
    """Convert messages to LlamaIndex chat messages, in order (see the module docs).

    A tool message becomes one chat message per tool response.

    Raises:
        UnsupportedContentError: naming the message (``messages[2]``) and the
            field, for media other than images, an image URL pydantic cannot
            parse, and a ``metadata["llama_index"]`` that does not fit the
            message.
    """
    return [part.message for part in to_llama_index_parts(messages)]


# --- From LlamaIndex ----------------------------------------------------------


def _refuse(where: str, what: str) -> UnsupportedContentError:
    return UnsupportedContentError(
        f"{where}: {what}; a chatledger message has no place for it"
    )


def _read_side(value: object, where: str) -> dict[str, Any]:
    """The ``additional_kwargs["chatledger"]`` that :func:`to_llama_index` writes."""
    where = f"{where}.additional_kwargs[{SIDE_KEY!r}]"
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not set(value) <= _SIDE_FIELDS:
        raise UnsupportedContentError(
            f"{where} is reserved for chatledger fields: "
            f"{', '.join(sorted(_SIDE_FIELDS))}"
        )
    side = dict(value)
    metadata = side.get("metadata", {})
    if not isinstance(metadata, Mapping) or EXTRAS_KEY in metadata:
        raise UnsupportedContentError(
            f"{where}['metadata'] must be a dict without the key {EXTRAS_KEY!r}"
        )
    media = side.get("media", [])
    if not isinstance(media, list) or not all(
        isinstance(entry, Mapping)
        and set(entry) <= _MEDIA_SIDE_FIELDS
        and all(isinstance(v, str) for v in entry.values())
        for entry in media
    ):
        raise UnsupportedContentError(
            f"{where}['media'] must be a list of dicts of name, id and url"
        )
    for key in ("content", "name"):
        if key in side and not isinstance(side[key], str):
            raise UnsupportedContentError(f"{where}[{key!r}] must be a str")
    return side


def _read_image(block: ImageBlock, where: str) -> tuple[Media, dict[str, Any]]:
    """The attachment of an image block, and what only LlamaIndex has of it."""
    if block.path is not None:
        raise _refuse(f"{where}.path", "an image named by a file path (give its bytes)")
    image = block.image
    if image is not None and not isinstance(image, bytes):
        raise _refuse(f"{where}.image", "an image given as a stream (give its bytes)")
    data: bytes | str
    if image and block.url is not None:
        raise _refuse(where, "an image with both bytes and a url")
    if isinstance(image, bytes) and (image or block.url is None):
        try:
            data = base64.b64decode(image, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise UnsupportedContentError(f"{where}.image is not base64") from exc
    elif block.url is not None:
        data = str(block.url)
    else:
        raise _refuse(where, "an image block without an image or url")
    extra: dict[str, Any] = {}
    mime = block.image_mimetype
    if mime is None:
        mime = "image/*"
        extra["image_mimetype"] = None
    elif not mime.lower().startswith("image/"):
        raise _refuse(f"{where}.image_mimetype", f"an image typed {mime!r}")
    if block.detail is not None:
        extra["detail"] = block.detail
    return Media(mime, data), extra


def _read_call_block(block: ToolCallBlock, where: str) -> tuple[ToolCall, str]:
    if block.tool_call_id is None:
        raise UnsupportedContentError(
            f"{where}.tool_call_id is None; a stored tool call needs an id its "
            "response can name"
        )
    if isinstance(block.tool_kwargs, str):
        return ToolCall(block.tool_call_id, block.tool_name, block.tool_kwargs), (
            _CALL_TEXT
        )
    # Checked for depth and type before anything recurses through it.
    arguments = _compact(block.tool_kwargs, f"{where}.tool_kwargs")
    if loads_value(arguments) != block.tool_kwargs:
        raise UnsupportedContentError(
            f"{where}.tool_kwargs holds values JSON does not keep as they are"
        )
    return ToolCall(block.tool_call_id, block.tool_name, arguments), _CALL


def _as_dict(item: object, where: str) -> dict[str, Any]:
    if isinstance(item, Mapping):
        return dict(item)
    dump = getattr(item, "model_dump", None)
    if callable(dump):  # an SDK object, such as OpenAI's ChatCompletionMessageToolCall
        dumped = dump()
        if isinstance(dumped, Mapping):
            return dict(dumped)
    raise UnsupportedContentError(
        f"{where} must be a dict or an SDK object, not {type(item).__name__}"
    )


def _read_openai_calls(
    value: object, where: str
) -> tuple[list[ToolCall], list[dict[str, Any]] | None]:
    """Tool calls in OpenAI's shape, and the list as given when it is not that."""
    if not isinstance(value, list | tuple):
        raise UnsupportedContentError(
            f"{where} must be a list, not {type(value).__name__}"
        )
    calls = []
    given = []
    for number, item in enumerate(value):
        item_where = f"{where}[{number}]"
        call = _as_dict(item, item_where)
        function = call.get("function")
        if not isinstance(function, Mapping):
            raise UnsupportedContentError(f"{item_where}.function must be a dict")
        arguments = function.get("arguments")
        if not isinstance(arguments, str):
            arguments = _compact(arguments, f"{item_where}.function.arguments")
        call_type = call.get("type", "function")
        for field, found in (
            ("id", call.get("id")),
            ("function.name", function.get("name")),
            ("type", call_type),
        ):
            if not isinstance(found, str):
                raise UnsupportedContentError(
                    f"{item_where}.{field} is a {type(found).__name__}; a stored "
                    "tool call needs a str"
                )
        calls.append(ToolCall(call["id"], function["name"], arguments, call_type))
        given.append(call)
    if isinstance(value, list) and given == _openai_calls(calls):
        return calls, None  # SDK objects in this shape come back as dicts
    return calls, given


def _tool_calls(
    kwargs: dict[str, Any],
    block_calls: list[tuple[ToolCall, str, str, ToolCallBlock]],
    where: str,
    extras: dict[str, Any],
) -> list[ToolCall]:
    raw = kwargs.get("tool_calls")
    if raw is None or (isinstance(raw, list) and not raw):
        if block_calls:
            extras["tool_calls_in"] = "blocks"
        return [call for call, _, _, _ in block_calls]
    del kwargs["tool_calls"]
    calls, given = _read_openai_calls(raw, f"{where}.additional_kwargs['tool_calls']")
    if given is not None:
        extras["tool_calls"] = given
    if block_calls:
        if len(block_calls) != len(calls):
            raise UnsupportedContentError(
                f"{where}: {len(block_calls)} tool call blocks and "
                f"{len(calls)} additional_kwargs['tool_calls']; a chatledger "
                "message keeps one list of tool calls"
            )
        for call, (_, kind, block_where, block) in zip(calls, block_calls, strict=True):
            try:
                same = _call_block(call, kind, block_where) == block
            except UnsupportedContentError:
                same = False
            if not same:
                raise UnsupportedContentError(
                    f"{block_where} differs from its additional_kwargs['tool_calls'] "
                    "entry; a chatledger message keeps one list of tool calls"
                )
    return calls


def _one_from_llama_index(
    chat: object, where: str, call_names: Mapping[str, str]
) -> Message:
    if not isinstance(chat, ChatMessage):
        raise UnsupportedContentError(
            f"{where} must be a LlamaIndex ChatMessage, not {type(chat).__name__}"
        )
    role = _FROM_ROLE.get(chat.role)
    if role is None:
        raise _refuse(f"{where}.role", f"the role {chat.role.value!r}")
    kwargs = dict(chat.additional_kwargs)
    side = _read_side(kwargs.pop(SIDE_KEY, None), where)
    extras: dict[str, Any] = {}
    texts: list[str] = []
    media: list[Media] = []
    image_extras: list[dict[str, Any]] = []
    block_calls: list[tuple[ToolCall, str, str, ToolCallBlock]] = []
    layout: list[Any] = []
    for number, block in enumerate(chat.blocks):
        block_where = f"{where}.blocks[{number}]"
        if isinstance(block, TextBlock):
            texts.append(block.text)
            layout.append(len(block.text))
        elif isinstance(block, ImageBlock) and role in (Role.USER, Role.ASSISTANT):
            found, extra = _read_image(block, block_where)
            media.append(found)
            image_extras.append(extra)
            layout.append(_IMAGE)
        elif isinstance(block, ToolCallBlock) and role is Role.ASSISTANT:
            call, kind = _read_call_block(block, block_where)
            block_calls.append((call, kind, block_where, block))
            layout.append(kind)
        else:
            raise _refuse(
                block_where, f"a block of type {block.block_type!r} in a {role} message"
            )
    text = "\n".join(texts) if texts else None
    media_side = side.get("media", [])
    if media_side and len(media_side) != len(media):
        raise UnsupportedContentError(
            f"{where}.additional_kwargs[{SIDE_KEY!r}]['media'] does not match "
            "the images"
        )
    for number, entry in enumerate(media_side):
        found = media[number]
        media[number] = Media(
            found.mime_type,
            entry.get("url", found.data),
            name=entry.get("name"),
            id=entry.get("id"),
        )
    content: str | None = text
    laid_text: str | None = text
    tool_calls: list[ToolCall] = []
    responses: list[ToolResponse] = []
    if role in (Role.SYSTEM, Role.USER):
        content = laid_text = text or ""
    elif role is Role.ASSISTANT:
        tool_calls = _tool_calls(kwargs, block_calls, where, extras)
    elif isinstance(kwargs.get("tool_call_id"), str):
        call_id = kwargs.pop("tool_call_id")
        laid_text = text or ""
        name = side.get("name", call_names.get(call_id, ""))
        responses = [ToolResponse(call_id, name, laid_text)]
        content = side.get("content")
    elif "content" in side or "name" in side:
        raise UnsupportedContentError(
            f"{where}.additional_kwargs[{SIDE_KEY!r}] holds a tool response's "
            "fields, and the message has no tool_call_id"
        )
    if role is not Role.TOOL and ("content" in side or "name" in side):
        raise UnsupportedContentError(
            f"{where}.additional_kwargs[{SIDE_KEY!r}] holds a tool response's "
            f"fields in a {role} message"
        )
    if layout != _canonical_layout(role, laid_text, len(media)):
        extras["blocks"] = layout
    if any(image_extras):
        extras["images"] = image_extras
    if kwargs:
        extras["additional_kwargs"] = kwargs
    metadata = dict(side.get("metadata", {}))
    if extras:
        metadata[EXTRAS_KEY] = extras
    try:
        return Message(
            role=role,
            content=content,
            tool_calls=tool_calls,
            tool_responses=responses,
            media=media,
            metadata=metadata,
        )
    except InvalidMessageError as exc:
        raise UnsupportedContentError(f"{where}: {exc}") from exc


def read_chat_message(
    chat: object, where: str, call_names: Mapping[str, str] | None = None
) -> Message:
    """Convert one chat message as :func:`from_llama_index` does.

    Args:
        chat: The LlamaIndex message.
        where: How errors name it, such as ``"message"``.
        call_names: The names of the calls made before it, by call id, which
            name a tool response.

    Raises:
        UnsupportedContentError: as :func:`from_llama_index`.
    """
    return _one_from_llama_index(chat, where, call_names or {})


def from_llama_index(chat_messages: Sequence[ChatMessage]) -> list[Message]:
    """Convert LlamaIndex chat messages to messages, in order (see the module docs).

    Every message gets a new id.

    Raises:
        UnsupportedContentError: naming the message (``chat_messages[2]``) and
            the field, for a role other than system, user, assistant and tool;
            a block other than text, image and tool call blocks; an image
            given by path or stream; a tool call without an id; and values
            that are not JSON.
    """
    if isinstance(chat_messages, str | bytes | Mapping) or not isinstance(
        chat_messages, Sequence
    ):
        raise UnsupportedContentError(
            "chat_messages must be a list of ChatMessage, not "
            f"{type(chat_messages).__name__}"
        )
    call_names: dict[str, str] = {}
    converted = []
    for index, chat in enumerate(chat_messages):
        message = _one_from_llama_index(chat, f"chat_messages[{index}]", call_names)
        for call in message.tool_calls:
            call_names[call.id] = call.name
        converted.append(message)
    return converted
