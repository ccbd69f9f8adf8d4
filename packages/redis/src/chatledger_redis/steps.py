"""What each Redis call of a repository sends, and how its answer is read.

Example:
    from chatledger import Message, MessageWindow
    from chatledger.adapters import stamp_messages
    from chatledger_redis.steps import append_args, append_result, conversation_keys

    stamped = stamp_messages([Message.user("hi", id="m9")])
    _, keys = conversation_keys("chatledger:", "c1")
    args = append_args(stamped, MessageWindow(20), 0)   # the APPEND script's ARGV
    # outcome = client.evalsha(append_sha, len(keys), *keys, *args)  # or awaited
    outcome = [1, b"m1"]                   # what the script answers: m1 evicted
    append_result(outcome, stamped)        # AppendResult([m9], ["m1"])

The sync and the async repository send the same scripts with the same
arguments to the same keys (:mod:`chatledger_redis.keys`), so a conversation
written by one reads the same through the other; only the client differs.
Nothing here does I/O.

A window view (``find_window``) is read newest first: the ``VIEW`` script
answers the current system set and the newest rows (core's
:func:`~chatledger.window_view.view_reads` says how many), :class:`TailRead`
turns them into :class:`~chatledger.window_view.LogRow` for core's
:class:`~chatledger.window_view.TailView`, and only while that view is not
done does the ``TAIL`` script read further back.
"""

from __future__ import annotations

import bisect
import functools
import inspect
import itertools
import math
import os
from collections.abc import Iterable, Iterator, Sequence
from typing import Any
from urllib.parse import unquote

from chatledger.adapters import (
    EVICTED_IDS_KEPT,
    EVICTED_IDS_TRIM_STEP,
    AppendResult,
    ConversationPage,
    InvalidOptionError,
    LogRow,
    Message,
    Role,
    TailView,
    Window,
    codec,
    system_key,
    to_ttl,
    validate_page_request,
)
from chatledger.retention import Retention, to_retention
from chatledger_redis.keys import (
    ConversationKeys,
    parse_evicted_key,
    parse_info_key,
    parse_meta_key,
    parse_removals_key,
    validate_key_prefix,
)
from chatledger_redis.markers import (
    ROLE_CODES,
    system_batch,
    system_marker,
    turn_marker,
)

__all__ = [
    "CLUSTER_SUFFIX",
    "REMOVAL_RECEIPTS",
    "REMOVAL_RECEIPT_MS",
    "RESIZE_ATTEMPTS",
    "TailRead",
    "append_args",
    "append_result",
    "client_url",
    "conversation_keys",
    "ids_of_evicted_keys",
    "ids_of_info_keys",
    "ids_of_meta_keys",
    "log_append_args",
    "log_append_result",
    "ordered_messages",
    "page_args",
    "page_of",
    "page_rows",
    "removal_args",
    "removed_messages",
    "resize_args",
    "save_args",
    "text",
    "trim_args",
    "ttl_milliseconds",
    "write_token",
]

#: How often an append re-measures the history before giving up; only writers
#: with different token counters on one conversation can make it retry.
RESIZE_ATTEMPTS = 8
# The evicted-id record's bound and trim step, as the APPEND header sends them.
_RECORD_BOUNDS = f"{EVICTED_IDS_KEPT}:{EVICTED_IDS_TRIM_STEP}"
#: How many removals of one conversation keep a receipt (the newest ones):
#: a removal sent again finds its own among them unless this many others of
#: the same conversation ran in between. A retry after a dropped connection
#: comes within milliseconds (the backoff starts at 10 ms), one after a
#: timeout within seconds; 64 removals of one conversation in that time is
#: a storm, and a receipt holds only what its removal returned, so the
#: receipts of a conversation hold at most its last 64 removals' messages.
REMOVAL_RECEIPTS = 64
#: How long the receipts live after a conversation's last removal, in ms.
#: They must outlast the client's last resend: redis-py's cluster client
#: sends a command up to 11 times, each waiting up to its 5 s socket timeout
#: and the retries up to 1 s of backoff each, so about 65 s from the first
#: send; a plain client made here gives up within seconds. Two minutes
#: covers both with room; a client whose attempts span longer (a longer
#: ``socket_timeout``, more retries) may outlive the receipt.
REMOVAL_RECEIPT_MS = 120_000
#: A URL scheme ending in this (``redis+cluster://``) asks for a cluster client.
CLUSTER_SUFFIX = "+cluster"
#: The options a repository takes for itself; every other goes to the client.
REPOSITORY_OPTIONS = ("key_prefix", "ttl", "retention")
#: Core numbers a log from 1, and a bounded retention counts from there
#: (:mod:`chatledger.retention`); Redis numbers it from 0 (``save_all`` too).
LOG_NUMBER_OFFSET = 1


