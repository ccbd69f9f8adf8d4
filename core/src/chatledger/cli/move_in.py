"""``chatledger import --from FORMAT SOURCE TARGET_URL``: moving in from elsewhere."""

from __future__ import annotations

import argparse
from datetime import UTC, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from chatledger.cli.errors import UsageError
from chatledger.cli.output import err, out, progress
from chatledger.cli.stores import open_store
from chatledger.cli.writing import refuse_in_process
from chatledger.connect import redact_url
from chatledger.errors import ChatLedgerError
from chatledger.move_in.formats import FORMATS
from chatledger.move_in.landing import Landing, land
from chatledger.repository import SupportsLog

__all__ = ["move_in", "source_zone"]


def source_zone(name: str) -> tzinfo:
    """The zone ``--source-timezone`` names (``UTC`` or an IANA name)."""
    if name.upper() == "UTC":
        return UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise UsageError(
            f"--source-timezone {name!r} is not a time zone (UTC, or an IANA name "
            "such as Europe/Rome)"
        ) from None


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _report(landing: Landing, dropping: bool) -> list[str]:
    """The lines that say what of one conversation was not carried."""
    head = f"conversation {landing.conversation_id!r}"
    if landing.refused is not None:
        lines = [f"{head}: not imported: {landing.refused}"]
    elif landing.uncarriable:
        left = _plural(len(landing.uncarriable), "row")
        what = "left out" if dropping else "not carried"
        lines = [f"{head}: imported, {left} {what}:"]
    else:
        return []
    lines += [f"  {problem}" for problem in landing.uncarriable]
    return lines


def move_in(args: argparse.Namespace) -> int:
    """Append each conversation of the source to its log in the target.

    Exit code 1 when a conversation was not imported or a row not carried,
    each said on stderr; the rest is written all the same.
    """
    source_format = FORMATS[args.source_format]
    refuse_in_process(args.target, "import")
    zone = source_zone(args.source_timezone)
    reader = source_format.reader(args.source, args.table, zone)
    args.closing.append(reader)
    target = open_store(args.target, args.options, closing=args.closing)
    if not isinstance(target, SupportsLog):
        raise UsageError(
            f"{redact_url(args.target)} does not keep logs ({type(target).__name__} "
            "has no append_to_log): import --from appends each conversation to "
            "its log"
        )
    ids = reader.conversation_ids()
    shown = progress(args, "importing", len(ids))
    landings: list[Landing] = []
    try:
        for done, conversation_id in enumerate(ids, start=1):
            conversation = reader.read(conversation_id)
            try:
                landing = land(
                    target, conversation, drop_uncarriable=args.drop_uncarriable
                )
            except Exception as exc:
                text = str(exc) or type(exc).__name__
                if not isinstance(exc, ChatLedgerError):
                    text = f"{type(exc).__name__}: {text}"
                raise ChatLedgerError(
                    f"conversation {conversation_id!r} was not imported into "
                    f"{redact_url(args.target)}: {text}; the "
                    f"{_plural(done - 1, 'conversation')} before it "
                    f"{'was' if done == 2 else 'were'}"
                ) from exc
            landings.append(landing)
            shown.update(done)
    finally:
        shown.close()
        for landing in landings:
            for line in _report(landing, args.drop_uncarriable):
                err(line)
    added = sum(landing.added for landing in landings)
    written = [x for x in landings if x.refused is None and x.added]
    unchanged = [x for x in landings if x.refused is None and not x.added]
    refused = [x for x in landings if x.refused is not None]
    rows = sum(len(x.uncarriable) for x in landings if x.refused is None)
    summary = (
        f"imported {_plural(added, 'message')} in "
        f"{_plural(len(written), 'conversation')} from {reader.where} into "
        f"{redact_url(args.target)}"
    )
    if unchanged:
        summary += f"; {_plural(len(unchanged), 'conversation')} already there"
    out(summary)
    problems = []
    if refused:
        problems.append(f"{_plural(len(refused), 'conversation')} not imported")
    if rows:
        verb = "left out" if args.drop_uncarriable else "not carried"
        problems.append(f"{_plural(rows, 'row')} {verb}")
    if problems:
        raise ChatLedgerError(f"{' and '.join(problems)} (said above)")
    return 0
