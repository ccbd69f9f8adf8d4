"""What the converters of :mod:`chatledger.convert` share.

The error they raise; reading the fields of a foreign shape, each wrong one
named by its path (``messages[3].content[1].image_url.detail``); media as
``data:`` URLs and base64; and gathering messages from the items of a shape
that splits or merges them otherwise than chatledger does. Use these names
through :mod:`chatledger.convert`: this module is how that one is built.
"""

from __future__ import annotations

import base64
import binascii
import mimetypes
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from chatledger.codec import dumps_value
from chatledger.errors import ChatLedgerError, InvalidMessageError
from chatledger.messages import (
    JsonValue,
    Media,
    Message,
    Role,
    ToolCall,
    ToolResponse,
    _freeze_json,
    _shown,
)

__all__ = [
    "Draft",
    "Gathered",
    "Reader",
    "UnsupportedContentError",
    "b64",
    "carried",
    "data_url",
    "guess_mime",
    "is_empty",
    "item",
    "json_text",
    "key_path",
    "malformed",
    "no_place",
    "only",
    "optional_text",
    "text",
    "url_media",
]


class UnsupportedContentError(ChatLedgerError, ValueError, TypeError):
    """A message holds something the target API has no place for.

    On the way in, also input that is malformed: a wrong type, a value that
    is not JSON, nesting deeper than
    :data:`~chatledger.messages.MAX_METADATA_DEPTH`. It is both a
    ``ValueError`` and a ``TypeError``, so callers may catch either builtin.
    """


# Shown in tracebacks, and pickled, under the module that documents it.
UnsupportedContentError.__module__ = "chatledger.convert"


# --- Media --------------------------------------------------------------------


def data_url(media: Media) -> str:
    """The media's URL, or its bytes as a ``data:<mime>;base64,`` URL."""
    if isinstance(media.data, str):
        return media.data
    encoded = base64.b64encode(media.data).decode("ascii")
    return f"data:{media.mime_type};base64,{encoded}"


def guess_mime(url: str, fallback: str) -> str:
    """The MIME type the extension of ``url``'s path names, else ``fallback``."""
    guessed, _ = mimetypes.guess_type(urlsplit(url).path)
    return guessed or fallback


def url_media(url: str, where: str, fallback: str) -> Media:
    """A URL as media: a ``data:`` URL gives bytes, any other stays a URL.

    An empty ``fallback`` means only a ``data:`` URL is taken.
    """
    if not url.startswith("data:"):
        if not fallback:
            raise UnsupportedContentError(f"{where}: inline file data is a data URL")
        return Media(guess_mime(url, fallback), url)
    header, comma, payload = url[5:].partition(",")
    mime, _, encoding = header.partition(";")
    if not comma or encoding != "base64" or not mime:
        raise UnsupportedContentError(
            f"{where}: a data URL is read as data:<mime type>;base64,<data>"
        )
    return Media(mime, b64(payload, where))


def b64(data: object, where: str) -> bytes:
    """The bytes of base64 text, refused unless it is valid base64 written as
    :func:`base64.b64encode` writes it (so the bytes encode back to it)."""
    if not isinstance(data, str):
        raise malformed(where, "base64 text", data)
    try:
        decoded = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise UnsupportedContentError(f"{where} is not valid base64: {exc}") from exc
    # Unused bits set in the last character decode all the same, and would be
    # written back otherwise.
    if base64.b64encode(decoded).decode("ascii") != data:
        raise UnsupportedContentError(
            f"{where} is not base64 as it is written (its last characters carry "
            "bits that decode to nothing), so it would not be written back as given"
        )
    return decoded


# --- Reading fields -----------------------------------------------------------


def no_place(where: str, what: str) -> UnsupportedContentError:
    """The error for a field that holds what a message has no place for."""
    return UnsupportedContentError(
        f"{where}: {what}; a chatledger message has no place for it"
    )


def malformed(where: str, expected: str, value: object) -> UnsupportedContentError:
    """The error for a field of the wrong type."""
    return UnsupportedContentError(
        f"{where} must be {expected}, not {type(value).__name__}"
    )


def item(value: object, where: str) -> Mapping[str, Any]:
    """``value`` as a mapping: a dict, or an SDK object's fields."""
    if isinstance(value, Mapping):
        return value
    dump = getattr(value, "model_dump", None)
    if callable(dump):  # an SDK object: its fields as the API spells them
        try:
            dumped = dump(by_alias=True)
        except TypeError:  # a model_dump without pydantic's keywords
            dumped = dump()
        if isinstance(dumped, Mapping):
            return dumped
    raise malformed(where, "a dict", value)


def key_path(key: object) -> str:
    """A field as a path shows it (``.name``), whatever the key is."""
    return f".{key}" if isinstance(key, str) else f"[{_shown(key)}]"


def json_text(value: object, where: str) -> str:
    """Compact JSON text of ``value``, refused unless it is JSON chatledger keeps."""
    try:
        return dumps_value(value, where)
    except ChatLedgerError as exc:
        raise UnsupportedContentError(str(exc)) from exc


def carried(value: object, where: str, level: int) -> JsonValue:
    """``value`` checked as JSON that will sit at ``level`` of a message's metadata.

    The metadata mapping is level 1, so a value under ``metadata["openai"]``
    is at level 3. Refused, naming ``where``, unless it is JSON chatledger
    keeps and fits under :data:`~chatledger.messages.MAX_METADATA_DEPTH` there.
    """
    try:
        return _freeze_json(value, where, level, "JSON")
    except InvalidMessageError as exc:
        raise UnsupportedContentError(str(exc)) from exc


