"""Turn stored messages into the request shapes of model APIs, and back.

Example:
    from chatledger import Message
    from chatledger.convert import from_openai, to_anthropic, to_openai

    history = [Message.system("Be brief."), Message.user("Weather in Rome?")]
    to_openai(history)     # for chat.completions.create(model=..., messages=...)
    to_anthropic(history)  # for messages.create(model=..., max_tokens=512, **...)
    from_openai(to_openai(history)) == history   # and back

Every converter is pure and lossless for what the other side can carry. What
a target has no place for is said here, never dropped at random: ``id``,
``created_at`` and ``metadata`` are storage fields and are not sent; the
``content`` of a tool message that carries tool responses is not sent either
(the responses are what the model reads). Anything else the target cannot
carry raises :class:`UnsupportedContentError` instead of being dropped; on the
way in (:func:`from_openai`, :func:`from_anthropic`) the error names the item
by its index and field, such as ``messages[3].content[1].image_url.detail``.

Hostile input gets the same error, never a builtin one from deep inside: a
wrong type, a value that is not JSON where JSON is kept (a set, bytes, a
non-str key, ``NaN``, any other object in a ``tool_use`` input), and JSON
nested deeper than :data:`~chatledger.messages.MAX_METADATA_DEPTH` levels,
measured before anything recurses through it (tool-call arguments too, when
:func:`to_anthropic` parses them). A message the converters build is a
:class:`~chatledger.Message` and refuses what it always refuses with
:class:`~chatledger.InvalidMessageError`.

Round trips: ``from_openai(to_openai(messages)) == messages`` and
``from_anthropic(to_anthropic(messages)) == messages`` (``Message`` equality)
hold for every history the shape can carry; the docstrings of the ``from_``
functions say which those are.

For converters of one's own, such as the framework bridges: :func:`loads_value`
and :func:`dumps_value` read and write JSON text by the rules chatledger keeps
JSON by (the depth limit, no ``NaN``), and :func:`thaw` turns a message's
frozen metadata into plain ``dict`` and ``list`` values.
"""

from __future__ import annotations

import base64
import binascii
import mimetypes
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from chatledger.codec import dumps_value, loads_value, thaw
from chatledger.errors import ChatLedgerError
from chatledger.messages import Media, Message, Role, ToolCall, ToolResponse, _shown

__all__ = [
    "UnsupportedContentError",
    "dumps_value",
    "from_anthropic",
    "from_openai",
    "loads_value",
    "thaw",
    "to_anthropic",
    "to_openai",
]

_OPENAI_AUDIO = {
    "audio/wav": "wav",
    "audio/x-wav": "wav",
    "audio/wave": "wav",
    "audio/mpeg": "mp3",
    "audio/mp3": "mp3",
}


class UnsupportedContentError(ChatLedgerError, ValueError, TypeError):
    """A message holds something the target API has no place for.

    On the way in, also input that is malformed: a wrong type, a value that
    is not JSON, nesting deeper than
    :data:`~chatledger.messages.MAX_METADATA_DEPTH`. It is both a
    ``ValueError`` and a ``TypeError``, so callers may catch either builtin.
    """


def _data_url(media: Media) -> str:
    if isinstance(media.data, str):
        return media.data
    encoded = base64.b64encode(media.data).decode("ascii")
    return f"data:{media.mime_type};base64,{encoded}"


def _openai_part(media: Media) -> dict[str, Any]:
    mime = media.mime_type.lower()
    if mime.startswith("image/"):
        return {"type": "image_url", "image_url": {"url": _data_url(media)}}
    if isinstance(media.data, bytes):
        if mime in _OPENAI_AUDIO:
            return {
                "type": "input_audio",
                "input_audio": {
                    "data": base64.b64encode(media.data).decode("ascii"),
                    "format": _OPENAI_AUDIO[mime],
                },
            }
        file: dict[str, Any] = {"file_data": _data_url(media)}
        if media.name is not None:
            file["filename"] = media.name
        return {"type": "file", "file": file}
    raise UnsupportedContentError(
        f"OpenAI chat messages take images by URL, other files ({media.mime_type}) "
        "only as inline data; this media is the URL "
        f"{media.data[:80]!r}"
    )


