"""What a request shape carries beyond a message's fields, kept in its metadata.

The converters of :mod:`chatledger.convert` keep what a shape holds and a
:class:`~chatledger.Message` has no field for (an image's ``detail``, a
developer role, Anthropic's ``cache_control``) under a reserved metadata key:
:data:`OPENAI_KEY` for both OpenAI shapes, :data:`ANTHROPIC_KEY` for
Anthropic's. Its value is a dict of the message's own fields, plus ``media``,
``calls`` and ``outputs``: one dict per media, tool call and tool response, in
their order. Each API's module says which keys it keeps (:class:`KeptKeys`);
:mod:`chatledger.convert` lists them for its users.

On the way out a converter reads its key through :class:`Kept`, which refuses
a key it does not know and a value of the wrong type, naming the place
(``messages[2].metadata['openai']['media'][0]['detail']``), so a typo or a key
written by something else is never sent, nor skipped, unnoticed.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from chatledger.codec import thaw
from chatledger.convert_shared import UnsupportedContentError, is_empty
from chatledger.messages import Message, _shown

__all__ = [
    "ANTHROPIC_KEY",
    "OPENAI_KEY",
    "PART_SEPARATOR",
    "Kept",
    "KeptKeys",
    "joined",
    "split",
]

#: The metadata key of what the OpenAI shapes carry beyond a message's fields.
OPENAI_KEY = "openai"
#: The metadata key of what the Anthropic shape carries beyond them.
ANTHROPIC_KEY = "anthropic"

#: How the text parts of a content list are joined into ``content``.
PART_SEPARATOR = "\n\n"


class KeptKeys:
    """The keys one reserved metadata key may hold, per level."""

    def __init__(
        self,
        message: set[str],
        media: set[str],
        calls: set[str],
        outputs: set[str],
    ) -> None:
        self.message = frozenset(message) | {"media", "calls", "outputs"}
        self.entries = {"media": media, "calls": calls, "outputs": outputs}


class Kept:
    """The extras a message keeps under a reserved key, checked as they are read.

    Args:
        fields: The dict found at ``where`` (empty when there is none).
        where: Its path, for errors.
    """

    def __init__(self, fields: Mapping[str, Any], where: str) -> None:
        self.fields = fields
        self.where = where

    @classmethod
    def of(cls, message: Message, key: str, keys: KeptKeys, where: str) -> Kept:
        """The extras ``message`` keeps under ``key``; ``where`` names the message.

        Raises:
            UnsupportedContentError: the value is not a dict, holds a key
                ``keys`` does not list, or a ``media``, ``calls`` or
                ``outputs`` list that is not one dict per item of the
                message's list.
        """
        value = message.metadata.get(key)
        if value is None:
            return NOTHING_KEPT
        where = f"{where}.metadata[{key!r}]"
        if not isinstance(value, Mapping):
            raise UnsupportedContentError(
                f"{where} is reserved for what the {key} request shapes carry "
                f"beyond a message's fields, and must be a dict"
            )
        _known(value, keys.message, where, key)
        counts = {
            "media": len(message.media),
            "calls": len(message.tool_calls),
            "outputs": len(message.tool_responses),
        }
        for name, known in keys.entries.items():
            entries = value.get(name)
            if entries is None:
                continue
            if not isinstance(entries, Sequence) or isinstance(entries, str):
                raise UnsupportedContentError(
                    f"{where}[{name!r}] must be a list, one dict per item"
                )
            if len(entries) != counts[name]:
                raise UnsupportedContentError(
                    f"{where}[{name!r}] holds {len(entries)} entries for "
                    f"{counts[name]} {_ITEMS[name]}; it must hold one each"
                )
            for index, entry in enumerate(entries):
                entry_where = f"{where}[{name!r}][{index}]"
                if not isinstance(entry, Mapping):
                    raise UnsupportedContentError(f"{entry_where} must be a dict")
                _known(entry, known, entry_where, key)
        return cls(value, where)

    def entry(self, name: str, index: int) -> Kept:
        """The extras of item ``index`` of the message's ``media``, ``calls`` or
        ``outputs`` (empty when none are kept)."""
        entries = self.fields.get(name)
        if entries is None:
            return NOTHING_KEPT
        return Kept(entries[index], f"{self.where}[{name!r}][{index}]")

    def __contains__(self, name: str) -> bool:
        return self.fields.get(name) is not None

    def text(self, name: str) -> str | None:
        """The ``str`` kept under ``name``, or ``None``."""
        value = self.fields.get(name)
        if value is not None and not isinstance(value, str):
            raise UnsupportedContentError(
                f"{self.where}[{name!r}] must be a str, not {type(value).__name__}"
            )
        return value

    def value(self, name: str) -> Any:
        """The JSON value kept under ``name`` as plain values, or ``None``."""
        value = self.fields.get(name)
        return None if value is None else thaw(value)

    def sequence(self, name: str) -> list[Any] | None:
        """The list kept under ``name`` as plain values, or ``None``."""
        value = self.fields.get(name)
        if value is None:
            return None
        if not isinstance(value, Sequence) or isinstance(value, str):
            raise UnsupportedContentError(
                f"{self.where}[{name!r}] must be a list, not {type(value).__name__}"
            )
        listed: list[Any] = thaw(value)
        return listed

    def copy(self, names: Sequence[str]) -> dict[str, Any]:
        """The fields ``names`` that are kept, as plain values, to write back."""
        return {
            name: thaw(self.fields[name])
            for name in names
            if self.fields.get(name) is not None
        }

    def empty(self, names: Collection[str]) -> dict[str, Any]:
        """The fields of ``names`` that came holding nothing, kept under ``"empty"``.

        They are written back as they came (``None``, ``""``, ``[]`` or ``{}``).
        """
        value = self.fields.get("empty")
        if value is None:
            return {}
        where = f"{self.where}['empty']"
        if not isinstance(value, Mapping):
            raise UnsupportedContentError(f"{where} must be a dict")
        given: dict[str, Any] = thaw(value)
        for name, held in given.items():
            if name not in names:
                raise UnsupportedContentError(
                    f"{where}[{name!r}] is not a field written here (these are "
                    f"{', '.join(sorted(names))})"
                )
            if not is_empty(held):
                raise UnsupportedContentError(
                    f"{where}[{name!r}] must hold nothing (None, '', [] or {{}})"
                )
        return given

    def absent(self, names: Collection[str]) -> frozenset[str]:
        """The fields of ``names`` that came missing, kept under ``"absent"``.

        They are left out where the writer would write them.
        """
        value = self.sequence("absent")
        if value is None:
            return frozenset()
        for name in value:
            if name not in names:
                raise UnsupportedContentError(
                    f"{self.where}['absent'] holds {_shown(name)}; it may name "
                    f"{', '.join(sorted(names))}"
                )
        return frozenset(value)

    def flag(self, name: str) -> bool:
        """Whether ``True`` is kept under ``name`` (nothing kept is ``False``)."""
        value = self.fields.get(name)
        if value is None:
            return False
        if value is not True:
            raise UnsupportedContentError(
                f"{self.where}[{name!r}] is kept only as true, not {_shown(value)}"
            )
        return True

    def parts(self, name: str, text: str | None) -> list[str] | None:
        """``text`` cut into the text parts whose lengths are kept under ``name``.

        ``None`` when no lengths are kept. The lengths must describe ``text``
        exactly: the parts joined by a blank line, as :func:`joined` joins them.
        """
        lengths = self.fields.get(name)
        if lengths is None:
            return None
        where = f"{self.where}[{name!r}]"
        if (
            not isinstance(lengths, Sequence)
            or isinstance(lengths, str)
            or not all(type(n) is int and n >= 0 for n in lengths)
        ):
            raise UnsupportedContentError(
                f"{where} must be a list of text part lengths (ints, 0 or more)"
            )
        cut = split(text or "", list(lengths))
        if cut is None or (text is None and lengths):
            raise UnsupportedContentError(
                f"{where}: the text parts {list(lengths)} do not match the text "
                f"of {len(text or '')} characters; the parts must be the text "
                "cut where a blank line joins them"
            )
        return cut


#: What a message without the key keeps: nothing, which no check can refuse,
#: so one instance serves every such message.
NOTHING_KEPT = Kept({}, "")

_ITEMS = {"media": "media", "calls": "tool calls", "outputs": "tool responses"}


def _known(
    fields: Mapping[str, Any], known: frozenset[str] | set[str], where: str, key: str
) -> None:
    for name in fields:
        if name not in known:
            raise UnsupportedContentError(
                f"{where}[{name!r}] is not a field chatledger's {key} converters "
                f"keep (the key {key!r} is reserved for them; they keep "
                f"{', '.join(sorted(known))})"
            )


def joined(texts: Sequence[str]) -> str | None:
    """Text parts as one text, joined by a blank line; ``None`` for no parts."""
    return PART_SEPARATOR.join(texts) if texts else None


def split(text: str, lengths: list[int]) -> list[str] | None:
    """``text`` cut into parts of ``lengths`` joined by a blank line, else ``None``."""
    if not lengths:
        return [] if not text else None
    if sum(lengths) + len(PART_SEPARATOR) * (len(lengths) - 1) != len(text):
        return None
    parts = []
    start = 0
    for index, length in enumerate(lengths):
        if index:
            if not text.startswith(PART_SEPARATOR, start):
                return None
            start += len(PART_SEPARATOR)
        parts.append(text[start : start + length])
        start += length
    return parts
