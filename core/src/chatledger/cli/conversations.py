"""``chatledger ls``, ``show`` and ``rm``: the conversations of one store."""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Iterator

from chatledger.cli.errors import UsageError
from chatledger.cli.output import err, out
from chatledger.cli.stores import open_store, read_conversation
from chatledger.codec import thaw
from chatledger.connect import redact_url
from chatledger.conversation_info import ConversationInfo
from chatledger.demo import describe
from chatledger.errors import ChatLedgerError
from chatledger.messages import JsonValue, Message
from chatledger.repository import (
    ChatMemoryRepository,
    SupportsConversationInfo,
    SupportsConversationPages,
    SupportsCountMessages,
    SupportsLog,
)
from chatledger.validation import validate_conversation_id

__all__ = ["ls", "rm", "show"]

#: Conversation ids ``ls`` asks for at a time, where the store can page.
_LS_PAGE = 1000
#: Messages ``show --all`` reads at a time from a log.
_SHOW_PAGE = 500
#: Messages ``show`` prints without ``--all``: the newest.
DEFAULT_SHOWN = 50


def _page_size(limit: int | None, listed: int) -> int:
    """How many to ask for next: a page, or what is left of ``--limit``."""
    return _LS_PAGE if limit is None else min(_LS_PAGE, limit - listed)


def _conversation_ids(
    repository: ChatMemoryRepository, limit: int | None
) -> Iterator[str]:
    """Conversation ids in id order, a page at a time where the store can page."""
    if not isinstance(repository, SupportsConversationPages):
        yield from sorted(repository.find_conversation_ids())[:limit]
        return
    cursor = None
    listed = 0
    while True:
        page = repository.find_conversation_ids_page(cursor, _page_size(limit, listed))
        yield from page.ids
        listed += len(page.ids)
        if page.next_cursor is None or listed == limit:
            return
        cursor = page.next_cursor


def _records(
    repository: SupportsConversationInfo, owner: str | None, limit: int | None
) -> Iterator[ConversationInfo]:
    """The records, newest first, a page at a time."""
    cursor = None
    listed = 0
    while True:
        page = repository.find_conversations(
            owner=owner, cursor=cursor, limit=_page_size(limit, listed)
        )
        yield from page.items
        listed += len(page.items)
        if page.next_cursor is None or listed == limit:
            return
        cursor = page.next_cursor


def _nothing_stored(
    repository: ChatMemoryRepository, url: str, owner: str | None = None
) -> str:
    """Where ``ls`` looked and found nothing, so that a mistyped prefix shows."""
    prefix = getattr(repository, "key_prefix", None)
    under = f"under the key prefix {prefix!r} " if isinstance(prefix, str) else ""
    whose = "" if owner is None else f" of owner {owner!r}"
    return f"no conversation{whose} is stored {under}in {redact_url(url)}"


#: What would break a tab-separated line, or read as a column left empty.
_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def _cell(value: JsonValue) -> str:
    """A column of ``ls --long``: ``-`` for none, text as is, else JSON.

    Text that holds a tab, a line break or another control character, that is
    empty or that is ``-`` is written as a JSON string, so each line keeps
    its five columns and ``-`` always means none.
    """
    if value is None:
        return "-"
    if isinstance(value, str) and value not in ("", "-") and not _UNSAFE.search(value):
        return value
    return json.dumps(thaw(value), ensure_ascii=False, separators=(",", ":"))


def _times_line(repository: ChatMemoryRepository, cid: str) -> str:
    """``id, count, first and last created_at``, read from the conversation."""
    messages = repository.find_by_conversation_id(cid)
    first = messages[0].created_at if messages else None
    last = messages[-1].created_at if messages else None
    return (
        f"{cid}\t{len(messages)}\t"
        f"{first.isoformat(timespec='seconds') if first else '-'}\t"
        f"{last.isoformat(timespec='seconds') if last else '-'}"
    )


def ls(args: argparse.Namespace) -> int:
    """List the conversation ids, with counts and times where asked.

    With ``--owner`` or ``--long`` it lists the records
    (:class:`chatledger.SupportsConversationInfo`), newest first; a store that
    keeps none is refused. A store that holds nothing is no error, but stderr
    says where the command looked: a key space that exists once written to (a
    Redis key prefix) has no other way to tell a typo apart from an empty
    store.
    """
    repository = open_store(args.url, args.options, create=False, closing=args.closing)
    if args.owner is not None or args.long:
        return _ls_records(repository, args)
    listed = 0
    for cid in _conversation_ids(repository, args.limit):
        listed += 1
        if args.times:
            out(_times_line(repository, cid))
        else:
            out(cid)
    if not listed:
        err(_nothing_stored(repository, args.url))
    return 0