def ttl_milliseconds(ttl: object) -> int:
    """Return ``ttl`` in whole milliseconds (0 for no TTL), or raise."""
    value = to_ttl(ttl)
    return 0 if value is None else max(1, math.ceil(value.total_seconds() * 1000))


def text(value: bytes | str) -> str:
    """A reply as text, whether the client decodes responses or not."""
    return value.decode("utf-8") if isinstance(value, bytes) else value


class _Tokens:
    """Write tokens unique across processes: a random prefix and a counter.

    A token only has to differ from every other write's token on the same
    conversation; a per-process random prefix (renewed in a forked child) and
    a counter do that without a system call per write.
    """

    def __init__(self) -> None:
        self._renew()
        os.register_at_fork(after_in_child=self._renew)

    def _renew(self) -> None:
        self._prefix = os.urandom(8).hex()
        self._count = itertools.count()

    def __call__(self) -> str:
        return f"{self._prefix}{next(self._count):x}"


#: A new write token per call.
write_token = _Tokens()


@functools.lru_cache(maxsize=1024)
def conversation_keys(
    prefix: str, conversation_id: str
) -> tuple[ConversationKeys, tuple[str, ...]]:
    """The keys of one conversation, and all of them in the scripts' order."""
    # Building the keys base64-encodes the id; a chat appends to the same
    # conversations over and over, so the recent ones are kept.
    keys = ConversationKeys.of(prefix, conversation_id)
    return keys, tuple(keys.all())


@functools.cache
def _client_option_names() -> frozenset[str]:
    """Every keyword a ``redis.Redis`` made from a URL passes on and accepts."""
    from redis import ConnectionPool, Redis
    from redis.connection import (
        AbstractConnection,
        Connection,
        SSLConnection,
        UnixDomainSocketConnection,
    )

    names: set[str] = set()
    for target in (
        Redis.__init__,
        ConnectionPool.__init__,
        AbstractConnection.__init__,
        Connection.__init__,
        SSLConnection.__init__,
        UnixDomainSocketConnection.__init__,
    ):
        parameters = inspect.signature(target).parameters.values()
        names.update(
            p.name
            for p in parameters
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        )
    names.discard("self")
    return frozenset(names)


def check_client_options(options: dict[str, Any]) -> None:
    """Refuse, before any connection, an option no part of the client takes.

    redis-py would raise only when its first connection is made, from deep
    inside, naming neither the repository nor the options it takes.
    """
    unknown = sorted(set(options) - _client_option_names())
    if unknown:
        raise InvalidOptionError(
            f"RedisChatMemoryRepository.from_url takes no option {unknown[0]!r}; "
            "its options are cluster, key_prefix, ttl and retention, and those of "
            "redis.Redis (socket_timeout, socket_connect_timeout, username, "
            "password, max_connections, ...)"
        )


def client_url(url: str, options: dict[str, Any]) -> tuple[str, bool, dict[str, Any]]:
    """Split a repository URL and options into the client's and the repository's.

    Returns the client's URL (without ``+cluster`` and without a
    ``retention`` query parameter), whether a cluster client is asked for
    (``redis+cluster://`` or ``cluster=True``) and the repository's own
    options (``key_prefix``, ``ttl``, ``retention``, which the URL's query
    may give as ``?retention=100``), validated; ``options`` is left with the
    client's.

    Raises:
        InvalidOptionError: ``retention`` in the URL and as an option too.
        InvalidRetentionError: a ``retention`` :func:`to_retention` refuses.
    """
    repository_options: dict[str, Any] = {
        name: options.pop(name) for name in REPOSITORY_OPTIONS if name in options
    }
    url, in_query = _without_retention(url)
    if in_query is not None:
        if "retention" in repository_options:
            raise InvalidOptionError(
                "retention is given twice: in the URL's query and as an option"
            )
        repository_options["retention"] = in_query
    cluster = bool(options.pop("cluster", False))
    scheme, separator, rest = url.partition("://")
    if scheme.endswith(CLUSTER_SUFFIX):
        cluster = True
        url = scheme[: -len(CLUSTER_SUFFIX)] + separator + rest
    if not cluster:
        check_client_options(options)
    validate_key_prefix(repository_options.get("key_prefix", "chatledger:"))
    ttl_milliseconds(repository_options.get("ttl"))
    to_retention(repository_options.get("retention"))
    return url, cluster, repository_options


