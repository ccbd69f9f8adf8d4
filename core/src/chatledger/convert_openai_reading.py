"""Reading OpenAI's two shapes, Chat Completions messages and Responses items.

One reader serves both: :func:`~chatledger.convert.from_openai` lets it take
either shape (its :data:`EITHER` dialect) and
:func:`~chatledger.convert.from_openai_responses` the Responses shape only
(:data:`RESPONSES`). What a message has no field for is kept under
``metadata["openai"]`` (see :mod:`chatledger.convert_extras`), and
:func:`list_default` says which text parts the writers lay out by themselves,
so that only a layout they would not write is kept. Use these names through
:mod:`chatledger.convert`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from chatledger.convert_extras import KeptKeys, joined
from chatledger.convert_shared import (
    Draft,
    Reader,
    b64,
    carried,
    guess_mime,
    is_empty,
    item,
    malformed,
    no_place,
    only,
    optional_text,
    text,
    url_media,
)
from chatledger.messages import Media, Role, ToolCall, ToolResponse, _shown

__all__ = [
    "CALL_FIELDS",
    "DEFAULT_IMAGE_DETAIL",
    "EITHER",
    "MESSAGE_FIELDS",
    "OPENAI_KEYS",
    "OUTPUT_FIELDS",
    "RESPONSES",
    "Dialect",
    "list_default",
    "output_kind",
    "read_items",
]

#: The ``detail`` the Responses API takes for an image when none is given,
#: and which ``to_openai_responses`` writes for an image that keeps none.
DEFAULT_IMAGE_DETAIL = "auto"


@dataclass(frozen=True)
class Dialect:
    """Which of OpenAI's shapes a reader takes."""

    chat: bool
    responses: bool

    @property
    def parts(self) -> frozenset[str]:
        kinds: set[str] = {"refusal"}
        if self.chat:
            kinds |= {"text", "image_url", "input_audio", "file"}
        if self.responses:
            kinds |= {"input_text", "output_text", "input_image", "input_file"}
        return frozenset(kinds)


#: Chat Completions messages and the Responses items that map, mixed.
EITHER = Dialect(chat=True, responses=True)
#: Responses input and output items only.
RESPONSES = Dialect(chat=False, responses=True)

_TEXT_PARTS = ("text", "input_text", "output_text")
_AUDIO_MIME = {"wav": "audio/wav", "mp3": "audio/mpeg"}
_ROLES = {
    "system": Role.SYSTEM,
    "developer": Role.SYSTEM,
    "user": Role.USER,
    "assistant": Role.ASSISTANT,
}
#: The fields of a Responses message item kept as they are.
MESSAGE_FIELDS = ("id", "status", "phase")
#: The fields of a call item kept as they are: all but its call id, name and
#: arguments (or input).
CALL_FIELDS = ("id", "status", "namespace", "caller", "async")
#: The fields of an output item kept as they are: all but its call id and output.
OUTPUT_FIELDS = ("id", "status", "name", "namespace", "caller")

#: What ``metadata["openai"]`` may hold.
OPENAI_KEYS = KeptKeys(
    message={
        "role",
        "name",
        "refusal",
        "text_parts",
        "annotations",
        "logprobs",
        "reasoning",
        *MESSAGE_FIELDS,
    },
    media={"detail"},
    calls=set(CALL_FIELDS),
    outputs={"text_parts", "type", *OUTPUT_FIELDS},
)
_CUSTOM_CALL = "custom"


def list_default(
    role: Role,
    content: str | None,
    media: int,
    fields: Mapping[str, Any],
    *,
    chat: bool,
) -> list[str] | None:
    """The text parts an OpenAI writer gives a message's content by itself.

    ``None`` when it writes ``content`` as a str. Both shapes write a list for
    a user message with media; the Responses shape also for an input item
    that keeps an ``id`` or ``status``, and for an output message (one that
    keeps an ``id``, a refusal, annotations or logprobs). The list starts
    with ``content`` as one text part when there is any (``""`` included, for
    an assistant). A message that keeps ``text_parts`` gets those instead.
    """
    if chat or not fields:
        listed = role is Role.USER and media > 0
    elif role is Role.ASSISTANT:
        if not any(
            fields.get(name) is not None
            for name in ("id", "refusal", "annotations", "logprobs")
        ):
            return None
        return [] if content is None else [content]
    else:
        listed = (role is Role.USER and media > 0) or any(
            fields.get(name) is not None for name in ("id", "status")
        )
    if not listed:
        return None
    return [content] if content else []


