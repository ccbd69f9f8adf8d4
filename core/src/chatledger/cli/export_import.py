"""``chatledger export`` and ``import``: conversations as JSON lines, out and in.

``import --from FORMAT`` moves in from another library's store instead
(:mod:`chatledger.cli.move_in`).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import IO, Any

from chatledger.bulk import BulkSaveError, save_conversations
from chatledger.cli.errors import UsageError
from chatledger.cli.move_in import move_in
from chatledger.cli.output import counted, out, progress
from chatledger.cli.stores import open_store, read_conversation
from chatledger.cli.writing import not_written, refuse_in_process, written_before
from chatledger.connect import redact_url
from chatledger.convert import (
    UnsupportedContentError,
    to_anthropic,
    to_openai,
    to_openai_responses,
)
from chatledger.errors import ChatLedgerError
from chatledger.jsonl import export_line, read_export
from chatledger.messages import Message
from chatledger.validation import validate_conversation_id

__all__ = ["export", "import_"]


def _export_lines(
    fmt: str, conversations: Iterable[tuple[str, list[Message]]]
) -> Iterator[str]:
    for cid, messages in conversations:
        try:
            if fmt == "jsonl":
                for message in messages:
                    yield export_line(cid, message)
            elif fmt == "openai":
                yield _json({"conversation_id": cid, "messages": to_openai(messages)})
            elif fmt == "openai-responses":
                items = to_openai_responses(messages)
                yield _json({"conversation_id": cid, "input": items})
            else:
                yield _json({"conversation_id": cid, **to_anthropic(messages)})
        except UnsupportedContentError as exc:
            raise ChatLedgerError(f"conversation {cid!r}: {exc}") from exc


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _check_output(path: str | None) -> None:
    """Refuse an ``--output`` that cannot be written, before the store is read."""
    if path is None or path == "-":
        return
    folder = Path(path).parent
    if not folder.is_dir():
        raise UsageError(
            f"--output {path!r}: the folder {str(folder)!r} does not exist"
        )
    if Path(path).is_dir():
        raise UsageError(f"--output {path!r} is a folder, not a file")


@contextmanager
def _output(path: str | None) -> Iterator[IO[str]]:
    if path is None or path == "-":
        yield sys.stdout
        return
    with ExitStack() as stack:
        try:
            handle = stack.enter_context(
                open(path, "w", encoding="utf-8", newline="\n")
            )
        except OSError as exc:
            raise UsageError(
                f"cannot write --output {path!r}: {_reason(exc)}"
            ) from None
        yield handle


def _reason(error: OSError) -> str:
    """``no such file or directory``: the system's words, without ``[Errno 2]``."""
    return (error.strerror or str(error)).lower()


def export(args: argparse.Namespace) -> int:
    """Write the conversations (all, or those named) in the format asked for."""
    for cid in args.ids:
        validate_conversation_id(cid)
    _check_output(args.output)
    repository = open_store(args.url, args.options, create=False, closing=args.closing)
    conversations: Iterable[tuple[str, list[Message]]]
    if args.ids:
        # Named conversations are all checked before the first line is written.
        conversations = [
            (c, read_conversation(repository, args.url, c)) for c in args.ids
        ]
        total = len(args.ids)
    else:
        ids = sorted(repository.find_conversation_ids())
        conversations = ((c, repository.find_by_conversation_id(c)) for c in ids)
        total = len(ids)
    shown = progress(args, "exporting", total)
    try:
        with _output(args.output) as handle:
            for line in _export_lines(args.format, counted(conversations, shown)):
                handle.write(line + "\n")
    finally:
        shown.close()
    return 0


def _sort_positionals(args: argparse.Namespace) -> bool:
    """Name ``import``'s two arguments by ``--from``; whether it moves in."""
    if args.source_format is None:
        args.url, args.file = args.first, args.second
    elif args.source_format == "jsonl":
        args.file, args.url = args.first, args.second
    else:
        args.source, args.target = args.first, args.second
        return True
    given = [
        name
        for name, value in [
            ("--table", args.table is not None),
            ("--source-timezone", args.source_timezone != "UTC"),
            ("--drop-uncarriable", args.drop_uncarriable),
        ]
        if value
    ]
    if given:
        raise UsageError(
            f"{', '.join(given)}: only with --from FORMAT, a store other than a "
            "jsonl export"
        )
    return False


def import_(args: argparse.Namespace) -> int:
    """Read a jsonl export, each conversation replacing the stored one; or move in.

    With ``--from FORMAT`` (other than jsonl), :func:`chatledger.cli.move_in.move_in`.
    """
    if _sort_positionals(args):
        return move_in(args)
    refuse_in_process(args.url, "import")
    if args.file == "-":
        conversations = read_export(sys.stdin.buffer, "<stdin>")
        name = "<stdin>"
    else:
        with ExitStack() as stack:
            try:
                handle = stack.enter_context(open(args.file, "rb"))
            except OSError as exc:
                raise UsageError(f"cannot read {args.file!r}: {_reason(exc)}") from None
            conversations = read_export(handle, args.file)
        name = args.file
    # The whole file is checked: from here on only the store can refuse.
    repository = open_store(args.url, args.options, closing=args.closing)
    shown = progress(args, "importing", len(conversations))
    try:
        save_conversations(
            repository,
            ((c.conversation_id, c.messages) for c in conversations),
            on_saved=shown.update,
        )
    except BulkSaveError as exc:
        failed = conversations[exc.saved : exc.saved + len(exc.conversation_ids)]
        first, last = failed[0].lines[0], failed[-1].lines[-1]
        lines = f"line {first}" if first == last else f"lines {first}-{last}"
        raise ChatLedgerError(
            f"{name}:{first}: {not_written(exc, 'imported into', args.url)} "
            f"({lines}): {exc}; {written_before(exc)}"
        ) from exc
    finally:
        shown.close()
    total = sum(len(c.messages) for c in conversations)
    out(
        f"imported {total} messages in {len(conversations)} conversations "
        f"into {redact_url(args.url)}"
    )
    return 0