def _without_retention(url: str) -> tuple[str, str | None]:
    """``url`` less its ``retention`` query parameter, and that parameter's value.

    The rest of the URL is kept as written: the client parses it.

    Raises:
        InvalidOptionError: the parameter is given more than once.
    """
    start = url.find("?")
    if start < 0:
        return url, None
    end = url.find("#", start)
    end = len(url) if end < 0 else end
    kept: list[str] = []
    values: list[str] = []
    for item in url[start + 1 : end].split("&"):
        name, _, value = item.partition("=")
        if unquote(name) == "retention":
            values.append(unquote(value))
        else:
            kept.append(item)
    if not values:
        return url, None
    if len(values) > 1:
        raise InvalidOptionError("the URL's query gives retention more than once")
    query = "&".join(kept)
    return url[:start] + ("?" + query if query else "") + url[end:], values[0]


def ids_of_meta_keys(prefix: str, keys: Iterable[bytes | str]) -> list[str]:
    """The conversation ids of the ``meta`` keys a SCAN found, each once."""
    found: set[str] = set()
    for key in keys:
        conversation_id = parse_meta_key(prefix, text(key))
        if conversation_id is not None:
            found.add(conversation_id)
    return list(found)


def ids_of_info_keys(prefix: str, keys: Iterable[bytes | str]) -> list[str]:
    """The conversation ids of the record keys a SCAN found, each once."""
    found: set[str] = set()
    for key in keys:
        conversation_id = parse_info_key(prefix, text(key))
        if conversation_id is not None:
            found.add(conversation_id)
    return sorted(found)


def ids_of_evicted_keys(prefix: str, keys: Iterable[bytes | str]) -> set[str]:
    """The conversation ids of the evicted-id records, receipts and records found.

    A window that empties a conversation leaves its evicted-id record behind
    (without ``meta``), a removal its receipts (see
    ``ConversationKeys.removals``), and a conversation record may have no
    messages (``ConversationKeys.info``), so removing everything under a
    prefix scans for these too.
    """
    found: set[str] = set()
    for key in keys:
        name = text(key)
        conversation_id = parse_evicted_key(prefix, name)
        if conversation_id is None:
            conversation_id = parse_removals_key(prefix, name)
        if conversation_id is None:
            conversation_id = parse_info_key(prefix, name)
        if conversation_id is not None:
            found.add(conversation_id)
    return found


def page_of(ids: list[str], cursor: str | None, limit: int) -> ConversationPage:
    """One page of ``ids`` (every id under the prefix) after ``cursor``."""
    after, limit = validate_page_request(cursor, limit)
    ordered = sorted(ids)
    start = 0 if after is None else bisect.bisect_right(ordered, after)
    page = ordered[start : start + limit]
    more = start + limit < len(ordered)
    return ConversationPage(page, page[-1] if more else None)


def ordered_messages(stored: dict[Any, Any]) -> list[Message]:
    """The messages of an ``HGETALL`` of the ``msgs`` hash, oldest first."""
    ordered = sorted(stored.items(), key=lambda item: int(item[0]))
    return [codec.from_json(value) for _, value in ordered]


def save_args(batch: Sequence[Message], ttl_ms: int) -> list[Any]:
    """The SAVE script's ARGV for a stamped batch."""
    args: list[Any] = [ttl_ms, write_token(), len(batch)]
    for message in batch:
        system = message.role is Role.SYSTEM
        args += [
            message.id,
            ROLE_CODES[message.role],
            system_key(message) if system else "",
            codec.to_json(message),
        ]
    return args


def _message_args(stamped: Sequence[Message], window: Window | None) -> list[str]:
    """One script argument per message; sizes by ``window``, else 1 each."""
    # One argument per message (see ``scripts``): redis-py packs each
    # argument on its own, so fewer of them is the cheapest saving.
    args: list[str] = []
    for message in stamped:
        role = message.role
        size = 1 if window is None else window.measure(message)
        if role is Role.SYSTEM:
            args.append(
                f"s{size}\n{message.id}\n{system_key(message)}\n"
                f"{codec.to_json(message)}"
            )
        else:
            args.append(
                f"{ROLE_CODES[role]}{size}\n{message.id}\n{codec.to_json(message)}"
            )
    return args


def append_args(stamped: Sequence[Message], window: Window, ttl_ms: int) -> list[str]:
    """The APPEND script's ARGV: one header, then one argument per message.

    The header names the bound of the evicted-id record and its trim step,
    core's :data:`~chatledger.evicted_ids.EVICTED_IDS_KEPT` and
    :data:`~chatledger.evicted_ids.EVICTED_IDS_TRIM_STEP`.
    """
    counter = window.counter_id
    header = f"{window.limit}:{ttl_ms}:{_RECORD_BOUNDS}:{write_token()}:{counter or ''}"
    return [header, *_message_args(stamped, None if counter is None else window)]