def text(fields: Mapping[str, Any], key: str, where: str) -> str:
    """The ``str`` field ``key``, which must be there."""
    value = fields.get(key)
    if not isinstance(value, str):
        raise malformed(f"{where}.{key}", "a str", value)
    return value


def optional_text(fields: Mapping[str, Any], key: str, where: str) -> str | None:
    """The ``str`` field ``key``, or ``None`` when it is missing, ``None`` or empty."""
    value = fields.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise malformed(f"{where}.{key}", "a str", value)
    return value


def is_empty(value: object) -> bool:
    """Whether a field holds nothing: ``None``, or an empty str, list or dict."""
    return value is None or (isinstance(value, list | dict | str) and not value)


def only(fields: Mapping[str, Any], where: str, known: set[str]) -> None:
    """Refuse a field outside ``known`` that holds anything but an empty value."""
    for key, value in fields.items():
        if key in known or is_empty(value):
            continue
        raise no_place(f"{where}{key_path(key)}", f"holds {_shown(value)}")


# --- Gathering messages -------------------------------------------------------


@dataclass
class Gathered:
    """What a shape carries beyond a message's fields, gathered while reading.

    ``fields`` belong to the message; ``media``, ``calls`` and ``outputs``
    hold one dict per media, tool call and tool response, in their order.
    """

    fields: dict[str, Any] = field(default_factory=dict)
    media: list[dict[str, Any]] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)
    outputs: list[dict[str, Any]] = field(default_factory=list)

    def metadata(self, key: str) -> dict[str, Any]:
        """``{key: extras}``, or ``{}`` when there is nothing to keep.

        A list of per-item dicts is kept whole when any of them holds
        something, so its entries stay in step with the message's own list.
        """
        kept = dict(self.fields)
        for name, entries in (
            ("media", self.media),
            ("calls", self.calls),
            ("outputs", self.outputs),
        ):
            if any(entries):
                kept[name] = entries
        return {key: kept} if kept else {}


@dataclass
class Draft:
    """A message being gathered from one or more items of the other shape.

    ``extras`` gathers what the shape carries beyond the message's fields;
    each media, tool call and tool response is added with its own.
    """

    role: Role
    content: str | None = None
    media: list[Media] = field(default_factory=list)
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_responses: list[ToolResponse] = field(default_factory=list)
    id: str | None = None
    extras: Gathered = field(default_factory=Gathered)
    #: Takes no tool response that follows (a message of its own kind).
    closed: bool = False

    def add_media(self, media: Media, extras: dict[str, Any] | None = None) -> None:
        self.media.append(media)
        self.extras.media.append(extras or {})

    def add_call(self, call: ToolCall, extras: dict[str, Any] | None = None) -> None:
        self.tool_calls.append(call)
        self.extras.calls.append(extras or {})

    def add_response(
        self, response: ToolResponse, extras: dict[str, Any] | None = None
    ) -> None:
        self.tool_responses.append(response)
        self.extras.outputs.append(extras or {})

    def build(self, key: str) -> Message:
        """The message, its extras under ``metadata[key]`` when there are any."""
        if self.content is None and self.role in (Role.SYSTEM, Role.USER):
            self.content = ""
        extra: dict[str, Any] = {} if self.id is None else {"id": self.id}
        metadata = self.extras.metadata(key)
        return Message(
            role=self.role,
            content=self.content,
            tool_calls=self.tool_calls,
            tool_responses=self.tool_responses,
            media=self.media,
            metadata=metadata,
            **extra,
        )


class Reader:
    """Gathers messages, merging items the other shape splits.

    ``key`` is the metadata key the messages' extras go under. ``calls``
    maps each tool call id read so far to its call, so a response is named
    after the call it answers.
    """

    def __init__(self, key: str) -> None:
        self.key = key
        self.drafts: list[Draft] = []
        self.calls: dict[str, ToolCall] = {}
        self.open_assistant = False
        #: The open assistant message holds reasoning items and nothing else.
        self.only_reasoning = False

    def add(self, draft: Draft) -> Draft:
        self.drafts.append(draft)
        self.open_assistant = False
        self.only_reasoning = False
        for call in draft.tool_calls:
            self.calls[call.id] = call
        return draft

    def assistant(self) -> Draft:
        """The assistant message being read, or a new one."""
        if not self.open_assistant:
            self.add(Draft(Role.ASSISTANT))
            self.open_assistant = True
        return self.drafts[-1]

    def call(self, call: ToolCall, extras: dict[str, Any] | None = None) -> None:
        """Add a tool call to the assistant message being read, or a new one."""
        self.assistant().add_call(call, extras)
        self.calls[call.id] = call
        self.only_reasoning = False

    def name_of(self, call_id: str) -> str:
        """The name of the call ``call_id`` read so far, else ``""``."""
        call = self.calls.get(call_id)
        return "" if call is None else call.name

    def response(
        self, response: ToolResponse, extras: dict[str, Any] | None = None
    ) -> None:
        """Add a tool response to the tool message being read, or a new one."""
        last = self.drafts[-1] if self.drafts else None
        if last is None or last.role is not Role.TOOL or last.closed:
            last = self.add(Draft(Role.TOOL))
        last.add_response(response, extras)
        self.open_assistant = False
        self.only_reasoning = False

    def messages(self) -> list[Message]:
        return [draft.build(self.key) for draft in self.drafts]
