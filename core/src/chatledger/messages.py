"""The message model: immutable, validated values that every backend stores alike.

Example:
    from chatledger import Message, ToolCall, ToolResponse

    question = Message.user("What is the weather in Paris?")
    call = Message.assistant(
        tool_calls=[ToolCall(id="c1", name="weather", arguments='{"city": "Paris"}')]
    )
    answer = Message.tool([ToolResponse(id="c1", name="weather", data='{"c": 21}')])

A message is checked when it is made, so a bad message never reaches storage.
``id`` and ``created_at`` are storage fields: they travel with the message but
take no part in equality.
"""

from __future__ import annotations

import math
import reprlib
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from types import MappingProxyType
from typing import Any, Union

from chatledger.drafts import draft_of
from chatledger.errors import InvalidMessageError

__all__ = [
    "MAX_METADATA_DEPTH",
    "JsonArray",
    "JsonValue",
    "Media",
    "Message",
    "Role",
    "ToolCall",
    "ToolResponse",
    "thaw",
]

#: How deep any JSON value chatledger keeps may nest, counted in levels: the
#: value itself is level 1 and the items of a list or dict one level below it,
#: so no value (a scalar included) may sit below level 64. One limit for every
#: path: ``metadata`` when a message is made or decoded, stored JSON text (whose
#: message object holds the metadata one level down), a converter's tool-call
#: arguments and tool input. Deeper input is refused with a chatledger error
#: before anything recurses through it, so no encoder, decoder or driver on any
#: backend meets a recursion limit halfway through a read or a write.
MAX_METADATA_DEPTH = 64

JsonValue = Union[  # noqa: UP007 - a recursive alias needs the Union spelling
    str, int, float, bool, None, Sequence["JsonValue"], Mapping[str, "JsonValue"]
]


class Role(StrEnum):
    """Who wrote a message."""

    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