def log_append_args(
    stamped: Sequence[Message], window: Window | None, ttl_ms: int
) -> list[str]:
    """The APPEND_LOG script's ARGV: one header, then one argument per message.

    Sizes are sent, and stored, only for a window with a counter.
    """
    counter = None if window is None else window.counter_id
    header = f"{ttl_ms}:{write_token()}:{counter or ''}"
    return [header, *_message_args(stamped, None if counter is None else window)]


class TailRead:
    """What a window view has read of a log, from the VIEW and TAIL answers.

    Rows are read by sequence number, newest first, down to the head of the
    turns list (below it only system messages are left, which a view takes
    from the current set alone). The sizes stored in the markers are used
    when they were measured by the window's counter (from ``sized`` on, when
    a log append measured only its own rows); other rows are measured by
    :class:`~chatledger.window_view.TailView`.

    Args:
        reply: The VIEW script's answer.
        window: The window shown.
    """

    __slots__ = (
        "_bodies",
        "_seen",
        "_since",
        "_sizes",
        "_top",
        "low",
        "marker",
        "start",
        "view",
    )

    def __init__(self, reply: list[Any], window: Window) -> None:
        """Read the system rows, the first tail rows and their sizes."""
        self._sizes: dict[int, int] = {}
        self._bodies: list[Any] = []
        self._seen = ["", ""]
        #: The oldest marker read, ``""`` before any (and when none is wanted).
        self.marker: str | bytes = ""
        if not reply:
            self.view = TailView(window, [])
            self._since, self._top = 0, -1
            self.start = self.low = 0
            return
        counter, sized = text(reply[0] or ""), text(reply[1] or "")
        weighed = window.counter_id is not None and counter == window.counter_id
        self._since = int(sized) if sized else 0
        # What a further read checks before it takes sizes from the markers.
        self._seen = [counter, sized]
        count = int(reply[2])
        end = 4 + count
        system: list[LogRow] = []
        for entry, body in zip(reply[4:end], reply[end : end + count], strict=True):
            if body is not None:
                size, seq = text(entry).split(":")
                number = int(seq)
                stored = weighed and number >= self._since
                message = codec.from_json(body)
                system.append(LogRow(number, message, int(size) if stored else None))
        self.view = TailView(window, system)
        self._top = int(reply[3])
        self._take(reply[end + count :], weighed)

    def _take(self, rows: list[Any], weighed: bool) -> None:
        """Read a tail answer: the bounds, the messages, then any markers."""
        self.start, self.low = int(rows[0]), int(rows[1])
        read = max(0, self._top - self.start + 1)
        self._bodies = rows[2 : 2 + read]
        markers = rows[2 + read :]
        if weighed and markers:
            self.marker = markers[0]
            for marker in markers:
                _, size, seq, _ = text(marker).split(":", 3)
                if int(seq) >= self._since:
                    self._sizes[int(seq)] = int(size)

    @property
    def complete(self) -> bool:
        """True once the rows read reach the head of the turns list."""
        return self.start <= self.low

    def rows(self) -> Iterator[LogRow]:
        """The rows of the latest read, newest first, decoded as fed.

        A lazy iterator: :meth:`~chatledger.window_view.TailView.feed` stops
        at the row that settles the view, and no message past it is decoded.
        """
        sizes, top, decode = self._sizes, self._top, codec.from_json
        for offset, body in enumerate(self._bodies):
            if body is not None:  # a hole: a system message a window replaced
                seq = top - offset
                yield LogRow(seq, decode(body), sizes.get(seq))

    def further(self, rows: int) -> list[Any]:
        """The TAIL script's ARGV to read ``rows`` numbers below those read."""
        return [self.start, rows, self.marker, *self._seen]

    def extend(self, reply: list[Any]) -> None:
        """Take the TAIL script's answer as the latest read."""
        below = self.start
        self._top = below - 1
        self._take(reply, bool(self.marker))
        if self.start >= below:
            # Nothing older was left to read: never ask again.
            self.low = self.start


def page_args(after: int | None, limit: int, newest_first: bool) -> list[Any]:
    """The PAGE script's ARGV: one row more than the page, to tell if one follows."""
    return ["n" if newest_first else "o", "" if after is None else after, limit + 1]