def read_items(
    items: Sequence[Any], name: str, reader: Reader, dialect: Dialect
) -> None:
    """Read ``items`` (called ``name`` in errors) into ``reader``."""
    if isinstance(items, str | bytes | Mapping) or not isinstance(items, Sequence):
        raise malformed(name, "a list", items)
    for index, raw in enumerate(items):
        where = f"{name}[{index}]"
        fields = item(raw, where)
        kind = fields.get("type")
        if kind is None or kind == "message":
            _message(fields, where, reader, dialect)
        elif kind in ("function_call", "custom_tool_call"):
            _call(fields, kind, where, reader)
        elif kind in ("function_call_output", "custom_tool_call_output"):
            _output(fields, kind, where, reader, dialect)
        elif kind == "reasoning":
            _reasoning(fields, where, reader)
        else:
            raise no_place(f"{where}.type", f"a {_shown(kind)} item")


# --- Messages -----------------------------------------------------------------


@dataclass
class _Content:
    """A ``content`` read: text parts, media, a refusal and the parts' extras.

    ``texts`` is ``None`` when the content was a str (or ``None``), which is
    then ``text``. ``annotations`` and ``logprobs`` hold one entry per text
    part, ``None`` where a part has none.
    """

    text: str | None = None
    texts: list[str] | None = None
    media: list[tuple[Media, dict[str, Any]]] = field(default_factory=list)
    refusal: str | None = None
    annotations: list[Any] = field(default_factory=list)
    logprobs: list[Any] = field(default_factory=list)


def _message(
    fields: Mapping[str, Any], where: str, reader: Reader, dialect: Dialect
) -> None:
    role_name = fields.get("role")
    typed = fields.get("type") == "message"
    chat = dialect.chat and not typed
    if role_name == "tool" and chat:
        _chat_tool(fields, where, reader)
        return
    if not isinstance(role_name, str) or role_name not in _ROLES:
        raise no_place(f"{where}.role", f"the role {_shown(role_name)}")
    role = _ROLES[role_name]
    known = {"role", "content"}
    if dialect.responses:
        known |= {"type", *MESSAGE_FIELDS}
    if chat:
        known.add("name")
        if role is Role.ASSISTANT:
            known |= {"refusal", "tool_calls"}
    only(fields, where, known)

    content = _content(fields.get("content"), f"{where}.content", dialect)
    if content.media and role is not Role.USER:
        raise no_place(f"{where}.content", f"media in a {role_name} message")
    if content.refusal is not None and role is not Role.ASSISTANT:
        raise no_place(f"{where}.content", f"a refusal in a {role_name} message")
    kept: dict[str, Any] = {}
    if role_name == "developer":
        kept["role"] = role_name
    for name in ("name", *MESSAGE_FIELDS):
        value = optional_text(fields, name, where)
        if value is not None:
            kept[name] = value
    refusal = optional_text(fields, "refusal", where)
    if refusal is not None and content.refusal is not None:
        raise no_place(f"{where}.content", "a refusal part beside the refusal field")
    refusal = refusal if refusal is not None else content.refusal
    if refusal is not None:
        kept["refusal"] = refusal
    for name in ("annotations", "logprobs"):
        per_part = getattr(content, name)
        if any(entry is not None for entry in per_part):
            if role is not Role.ASSISTANT:
                raise no_place(f"{where}.content", f"{name} in a {role_name} message")
            kept[name] = per_part

    calls = []
    if role is Role.ASSISTANT and chat:
        raw_calls = fields.get("tool_calls") or []
        if not isinstance(raw_calls, list):
            raise malformed(f"{where}.tool_calls", "a list", raw_calls)
        calls = [
            _chat_tool_call(call, f"{where}.tool_calls[{i}]")
            for i, call in enumerate(raw_calls)
        ]

    if role is Role.ASSISTANT and reader.open_assistant and reader.only_reasoning:
        draft = reader.drafts[-1]  # the reasoning items before it
    else:
        draft = reader.add(Draft(role))
    draft.content = content.text
    draft.id = kept.get("id")
    for media, media_extras in content.media:
        draft.add_media(media, media_extras)
    for call in calls:
        draft.add_call(call)
        reader.calls[call.id] = call
    default = list_default(role, draft.content, len(draft.media), kept, chat=chat)
    # A list that holds a refusal alone reads as the refusal, without text.
    only_refusal = content.texts == [] and content.refusal is not None
    if content.texts is not None and content.texts != default and not only_refusal:
        kept["text_parts"] = [len(part) for part in content.texts]
    draft.extras.fields.update(kept)
    reader.only_reasoning = False
    # The call items that follow a Responses message belong to it; in a
    # Chat Completions message the calls are its own tool_calls.
    reader.open_assistant = role is Role.ASSISTANT and not chat and not calls


