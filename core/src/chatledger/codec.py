"""The one versioned JSON codec every adapter stores messages through.

Example:
    from chatledger import Message, codec

    message = Message.user("hi", metadata={"n": 2**63 + 1})
    text = codec.to_json(message)
    assert codec.from_json(text) == message

``to_dict`` gives a dict of plain JSON values; an adapter that keeps some fields
in columns of their own (``role``, ``content``, ``id``, ``created_at``) pops them
from the dict before storing the rest, and puts them back before ``from_dict``
(``created_at`` as the ISO text or as a timezone-aware ``datetime``).
Round trips are exact: bytes media (base64), integers beyond 2**53, floats,
``None`` versus ``""`` content, and any unicode including NUL (JSON escapes it,
so the stored text never holds a raw NUL).

Depth: text that nests deeper than a message can (its metadata at most
:data:`~chatledger.messages.MAX_METADATA_DEPTH` levels, one level below the
message's object) is refused with :class:`~chatledger.InvalidMessageError`,
whatever a stored row holds. :func:`from_json` decodes the common shapes
typed, where only the metadata nests and its depth is checked as it is
frozen; any other text is measured before it is parsed, without recursing.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import msgspec

from chatledger.errors import InvalidMessageError
from chatledger.messages import (
    _EMPTY_METADATA,
    MAX_METADATA_DEPTH,
    Media,
    Message,
    Role,
    ToolCall,
    ToolResponse,
    _freeze_json,
    _freeze_plain,
    _Rejected,
    _shown,
    _text_ok,
    thaw,
)

__all__ = [
    "CODEC_VERSION",
    "dumps",
    "dumps_value",
    "from_columns",
    "from_dict",
    "from_json",
    "loads",
    "loads_value",
    "thaw",
    "to_dict",
    "to_json",
]

#: Written as ``"v"`` into every encoded message; bumped on any format change.
CODEC_VERSION = 1

# msgspec's JSON: encoding 2-4x and parsing ~4x faster than the json module,
# the same values back (integers of any size included). It refuses what the
# codec would refuse anyway (lone surrogates, NaN, out-of-range floats); such
# text goes to json.loads, whose values then fail the codec's own checks with
# the codec's own error.
_ENCODE = msgspec.json.Encoder().encode
_DECODE = msgspec.json.Decoder().decode
_REFUSED = (msgspec.DecodeError, UnicodeEncodeError)
#: A field of an encoded message left out.
_ABSENT: Any = msgspec.UNSET


class _StoredCall(msgspec.Struct, forbid_unknown_fields=True):
    """A tool call as :func:`to_dict` writes it, typed (see :class:`_Stored`)."""

    id: str
    type: str
    name: str
    arguments: str


class _StoredResponse(msgspec.Struct, forbid_unknown_fields=True):
    """A tool response as :func:`to_dict` writes it, typed."""

    id: str
    name: str
    data: str


class _Stored(msgspec.Struct, forbid_unknown_fields=True):
    """The common shapes of an encoded message, typed so that msgspec builds
    and type-checks its fields in C; media, an unknown field or a type off
    these fails to decode and goes to the general decoder."""

    v: int
    id: str
    role: str
    content: str | None
    tool_calls: list[_StoredCall] | msgspec.UnsetType = msgspec.UNSET
    tool_responses: list[_StoredResponse] | msgspec.UnsetType = msgspec.UNSET
    metadata: dict[str, Any] | msgspec.UnsetType = msgspec.UNSET
    created_at: str | None = None


class _StoredRest(msgspec.Struct, forbid_unknown_fields=True):
    """The common shapes of what an adapter keeps of a message besides its
    id, role, text and time (see :func:`from_columns`)."""

    v: int
    content: str | msgspec.UnsetType | None = msgspec.UNSET
    tool_calls: list[_StoredCall] | msgspec.UnsetType = msgspec.UNSET
    tool_responses: list[_StoredResponse] | msgspec.UnsetType = msgspec.UNSET
    metadata: dict[str, Any] | msgspec.UnsetType = msgspec.UNSET


_DECODE_STORED = msgspec.json.Decoder(_Stored).decode
_DECODE_REST = msgspec.json.Decoder(_StoredRest).decode


def dumps(value: Any) -> str:
    """Compact JSON text of plain JSON values, as the codec writes it.

    For adapters that store part of a message's dict (see the module's
    docstring). Non-ASCII text is written as is, not escaped.
    """
    return _ENCODE(value).decode()


def loads(text: str | bytes) -> Any:
    """The JSON values of ``text``, read the way :func:`from_json` reads.

    Raises:
        InvalidMessageError: if ``text`` nests deeper than a stored message
            can (a ``ValueError`` too).
        ValueError: if ``text`` is not JSON (``json.loads``'s error).
    """
    return _parse(text)[0]


#: The levels of a stored message's JSON: its object, then its metadata.
_STORED_LEVELS = MAX_METADATA_DEPTH + 1

_OPENING = frozenset("[{")
_CLOSING = frozenset("]}")
_SPACING = frozenset(" \t\n\r,:")
_BLANK = " \t\n\r,:"


def _nests_deeper(text: str | bytes, levels: int) -> bool:
    """Whether the JSON value of ``text`` has a value below level ``levels``.

    Counted as :func:`~chatledger.messages._freeze_json` counts (the value
    itself is level 1), in one pass and without recursing, so that no parser
    sees text that would exhaust its recursion. Text with fewer brackets than
    ``levels`` cannot be that deep and is not scanned; in text that is, strings
    are skipped with ``str.find``, so a long string costs next to nothing.
    """
    if isinstance(text, bytes):
        if text.count(b"[") + text.count(b"{") < levels:
            return False
        # One char per byte: the ASCII that structures JSON stays where it
        # is, and no byte of a multi-byte UTF-8 sequence is ASCII.
        text = text.decode("latin-1")
    elif text.count("[") + text.count("{") < levels:
        return False
    depth = 0
    start = 0
    while True:
        quote = text.find('"', start)
        between = text[start:] if quote < 0 else text[start:quote]
        if _OPENING.isdisjoint(between) and _CLOSING.isdisjoint(between):
            if depth + 1 > levels and between.strip(_BLANK):
                return True  # a number or literal below the limit
        else:
            for char in between:
                if char in _OPENING:
                    depth += 1
                    if depth > levels:
                        return True
                elif char in _CLOSING:
                    depth -= 1
                elif depth + 1 > levels and char not in _SPACING:
                    return True
        if quote < 0:
            return False
        if depth + 1 > levels:
            return True  # a string (or key) below the limit
        start = _string_end(text, quote)
        if start < 0:
            return False  # unterminated: the parser says what is wrong


def _string_end(text: str, quote: int) -> int:
    """The index after the string that opens at ``quote``; -1 if it never closes."""
    end = quote
    while True:
        end = text.find('"', end + 1)
        if end < 0:
            return -1
        backslashes = end - 1
        while text[backslashes] == "\\":
            backslashes -= 1
        if (end - 1 - backslashes) % 2 == 0:  # not escaped
            return end + 1


def _parse(text: str | bytes) -> tuple[Any, bool]:
    """The JSON values of ``text``, and whether every string in them encodes.

    The depth is checked first. msgspec then; it refuses invalid UTF-8 and
    lone surrogates, so what it returns is clean. What it refuses goes to
    ``json.loads``.
    """
    _check_depth(text)
    try:
        return _DECODE(text), True
    except _REFUSED:
        return json.loads(text), False


def _check_depth(text: str | bytes) -> None:
    if _nests_deeper(text, _STORED_LEVELS):
        raise InvalidMessageError(
            f"JSON text nests deeper than {_STORED_LEVELS} levels, deeper than a "
            f"message can (metadata holds at most {MAX_METADATA_DEPTH})"
        )


def loads_value(text: str | bytes) -> Any:
    """The JSON value of ``text``, held to the rules chatledger keeps JSON by.

    For JSON that a converter reads, such as a tool call's argument text: at
    most :data:`~chatledger.messages.MAX_METADATA_DEPTH` levels (checked
    before parsing), no ``NaN`` or ``Infinity``, valid UTF-8 and no lone
    surrogates. The value is plain ``dict``, ``list``, ``str``, ``int``,
    ``float``, ``bool`` and ``None``, and :func:`dumps_value` takes it.

    Raises:
        InvalidMessageError: if ``text`` is not such JSON (a ``ValueError``).
    """
    if _nests_deeper(text, MAX_METADATA_DEPTH):
        raise InvalidMessageError(
            f"JSON text nests deeper than {MAX_METADATA_DEPTH} levels"
        )
    try:
        return _DECODE(text)
    except _REFUSED as exc:
        raise InvalidMessageError(f"not JSON: {exc}") from None


def dumps_value(value: object, where: str = "value") -> str:
    """Compact JSON text of ``value``, checked as metadata is checked.

    For values a converter turns into JSON text, such as a tool call's input:
    ``str`` keys, finite floats, no lone surrogates, ``list``/``tuple`` and
    mappings, at most :data:`~chatledger.messages.MAX_METADATA_DEPTH` levels
    (checked before recursing). Non-ASCII text is written as is; the text is
    what ``json.dumps(value, ensure_ascii=False, separators=(",", ":"))``
    writes for plain values.

    Raises:
        InvalidMessageError: naming the place in ``value`` (after ``where``)
            that is not JSON: a set, bytes, a non-str key, ``NaN``, any other
            object, or nesting too deep. It is a ``ValueError`` and a
            ``TypeError``.
    """
    frozen = _freeze_json(value, where, 1, "JSON")
    return json.dumps(thaw(frozen), ensure_ascii=False, separators=(",", ":"))


def _media_to_dict(media: Media) -> dict[str, Any]:
    encoded: dict[str, Any] = {"mime_type": media.mime_type}
    if isinstance(media.data, bytes):
        encoded["data_b64"] = base64.b64encode(media.data).decode("ascii")
    else:
        encoded["url"] = media.data
    if media.name is not None:
        encoded["name"] = media.name
    if media.id is not None:
        encoded["id"] = media.id
    return encoded


def to_dict(message: Message) -> dict[str, Any]:
    """Encode ``message`` as a dict of JSON values (empty fields are left out)."""
    encoded: dict[str, Any] = {
        "v": CODEC_VERSION,
        "id": message.id,
        "role": message.role.value,
        "content": message.content,
    }
    if message.tool_calls:
        encoded["tool_calls"] = [
            {"id": c.id, "type": c.type, "name": c.name, "arguments": c.arguments}
            for c in message.tool_calls
        ]
    if message.tool_responses:
        encoded["tool_responses"] = [
            {"id": r.id, "name": r.name, "data": r.data} for r in message.tool_responses
        ]
    if message.media:
        encoded["media"] = [_media_to_dict(m) for m in message.media]
    if message.metadata:
        encoded["metadata"] = thaw(message.metadata)
    if message.created_at is not None:
        encoded["created_at"] = message.created_at.isoformat()
    return encoded


def _media_from_dict(data: Mapping[str, Any]) -> Media:
    if "data_b64" in data:
        try:
            payload: bytes | str = base64.b64decode(data["data_b64"], validate=True)
        except (binascii.Error, TypeError) as exc:
            raise InvalidMessageError(f"media data is not valid base64: {exc}") from exc
    else:
        payload = data["url"]
    return Media(
        mime_type=data["mime_type"],
        data=payload,
        name=data.get("name"),
        id=data.get("id"),
    )


_ROLES = {role.value: role for role in Role}
_NO_CONTENT = (Role.SYSTEM, Role.USER)


def _str(value: object, clean: bool) -> str:
    if type(value) is str and (clean or _text_ok(value)):
        return value
    raise _Rejected


def _decode_plain(data: dict[str, Any], clean: bool) -> Message:
    """Decode the common shapes of a plain dict, checking what ``Message`` checks.

    Accepts a subset of what :func:`_decode_checked` accepts and builds the
    same message; anything else (another type, media, a rule broken) raises
    :class:`_Rejected` and the caller reruns the full decoder, which raises
    the error. ``clean`` says every string is known to encode as UTF-8.
    """
    if "media" in data:
        raise _Rejected
    metadata = data.get("metadata", _ABSENT)
    if metadata is None:
        raise _Rejected
    return _decode_fields(
        data.get("v"),
        data.get("role"),
        data.get("content", _Rejected),
        data.get("id"),
        data.get("tool_calls", _ABSENT),
        data.get("tool_responses", _ABSENT),
        metadata,
        data.get("created_at"),
        clean,
    )


def _decode_fields(
    version: object,
    role_value: object,
    content: Any,
    message_id: object,
    raw_calls: Any,
    raw_responses: Any,
    metadata: Any,
    created: object,
    clean: bool,
) -> Message:
    """The message of a plain dict's fields, or :class:`_Rejected` (see
    :func:`_decode_plain`); a list or the metadata left out is ``_ABSENT``.
    Tool calls and responses are dicts, or msgspec's typed structs, whose
    strings need no check."""
    if version != CODEC_VERSION:
        raise _Rejected
    role = _ROLES.get(role_value) if type(role_value) is str else None
    if role is None:
        raise _Rejected
    if content is None:
        if role in _NO_CONTENT:
            raise _Rejected
    elif type(content) is not str or not (clean or _text_ok(content)):
        raise _Rejected
    # isprintable() is False for lone surrogates too.
    if type(message_id) is not str or not message_id or not message_id.isprintable():
        raise _Rejected
    calls: tuple[ToolCall, ...] = ()
    if raw_calls is not _ABSENT:
        if type(raw_calls) is not list or (raw_calls and role is not Role.ASSISTANT):
            raise _Rejected
        # A list inside: tuple() of a generator costs twice as much.
        calls = tuple(
            [
                # Typed by msgspec: strings, and clean.
                ToolCall._checked(c.id, c.name, c.arguments, c.type)
                if type(c) is _StoredCall
                else ToolCall._checked(
                    _str(c.get("id"), clean),
                    _str(c.get("name"), clean),
                    _str(c.get("arguments"), clean),
                    _str(c.get("type"), clean),
                )
                if type(c) is dict
                else _reject()
                for c in raw_calls
            ]
        )
    responses: tuple[ToolResponse, ...] = ()
    if raw_responses is not _ABSENT:
        if type(raw_responses) is not list or (raw_responses and role is not Role.TOOL):
            raise _Rejected
        responses = tuple(
            [
                ToolResponse._checked(r.id, r.name, r.data)
                if type(r) is _StoredResponse
                else ToolResponse._checked(
                    _str(r.get("id"), clean),
                    _str(r.get("name"), clean),
                    _str(r.get("data"), clean),
                )
                if type(r) is dict
                else _reject()
                for r in raw_responses
            ]
        )
    if metadata is _ABSENT or (type(metadata) is dict and not metadata):
        frozen = _EMPTY_METADATA
    elif type(metadata) is dict:
        frozen = _freeze_plain(metadata, 1, clean)  # type: ignore[assignment]
    else:
        raise _Rejected
    moment = None
    if created is not None:
        if type(created) is datetime:
            moment = created
        elif type(created) is not str:
            raise _Rejected
        else:
            try:
                moment = datetime.fromisoformat(created)
            except ValueError:
                raise _Rejected from None
        if moment.tzinfo is not UTC:
            if moment.utcoffset() is None:
                raise _Rejected
            moment = moment.astimezone(UTC)
    return Message._checked(
        role, content, calls, responses, (), frozen, message_id, moment
    )


def _reject() -> Any:
    raise _Rejected


def from_dict(data: Mapping[str, Any]) -> Message:
    """Decode a dict made by :func:`to_dict` (or read back from storage).

    Raises:
        InvalidMessageError: if the dict is not a message of a known version.
    """
    if type(data) is dict:
        try:
            return _decode_plain(data, False)
        except _Rejected:
            pass
    return _decode_checked(data)


def from_columns(
    message_id: str,
    role: str,
    content: str | None,
    created_at: datetime | str | None,
    rest: str | bytes | None = None,
) -> Message:
    """Decode a message an adapter keeps partly in columns of its own.

    ``rest`` is the JSON text (:func:`dumps`) of what :func:`to_dict` made
    less those fields, ``None`` for a message of text alone (whose rest is
    ``{"v": CODEC_VERSION}``); a ``content`` kept in it wins over the
    column's. The same message as :func:`from_dict` of the whole dict.

    Raises:
        InvalidMessageError: if the fields are not a message of a known version.
    """
    version, calls, responses, metadata = CODEC_VERSION, _ABSENT, _ABSENT, _ABSENT
    if rest is not None:
        try:
            stored = _DECODE_REST(rest)
        except (*_REFUSED, RecursionError):
            return _from_columns_checked(message_id, role, content, created_at, rest)
        version, calls, responses = stored.v, stored.tool_calls, stored.tool_responses
        metadata = stored.metadata
        if not isinstance(stored.content, msgspec.UnsetType):
            content = stored.content
    try:
        # The columns' strings come from a driver, not from msgspec: checked.
        return _decode_fields(
            version,
            role,
            content,
            message_id,
            calls,
            responses,
            metadata,
            created_at,
            False,
        )
    except _Rejected:
        return _from_columns_checked(message_id, role, content, created_at, rest)


def _from_columns_checked(
    message_id: str,
    role: str,
    content: str | None,
    created_at: datetime | str | None,
    rest: str | bytes | None,
) -> Message:
    """:func:`from_columns` through :func:`from_dict`, for its errors."""
    try:
        fields = {"v": CODEC_VERSION} if rest is None else loads(rest)
    except InvalidMessageError:
        raise
    except ValueError as exc:
        raise InvalidMessageError(f"encoded message is not valid JSON: {exc}") from exc
    if type(fields) is not dict:
        raise InvalidMessageError(
            f"the stored fields of a message are a JSON object, not {_shown(fields)}"
        )
    data = {"content": content, **fields}
    data["id"] = message_id
    data["role"] = role
    data["created_at"] = created_at
    return from_dict(data)


def _decode_checked(data: Mapping[str, Any]) -> Message:
    """Decode through the ``Message`` constructor: every check, with its error."""
    if type(data) is not dict and not isinstance(data, Mapping):
        raise InvalidMessageError(
            f"an encoded message is a dict, not {type(data).__name__}"
        )
    version = data.get("v")
    if version != CODEC_VERSION:
        raise InvalidMessageError(
            f"encoded message has codec version {_shown(version)}; this chatledger "
            f"reads version {CODEC_VERSION}"
        )
    try:
        created = data.get("created_at")
        # Most messages have no calls, responses or media: skip building lists.
        return Message(
            role=data["role"],
            content=data["content"],
            tool_calls=[
                ToolCall(
                    id=c["id"], name=c["name"], arguments=c["arguments"], type=c["type"]
                )
                for c in data["tool_calls"]
            ]
            if "tool_calls" in data
            else (),
            tool_responses=[
                ToolResponse(id=r["id"], name=r["name"], data=r["data"])
                for r in data["tool_responses"]
            ]
            if "tool_responses" in data
            else (),
            media=[_media_from_dict(m) for m in data["media"]]
            if "media" in data
            else (),
            metadata=data.get("metadata", {}),
            id=data["id"],
            created_at=created
            if created is None or isinstance(created, datetime)
            else datetime.fromisoformat(created),
        )
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, InvalidMessageError):
            raise
        raise InvalidMessageError(f"malformed encoded message: {exc!r}") from exc


def to_json(message: Message) -> str:
    """Encode ``message`` as compact JSON text."""
    return _ENCODE(to_dict(message)).decode()


def from_json(text: str | bytes) -> Message:
    """Decode JSON text made by :func:`to_json`."""
    # The common shapes first, typed: nothing in them nests but metadata,
    # whose depth _freeze_plain checks. Anything else, text too deep for
    # msgspec included, is read again below, depth first, for its error.
    try:
        stored = _DECODE_STORED(text)
    except (*_REFUSED, RecursionError):
        pass
    else:
        try:
            # msgspec refuses invalid UTF-8 and lone surrogates: clean strings.
            return _decode_fields(
                stored.v,
                stored.role,
                stored.content,
                stored.id,
                stored.tool_calls,
                stored.tool_responses,
                stored.metadata,
                stored.created_at,
                True,
            )
        except _Rejected:
            pass
    try:
        data, clean = _parse(text)
    except InvalidMessageError:
        raise
    except ValueError as exc:
        raise InvalidMessageError(f"encoded message is not valid JSON: {exc}") from exc
    if type(data) is dict:
        try:
            return _decode_plain(data, clean)
        except _Rejected:
            return _decode_checked(data)
    return from_dict(data)