def page_rows(reply: list[Any]) -> Iterator[tuple[int, Message]]:
    """``(sequence, message)`` of each row of a PAGE answer, in page order."""
    for index in range(0, len(reply), 2):
        yield int(reply[index]), codec.from_json(reply[index + 1])


def append_result(outcome: Any, stamped: Sequence[Message]) -> AppendResult:
    """What an APPEND script's answer says was appended and evicted."""
    first = outcome[0]
    if type(first) is int:  # every message of the batch was appended
        appended = list(stamped)
    else:
        indexes = text(first)
        appended = [stamped[int(i)] for i in indexes.split(",")] if indexes else []
    return AppendResult(appended, [text(message_id) for message_id in outcome[1:]])


def log_append_result(
    outcome: Any, stamped: Sequence[Message]
) -> tuple[AppendResult, tuple[int, int] | None]:
    """What an APPEND_LOG answer says was appended, and the numbers it stored.

    The numbers are ``(first, last)`` as core counts them (from 1, see
    :data:`LOG_NUMBER_OFFSET`), ``None`` when nothing was appended.
    """
    result = append_result(outcome[:1], stamped)
    if not result.appended:
        return result, None
    last = int(outcome[1]) + LOG_NUMBER_OFFSET
    return result, (last - len(result.appended) + 1, last)


def trim_args(
    retention: Retention,
    last: int,
    last_id: str,
    shown_from: int | None,
) -> list[Any]:
    """The TRIM script's ARGV after an append that ended at number ``last``.

    ``last`` is core's number of the append's last message (see
    :func:`log_append_result`), ``last_id`` its id, and ``shown_from`` the
    sequence number :meth:`~chatledger.window_view.TailView.shown_from`
    gives for the append's window view, if it had one. The script works in
    Redis's sequence numbers; core's :meth:`Retention.first_kept` is asked
    here.
    """
    first_kept = retention.first_kept(last) - LOG_NUMBER_OFFSET
    return [
        last - LOG_NUMBER_OFFSET,
        last_id,
        first_kept,
        "" if shown_from is None else shown_from,
        EVICTED_IDS_KEPT,
        EVICTED_IDS_TRIM_STEP,
        write_token(),
    ]


def removal_args(
    newest: bool,
    values: Sequence[Any],
    ttl_ms: int,
    receipts: int = REMOVAL_RECEIPTS,
    receipt_ms: int = REMOVAL_RECEIPT_MS,
) -> list[Any]:
    """The REMOVE script's ARGV: one header, then the count or the ids.

    The header's write token names the removal's receipt: sent again with
    these very arguments, the script answers what it removed the first
    time and changes nothing.

    Args:
        newest: Remove the newest ``values[0]`` messages; else the messages
            of the ids in ``values``.
        values: ``[count]``, or the ids, each once.
        ttl_ms: The repository's TTL in milliseconds (0 for none).
        receipts: How many of the conversation's removals keep a receipt.
        receipt_ms: How long the receipts live after the latest removal.
    """
    mode = "n" if newest else "i"
    return [f"{mode}:{ttl_ms}:{receipts}:{receipt_ms}:{write_token()}", *values]


def removed_messages(reply: Sequence[Any]) -> list[Message]:
    """The messages a REMOVE answer holds, oldest first."""
    return [codec.from_json(body) for body in reply]


def resize_args(
    counter: str,
    state: Sequence[Any],
    stored: dict[Any, Any],
    window: Window,
    system: Sequence[Any] = (),
) -> list[Any] | None:
    """The RESIZE script's ARGV: the history measured by ``window``.

    ``state`` is the ``ver`` and ``sb`` fields of ``meta``, read before the
    ``msgs`` hash, ``stored``, and the system list, ``system``; ``None`` when
    there is nothing to measure. Every stored system message gets a marker,
    keeping the batch its marker records, and only those of the current set
    (from ``sb`` on) count in the system total.
    """
    token, batch = state
    if token is None or not stored:
        return None
    current = 0 if batch is None else int(batch)
    batches: dict[int, int | None] = {}
    for marker in system:
        entry = text(marker)
        batches[int(entry.split(":", 2)[1])] = system_batch(entry)
    turns: list[str] = []
    markers: list[str] = []
    tsize = ssize = 0
    for seq, value in sorted(stored.items(), key=lambda item: int(item[0])):
        message = codec.from_json(value)
        size = window.measure(message)
        number = int(seq)
        if message.role is Role.SYSTEM:
            markers.append(system_marker(message, size, number, batches.get(number)))
            if number >= current:
                ssize += size
        else:
            turns.append(turn_marker(message, size, number))
            tsize += size
    return [counter, text(token), tsize, ssize, len(turns), *turns, *markers]
