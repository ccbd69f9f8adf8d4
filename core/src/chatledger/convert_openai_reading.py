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
    UnsupportedContentError,
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
    "CHAT_FIELDS",
    "DEFAULT_IMAGE_DETAIL",
    "EITHER",
    "EMPTY_FIELDS",
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
#: The fields of a Chat Completions assistant message kept whole.
CHAT_FIELDS = ("audio", "function_call")
#: The fields of a Chat Completions message that may come holding nothing
#: (``None``, ``""``, ``[]``), kept so under ``"empty"``.
EMPTY_FIELDS = ("name", "refusal", "audio", "function_call", "tool_calls")
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
        *CHAT_FIELDS,
        "parts",
        "empty",
        "absent",
        "prompt_cache_breakpoint",
    },
    media={"detail", "prompt_cache_breakpoint"},
    calls={*CALL_FIELDS, "spelled"},
    outputs={"text_parts", "type", "prompt_cache_breakpoint", *OUTPUT_FIELDS},
)
_CUSTOM_CALL = "custom"
_BREAKPOINT = "prompt_cache_breakpoint"


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
            _message(fields, where, reader, dialect, isinstance(raw, Mapping))
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
    #: Each text part's ``prompt_cache_breakpoint``, ``None`` for none.
    breakpoints: list[Any] = field(default_factory=list)
    #: The parts in order: ``"text"``, ``"media"``, ``"refusal"``, or a part
    #: kept whole.
    layout: list[Any] = field(default_factory=list)


def _message(
    fields: Mapping[str, Any],
    where: str,
    reader: Reader,
    dialect: Dialect,
    exact: bool,
) -> None:
    """Read a message; ``exact`` is false for an SDK object (see :func:`_empty`)."""
    role_name = fields.get("role")
    typed = fields.get("type") == "message"
    chat = dialect.chat and not typed
    if role_name == "tool" and chat:
        _chat_tool(fields, where, reader)
        return
    if role_name == "function" and chat:
        _chat_function(fields, where, reader)
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
            known |= {"refusal", "tool_calls", *CHAT_FIELDS}
    only(fields, where, known)

    content = _content(fields.get("content"), f"{where}.content", dialect, chat)
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
    if any(entry is not None for entry in content.breakpoints):
        kept[_BREAKPOINT] = content.breakpoints
    if chat:
        kept.update(_chat_extras(fields, where, exact))

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
    for call, spelled in calls:
        draft.add_call(call, spelled)
        reader.calls[call.id] = call
    default = list_default(role, draft.content, len(draft.media), kept, chat=chat)
    # A list that holds a refusal alone reads as the refusal, without text.
    only_refusal = content.texts == [] and content.refusal is not None
    if content.texts is not None and content.texts != default and not only_refusal:
        kept["text_parts"] = [len(part) for part in content.texts]
    if chat and content.texts is not None:
        usual = ["text"] * len(content.texts) + ["media"] * len(content.media)
        if content.layout != usual:
            # metadata > "openai" > "parts" > a part kept whole
            kept["parts"] = carried(content.layout, f"{where}.content", 3)
    draft.extras.fields.update(kept)
    reader.only_reasoning = False
    # The call items that follow a Responses message belong to it; in a
    # Chat Completions message the calls are its own tool_calls.
    reader.open_assistant = role is Role.ASSISTANT and not chat and not calls


def _chat_extras(fields: Mapping[str, Any], where: str, exact: bool) -> dict[str, Any]:
    """What a Chat Completions message keeps beyond its content and calls.

    An assistant's ``audio`` and ``function_call``, whole; the fields given
    holding nothing (``"empty"``); a content not given (``"absent"``).
    ``exact`` is false for an SDK object, whose fields that hold nothing are
    its defaults rather than something written, and are not kept.
    """
    kept: dict[str, Any] = {}
    for name, inner in (("audio", {"id"}), ("function_call", {"name", "arguments"})):
        value = fields.get(name)
        if is_empty(value):
            continue
        entry = item(value, f"{where}.{name}")
        only(entry, f"{where}.{name}", inner)
        for key in sorted(inner):
            text(entry, key, f"{where}.{name}")
        # metadata > "openai" > the field
        kept[name] = carried(dict(entry), f"{where}.{name}", 3)
    if not exact:
        return kept
    empty = {
        name: fields[name]
        for name in EMPTY_FIELDS
        if name in fields and is_empty(fields[name])
    }
    if empty:
        kept["empty"] = empty
    if "content" not in fields:
        kept["absent"] = ["content"]
    return kept


def _chat_tool(fields: Mapping[str, Any], where: str, reader: Reader) -> None:
    only(fields, where, {"role", "content", "tool_call_id"})
    call_id = text(fields, "tool_call_id", where)
    data, extras = _output_text(fields.get("content"), f"{where}.content", EITHER)
    reader.response(ToolResponse(call_id, reader.name_of(call_id), data), extras)


def _chat_function(fields: Mapping[str, Any], where: str, reader: Reader) -> None:
    """The deprecated ``function`` message: a tool message of its own.

    It answers a ``function_call``, which has no call id, so it holds no tool
    response: its content is the message's, its name kept, and the tool
    messages after it are not merged into it.
    """
    only(fields, where, {"role", "content", "name"})
    name = text(fields, "name", where)
    content = fields.get("content")
    if content is not None and not isinstance(content, str):
        raise malformed(f"{where}.content", "a str or None", content)
    draft = reader.add(Draft(Role.TOOL, content, closed=True))
    draft.extras.fields.update({"role": "function", "name": name})