def _chat_tool(fields: Mapping[str, Any], where: str, reader: Reader) -> None:
    only(fields, where, {"role", "content", "tool_call_id"})
    call_id = text(fields, "tool_call_id", where)
    data, extras = _output_text(fields.get("content"), f"{where}.content", EITHER)
    reader.response(ToolResponse(call_id, reader.name_of(call_id), data), extras)


def _chat_tool_call(raw: object, where: str) -> ToolCall:
    call = item(raw, where)
    call_type = call.get("type", "function")
    if not isinstance(call_type, str):
        raise malformed(f"{where}.type", "a str", call_type)
    if call.get(_CUSTOM_CALL) is not None:
        only(call, where, {"id", "type", _CUSTOM_CALL})
        custom = item(call[_CUSTOM_CALL], f"{where}.custom")
        only(custom, f"{where}.custom", {"name", "input"})
        name = text(custom, "name", f"{where}.custom")
        arguments = text(custom, "input", f"{where}.custom")
    else:
        only(call, where, {"id", "type", "function"})
        function = item(call.get("function"), f"{where}.function")
        only(function, f"{where}.function", {"name", "arguments"})
        name = text(function, "name", f"{where}.function")
        arguments = text(function, "arguments", f"{where}.function")
    return ToolCall(text(call, "id", where), name, arguments, call_type)


# --- Content parts ------------------------------------------------------------


def _content(value: object, where: str, dialect: Dialect) -> _Content:
    """Read a ``content``: a str, ``None``, or a list of the dialect's parts."""
    if value is None or isinstance(value, str):
        return _Content(text=value)
    if not isinstance(value, list):
        raise malformed(where, "a str, None or a list of parts", value)
    content = _Content(texts=[])
    assert content.texts is not None
    kinds = dialect.parts
    for index, raw in enumerate(value):
        part_where = f"{where}[{index}]"
        part = item(raw, part_where)
        kind = part.get("type")
        if not isinstance(kind, str):
            raise malformed(f"{part_where}.type", "a str", kind)
        if kind not in kinds:
            raise no_place(f"{part_where}.type", f"a {_shown(kind)} part")
        if kind in _TEXT_PARTS:
            content.texts.append(_text_part(part, kind, part_where, content))
        elif kind == "refusal":
            only(part, part_where, {"type", "refusal"})
            if content.refusal is not None:
                raise no_place(part_where, "a second refusal part")
            content.refusal = text(part, "refusal", part_where)
        else:
            content.media.append(_media_part(part, kind, part_where))
    content.text = joined(content.texts)
    return content


def _text_part(
    part: Mapping[str, Any], kind: str, where: str, content: _Content
) -> str:
    if kind != "output_text":
        only(part, where, {"type", "text"})
        content.annotations.append(None)
        content.logprobs.append(None)
        return text(part, "text", where)
    only(part, where, {"type", "text", "annotations", "logprobs"})
    for name in ("annotations", "logprobs"):
        value = part.get(name)
        per_part: list[Any] = getattr(content, name)
        if value is None or value == []:
            per_part.append(None)
        elif isinstance(value, list):
            # metadata > "openai" > the name > one entry per part > the values
            per_part.append(carried(value, f"{where}.{name}", 4))
        else:
            raise malformed(f"{where}.{name}", "a list", value)
    return text(part, "text", where)


