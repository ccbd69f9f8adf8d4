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
    "decode_tag",
    "encode_tag",
    "evicted_key_pattern",
    "meta_key_pattern",
    "parse_evicted_key",
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


def _parse_key(prefix: str, key: str, part: str) -> str | None:
    match = re.fullmatch(re.escape(prefix) + r"\{(" + _TAG + r")\}:" + part, key)
    return None if match is None else decode_tag(match.group(1))


def parse_meta_key(prefix: str, key: str) -> str | None:
    """Return the conversation id of a meta key under ``prefix``, else ``None``."""
    return _parse_key(prefix, key, "meta")


def parse_evicted_key(prefix: str, key: str) -> str | None:
    """Return the conversation id of a record key under ``prefix``, else ``None``."""
    return _parse_key(prefix, key, "evicted")


def parse_removals_key(prefix: str, key: str) -> str | None:
    """Return the conversation id of a receipt key under ``prefix``, else ``None``."""
    return _parse_key(prefix, key, "removals")


@dataclass(frozen=True, slots=True)
class ConversationKeys:
    """The keys of one conversation, all in one hash slot.

    Six hold the conversation (:meth:`all`); the seventh, :attr:`removals`,
    only makes a removal safe to send again.

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
    """

    meta: str
    msgs: str
    turns: str
    system: str
    ids: str
    evicted: str
    removals: str

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
