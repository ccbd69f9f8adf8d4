"""``chatledger copy``: every conversation from one store into another."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from chatledger.bulk import BulkSaveError, save_conversations
from chatledger.cli.output import out, progress
from chatledger.cli.stores import open_store
from chatledger.cli.writing import not_written, refuse_in_process, written_before
from chatledger.connect import redact_url
from chatledger.errors import ChatLedgerError
from chatledger.messages import Message

__all__ = ["copy"]


def copy(args: argparse.Namespace) -> int:
    """Copy every conversation, ids and created_at kept; a re-run is safe."""
    refuse_in_process(args.target, "copy")
    source = open_store(args.source, args.options, create=False, closing=args.closing)
    target = open_store(args.target, args.target_options, closing=args.closing)
    ids = sorted(source.find_conversation_ids())
    shown = progress(args, "copying", len(ids))
    read = 0
    copied: list[int] = []

    def conversations() -> Iterator[tuple[str, list[Message]]]:
        nonlocal read
        for cid in ids:
            messages = source.find_by_conversation_id(cid)
            read += 1
            # Gone since the listing (deleted, expired): nothing to copy.
            if messages:
                copied.append(len(messages))
                yield cid, messages

    try:
        # save_all and save_many keep ids and created_at, and replace: a
        # re-run gives the same target, never duplicates.
        save_conversations(
            target, conversations(), on_saved=lambda _: shown.update(read)
        )
    except BulkSaveError as exc:
        raise ChatLedgerError(
            f"{not_written(exc, 'copied to', args.target)}: {exc}; "
            f"{written_before(exc)}"
        ) from exc
    finally:
        shown.close()
    out(
        f"copied {len(copied)} conversations ({sum(copied)} messages) from "
        f"{redact_url(args.source)} to {redact_url(args.target)}"
    )
    return 0