def _ls_records(repository: ChatMemoryRepository, args: argparse.Namespace) -> int:
    """``ls --owner X`` and ``ls --long``: the records, newest first."""
    if not isinstance(repository, SupportsConversationInfo):
        asked = "--owner" if args.owner is not None else "--long"
        raise UsageError(
            f"ls {asked} lists conversation records, and the store at "
            f"{redact_url(args.url)} keeps none (its adapter has no "
            "find_conversations); ls --times shows each conversation's count "
            "and times"
        )
    listed = 0
    for info in _records(repository, args.owner, args.limit):
        listed += 1
        if args.times:
            out(_times_line(repository, info.id))
        elif args.long:
            stamp = info.updated_at.isoformat(timespec="milliseconds")
            title = info.metadata.get("title")
            out(
                f"{info.id}\t{stamp}\t{info.message_count}\t"
                f"{_cell(info.owner)}\t{_cell(title)}"
            )
        else:
            out(info.id)
    if not listed:
        err(_nothing_stored(repository, args.url, args.owner))
    return 0


def show(args: argparse.Namespace) -> int:
    """Print the newest messages of one conversation (every one with ``--all``).

    A store that keeps logs is read a page at a time: ``--all`` walks the
    whole log oldest first without holding it in memory, and the default
    reads the newest ``--last`` messages only. Lines are numbered by the
    message's place in the conversation.
    """
    validate_conversation_id(args.id)
    last = args.last
    repository = open_store(args.url, args.options, create=False, closing=args.closing)
    if not isinstance(repository, SupportsLog):
        messages = read_conversation(repository, args.url, args.id)
        shown = messages if args.all else messages[-last:]
        _print_numbered(shown, len(messages) - len(shown) + 1)
        _say_what_is_hidden(len(shown), len(messages) - len(shown), len(messages))
        return 0
    if args.all:
        number = 1
        for page in _pages(repository, args.id, newest_first=False):
            if number == 1 and not page:
                read_conversation(repository, args.url, args.id)  # says it is missing
            _print_numbered(page, number)
            number += len(page)
        return 0
    newest = repository.find_messages_page(args.id, None, last, newest_first=True)
    shown = newest.messages[::-1]
    if not shown:
        read_conversation(repository, args.url, args.id)  # says it is missing
    if newest.next_cursor is None:
        _print_numbered(shown, 1)
        return 0
    total = (
        repository.count_messages(args.id)
        if isinstance(repository, SupportsCountMessages)
        else None
    )
    _print_numbered(shown, None if total is None else total - len(shown) + 1)
    _say_what_is_hidden(
        len(shown), None if total is None else total - len(shown), total
    )
    return 0


def _pages(
    repository: SupportsLog, cid: str, *, newest_first: bool
) -> Iterator[list[Message]]:
    """The pages of one log, ``_SHOW_PAGE`` messages each."""
    cursor = None
    while True:
        page = repository.find_messages_page(cid, cursor, _SHOW_PAGE, newest_first)
        yield page.messages
        if page.next_cursor is None:
            return
        cursor = page.next_cursor


def _print_numbered(messages: list[Message], first: int | None) -> None:
    """A message per line (more for tool calls), numbered from ``first``."""
    for index, message in enumerate(messages):
        stamp = (
            message.created_at.isoformat(timespec="milliseconds")
            if message.created_at
            else "-"
        )
        number = "" if first is None else str(first + index)
        lines = describe(message)
        out(f"{number:>4}  {stamp}  {lines[0]}")
        for line in lines[1:]:
            out(f"{'':>4}  {'':<{len(stamp)}}  {line}")


def _say_what_is_hidden(shown: int, hidden: int | None, total: int | None) -> None:
    """On stderr: how many older messages the default left out."""
    if hidden == 0:
        return
    if total is None:
        err(f"showing the newest {shown} messages; --all shows every one")
    else:
        err(f"showing the newest {shown} of {total} messages; --all shows every one")


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