def _media_part(
    part: Mapping[str, Any], kind: str, where: str
) -> tuple[Media, dict[str, Any]]:
    """A media part as media and what it keeps (a ``detail``)."""
    if kind == "image_url":
        only(part, where, {"type", "image_url"})
        image_where = f"{where}.image_url"
        image = item(part.get("image_url"), image_where)
        only(image, image_where, {"url", "detail"})
        media = url_media(text(image, "url", image_where), where, "image/*")
        # Chat Completions writes no detail by itself: any given is kept.
        return media, _detail(image, image_where, default=None)
    if kind == "input_image":
        only(part, where, {"type", "image_url", "detail"})
        media = url_media(text(part, "image_url", where), where, "image/*")
        return media, _detail(part, where, default=DEFAULT_IMAGE_DETAIL)
    if kind == "input_audio":
        only(part, where, {"type", "input_audio"})
        audio_where = f"{where}.input_audio"
        audio = item(part.get("input_audio"), audio_where)
        only(audio, audio_where, {"data", "format"})
        audio_format = text(audio, "format", audio_where)
        if audio_format not in _AUDIO_MIME:
            raise no_place(f"{audio_where}.format", f"{_shown(audio_format)} audio")
        data = b64(audio.get("data"), f"{audio_where}.data")
        return Media(_AUDIO_MIME[audio_format], data), {}
    if kind == "file":
        only(part, where, {"type", "file"})
        file_where = f"{where}.file"
        file = item(part.get("file"), file_where)
        only(file, file_where, {"file_data", "filename"})
        media = url_media(text(file, "file_data", file_where), file_where, "")
        name = optional_text(file, "filename", file_where)
        return Media(media.mime_type, media.data, name=name), {}
    # input_file
    only(part, where, {"type", "file_data", "file_url", "filename", "detail"})
    name = optional_text(part, "filename", where)
    if part.get("file_url"):
        url = text(part, "file_url", where)
        media = Media(guess_mime(url, "application/octet-stream"), url)
    else:
        media = url_media(text(part, "file_data", where), where, "")
    extras = _detail(part, where, default=None)
    return Media(media.mime_type, media.data, name=name), extras


def _detail(
    fields: Mapping[str, Any], where: str, default: str | None
) -> dict[str, Any]:
    """The ``detail`` to keep: any given but ``default``, which is written anyway."""
    detail = optional_text(fields, "detail", where)
    if detail is None or detail == default:
        return {}
    return {"detail": detail}


# --- Responses items ----------------------------------------------------------


def _kept_fields(
    fields: Mapping[str, Any], names: Sequence[str], where: str
) -> dict[str, Any]:
    """The fields ``names`` that hold something, checked as kept JSON.

    They sit in ``metadata["openai"]["calls"][i]`` or ``["outputs"][i]``.
    """
    return {
        name: carried(fields[name], f"{where}.{name}", 5)
        for name in names
        if not is_empty(fields.get(name))
    }


def _call(fields: Mapping[str, Any], kind: str, where: str, reader: Reader) -> None:
    custom = kind == "custom_tool_call"
    arguments = "input" if custom else "arguments"
    only(fields, where, {"type", "call_id", "name", arguments, *CALL_FIELDS})
    call = ToolCall(
        text(fields, "call_id", where),
        text(fields, "name", where),
        text(fields, arguments, where),
        _CUSTOM_CALL if custom else "function",
    )
    reader.call(call, _kept_fields(fields, CALL_FIELDS, where))


def output_kind(call: ToolCall | None) -> str:
    """The output item type that answers ``call`` (a function's when unknown)."""
    if call is not None and call.type == _CUSTOM_CALL:
        return "custom_tool_call_output"
    return "function_call_output"


def _output(
    fields: Mapping[str, Any],
    kind: str,
    where: str,
    reader: Reader,
    dialect: Dialect,
) -> None:
    only(fields, where, {"type", "call_id", "output", *OUTPUT_FIELDS})
    call_id = text(fields, "call_id", where)
    data, extras = _output_text(fields.get("output"), f"{where}.output", dialect)
    extras.update(_kept_fields(fields, OUTPUT_FIELDS, where))
    if kind != output_kind(reader.calls.get(call_id)):
        extras["type"] = kind
    name = optional_text(fields, "name", where)
    response = ToolResponse(call_id, name or reader.name_of(call_id), data)
    reader.response(response, extras)


def _output_text(
    value: object, where: str, dialect: Dialect
) -> tuple[str, dict[str, Any]]:
    """A tool output's text, and its parts' lengths when it came as parts."""
    content = _content(value, where, dialect)
    if content.media:
        raise no_place(where, "media in a tool output")
    if content.refusal is not None:
        raise no_place(where, "a refusal in a tool output")
    if any(entry is not None for entry in (*content.annotations, *content.logprobs)):
        raise no_place(where, "annotations or logprobs in a tool output")
    if content.texts is None:
        return content.text or "", {}
    return content.text or "", {"text_parts": [len(t) for t in content.texts]}


def _reasoning(fields: Mapping[str, Any], where: str, reader: Reader) -> None:
    """Keep a reasoning item whole, on the assistant message it comes before."""
    # metadata > "openai" > "reasoning" > the item
    kept = carried(dict(fields), where, 4)
    if reader.open_assistant and reader.only_reasoning:
        draft = reader.drafts[-1]
    else:
        draft = reader.add(Draft(Role.ASSISTANT))
        reader.open_assistant = True
    draft.extras.fields.setdefault("reasoning", []).append(kept)
    reader.only_reasoning = True
