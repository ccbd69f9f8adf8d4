"""``chatledger ls``, ``show`` and ``rm``: the conversations of one store."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from chatledger.cli.output import err, out
from chatledger.cli.stores import open_store, read_conversation
from chatledger.connect import redact_url
from chatledger.demo import describe
from chatledger.errors import ChatLedgerError
from chatledger.repository import (
    ChatMemoryRepository,
    SupportsConversationPages,
    SupportsCountMessages,
)
from chatledger.validation import validate_conversation_id

__all__ = ["ls", "rm", "show"]

#: Conversation ids ``ls`` asks for at a time, where the store can page.
_LS_PAGE = 1000


def _conversation_ids(repository: ChatMemoryRepository) -> Iterator[str]:
    """Every conversation id, a page at a time where the store can page."""
    if not isinstance(repository, SupportsConversationPages):
        yield from sorted(repository.find_conversation_ids())
        return
    cursor = None
    while True:
        page = repository.find_conversation_ids_page(cursor, _LS_PAGE)
        yield from page.ids
        if page.next_cursor is None:
            return
        cursor = page.next_cursor


def _nothing_stored(repository: ChatMemoryRepository, url: str) -> str:
    """Where ``ls`` looked and found nothing, so that a mistyped prefix shows."""
    prefix = getattr(repository, "key_prefix", None)
    under = f"under the key prefix {prefix!r} " if isinstance(prefix, str) else ""
    return f"no conversation is stored {under}in {redact_url(url)}"


def ls(args: argparse.Namespace) -> int:
    """List the conversation ids, with counts and times where asked.

    A store that holds nothing is no error, but stderr says where the command
    looked: a key space that exists once written to (a Redis key prefix) has
    no other way to tell a typo apart from an empty store.
    """
    repository = open_store(args.url, args.options, create=False, closing=args.closing)
    counting = isinstance(repository, SupportsCountMessages)
    listed = 0
    for cid in _conversation_ids(repository):
        listed += 1
        if not (args.long or args.times):
            out(cid)
            continue
        if args.times or not counting:
            messages = repository.find_by_conversation_id(cid)
            count = len(messages)
        else:
            count = repository.count_messages(cid)  # type: ignore[attr-defined]
        if not args.times:
            out(f"{cid}\t{count}")
            continue
        first = messages[0].created_at if messages else None
        last = messages[-1].created_at if messages else None
        out(
            f"{cid}\t{count}\t"
            f"{first.isoformat(timespec='seconds') if first else '-'}\t"
            f"{last.isoformat(timespec='seconds') if last else '-'}"
        )
    if not listed:
        err(_nothing_stored(repository, args.url))
    return 0


def show(args: argparse.Namespace) -> int:
    """Print one conversation, a message per line."""
    validate_conversation_id(args.id)
    repository = open_store(args.url, args.options, create=False, closing=args.closing)
    messages = read_conversation(repository, args.url, args.id)
    for number, message in enumerate(messages, start=1):
        stamp = (
            message.created_at.isoformat(timespec="milliseconds")
            if message.created_at
            else "-"
        )
        lines = describe(message)
        out(f"{number:>4}  {stamp}  {lines[0]}")
        for line in lines[1:]:
            out(f"{'':>4}  {'':<{len(stamp)}}  {line}")
    return 0


def rm(args: argparse.Namespace) -> int:
    """Delete the conversations named; all must exist unless ``--force``."""
    for cid in args.ids:
        validate_conversation_id(cid)
    # Nothing to remove from a store that does not exist: do not create it.
    repository = open_store(args.url, args.options, create=False, closing=args.closing)
    known = set(repository.find_conversation_ids())
    missing = [cid for cid in args.ids if cid not in known]
    if missing and not args.force:
        raise ChatLedgerError(
            f"no conversation {missing[0]!r} in {redact_url(args.url)} "
            "(nothing removed; --force ignores missing ids)"
        )
    for cid in args.ids:
        repository.delete_by_conversation_id(cid)
        if cid in known:
            out(f"removed {cid}")
    return 0
