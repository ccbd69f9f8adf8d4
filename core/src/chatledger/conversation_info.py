"""Conversations as records: whose a conversation is, what it is about, when it moved.

Example:
    from chatledger import InMemoryChatMemoryRepository, Message

    repository = InMemoryChatMemoryRepository()
    repository.set_conversation_info("c1", owner="alice", metadata={"title": "Taxes"})
    repository.append_to_log("c1", [Message.user("What can I deduct?")])
    page = repository.find_conversations(owner="alice", limit=20)
    [(info.id, info.message_count, info.metadata["title"]) for info in page.items]
    # [('c1', 1, 'Taxes')]

A repository with :class:`chatledger.SupportsConversationInfo` keeps one
:class:`ConversationInfo` per conversation and lists them newest first, a
page at a time. This module holds what every such repository shares, so
that a bad input gets the same error on every backend, before any I/O:

- the record and the page (:class:`ConversationInfo`,
  :class:`ConversationInfoPage`) and :data:`UNSET`, the value of an argument
  left out;
- the checks of ``set_conversation_info``'s arguments
  (:func:`check_conversation_info`, built on :func:`validate_owner` and
  :func:`validate_metadata`);
- the request of ``find_conversations`` (:func:`check_find_conversations`
  gives a :class:`ConversationQuery`, which says what matches, in which
  order, and makes the page and its cursor);
- the cursor codec (:func:`encode_conversation_cursor`,
  :func:`decode_conversation_cursor`): a cursor carries the ``(updated_at,
  id)`` of the last item a page gave and a fingerprint of the filter it was
  given for, so a cursor used with another filter, altered, or made by
  anything else is refused.

The listing order is ``updated_at`` descending, then the id descending (by
code point, which is also UTF-8 byte order): a keyset on ``(updated_at,
id)``. A page continues strictly after the cursor's pair, so a walk shows a
conversation that nobody wrote to meanwhile exactly once, and one written
meanwhile at most once (a write moves it to the front, where a new walk
shows it first).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import Enum
from types import MappingProxyType
from typing import Final, Literal, Protocol

from chatledger.codec import thaw
from chatledger.errors import (
    InvalidConversationIdError,
    InvalidConversationInfoError,
    InvalidMessageError,
    InvalidPageError,
)
from chatledger.messages import JsonValue, _freeze_json
from chatledger.validation import validate_conversation_id, validate_page_request

__all__ = [
    "DEFAULT_CONVERSATION_PAGE_SIZE",
    "MAX_METADATA_BYTES",
    "MAX_OWNER_LENGTH",
    "UNSET",
    "ConversationInfo",
    "ConversationInfoPage",
    "ConversationInfoUpdate",
    "ConversationQuery",
    "JsonScalar",
    "Listed",
    "Unset",
    "check_conversation_info",
    "check_find_conversations",
    "decode_conversation_cursor",
    "encode_conversation_cursor",
    "filter_fingerprint",
    "listing_key",
    "metadata_matches",
    "validate_metadata",
    "validate_metadata_filter",
    "validate_owner",
    "validate_updated_before",
]

#: The longest owner, in characters: every SQL dialect can index a
#: ``VARCHAR(255)``.
MAX_OWNER_LENGTH = 255

#: The largest metadata, in bytes of its compact UTF-8 JSON text.
MAX_METADATA_BYTES = 64 * 1024

#: How many records a page of ``find_conversations`` holds when the caller
#: does not say.
DEFAULT_CONVERSATION_PAGE_SIZE = 100

#: A value a metadata filter may hold: a JSON scalar.
JsonScalar = str | int | float | bool | None


class Unset(Enum):
    """The type of :data:`UNSET`."""

    UNSET = "UNSET"

    def __repr__(self) -> str:
        return "UNSET"


#: The default of an argument left out: ``set_conversation_info(id,
#: owner=UNSET)`` keeps the owner, where ``owner=None`` clears it.
UNSET: Final = Unset.UNSET

_EMPTY: Mapping[str, JsonValue] = MappingProxyType({})
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def _utc(value: object, what: str, error: type[Exception]) -> datetime:
    """``value`` as an aware UTC datetime; a naive one or another type is refused."""
    if not isinstance(value, datetime):
        raise error(
            f"{what} must be a timezone-aware datetime, not {type(value).__name__}"
        )
    if value.utcoffset() is None:
        raise error(
            f"{what} must be a timezone-aware datetime, not the naive {value!r}: "
            "say its zone (datetime.now(UTC), or .replace(tzinfo=UTC))"
        )
    return value if value.tzinfo is UTC else value.astimezone(UTC)


def _frozen(metadata: object) -> Mapping[str, JsonValue]:
    """A deep, read-only copy of ``metadata``, a JSON object; else raise."""
    if not isinstance(metadata, Mapping):
        raise InvalidConversationInfoError(
            f"metadata must be a mapping, not {type(metadata).__name__}"
        )
    if not metadata:
        return _EMPTY
    try:
        frozen = _freeze_json(metadata, "metadata", 1)
    except InvalidMessageError as exc:
        raise InvalidConversationInfoError(str(exc)) from None
    assert isinstance(frozen, Mapping)
    return frozen


@dataclass(frozen=True, slots=True)
class ConversationInfo:
    """The record of one conversation.

    An adapter makes one from what it stored: the times are given as aware
    datetimes (turned to UTC here), ``metadata`` as a decoded JSON object,
    of which the record keeps a read-only deep copy.

    Attributes:
        id: The conversation's id.
        created_at: When the record was made: the conversation's first
            write (an append, or ``set_conversation_info`` on a new id).
        updated_at: The last write to its messages (an append,
            ``save_all``, a window's eviction, a removal); setting the owner
            or the metadata does not move it. ``created_at`` for a record
            that never held a message.
        message_count: How many messages the conversation holds now.
        owner: Whose conversation it is, or ``None``.
        metadata: A JSON object (a title, tags, ...), read-only.
    """

    id: str
    created_at: datetime
    updated_at: datetime
    message_count: int
    owner: str | None = None
    metadata: Mapping[str, JsonValue] = field(default_factory=lambda: _EMPTY)

    def __post_init__(self) -> None:
        for name in ("created_at", "updated_at"):
            moment = _utc(getattr(self, name), name, TypeError)
            object.__setattr__(self, name, moment)
        object.__setattr__(self, "metadata", _frozen(self.metadata))


@dataclass(frozen=True, slots=True)
class ConversationInfoPage:
    """One page of :meth:`~chatledger.SupportsConversationInfo.find_conversations`.

    Attributes:
        items: The records on this page, newest ``updated_at`` first.
        next_cursor: Pass it (with the same filter) for the next page;
            ``None`` on the last page.
    """

    items: list[ConversationInfo]
    next_cursor: str | None


def validate_owner(owner: object) -> str:
    """Return ``owner`` if it can be stored as an owner, else raise.

    An owner is a ``str`` of 1 to :data:`MAX_OWNER_LENGTH` characters,
    without NUL, encodable as UTF-8. It is kept exactly as given: ``"alice"``,
    ``"Alice"`` and ``"alice "`` are three owners.

    Raises:
        InvalidConversationInfoError: saying what is wrong.
    """
    if not isinstance(owner, str):
        raise InvalidConversationInfoError(
            f"owner must be a str or None, not {type(owner).__name__}"
        )
    if not owner:
        raise InvalidConversationInfoError("owner must not be empty (None clears it)")
    if len(owner) > MAX_OWNER_LENGTH:
        raise InvalidConversationInfoError(
            f"owner is {len(owner)} characters; the limit is {MAX_OWNER_LENGTH}"
        )
    if "\x00" in owner:
        raise InvalidConversationInfoError("owner must not contain NUL")
    if not owner.isascii():
        try:
            owner.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidConversationInfoError(
                "owner cannot be encoded as UTF-8 (lone surrogate)"
            ) from None
    return owner


def _metadata_text(frozen: Mapping[str, JsonValue]) -> str:
    return json.dumps(
        thaw(frozen), ensure_ascii=False, separators=(",", ":"), allow_nan=False
    )


def validate_metadata(metadata: object) -> Mapping[str, JsonValue]:
    """Return a read-only deep copy of ``metadata`` if it can be stored, else raise.

    Metadata is a JSON object: a mapping with ``str`` keys whose values are
    ``str``, ``int``, finite ``float``, ``bool``, ``None``, lists and such
    mappings, nested at most :data:`chatledger.messages.MAX_METADATA_DEPTH`
    levels, at most :data:`MAX_METADATA_BYTES` as compact UTF-8 JSON.

    Raises:
        InvalidConversationInfoError: naming the place that is not JSON, or
            the size.
    """
    frozen = _frozen(metadata)
    size = len(_metadata_text(frozen).encode("utf-8"))
    if size > MAX_METADATA_BYTES:
        raise InvalidConversationInfoError(
            f"metadata is {size} bytes as JSON; the limit is {MAX_METADATA_BYTES}"
        )
    return frozen


@dataclass(frozen=True, slots=True)
class ConversationInfoUpdate:
    """The checked arguments of one ``set_conversation_info`` call.

    Attributes:
        conversation_id: The conversation's id.
        owner: The new owner (``None`` clears it), or :data:`UNSET` to keep it.
        metadata: The new metadata, read-only, replacing the whole of it, or
            :data:`UNSET` to keep it.
        metadata_json: ``metadata`` as compact JSON text, for a store that
            keeps text, or :data:`UNSET`.
    """

    conversation_id: str
    owner: str | Literal[Unset.UNSET] | None
    metadata: Mapping[str, JsonValue] | Literal[Unset.UNSET]
    metadata_json: str | Literal[Unset.UNSET]

    def owner_after(self, current: str | None) -> str | None:
        """The owner after this update of a record whose owner is ``current``."""
        return current if self.owner is UNSET else self.owner

    def metadata_after(
        self, current: Mapping[str, JsonValue]
    ) -> Mapping[str, JsonValue]:
        """The metadata once the update is applied to a record holding ``current``."""
        return current if self.metadata is UNSET else self.metadata


def check_conversation_info(
    conversation_id: object, owner: object = UNSET, metadata: object = UNSET
) -> ConversationInfoUpdate:
    """Check ``set_conversation_info``'s arguments, before any I/O.

    Raises:
        InvalidConversationIdError: the id is not valid.
        InvalidConversationInfoError: the owner or the metadata is not valid
            (see :func:`validate_owner`, :func:`validate_metadata`).
    """
    checked_id = validate_conversation_id(conversation_id)
    new_owner: str | Literal[Unset.UNSET] | None = UNSET
    if owner is None:
        new_owner = None
    elif owner is not UNSET:
        new_owner = validate_owner(owner)
    if metadata is UNSET:
        return ConversationInfoUpdate(checked_id, new_owner, UNSET, UNSET)
    frozen = validate_metadata(metadata)
    return ConversationInfoUpdate(checked_id, new_owner, frozen, _metadata_text(frozen))


def validate_metadata_filter(metadata: object) -> Mapping[str, JsonScalar]:
    """Return a read-only copy of a ``find_conversations`` metadata filter, or raise.

    ``None`` is no filter (``{}``). A filter is a mapping of ``str`` keys to
    JSON scalars: ``str``, ``int``, finite ``float``, ``bool`` or ``None``.

    Raises:
        InvalidConversationInfoError: saying which key or value is refused.
    """
    if metadata is None:
        return MappingProxyType({})
    if not isinstance(metadata, Mapping):
        raise InvalidConversationInfoError(
            f"the metadata filter must be a mapping, not {type(metadata).__name__}"
        )
    checked: dict[str, JsonScalar] = {}
    for key, value in metadata.items():
        if not isinstance(key, str):
            raise InvalidConversationInfoError(
                f"a metadata filter key must be a str, not {type(key).__name__}"
            )
        if value is not None and not isinstance(value, str | int | float):
            raise InvalidConversationInfoError(
                f"the metadata filter's value of {key!r} is a "
                f"{type(value).__name__}; a filter compares JSON scalars only "
                "(str, int, float, bool, None)"
            )
        if isinstance(value, float) and not math.isfinite(value):
            raise InvalidConversationInfoError(
                f"the metadata filter's value of {key!r} is {value!r}, not JSON"
            )
        for text in (key, value):
            if isinstance(text, str) and not text.isascii():
                try:
                    text.encode("utf-8")
                except UnicodeEncodeError:
                    raise InvalidConversationInfoError(
                        f"the metadata filter's {key!r} cannot be encoded as "
                        "UTF-8 (lone surrogate)"
                    ) from None
        checked[key] = value
    return MappingProxyType(checked)


def validate_updated_before(updated_before: object) -> datetime | None:
    """Return ``updated_before`` in UTC (``None`` stays ``None``), or raise.

    Raises:
        InvalidConversationInfoError: it is not a timezone-aware datetime.
    """
    if updated_before is None:
        return None
    return _utc(updated_before, "updated_before", InvalidConversationInfoError)


def _json_equal(stored: object, wanted: JsonScalar) -> bool:
    """Equal as JSON values: ``True`` is not ``1``; ``1`` is ``1.0``."""
    if wanted is None:
        return stored is None
    if isinstance(wanted, bool) or isinstance(stored, bool):
        return (
            isinstance(wanted, bool) and isinstance(stored, bool) and (stored is wanted)
        )
    if isinstance(wanted, str):
        return isinstance(stored, str) and stored == wanted
    return isinstance(stored, int | float) and stored == wanted


def metadata_matches(
    metadata: Mapping[str, object], wanted: Mapping[str, JsonScalar]
) -> bool:
    """True when each key of ``wanted`` is in ``metadata`` with an equal value.

    Values are compared as JSON values: a string only equals the same string
    (case and spaces count), a bool only a bool, a number an equal number
    (``1`` equals ``1.0``), ``None`` only a key present with ``null``.
    """
    for key, value in wanted.items():
        if key not in metadata or not _json_equal(metadata[key], value):
            return False
    return True


class Listed(Protocol):
    """What the listing reads of a record: a :class:`ConversationInfo`, or a
    store's own record with the same attributes."""

    @property
    def id(self) -> str: ...

    @property
    def updated_at(self) -> datetime: ...

    @property
    def owner(self) -> str | None: ...

    @property
    def metadata(self) -> Mapping[str, object]: ...


def listing_key(info: Listed) -> tuple[datetime, str]:
    """The listing's sort key: sort by it, descending (newest first)."""
    return info.updated_at, info.id


def filter_fingerprint(
    owner: str | None,
    metadata: Mapping[str, JsonScalar],
    updated_before: datetime | None,
) -> str:
    """A short digest of a checked filter; the cursor carries it."""
    before = None if updated_before is None else _micros(updated_before)
    # Each scalar is tagged with its type, so that 1 and True differ.
    tagged = sorted(
        (key, type(value).__name__, value) for key, value in metadata.items()
    )
    text = json.dumps([owner, tagged, before], ensure_ascii=False, allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _micros(moment: datetime) -> int:
    return (moment - _EPOCH) // _MICROSECOND


_CURSOR_PREFIX = "cl1."


def _check_digest(body: bytes) -> str:
    return hashlib.sha256(b"chatledger conversations\x00" + body).hexdigest()[:12]


def encode_conversation_cursor(
    updated_at: datetime, conversation_id: str, fingerprint: str
) -> str:
    """The cursor of a page whose last item is ``(updated_at, conversation_id)``.

    ``fingerprint`` is :func:`filter_fingerprint` of the request's filter.
    The time is kept to the microsecond, as given: a store that keeps
    milliseconds gives the millisecond it stored.
    """
    moment = _utc(updated_at, "updated_at", TypeError)
    body = json.dumps(
        [_micros(moment), conversation_id, fingerprint],
        ensure_ascii=False,
        separators=(",", ":"),
    ).encode("utf-8")
    text = base64.urlsafe_b64encode(body).decode("ascii").rstrip("=")
    return f"{_CURSOR_PREFIX}{text}.{_check_digest(body)}"


def decode_conversation_cursor(cursor: str, fingerprint: str) -> tuple[datetime, str]:
    """The ``(updated_at, id)`` a cursor continues after, checked against the filter.

    Raises:
        InvalidPageError: ``cursor`` is not one :func:`encode_conversation_cursor`
            made (another listing's cursor, an altered one, any other text),
            or it was given for another filter than ``fingerprint``'s.
    """
    refused = InvalidPageError(
        f"{cursor[:60]!r} is not a cursor of find_conversations: pass the "
        "next_cursor of a page, as it was given"
    )
    text, dot, digest = cursor.removeprefix(_CURSOR_PREFIX).rpartition(".")
    if not cursor.startswith(_CURSOR_PREFIX) or not dot:
        raise refused
    try:
        body = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        if _check_digest(body) != digest:
            raise refused
        micros, conversation_id, given_for = json.loads(body.decode("utf-8"))
    except (binascii.Error, UnicodeDecodeError, ValueError, TypeError):
        raise refused from None
    if (
        isinstance(micros, bool)
        or not isinstance(micros, int)
        or not isinstance(given_for, str)
    ):
        raise refused
    try:
        validate_conversation_id(conversation_id)
        updated_at = _EPOCH + micros * _MICROSECOND
    except (InvalidConversationIdError, OverflowError):
        raise refused from None
    if given_for != fingerprint:
        raise InvalidPageError(
            "the cursor was given for another filter: pass the same owner, "
            "metadata and updated_before as for the first page"
        )
    return updated_at, conversation_id


@dataclass(frozen=True, slots=True)
class ConversationQuery:
    """A checked ``find_conversations`` request: what matches, from where, how many.

    An adapter reads up to ``limit + 1`` matching records in the listing's
    order, newest first (``ORDER BY updated_at DESC, id DESC``), starting
    strictly after ``after``, and hands them to :meth:`page`.

    Attributes:
        owner: Only this owner's records, or ``None`` for every record.
        metadata: Each key present with an equal value (see
            :func:`metadata_matches`); ``{}`` for no condition.
        updated_before: Only records with ``updated_at`` before it, or ``None``.
        after: The ``(updated_at, id)`` the page continues strictly after
            (``(updated_at, id) < after``), or ``None`` for the first page.
        limit: The page's size.
        fingerprint: The filter's digest, which the page's cursor carries.
    """

    owner: str | None
    metadata: Mapping[str, JsonScalar]
    updated_before: datetime | None
    after: tuple[datetime, str] | None
    limit: int
    fingerprint: str

    def matches(self, info: Listed) -> bool:
        """True when ``info`` is on this page or a later one of the walk."""
        if self.owner is not None and info.owner != self.owner:
            return False
        if self.updated_before is not None and info.updated_at >= self.updated_before:
            return False
        if self.after is not None and listing_key(info) >= self.after:
            return False
        return metadata_matches(info.metadata, self.metadata)

    def page(self, items: Iterable[ConversationInfo]) -> ConversationInfoPage:
        """The page of up to ``limit + 1`` matching records read in listing order.

        One record more than ``limit`` tells that another page follows; the
        cursor then names the last record kept.
        """
        taken: list[ConversationInfo] = []
        more = False
        for item in items:
            if len(taken) == self.limit:
                more = True
                break
            taken.append(item)
        cursor = None
        if more:
            last = taken[-1]
            cursor = encode_conversation_cursor(
                last.updated_at, last.id, self.fingerprint
            )
        return ConversationInfoPage(taken, cursor)


def check_find_conversations(
    *,
    owner: object = None,
    metadata: object = None,
    updated_before: object = None,
    cursor: object = None,
    limit: object = DEFAULT_CONVERSATION_PAGE_SIZE,
) -> ConversationQuery:
    """Check a ``find_conversations`` request, before any I/O.

    Raises:
        InvalidConversationInfoError: ``owner`` is neither ``None`` nor a
            valid owner, ``metadata`` is not a filter of JSON scalars, or
            ``updated_before`` is not a timezone-aware datetime.
        InvalidPageError: ``limit`` is not an int from 1 to
            :data:`chatledger.validation.MAX_PAGE_SIZE`, or ``cursor`` is not
            one a page of the same filter gave.
    """
    checked_owner = None if owner is None else validate_owner(owner)
    wanted = validate_metadata_filter(metadata)
    before = validate_updated_before(updated_before)
    text, checked_limit = validate_page_request(cursor, limit)
    fingerprint = filter_fingerprint(checked_owner, wanted, before)
    after = None if text is None else decode_conversation_cursor(text, fingerprint)
    return ConversationQuery(
        checked_owner, wanted, before, after, checked_limit, fingerprint
    )
