"""chatledger's export file, read back whole and checked before anything is stored.

Example:
    import io

    from chatledger import Message
    from chatledger.jsonl import export_line, read_export

    text = export_line("c1", Message.user("hi", id="m1")) + "\\n"
    [conversation] = read_export(io.BytesIO(text.encode()), "chats.jsonl")
    conversation.conversation_id, conversation.lines, conversation.messages

One line per message: a JSON object in chatledger's codec
(:mod:`chatledger.codec`) with the ``conversation_id`` it belongs to, as
``chatledger export --format jsonl`` writes it. :func:`read_export` reads the
whole file and applies every check a repository applies before I/O (ids,
messages, a message id repeated within a conversation), so an import can
refuse a bad file before its first write. Every error names the file, the
line and, once known, the conversation. A line is measured before it is
parsed: one nesting deeper than a message can (see
:data:`~chatledger.messages.MAX_METADATA_DEPTH`) is refused as any other
malformed line.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import IO, Any

from chatledger import codec
from chatledger.errors import ChatLedgerError, InvalidMessageError
from chatledger.messages import Message
from chatledger.validation import validate_conversation_id, validate_messages

__all__ = ["ExportFileError", "ImportedConversation", "export_line", "read_export"]


class ExportFileError(ChatLedgerError, ValueError):
    """A file is not an export that can be imported; the message says where."""


@dataclass
class ImportedConversation:
    """One conversation of an export file, checked.

    Attributes:
        conversation_id: Its id.
        messages: Its messages, in file order.
        lines: The line number of each message, in the same order.
    """

    conversation_id: str
    messages: list[Message] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)

    @property
    def where(self) -> str:
        """``lines 3-9`` (or ``line 3``): where it is in the file."""
        first, last = self.lines[0], self.lines[-1]
        return f"line {first}" if first == last else f"lines {first}-{last}"


def export_line(conversation_id: str, message: Message) -> str:
    """The export line of one message (without its newline)."""
    data = {"conversation_id": conversation_id, **codec.to_dict(message)}
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def _decode(raw: bytes, where: str, name: str) -> str:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = "\x00"
    if "\x00" in text:
        raise ExportFileError(
            f"{where}: binary data: {name} is not a chatledger export (the JSON "
            "lines that export --format jsonl writes)"
        )
    return text


def _object(text: str, where: str) -> dict[str, Any]:
    try:
        # The codec's reader measures the depth before parsing: a line nested
        # a million levels is refused here, not by a recursion limit.
        data = codec.loads(text)
    except InvalidMessageError as exc:
        raise ExportFileError(f"{where}: {exc}") from exc
    except ValueError as exc:
        raise ExportFileError(f"{where}: not JSON ({exc})") from exc
    if not isinstance(data, dict) or not isinstance(data.get("conversation_id"), str):
        raise ExportFileError(
            f"{where}: expected a JSON object with a conversation_id "
            "(as written by chatledger export --format jsonl)"
        )
    whole = data.get("messages", data.get("input"))
    if isinstance(whole, list) and "role" not in data:
        raise ExportFileError(
            f"{where}: this line holds a whole conversation in an API's request "
            "shape (export --format openai, openai-responses or anthropic); those "
            "formats are export-only, as they drop message ids and times: import "
            "reads export --format jsonl"
        )
    return data


def read_export(handle: IO[bytes], name: str) -> list[ImportedConversation]:
    """Read and check a whole export file; return its conversations in file order.

    Args:
        handle: The file, opened in binary mode.
        name: How errors name it (a path, or ``<stdin>``).

    Raises:
        ExportFileError: the first problem, as ``name:line: ...``, naming the
            conversation once the line's conversation id is known.
    """
    found: dict[str, ImportedConversation] = {}
    first_line_of: dict[tuple[str, str], int] = {}
    for number, raw in enumerate(handle, start=1):
        where = f"{name}:{number}"
        text = _decode(raw, where, name)
        if not text.strip():
            continue
        data = _object(text, where)
        cid = data.pop("conversation_id")
        try:
            validate_conversation_id(cid)
            message = codec.from_dict(data)
        except ChatLedgerError as exc:
            raise ExportFileError(f"{where}: conversation {cid!r}: {exc}") from exc
        earlier = first_line_of.setdefault((cid, message.id), number)
        if earlier != number:
            raise ExportFileError(
                f"{where}: conversation {cid!r}: message id {message.id!r} repeats "
                f"the one on line {earlier}; a conversation holds each id once"
            )
        conversation = found.setdefault(cid, ImportedConversation(cid))
        conversation.messages.append(message)
        conversation.lines.append(number)
    _check(found.values(), name)
    return list(found.values())


def _check(conversations: Iterable[ImportedConversation], name: str) -> None:
    """The checks a repository runs on a batch, for each conversation at once."""
    for conversation in conversations:
        try:
            validate_messages(conversation.messages)
        except ChatLedgerError as exc:
            raise ExportFileError(
                f"{name}:{conversation.lines[0]}: conversation "
                f"{conversation.conversation_id!r} ({conversation.where}): {exc}"
            ) from exc