def _check_text(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise InvalidMessageError(f"{what} must be a str, not {type(value).__name__}")
    if value.isascii():
        # ASCII always encodes; skipping the copy matters when decoding windows.
        return value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidMessageError(
            f"{what} cannot be encoded as UTF-8 (lone surrogate at index {exc.start})"
        ) from exc
    return value


class JsonArray(tuple):  # type: ignore[type-arg]
    """A frozen JSON array: a tuple that also compares equal to an equal list."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, list):
            other = tuple(other)
        return tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = tuple.__hash__


class _Shown(reprlib.Repr):
    """``repr`` cut to a few levels and characters, for error messages.

    Builtin containers are shown a few levels deep, never walked whole; any
    other object is named by its type, so no ``__repr__`` of the caller's runs.
    """

    def __init__(self) -> None:
        super().__init__()
        self.maxlevel = 3
        self.maxstring = 60
        self.maxother = 60

    def repr_instance(self, x: object, level: int) -> str:
        if type(x) in (float, bool, type(None)):
            return repr(x)
        return f"<{type(x).__name__}>"

    def repr_int(self, x: int, level: int) -> str:
        # repr() refuses an int of more than 4300 digits.
        return super().repr_int(x, level) if x.bit_length() < 128 else "<int>"


_SHOWN = _Shown()


def _shown(value: object) -> str:
    """A short ``repr`` of any value, however large or deep, for an error message."""
    return _SHOWN.repr(value)


def _freeze_json(
    value: object, path: str, depth: int, what: str = "metadata"
) -> JsonValue:
    """Check that ``value`` is plain JSON and return a deep, read-only copy.

    ``depth`` is the level of ``value`` (the root is 1); the depth is checked
    before recursing, so a value nested a million levels fails at level 65.
    ``what`` names the value in errors, ``path`` the place within it.
    """
    if depth > MAX_METADATA_DEPTH:
        raise InvalidMessageError(
            f"{what} nests deeper than {MAX_METADATA_DEPTH} levels at {path}"
        )
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return _check_text(value, f"{what} value at {path}")
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidMessageError(f"{what} value at {path} is {value!r}, not JSON")
        return float(value)
    if isinstance(value, Mapping):
        frozen: dict[str, JsonValue] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidMessageError(
                    f"{what} key {_shown(key)} at {path} must be a str, "
                    f"not {type(key).__name__}"
                )
            _check_text(key, f"{what} key at {path}")
            frozen[key] = _freeze_json(item, f"{path}[{key!r}]", depth + 1, what)
        return MappingProxyType(frozen)
    if isinstance(value, list | tuple):
        return JsonArray(
            _freeze_json(item, f"{path}[{index}]", depth + 1, what)
            for index, item in enumerate(value)
        )
    raise InvalidMessageError(
        f"{what} value at {path} is a {type(value).__name__}, which is not JSON "
        "(allowed: str, int, finite float, bool, None, list, dict)"
    )


def thaw(value: JsonValue) -> Any:
    """Turn frozen metadata back into plain ``dict`` and ``list`` values."""
    if isinstance(value, Mapping):
        return {key: thaw(item) for key, item in value.items()}
    if isinstance(value, tuple):
        return [thaw(item) for item in value]
    return value


class _Rejected(Exception):
    """Raised by the fast checks; the caller reruns the full checks for the error."""


def _text_ok(value: str) -> bool:
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _freeze_plain(value: object, depth: int, clean: bool) -> JsonValue:
    """Freeze exactly what :func:`_freeze_json` accepts, for plain JSON types only.

    Only ``dict``, ``list``, ``str``, ``int``, ``float``, ``bool`` and ``None``
    (what ``json.loads`` makes) pass; any other type, and everything
    ``_freeze_json`` rejects (depth, a non-finite float, a string that cannot
    be encoded), raises :class:`_Rejected`, so the caller reruns
    ``_freeze_json`` to get the error with its path. ``clean`` says the
    strings are known to encode (JSON text that could not produce a lone
    surrogate), so they are not checked one by one.
    """
    if depth > MAX_METADATA_DEPTH:
        raise _Rejected
    kind = type(value)
    if kind is str:
        if clean or _text_ok(value):  # type: ignore[arg-type]
            return value  # type: ignore[return-value]
        raise _Rejected
    if kind is int or kind is bool or value is None:
        return value  # type: ignore[return-value]
    if kind is float:
        if math.isfinite(value):  # type: ignore[arg-type]
            return value  # type: ignore[return-value]
        raise _Rejected
    if kind is dict:
        frozen: dict[str, JsonValue] = {}
        for key, item in value.items():  # type: ignore[attr-defined]
            if type(key) is not str or not (clean or _text_ok(key)):
                raise _Rejected
            frozen[key] = _freeze_plain(item, depth + 1, clean)
        return MappingProxyType(frozen)
    if kind is list:
        return JsonArray([_freeze_plain(item, depth + 1, clean) for item in value])  # type: ignore[attr-defined]
    raise _Rejected


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A function call requested by the assistant.

    ``arguments`` is kept as the exact text the model produced; it is never
    parsed or re-serialised.
    """

    id: str
    name: str
    arguments: str
    type: str = "function"

    def __post_init__(self) -> None:
        for name in ("id", "name", "arguments", "type"):
            _check_text(getattr(self, name), f"ToolCall.{name}")

    @classmethod
    def _checked(cls, id: str, name: str, arguments: str, type: str) -> ToolCall:
        """Build from fields the caller has checked as ``__post_init__`` would."""
        call = object.__new__(_TOOL_CALL_DRAFT)
        call.id = id
        call.name = name
        call.arguments = arguments
        call.type = type
        call.__class__ = cls
        return call  # type: ignore[no-any-return]


@dataclass(frozen=True, slots=True)
class ToolResponse:
    """The result of one tool call, matched to it by ``id``."""

    id: str
    name: str
    data: str

    def __post_init__(self) -> None:
        for name in ("id", "name", "data"):
            _check_text(getattr(self, name), f"ToolResponse.{name}")

    @classmethod
    def _checked(cls, id: str, name: str, data: str) -> ToolResponse:
        """Build from fields the caller has checked as ``__post_init__`` would."""
        response = object.__new__(_TOOL_RESPONSE_DRAFT)
        response.id = id
        response.name = name
        response.data = data
        response.__class__ = cls
        return response  # type: ignore[no-any-return]


_TOOL_CALL_DRAFT = draft_of(ToolCall)
_TOOL_RESPONSE_DRAFT = draft_of(ToolResponse)


@dataclass(frozen=True, slots=True)
class Media:
    """An attachment: raw ``bytes`` or a URL string, with its MIME type."""

    mime_type: str
    data: bytes | str
    name: str | None = None
    id: str | None = None

    def __post_init__(self) -> None:
        _check_text(self.mime_type, "Media.mime_type")
        if isinstance(self.data, bytearray | memoryview):
            object.__setattr__(self, "data", bytes(self.data))
        elif not isinstance(self.data, bytes):
            _check_text(self.data, "Media.data")
        if self.name is not None:
            _check_text(self.name, "Media.name")
        if self.id is not None:
            _check_text(self.id, "Media.id")


def _tuple_of(items: object, kind: type, what: str) -> tuple[Any, ...]:
    if items is None:
        return ()
    if type(items) is tuple or type(items) is list:
        # The common shapes skip the costly abstract Iterable check.
        if not items:
            return ()
        result = tuple(items)
    else:
        if isinstance(items, kind):
            return (items,)
        if isinstance(items, str | bytes) or not isinstance(items, Iterable):
            raise InvalidMessageError(f"{what} must be a list of {kind.__name__}")
        result = tuple(items)
    for item in result:
        if not isinstance(item, kind):
            raise InvalidMessageError(
                f"{what} must hold {kind.__name__} values, not {type(item).__name__}"
            )
    return result


def _new_id() -> str:
    return str(uuid.uuid4())


_EMPTY_METADATA: Mapping[str, JsonValue] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Message:
    """One immutable chat message.

    Args:
        role: Who wrote it (a :class:`Role` or its lower-case value).
        content: The text. ``None`` is allowed on assistant and tool messages only.
        tool_calls: Calls requested by an assistant message.
        tool_responses: Results carried by a tool message.
        media: Attachments of a user or assistant message.
        metadata: JSON values only, frozen on the way in, nested at most
            :data:`MAX_METADATA_DEPTH` levels (the mapping is the first).
        id: Unique id, made here unless given. A retry that carries the same id
            is recognised by the store and not stored twice.
        created_at: Timezone-aware UTC time, set by the store on first write.

    ``id`` and ``created_at`` take no part in equality.
    """

    role: Role
    content: str | None = None
    tool_calls: Sequence[ToolCall] = ()
    tool_responses: Sequence[ToolResponse] = ()
    media: Sequence[Media] = ()
    metadata: Mapping[str, JsonValue] = field(default_factory=lambda: _EMPTY_METADATA)
    id: str = field(default_factory=_new_id, compare=False)
    created_at: datetime | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        try:
            if type(self.role) is Role:
                role = self.role
            elif isinstance(self.role, str):
                role = Role(self.role)
            else:
                # Enum's own error would repr the value whole, however deep.
                raise ValueError
        except ValueError:
            raise InvalidMessageError(
                f"role must be one of {', '.join(r.value for r in Role)}, "
                f"not {_shown(self.role)}"
            ) from None
        object.__setattr__(self, "role", role)
        if self.content is None:
            if role in (Role.SYSTEM, Role.USER):
                raise InvalidMessageError(f"a {role} message needs content, not None")
        else:
            _check_text(self.content, "content")
        calls = _tuple_of(self.tool_calls, ToolCall, "tool_calls")
        responses = _tuple_of(self.tool_responses, ToolResponse, "tool_responses")
        media = _tuple_of(self.media, Media, "media")
        if calls and role is not Role.ASSISTANT:
            raise InvalidMessageError("only assistant messages carry tool_calls")
        if responses and role is not Role.TOOL:
            raise InvalidMessageError("only tool messages carry tool_responses")
        if media and role not in (Role.USER, Role.ASSISTANT):
            raise InvalidMessageError("only user and assistant messages carry media")
        object.__setattr__(self, "tool_calls", calls)
        object.__setattr__(self, "tool_responses", responses)
        object.__setattr__(self, "media", media)
        if type(self.metadata) is dict and not self.metadata:
            object.__setattr__(self, "metadata", _EMPTY_METADATA)
        elif self.metadata is not _EMPTY_METADATA:
            if not isinstance(self.metadata, Mapping):
                raise InvalidMessageError(
                    f"metadata must be a dict, not {type(self.metadata).__name__}"
                )
            object.__setattr__(
                self, "metadata", _freeze_json(self.metadata, "metadata", 1)
            )
        if not isinstance(self.id, str) or not self.id or not self.id.isprintable():
            raise InvalidMessageError(
                f"message id must be a non-empty printable str, not {_shown(self.id)}"
            )
        _check_text(self.id, "message id")
        if self.created_at is not None:
            if (
                not isinstance(self.created_at, datetime)
                or self.created_at.utcoffset() is None
            ):
                raise InvalidMessageError(
                    "created_at must be a timezone-aware datetime"
                )
            if self.created_at.tzinfo is not UTC:
                object.__setattr__(self, "created_at", self.created_at.astimezone(UTC))

    def __hash__(self) -> int:
        # Consistent with equality: equal messages share role and content.
        return hash((self.role, self.content))

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled as the constructor's arguments: the frozen metadata's
        # read-only mappings cannot be pickled, so they go as plain values and
        # are frozen again on the way back in.
        return (
            type(self),
            (
                self.role,
                self.content,
                self.tool_calls,
                self.tool_responses,
                self.media,
                thaw(self.metadata),
                self.id,
                self.created_at,
            ),
        )

    def __copy__(self) -> Message:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Message:
        # Immutable all the way down: a copy would be equal in every respect.
        return self

    @classmethod
    def system(
        cls,
        content: str,
        *,
        metadata: Mapping[str, Any] | None = None,
        id: str | None = None,
    ) -> Message:
        """Make a system message."""
        return cls._make(Role.SYSTEM, content, metadata=metadata, id=id)

    @classmethod
    def user(
        cls,
        content: str,
        *,
        media: Sequence[Media] = (),
        metadata: Mapping[str, Any] | None = None,
        id: str | None = None,
    ) -> Message:
        """Make a user message."""
        return cls._make(Role.USER, content, media=media, metadata=metadata, id=id)

    @classmethod
    def assistant(
        cls,
        content: str | None = None,
        *,
        tool_calls: Sequence[ToolCall] = (),
        media: Sequence[Media] = (),
        metadata: Mapping[str, Any] | None = None,
        id: str | None = None,
    ) -> Message:
        """Make an assistant message, optionally requesting tool calls."""
        return cls._make(
            Role.ASSISTANT,
            content,
            tool_calls=tool_calls,
            media=media,
            metadata=metadata,
            id=id,
        )

    @classmethod
    def tool(
        cls,
        responses: Sequence[ToolResponse] | ToolResponse,
        *,
        content: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        id: str | None = None,
    ) -> Message:
        """Make a tool message carrying one or more tool responses."""
        return cls._make(
            Role.TOOL,
            content,
            tool_responses=_tuple_of(responses, ToolResponse, "responses"),
            metadata=metadata,
            id=id,
        )

    @classmethod
    def _make(
        cls,
        role: Role,
        content: str | None,
        *,
        metadata: Mapping[str, Any] | None,
        id: str | None,
        **fields: Any,
    ) -> Message:
        return cls(
            role=role,
            content=content,
            metadata=_EMPTY_METADATA if metadata is None else metadata,
            id=_new_id() if id is None else id,
            **fields,
        )

    @classmethod
    def _checked(
        cls,
        role: Role,
        content: str | None,
        tool_calls: Sequence[ToolCall],
        tool_responses: Sequence[ToolResponse],
        media: Sequence[Media],
        metadata: Mapping[str, JsonValue],
        id: str,
        created_at: datetime | None,
    ) -> Message:
        """Build from fields checked and frozen as ``__post_init__`` would.

        For the codec's decoder, which checks the plain values ``json.loads``
        makes more cheaply than the general constructor can.
        """
        # A draft (chatledger.drafts): every message a read decodes is built
        # here, and plain slot stores cost half what the frozen class's do.
        message = object.__new__(_MESSAGE_DRAFT)
        message.role = role
        message.content = content
        message.tool_calls = tool_calls
        message.tool_responses = tool_responses
        message.media = media
        message.metadata = metadata
        message.id = id
        message.created_at = created_at
        message.__class__ = cls
        return message  # type: ignore[no-any-return]

    def stamped(self, created_at: datetime) -> Message:
        """Return this message with ``created_at`` set, unless it already has one."""
        if self.created_at is not None:
            return self
        return Message._checked(
            self.role,
            self.content,
            self.tool_calls,
            self.tool_responses,
            self.media,
            self.metadata,
            self.id,
            created_at.astimezone(UTC),
        )


_MESSAGE_DRAFT = draft_of(Message)