def _openai_user(message: Message) -> dict[str, Any]:
    if not message.media:
        return {"role": "user", "content": message.content}
    parts: list[dict[str, Any]] = []
    if message.content:
        parts.append({"type": "text", "text": message.content})
    parts.extend(_openai_part(m) for m in message.media)
    return {"role": "user", "content": parts}


def _openai_assistant(message: Message) -> dict[str, Any]:
    if message.media:
        raise UnsupportedContentError(
            "OpenAI chat messages cannot carry media on an assistant message "
            f"(message {message.id})"
        )
    converted: dict[str, Any] = {"role": "assistant", "content": message.content}
    if message.tool_calls:
        converted["tool_calls"] = [
            {
                "id": call.id,
                "type": call.type,
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in message.tool_calls
        ]
    return converted


def to_openai(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Convert messages to the OpenAI chat-completions ``messages`` list.

    A system message becomes ``{"role": "system", "content": ...}``; a user
    message with media gets content parts (``image_url`` for images, by URL or
    as a ``data:`` URL, ``input_audio`` for WAV and MP3 bytes, ``file`` for
    other bytes); an assistant message keeps ``content`` (``None`` included)
    and its ``tool_calls`` with the exact argument text; a tool message becomes
    one ``{"role": "tool", "tool_call_id": ..., "content": ...}`` per response,
    in order.

    Raises:
        UnsupportedContentError: for media the API cannot take (a non-image
            URL, media on an assistant message) and for a tool message without
            tool responses.
    """
    converted: list[dict[str, Any]] = []
    for message in messages:
        if message.role is Role.SYSTEM:
            converted.append({"role": "system", "content": message.content})
        elif message.role is Role.USER:
            converted.append(_openai_user(message))
        elif message.role is Role.ASSISTANT:
            converted.append(_openai_assistant(message))
        else:
            if not message.tool_responses:
                raise UnsupportedContentError(
                    f"tool message {message.id} has no tool response, so it has no "
                    "tool_call_id to send"
                )
            converted.extend(
                {"role": "tool", "tool_call_id": response.id, "content": response.data}
                for response in message.tool_responses
            )
    return converted


def _anthropic_source(media: Media) -> dict[str, Any]:
    if isinstance(media.data, str):
        return {"type": "url", "url": media.data}
    return {
        "type": "base64",
        "media_type": media.mime_type,
        "data": base64.b64encode(media.data).decode("ascii"),
    }


def _anthropic_media(media: Media) -> dict[str, Any]:
    mime = media.mime_type.lower()
    if mime.startswith("image/"):
        return {"type": "image", "source": _anthropic_source(media)}
    if mime == "application/pdf":
        return {"type": "document", "source": _anthropic_source(media)}
    if mime.startswith("text/") and isinstance(media.data, bytes):
        return {
            "type": "document",
            "source": {
                "type": "text",
                "media_type": "text/plain",
                "data": media.data.decode("utf-8", errors="strict"),
            },
        }
    raise UnsupportedContentError(
        f"Anthropic messages take images, PDF and text documents, not {media.mime_type}"
    )


def _tool_input(arguments: str, call_id: str) -> Any:
    try:
        value = loads_value(arguments) if arguments.strip() else {}
    except ValueError as exc:
        raise UnsupportedContentError(
            f"tool call {call_id} has arguments that are not JSON, and Anthropic "
            f"needs them as an object: {exc}"
        ) from exc
    if not isinstance(value, dict):
        raise UnsupportedContentError(
            f"tool call {call_id} has arguments that are not a JSON object"
        )
    return value


def _anthropic_blocks(message: Message) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if message.role is Role.TOOL:
        if not message.tool_responses:
            raise UnsupportedContentError(
                f"tool message {message.id} has no tool response to send"
            )
        return [
            {"type": "tool_result", "tool_use_id": r.id, "content": r.data}
            for r in message.tool_responses
        ]
    if message.content:
        blocks.append({"type": "text", "text": message.content})
    blocks.extend(_anthropic_media(m) for m in message.media)
    blocks.extend(
        {
            "type": "tool_use",
            "id": call.id,
            "name": call.name,
            "input": _tool_input(call.arguments, call.id),
        }
        for call in message.tool_calls
    )
    return blocks


def to_anthropic(messages: Sequence[Message]) -> dict[str, Any]:
    """Convert messages to the keyword arguments ``system`` and ``messages``.

    System messages are joined (blank line between them) into ``system``,
    which is left out when there is none. Tool responses become
    ``tool_result`` blocks of a user message, tool calls ``tool_use`` blocks
    with their arguments parsed into ``input``. Consecutive messages that land
    on the same role are merged into one message, as the API requires
    alternating roles; within a user message, tool results come first. An
    empty assistant message (no text, no call) is left out.

    Raises:
        UnsupportedContentError: for media the API cannot take, tool-call
            arguments that are not a JSON object (or nest deeper than
            :data:`~chatledger.messages.MAX_METADATA_DEPTH` levels, measured
            before parsing), and a tool message without tool responses.
    """
    system: list[str] = []
    turns: list[dict[str, Any]] = []
    for message in messages:
        if message.role is Role.SYSTEM:
            assert message.content is not None  # the model guarantees it
            system.append(message.content)
            continue
        role = "assistant" if message.role is Role.ASSISTANT else "user"
        blocks = _anthropic_blocks(message)
        if not blocks:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    for turn in turns:
        if turn["role"] == "user":
            results = [b for b in turn["content"] if b["type"] == "tool_result"]
            others = [b for b in turn["content"] if b["type"] != "tool_result"]
            turn["content"] = results + others
    request: dict[str, Any] = {"messages": turns}
    if system:
        request["system"] = "\n\n".join(system)
    return request


# --- From the request shapes back to messages --------------------------------

#: Fields whose value changes nothing a model reads; they are not kept.
_IGNORED_FIELDS = frozenset({"cache_control"})
_OPENAI_AUDIO_MIME = {"wav": "audio/wav", "mp3": "audio/mpeg"}
_CONTENT_TEXT_PARTS = ("text", "input_text", "output_text")


def _no_place(where: str, what: str) -> UnsupportedContentError:
    return UnsupportedContentError(
        f"{where}: {what}; a chatledger message has no place for it"
    )


def _malformed(where: str, expected: str, value: object) -> UnsupportedContentError:
    return UnsupportedContentError(
        f"{where} must be {expected}, not {type(value).__name__}"
    )


def _item(value: object, where: str) -> Mapping[str, Any]:
    if isinstance(value, Mapping):
        return value
    dump = getattr(value, "model_dump", None)
    if callable(dump):  # an SDK object: its fields as a dict
        dumped = dump()
        if isinstance(dumped, Mapping):
            return dumped
    raise _malformed(where, "a dict", value)


def _key(key: object) -> str:
    """A field as a path shows it (``.name``), whatever the key is."""
    return f".{key}" if isinstance(key, str) else f"[{_shown(key)}]"


def _json_text(value: object, where: str) -> str:
    """Compact JSON text of ``value``, refused unless it is JSON chatledger keeps."""
    try:
        return dumps_value(value, where)
    except ChatLedgerError as exc:
        raise UnsupportedContentError(str(exc)) from exc


def _text(item: Mapping[str, Any], key: str, where: str) -> str:
    value = item.get(key)
    if not isinstance(value, str):
        raise _malformed(f"{where}.{key}", "a str", value)
    return value


def _only(item: Mapping[str, Any], where: str, known: set[str]) -> None:
    """Refuse a field outside ``known`` that holds anything but an empty value."""
    for key, value in item.items():
        if key in known or key in _IGNORED_FIELDS:
            continue
        if value is None or (isinstance(value, list | dict | str) and not value):
            continue
        raise _no_place(f"{where}{_key(key)}", f"holds {_shown(value)}")


def _guess_mime(url: str, fallback: str) -> str:
    guessed, _ = mimetypes.guess_type(urlsplit(url).path)
    return guessed or fallback


def _url_media(url: str, where: str, fallback: str) -> Media:
    """A URL as media: a ``data:`` URL gives bytes, any other stays a URL."""
    if not url.startswith("data:"):
        if not fallback:
            raise UnsupportedContentError(f"{where}: inline file data is a data URL")
        return Media(_guess_mime(url, fallback), url)
    header, comma, payload = url[5:].partition(",")
    mime, _, encoding = header.partition(";")
    if not comma or encoding != "base64" or not mime:
        raise UnsupportedContentError(
            f"{where}: a data URL is read as data:<mime type>;base64,<data>"
        )
    return Media(mime, _b64(payload, where))


def _b64(data: object, where: str) -> bytes:
    if not isinstance(data, str):
        raise _malformed(where, "base64 text", data)
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise UnsupportedContentError(f"{where} is not valid base64: {exc}") from exc


@dataclass
class _Draft:
    """A message being gathered from one or more items of the other shape."""

    role: Role
    content: str | None = None
    media: list[Media] = field(default_factory=list)
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_responses: list[ToolResponse] = field(default_factory=list)
    id: str | None = None

    def build(self) -> Message:
        if self.content is None and self.role in (Role.SYSTEM, Role.USER):
            self.content = ""
        extra: dict[str, Any] = {} if self.id is None else {"id": self.id}
        return Message(
            role=self.role,
            content=self.content,
            tool_calls=self.tool_calls,
            tool_responses=self.tool_responses,
            media=self.media,
            **extra,
        )


def _joined(texts: list[str]) -> str | None:
    return "\n\n".join(texts) if texts else None


def _openai_media(part: Mapping[str, Any], kind: str, where: str) -> Media:
    if kind == "image_url":
        image = _item(part.get("image_url"), f"{where}.image_url")
        _only(image, f"{where}.image_url", {"url", "detail"})
        _no_detail(image, f"{where}.image_url")
        return _url_media(_text(image, "url", f"{where}.image_url"), where, "image/*")
    if kind == "input_image":
        _only(part, where, {"type", "image_url", "detail"})
        _no_detail(part, where)
        return _url_media(_text(part, "image_url", where), where, "image/*")
    if kind == "input_audio":
        audio = _item(part.get("input_audio"), f"{where}.input_audio")
        _only(audio, f"{where}.input_audio", {"data", "format"})
        audio_format = _text(audio, "format", f"{where}.input_audio")
        if audio_format not in _OPENAI_AUDIO_MIME:
            raise _no_place(f"{where}.input_audio.format", f"{audio_format!r} audio")
        data = _b64(audio.get("data"), f"{where}.input_audio.data")
        return Media(_OPENAI_AUDIO_MIME[audio_format], data)
    if kind == "file":
        file = _item(part.get("file"), f"{where}.file")
        _only(file, f"{where}.file", {"file_data", "filename"})
        media = _url_media(_text(file, "file_data", f"{where}.file"), where, "")
        name = file.get("filename")
        return Media(media.mime_type, media.data, name=name)
    if kind == "input_file":
        _only(part, where, {"type", "file_data", "file_url", "filename"})
        if part.get("file_url"):
            url = _text(part, "file_url", where)
            return Media(_guess_mime(url, "application/octet-stream"), url)
        media = _url_media(_text(part, "file_data", where), where, "")
        return Media(media.mime_type, media.data, name=part.get("filename"))
    raise _no_place(f"{where}.type", f"a {_shown(kind)} part")


def _no_detail(image: Mapping[str, Any], where: str) -> None:
    detail = image.get("detail")
    if detail not in (None, "auto"):
        raise _no_place(f"{where}.detail", f"the image detail {_shown(detail)}")


def _openai_content(value: object, where: str) -> tuple[str | None, list[Media]]:
    """The text (parts joined by a blank line) and media of an OpenAI ``content``."""
    if value is None or isinstance(value, str):
        return value, []
    if not isinstance(value, list):
        raise _malformed(where, "a str, None or a list of parts", value)
    texts: list[str] = []
    media: list[Media] = []
    for index, raw in enumerate(value):
        part_where = f"{where}[{index}]"
        part = _item(raw, part_where)
        kind = part.get("type")
        if kind in _CONTENT_TEXT_PARTS:
            _only(part, part_where, {"type", "text", "annotations", "logprobs"})
            texts.append(_text(part, "text", part_where))
        elif isinstance(kind, str):
            media.append(_openai_media(part, kind, part_where))
        else:
            raise _malformed(f"{part_where}.type", "a str", kind)
    return _joined(texts), media


class _Reader:
    """Gathers messages, merging items the other shape splits."""

    def __init__(self) -> None:
        self.drafts: list[_Draft] = []
        self.call_names: dict[str, str] = {}
        self.open_assistant = False

    def add(self, draft: _Draft) -> _Draft:
        self.drafts.append(draft)
        self.open_assistant = False
        for call in draft.tool_calls:
            self.call_names[call.id] = call.name
        return draft

    def call(self, call: ToolCall) -> None:
        """Add a tool call to the assistant message being read, or a new one."""
        if not self.open_assistant:
            self.add(_Draft(Role.ASSISTANT))
        self.drafts[-1].tool_calls.append(call)
        self.call_names[call.id] = call.name
        self.open_assistant = True

    def response(self, call_id: str, data: str) -> None:
        """Add a tool response to the tool message being read, or a new one."""
        name = self.call_names.get(call_id, "")
        last = self.drafts[-1] if self.drafts else None
        if last is None or last.role is not Role.TOOL:
            last = self.add(_Draft(Role.TOOL))
        last.tool_responses.append(ToolResponse(call_id, name, data))
        self.open_assistant = False

    def messages(self) -> list[Message]:
        return [draft.build() for draft in self.drafts]


def _openai_output(value: object, where: str) -> str:
    text, media = _openai_content(value, where)
    if media:
        raise _no_place(where, "media in a tool output")
    return text or ""


def _openai_tool_call(raw: object, where: str) -> ToolCall:
    call = _item(raw, where)
    call_type = call.get("type", "function")
    if not isinstance(call_type, str):
        raise _malformed(f"{where}.type", "a str", call_type)
    if "custom" in call and call["custom"] is not None:
        _only(call, where, {"id", "type", "custom"})
        custom = _item(call["custom"], f"{where}.custom")
        name = _text(custom, "name", f"{where}.custom")
        arguments = _text(custom, "input", f"{where}.custom")
    else:
        _only(call, where, {"id", "type", "function"})
        function = _item(call.get("function"), f"{where}.function")
        _only(function, f"{where}.function", {"name", "arguments"})
        name = _text(function, "name", f"{where}.function")
        arguments = _text(function, "arguments", f"{where}.function")
    return ToolCall(_text(call, "id", where), name, arguments, call_type)


def _openai_message(item: Mapping[str, Any], where: str, reader: _Reader) -> None:
    role = item.get("role")
    if role in ("system", "developer", "user"):
        _only(item, where, {"role", "content", "type", "id", "status"})
        text, media = _openai_content(item.get("content"), f"{where}.content")
        if role != "user" and media:
            raise _no_place(f"{where}.content", "media in a system message")
        draft = _Draft(Role.USER if role == "user" else Role.SYSTEM, text, media)
        draft.id = item.get("id") or None
        reader.add(draft)
    elif role == "assistant":
        _only(item, where, {"role", "content", "tool_calls", "type", "id", "status"})
        text, media = _openai_content(item.get("content"), f"{where}.content")
        if media:
            raise _no_place(f"{where}.content", "media in an assistant message")
        calls = item.get("tool_calls") or []
        if not isinstance(calls, list):
            raise _malformed(f"{where}.tool_calls", "a list", calls)
        draft = reader.add(
            _Draft(
                Role.ASSISTANT,
                text,
                tool_calls=[
                    _openai_tool_call(c, f"{where}.tool_calls[{i}]")
                    for i, c in enumerate(calls)
                ],
                id=item.get("id") or None,
            )
        )
        # A Responses message item is followed by its function_call items.
        reader.open_assistant = item.get("type") == "message" and not draft.tool_calls
    elif role == "tool":
        _only(item, where, {"role", "content", "tool_call_id"})
        data = _openai_output(item.get("content"), f"{where}.content")
        reader.response(_text(item, "tool_call_id", where), data)
    else:
        raise _no_place(f"{where}.role", f"the role {_shown(role)}")


def from_openai(messages: Sequence[Any]) -> list[Message]:
    """Read OpenAI messages: Chat Completions ``messages`` or Responses ``input``.

    Chat Completions messages (``system``/``developer``, ``user``,
    ``assistant`` with ``tool_calls``, ``tool``) and the Responses items that
    map (``message``, ``function_call``, ``function_call_output``) may come as
    dicts or as SDK objects. Text parts are joined by a blank line; images
    (URL or ``data:`` URL, which gives bytes), WAV and MP3 audio and inline
    files become media; a URL image gets the MIME type its extension names,
    else ``image/*``. Consecutive tool outputs become one tool message, each
    response named after the call it answers; ``function_call`` items join
    the assistant message before them. A message ``id`` (Responses) is kept.
    ``detail: "auto"`` and ``cache_control`` are not kept.

    The round trip ``from_openai(to_openai(history)) == history`` holds for
    every history ``to_openai`` takes whose messages have no metadata, whose
    tool messages have no content and no tool message next to them, whose
    tool responses are named after their calls, and whose media are images
    (by URL with a MIME type its extension names), ``audio/wav`` and
    ``audio/mpeg`` bytes, or other bytes, without ``name`` or ``id`` but for
    the ``name`` of a file.

    Raises:
        UnsupportedContentError: naming the item and field (e.g.
            ``messages[2].content[0].image_url.detail``) that is malformed or
            that a message has no place for: reasoning and other item types,
            refusals, a participant ``name``, a file by ``file_id``, other
            audio formats, media in a tool output; and any value of the wrong
            type, however large or deeply nested.
        InvalidMessageError: a message made of the items breaks a rule of
            :class:`~chatledger.Message` (an ``id`` that is not a printable
            str, say).
    """
    if isinstance(messages, str | bytes | Mapping) or not isinstance(
        messages, Sequence
    ):
        raise _malformed("messages", "a list", messages)
    reader = _Reader()
    for index, raw in enumerate(messages):
        where = f"messages[{index}]"
        item = _item(raw, where)
        kind = item.get("type")
        if kind is None or kind == "message":
            _openai_message(item, where, reader)
        elif kind == "function_call":
            _only(item, where, {"type", "call_id", "name", "arguments", "id", "status"})
            reader.call(
                ToolCall(
                    _text(item, "call_id", where),
                    _text(item, "name", where),
                    _text(item, "arguments", where),
                )
            )
        elif kind == "function_call_output":
            _only(item, where, {"type", "call_id", "output", "id", "status"})
            data = _openai_output(item.get("output"), f"{where}.output")
            reader.response(_text(item, "call_id", where), data)
        else:
            raise _no_place(f"{where}.type", f"a {_shown(kind)} item")
    return reader.messages()


def _anthropic_media_of(block: Mapping[str, Any], where: str, fallback: str) -> Media:
    source = _item(block.get("source"), f"{where}.source")
    kind = source.get("type")
    where = f"{where}.source"
    if kind == "base64":
        _only(source, where, {"type", "media_type", "data"})
        data = _b64(source.get("data"), f"{where}.data")
        return Media(_text(source, "media_type", where), data)
    if kind == "url":
        _only(source, where, {"type", "url"})
        url = _text(source, "url", where)
        return Media(_guess_mime(url, fallback), url)
    if kind == "text" and block.get("type") == "document":
        _only(source, where, {"type", "media_type", "data"})
        return Media("text/plain", _text(source, "data", where).encode("utf-8"))
    raise _no_place(f"{where}.type", f"a {_shown(kind)} source")


def _anthropic_result(block: Mapping[str, Any], where: str) -> str:
    _only(block, where, {"type", "tool_use_id", "content", "is_error"})
    if block.get("is_error"):
        raise _no_place(f"{where}.is_error", "a tool result marked as an error")
    content = block.get("content", "")
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise _malformed(f"{where}.content", "a str or a list of blocks", content)
    texts = []
    for index, raw in enumerate(content):
        inner_where = f"{where}.content[{index}]"
        inner = _item(raw, inner_where)
        if inner.get("type") != "text":
            raise _no_place(
                f"{inner_where}.type", f"a {_shown(inner.get('type'))} block"
            )
        _only(inner, inner_where, {"type", "text"})
        texts.append(_text(inner, "text", inner_where))
    return "\n\n".join(texts)


def _anthropic_turn(item: Mapping[str, Any], where: str, reader: _Reader) -> None:
    _only(item, where, {"role", "content"})
    role_name = item.get("role")
    if role_name not in ("user", "assistant"):
        raise _no_place(f"{where}.role", f"the role {_shown(role_name)}")
    role = Role.USER if role_name == "user" else Role.ASSISTANT
    content = item.get("content")
    if isinstance(content, str):
        reader.add(_Draft(role, content))
        return
    if not isinstance(content, list):
        raise _malformed(f"{where}.content", "a str or a list of blocks", content)
    # Each message of to_anthropic's merged turn starts with its text block,
    # so a text block starts a message and other blocks join the current one.
    current: _Draft | None = None
    for index, raw in enumerate(content):
        block_where = f"{where}.content[{index}]"
        block = _item(raw, block_where)
        kind = block.get("type")
        if kind == "text":
            _only(block, block_where, {"type", "text", "citations"})
            current = reader.add(_Draft(role, _text(block, "text", block_where)))
        elif kind in ("image", "document"):
            _only(block, block_where, {"type", "source"})
            fallback = "image/*" if kind == "image" else "application/pdf"
            media = _anthropic_media_of(block, block_where, fallback)
            if current is None or current.role is not role:
                current = reader.add(_Draft(role))
            current.media.append(media)
        elif kind == "tool_use" and role is Role.ASSISTANT:
            _only(block, block_where, {"type", "id", "name", "input"})
            arguments = _json_text(block.get("input", {}), f"{block_where}.input")
            call = ToolCall(
                _text(block, "id", block_where),
                _text(block, "name", block_where),
                arguments,
            )
            if current is None:
                current = reader.add(_Draft(role))
            current.tool_calls.append(call)
            reader.call_names[call.id] = call.name
        elif kind == "tool_result" and role is Role.USER:
            data = _anthropic_result(block, block_where)
            reader.response(_text(block, "tool_use_id", block_where), data)
            current = None
        else:
            raise _no_place(
                f"{block_where}.type", f"a {_shown(kind)} block in a {role} turn"
            )


def from_anthropic(request: Mapping[str, Any] | Sequence[Any]) -> list[Message]:
    """Read an Anthropic Messages request: ``{"system": ..., "messages": [...]}``.

    ``request`` is the keyword arguments of ``messages.create`` (only
    ``system`` and ``messages`` are read) or the ``messages`` list alone.
    ``system`` becomes one system message (one per block when it is a list of
    text blocks), first. In a turn, a text block starts a new message and
    image, document and ``tool_use`` blocks join the message being read;
    ``tool_result`` blocks become one tool message, each response named after
    the ``tool_use`` it answers. ``tool_use`` input becomes compact JSON
    argument text. A URL image or document gets the MIME type its extension
    names, else ``image/*`` or ``application/pdf``. ``cache_control`` is not
    kept.

    The round trip ``from_anthropic(to_anthropic(history)) == history`` holds
    for every history ``to_anthropic`` takes that has at most one system
    message, first; whose user and assistant messages have text (an
    assistant message with tool calls may have ``None``), no assistant media
    and no metadata; whose tool messages have no content, follow the
    assistant message that called them and are not next to another tool
    message; whose tool calls have compact JSON object arguments and type
    ``function``; whose tool responses are named after their calls; and whose
    media are images (base64, or a URL naming their MIME type), PDFs and
    ``text/plain`` UTF-8 bytes, without ``name`` or ``id``.

    Raises:
        UnsupportedContentError: naming the item and field that is malformed
            or that a message has no place for: thinking and server tool
            blocks, a tool result marked ``is_error`` or holding an image, a
            file source; a ``tool_use`` input that is not JSON (a set, bytes,
            a non-str key, ``NaN``, an object) or nests deeper than
            :data:`~chatledger.messages.MAX_METADATA_DEPTH` levels; and any
            value of the wrong type, however large or deeply nested.
    """
    system: object = None
    messages: object = request
    if isinstance(request, Mapping):
        system = request.get("system")
        messages = request.get("messages")
    if isinstance(messages, str | bytes | Mapping) or not isinstance(
        messages, Sequence
    ):
        raise _malformed("messages", "a list", messages)
    reader = _Reader()
    if isinstance(system, str):
        reader.add(_Draft(Role.SYSTEM, system))
    elif isinstance(system, list):
        for index, raw in enumerate(system):
            where = f"system[{index}]"
            block = _item(raw, where)
            if block.get("type") != "text":
                raise _no_place(f"{where}.type", f"a {_shown(block.get('type'))} block")
            _only(block, where, {"type", "text"})
            reader.add(_Draft(Role.SYSTEM, _text(block, "text", where)))
    elif system is not None:
        raise _malformed("system", "a str or a list of text blocks", system)
    for index, raw in enumerate(messages):
        _anthropic_turn(_item(raw, f"messages[{index}]"), f"messages[{index}]", reader)
    return reader.messages()