def _chat_tool_call(raw: object, where: str) -> tuple[ToolCall, dict[str, Any]]:
    """A tool call, and how it was spelled when that is the custom tool's way."""
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
        if call_type != _CUSTOM_CALL:
            raise UnsupportedContentError(
                f"{where}.type is {_shown(call_type)}: a call spelled with "
                "'custom' is of type 'custom'"
            )
        spelled = {"spelled": _CUSTOM_CALL}
    else:
        only(call, where, {"id", "type", "function"})
        function = item(call.get("function"), f"{where}.function")
        only(function, f"{where}.function", {"name", "arguments"})
        name = text(function, "name", f"{where}.function")
        arguments = text(function, "arguments", f"{where}.function")
        spelled = {}
    return ToolCall(text(call, "id", where), name, arguments, call_type), spelled


# --- Content parts ------------------------------------------------------------


def _content(
    value: object, where: str, dialect: Dialect, chat: bool = False
) -> _Content:
    """Read a ``content``: a str, ``None``, or a list of the dialect's parts.

    ``chat`` says it is a Chat Completions message's, whose file parts that
    are not inline data (a file by id) are kept whole.
    """
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
            content.layout.append("text")
        elif kind == "refusal":
            only(part, part_where, {"type", "refusal"})
            if content.refusal is not None:
                raise no_place(part_where, "a second refusal part")
            content.refusal = text(part, "refusal", part_where)
            content.layout.append("refusal")
        elif chat and kind == "file" and _file_kept_whole(part, part_where):
            # metadata > "openai" > "parts" > the part
            content.layout.append(carried(dict(part), part_where, 4))
        else:
            content.media.append(_media_part(part, kind, part_where))
            content.layout.append("media")
    content.text = joined(content.texts)
    return content


def _file_kept_whole(part: Mapping[str, Any], where: str) -> bool:
    """Whether a ``file`` part is kept whole: a file by id, or data that is
    not a ``data:`` URL (no MIME type to make media of)."""
    only(part, where, {"type", "file", "prompt_cache_breakpoint"})
    file_where = f"{where}.file"
    file = item(part.get("file"), file_where)
    only(file, file_where, {"file_data", "file_id", "filename"})
    if file.get("file_id") is not None:
        text(file, "file_id", file_where)
        return True
    data = text(file, "file_data", file_where)
    return not data.startswith("data:")


def _text_part(
    part: Mapping[str, Any], kind: str, where: str, content: _Content
) -> str:
    if kind != "output_text":
        only(
            part,
            where,
            {"type", "text", _BREAKPOINT} if kind == "text" else {"type", "text"},
        )
        content.annotations.append(None)
        content.logprobs.append(None)
        value = part.get(_BREAKPOINT)
        # metadata > "openai" > "outputs" > the entry > the name > the part's
        kept = None if is_empty(value) else carried(value, f"{where}.{_BREAKPOINT}", 6)
        content.breakpoints.append(kept)
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
        only(part, where, {"type", "image_url", _BREAKPOINT})
        image_where = f"{where}.image_url"
        image = item(part.get("image_url"), image_where)
        only(image, image_where, {"url", "detail"})
        media = url_media(text(image, "url", image_where), where, "image/*")
        # Chat Completions writes no detail by itself: any given is kept.
        extras = _detail(image, image_where, default=None)
        return media, extras | _breakpoint(part, where)
    if kind == "input_image":
        only(part, where, {"type", "image_url", "detail"})
        media = url_media(text(part, "image_url", where), where, "image/*")
        return media, _detail(part, where, default=DEFAULT_IMAGE_DETAIL)
    if kind == "input_audio":
        only(part, where, {"type", "input_audio", _BREAKPOINT})
        audio_where = f"{where}.input_audio"
        audio = item(part.get("input_audio"), audio_where)
        only(audio, audio_where, {"data", "format"})
        audio_format = text(audio, "format", audio_where)
        if audio_format not in _AUDIO_MIME:
            raise no_place(f"{audio_where}.format", f"{_shown(audio_format)} audio")
        data = b64(audio.get("data"), f"{audio_where}.data")
        return Media(_AUDIO_MIME[audio_format], data), _breakpoint(part, where)
    if kind == "file":
        only(part, where, {"type", "file", _BREAKPOINT})
        file_where = f"{where}.file"
        file = item(part.get("file"), file_where)
        only(file, file_where, {"file_data", "filename"})
        media = url_media(text(file, "file_data", file_where), file_where, "")
        name = optional_text(file, "filename", file_where)
        media = Media(media.mime_type, media.data, name=name)
        return media, _breakpoint(part, where)
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


def _breakpoint(part: Mapping[str, Any], where: str) -> dict[str, Any]:
    """A Chat Completions media part's ``prompt_cache_breakpoint``, to keep."""
    value = part.get(_BREAKPOINT)
    if is_empty(value):
        return {}
    # metadata > "openai" > "media" > the entry > the field
    return {_BREAKPOINT: carried(value, f"{where}.{_BREAKPOINT}", 5)}


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
    extras: dict[str, Any] = {"text_parts": [len(t) for t in content.texts]}
    if any(entry is not None for entry in content.breakpoints):
        extras[_BREAKPOINT] = content.breakpoints
    return content.text or "", extras


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
