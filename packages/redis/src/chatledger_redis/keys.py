"""The key layout: one hash tag per conversation, ids encoded so nothing escapes it.

Example:
    from chatledger_redis.keys import ConversationKeys, validate_key_prefix

    prefix = validate_key_prefix("chatledger:")
    keys = ConversationKeys.of(prefix, "user-42")
    keys.meta   # 'chatledger:{dXNlci00Mg}:meta'

Every key of a conversation is ``<prefix>{<tag>}:<part>``, where ``<tag>`` is
the unpadded base64url encoding of the id's UTF-8 bytes. The tag only holds
``A-Z a-z 0-9 - _``, so an id can never close the braces, start a glob, or make
two conversations share a key; and since Redis Cluster hashes only what is
inside the first ``{...}``, every key of one conversation lives in one slot, so
one script can touch them all.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass

from chatledger.adapters import (
    InvalidNameError,
    validate_conversation_id,
)

__all__ = [
    "KEY_PREFIX_PATTERN",
    "ConversationKeys",
    "IndexKeys",
    "decode_tag",
    "encode_tag",
    "evicted_key_pattern",
    "info_key_pattern",
    "meta_key_pattern",
    "parse_evicted_key",
    "parse_info_key",
    "parse_meta_key",
    "parse_removals_key",
    "removals_key_pattern",
    "validate_key_prefix",
]

#: What a key prefix may hold: no braces (hash tags), no glob characters.
KEY_PREFIX_PATTERN = re.compile(r"[A-Za-z0-9_:.-]+")

_TAG = r"[A-Za-z0-9_-]+"


def validate_key_prefix(prefix: object) -> str:
    """Return ``prefix`` if it fully matches ``[A-Za-z0-9_:.-]+``, else raise.

    Raises:
        InvalidNameError: for any other value, before any I/O.
    """
    if not isinstance(prefix, str) or not KEY_PREFIX_PATTERN.fullmatch(prefix):
        raise InvalidNameError(
            f"key prefix {prefix!r} is not allowed; use only letters, digits and "
            "'_', ':', '.', '-' (at least one character)"
        )
    return prefix


def encode_tag(conversation_id: str) -> str:
    """Return the hash tag of a (validated) conversation id."""
    encoded = base64.urlsafe_b64encode(conversation_id.encode("utf-8"))
    return encoded.rstrip(b"=").decode("ascii")


def decode_tag(tag: str) -> str | None:
    """Return the conversation id of a hash tag, or ``None`` if it is not one."""
    try:
        raw = base64.urlsafe_b64decode(tag + "=" * (-len(tag) % 4))
        conversation_id = validate_conversation_id(raw.decode("utf-8"))
    except (binascii.Error, ValueError):
        return None
    # Only the canonical encoding names a conversation: a foreign key that
    # decodes by accident under a second spelling is not listed.
    return conversation_id if encode_tag(conversation_id) == tag else None


def meta_key_pattern(prefix: str) -> str:
    """Return the SCAN pattern of every meta key under ``prefix``.

    The prefix allowlist holds no glob character, so it needs no escaping.
    """
    return f"{prefix}{{*}}:meta"


def evicted_key_pattern(prefix: str) -> str:
    """Return the SCAN pattern of every evicted-id record under ``prefix``."""
    return f"{prefix}{{*}}:evicted"


def removals_key_pattern(prefix: str) -> str:
    """Return the SCAN pattern of every removal receipt under ``prefix``."""
    return f"{prefix}{{*}}:removals"


def info_key_pattern(prefix: str) -> str:
    """Return the SCAN pattern of every conversation record under ``prefix``."""
    return f"{prefix}{{*}}:info"


def _parse_key(prefix: str, key: str, part: str) -> str | None:
    match = re.fullmatch(re.escape(prefix) + r"\{(" + _TAG + r")\}:" + part, key)
    return None if match is None else decode_tag(match.group(1))


def parse_meta_key(prefix: str, key: str) -> str | None:
    """Return the conversation id of a meta key under ``prefix``, else ``None``."""
    return _parse_key(prefix, key, "meta")


def parse_evicted_key(prefix: str, key: str) -> str | None:
    """Return the conversation id of a record key under ``prefix``, else ``None``."""
    return _parse_key(prefix, key, "evicted")


def parse_info_key(prefix: str, key: str) -> str | None:
    """Return the conversation id of a record key under ``prefix``, else ``None``."""
    return _parse_key(prefix, key, "info")


def parse_removals_key(prefix: str, key: str) -> str | None:
    """Return the conversation id of a receipt key under ``prefix``, else ``None``."""
    return _parse_key(prefix, key, "removals")


@dataclass(frozen=True, slots=True)
class ConversationKeys:
    """The keys of one conversation, all in one hash slot.

    Six hold the conversation (:meth:`all`); the seventh, :attr:`removals`,
    only makes a removal safe to send again; the eighth, :attr:`info`, is its
    record (``SupportsConversationInfo``).

    Attributes:
        meta: Hash: ``next`` sequence number, ``ctr`` (the counter the stored
            sizes were measured with, ``""`` when unknown), ``tsize`` and
            ``ssize`` (stored sizes of the non-system messages and of the
            current system set) and
            ``ver`` (a token changed by every write), ``exp`` (``"1"`` when
            the last write set an expiry, ``"0"`` when it did not), ``hn``
            (the ``ver`` of the last append that left a turn list whose head
            is not a tool response; absent in data written before it existed,
            which makes the next append read the head marker), ``sb`` (the
            batch of the current system set: the sequence number of the
            first message of the latest append that stored a system message;
            absent means 0, the batch ``save_all`` writes), ``sized`` (set
            by a log append whose counter was not ``ctr``: only the markers
            from this sequence number on carry sizes under ``ctr``, and
            ``tsize`` and ``ssize`` mean nothing until a re-measure drops it).
        msgs: Hash: sequence number -> the message's codec JSON: the log, or
            what a window left of it.
        turns: List of the non-system markers, oldest first.
        system: List of the system markers, oldest first: the current system
            set (from ``sb`` on) and, before it, the system messages a log
            append superseded (a window append deletes them instead).
        ids: Hash: message id -> sequence number (makes retries no-ops),
            and message id -> ``""`` for each id of the evicted-id record, so
            the one probe that finds a stored id finds an evicted one too.
        evicted: List: the evicted-id record (:mod:`chatledger.evicted_ids`),
            the ids the window took out, oldest first, at least the newest
            :data:`~chatledger.evicted_ids.EVICTED_IDS_KEPT` and at most
            that plus :data:`~chatledger.evicted_ids.EVICTED_IDS_TRIM_STEP`
            (:func:`~chatledger.evicted_ids.list_trim_count`). It outlives a
            window that empties the conversation (``meta`` is gone then, so
            the conversation is not listed) and goes with ``save_all``,
            delete and expiry like the other keys.
        removals: Hash: the receipts of the conversation's latest removals
            (:data:`~chatledger_redis.scripts.REMOVE`), so that a removal sent
            again (a client's retry after a lost reply) answers what it
            removed the first time and removes nothing more. Each removal's
            write token maps to its answer, at most
            :data:`~chatledger_redis.steps.REMOVAL_RECEIPTS` of them: ``@<k>``
            names the token in ring slot ``k``, ``#`` counts the removals.
            It has a deadline of its own,
            :data:`~chatledger_redis.steps.REMOVAL_RECEIPT_MS` after the last
            removal, whatever the conversation's TTL; it outlives a removal
            that empties the conversation and ``save_all``, and goes with
            delete.
        info: Hash: the conversation's record: ``c`` and ``u`` (created_at
            and updated_at, epoch milliseconds of the server's clock),
            ``v`` (the record's version, epoch microseconds of its last
            write, which orders the listing index's updates), ``o`` (the
            owner; absent for none) and ``m`` (the metadata as compact JSON
            text; absent for ``{}``). The message count is ``HLEN`` of
            :attr:`msgs`. It shares the conversation's deadline, outlives a
            window or a removal that empties the conversation (a record
            without messages), goes with delete and ``save_all(id, [])``, and
            is not one of :meth:`all` (nor :meth:`every`): the scripts take it
            after them.
    """

    meta: str
    msgs: str
    turns: str
    system: str
    ids: str
    evicted: str
    removals: str
    info: str

    @classmethod
    def of(cls, prefix: str, conversation_id: str) -> ConversationKeys:
        """Build the keys of ``conversation_id`` under a validated ``prefix``."""
        base = f"{prefix}{{{encode_tag(conversation_id)}}}:"
        return cls(
            base + "meta",
            base + "msgs",
            base + "turns",
            base + "system",
            base + "ids",
            base + "evicted",
            base + "removals",
            base + "info",
        )

    def all(self) -> list[str]:
        """Return the six keys of the conversation, in the order the scripts take them.

        They share the conversation's deadline; :attr:`removals` is not one
        of them (see :meth:`every`).
        """
        return [
            self.meta,
            self.msgs,
            self.turns,
            self.system,
            self.ids,
            self.evicted,
        ]

    def every(self) -> list[str]:
        """Return every key: :meth:`all`, then :attr:`removals` (``REMOVE``'s keys)."""
        return [*self.all(), self.removals]


@dataclass(frozen=True, slots=True)
class IndexKeys:
    """The listing index of the conversation records under one key prefix.

    Its three keys share the hash tag ``{index:<prefix>}``: a ``:`` never
    occurs in a conversation's tag (base64url), so no conversation's keys
    can be these, and each key prefix has an index of its own. Being one
    slot, one script updates the three together, on Redis Cluster too; but
    not in the script that writes a conversation, whose keys are in another
    slot (see :data:`chatledger_redis.scripts.INDEX`).

    Attributes:
        updated: Sorted set, every score 0, ordered by member:
            ``<updated_at ms, 15 digits>\\0<id>``; read backwards
            (``ZREVRANGEBYLEX``) it is the listing of every record, newest
            first, ties by id descending (UTF-8 byte order is code point
            order).
        owners: Sorted set, every score 0:
            ``<owner>\\0<updated_at ms, 15 digits>\\0<id>`` for each record
            with an owner; an owner's listing is the range of members
            starting ``<owner>\\0`` (an owner holds no NUL), so it reads that
            owner's entries only, however many others the set holds.
        entries: Hash: id -> ``<version>:<updated_at ms>[:<owner>]``, what
            the two sets hold for the id, so an update removes exactly the
            members it replaces, and applies only when its version is newer.
    """

    updated: str
    owners: str
    entries: str

    @classmethod
    def of(cls, prefix: str) -> IndexKeys:
        """Build the index keys of a validated ``prefix``."""
        base = f"{prefix}{{index:{prefix}}}:"
        return cls(base + "updated", base + "owners", base + "entries")

    def all(self) -> list[str]:
        """Return the three keys, in the order the scripts take them."""
        return [self.updated, self.owners, self.entries]
