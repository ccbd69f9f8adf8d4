"""The ``chatledger`` command line: a demo, and tools to inspect and move memory.

Example (shell):
    chatledger demo                        # a SQLite file; needs chatledger-sql
    chatledger ls sqlite:///chat.db --long   # ids and message counts
    chatledger show sqlite:///chat.db c1
    chatledger export sqlite:///chat.db --format openai > chats.jsonl
    chatledger copy sqlite:///chat.db postgresql+psycopg://app@db/chat
    chatledger conformance redis://127.0.0.1:6379/0 --namespace-option key_prefix
    chatledger conformance --async sqlite:///conformance.db
    chatledger bench postgresql+psycopg://app@db/chat --namespace-option table_name

Exit codes: 0 success, 1 runtime error, 2 usage error (a bad argument, URL or
option, an unknown URL scheme, a missing adapter or database driver). An error
is one line on stderr; ``--debug`` adds the traceback. Passwords in URLs are
never printed. Commands that only read create nothing; long commands report
progress on stderr, a bar on a terminal and a line every few seconds elsewhere.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import tempfile
import traceback
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO, Any, NoReturn, TypeVar
from urllib.parse import parse_qs

from chatledger.async_connect import connect_async
from chatledger.async_repository import AsyncSupportsWindowAppend
from chatledger.benchmark import (
    OPERATIONS,
    WINDOWS,
    Measurement,
    Stats,
    SupportsBenchmarkFloor,
    count_steps,
    measure_window_memory,
    ratio,
)
from chatledger.bulk import BulkSaveError, save_conversations
from chatledger.connect import (
    adapter_parameters,
    connect,
    hide_secrets,
    install_hint,
    redact_url,
    url_scheme,
    url_secrets,
)
from chatledger.convert import UnsupportedContentError, to_anthropic, to_openai
from chatledger.demo import describe, play
from chatledger.errors import (
    ChatLedgerError,
    InvalidConversationIdError,
    InvalidOptionError,
    InvalidUrlError,
    StoreNotFoundError,
    UnknownBackendError,
)
from chatledger.jsonl import export_line, read_export
from chatledger.messages import Message
from chatledger.progress import DEFAULT_EVERY, Progress
from chatledger.repository import (
    ChatMemoryRepository,
    SupportsConversationPages,
    SupportsCountMessages,
    SupportsWindowAppend,
)
from chatledger.validation import validate_conversation_id

__all__ = ["main"]

_T = TypeVar("_T")
#: Conversation ids ``ls`` asks for at a time, where the store can page.
_LS_PAGE = 1000

PROG = "chatledger"
DEMO_URL = "sqlite:///chatledger-demo.db"


class UsageError(ChatLedgerError, ValueError):
    """A command was called with arguments that cannot work (exit code 2)."""


class _Secrets:
    """Every password seen on the command line, so no output ever shows one."""

    def __init__(self) -> None:
        self.values: set[str] = set()

    def add_url(self, url: str) -> str:
        self.values.update(url_secrets(url))
        return url

    def scrub(self, text: str) -> str:
        return hide_secrets(text, self.values)


_SECRETS = _Secrets()


def _out(text: str = "") -> None:
    print(_SECRETS.scrub(text))


def _err(text: str) -> None:
    print(_SECRETS.scrub(text), file=sys.stderr)


#: The constructor flags with which adapters create their tables, indexes or
#: constraints on opening; commands that only read turn them off.
_CREATE_FLAGS = ("create_schema", "create_indexes")


#: Client settings the command gives, unless -o does, by scheme family: it
#: should fail in seconds when a server does not answer (pymongo waits 30 s).
_CLIENT_DEFAULTS: dict[str, dict[str, Any]] = {
    "mongodb": {"serverSelectionTimeoutMS": 3000},
}


def _open(
    url: str,
    options: dict[str, Any],
    *,
    create: bool = True,
    closing: list[object] | None = None,
) -> ChatMemoryRepository:
    """Open ``url``; with ``create=False`` the adapter creates no storage.

    Put in ``closing`` (the command's :func:`_closed_after` list), the
    repository is closed when the command ends, whether it succeeded or not.
    """
    options = dict(options)
    query = url.partition("?")[2].partition("#")[0]
    given = {name.lower() for name in [*options, *parse_qs(query)]}
    family = url_scheme(url).partition("+")[0]
    for name, value in _CLIENT_DEFAULTS.get(family, {}).items():
        # Given as -o or in the URL's query, in any case (as pymongo reads it).
        if name.lower() not in given:
            options[name] = value
    if not create:
        declared = adapter_parameters(url)
        for flag in _CREATE_FLAGS:
            if flag in declared:
                options.setdefault(flag, False)
    repository = connect(url, **options)
    if closing is not None:
        closing.append(repository)
    return repository


def _demo(args: argparse.Namespace) -> int:
    repository = _open(args.url, args.options, closing=args.closing)
    play(
        repository,
        redact_url(args.url),
        max_messages=args.max_messages,
        conversation_id=args.conversation,
        write=_out,
    )
    return 0


# --- ls, show, rm ----------------------------------------------------------


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


def _ls(args: argparse.Namespace) -> int:
    repository = _open(args.url, args.options, create=False, closing=args.closing)
    counting = isinstance(repository, SupportsCountMessages)
    for cid in _conversation_ids(repository):
        if not (args.long or args.times):
            _out(cid)
            continue
        if args.times or not counting:
            messages = repository.find_by_conversation_id(cid)
            count = len(messages)
        else:
            count = repository.count_messages(cid)  # type: ignore[attr-defined]
        if not args.times:
            _out(f"{cid}\t{count}")
            continue
        first = messages[0].created_at if messages else None
        last = messages[-1].created_at if messages else None
        _out(
            f"{cid}\t{count}\t"
            f"{first.isoformat(timespec='seconds') if first else '-'}\t"
            f"{last.isoformat(timespec='seconds') if last else '-'}"
        )
    return 0


def _read(repository: ChatMemoryRepository, url: str, cid: str) -> list[Message]:
    messages = repository.find_by_conversation_id(cid)
    if not messages:
        raise ChatLedgerError(f"no conversation {cid!r} in {redact_url(url)}")
    return messages


def _show(args: argparse.Namespace) -> int:
    validate_conversation_id(args.id)
    repository = _open(args.url, args.options, create=False, closing=args.closing)
    messages = _read(repository, args.url, args.id)
    for number, message in enumerate(messages, start=1):
        stamp = (
            message.created_at.isoformat(timespec="milliseconds")
            if message.created_at
            else "-"
        )
        lines = describe(message)
        _out(f"{number:>4}  {stamp}  {lines[0]}")
        for line in lines[1:]:
            _out(f"{'':>4}  {'':<{len(stamp)}}  {line}")
    return 0


def _rm(args: argparse.Namespace) -> int:
    for cid in args.ids:
        validate_conversation_id(cid)
    # Nothing to remove from a store that does not exist: do not create it.
    repository = _open(args.url, args.options, create=False, closing=args.closing)
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
            _out(f"removed {cid}")
    return 0


# --- export, import --------------------------------------------------------


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
            else:
                yield _json({"conversation_id": cid, **to_anthropic(messages)})
        except UnsupportedContentError as exc:
            raise ChatLedgerError(f"conversation {cid!r}: {exc}") from exc


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


@contextmanager
def _output(path: str | None) -> Iterator[IO[str]]:
    if path is None or path == "-":
        yield sys.stdout
        return
    with open(path, "w", encoding="utf-8", newline="\n") as handle:
        yield handle


def _export(args: argparse.Namespace) -> int:
    for cid in args.ids:
        validate_conversation_id(cid)
    repository = _open(args.url, args.options, create=False, closing=args.closing)
    conversations: Iterable[tuple[str, list[Message]]]
    if args.ids:
        # Named conversations are all checked before the first line is written.
        conversations = [(c, _read(repository, args.url, c)) for c in args.ids]
        total = len(args.ids)
    else:
        ids = sorted(repository.find_conversation_ids())
        conversations = ((c, repository.find_by_conversation_id(c)) for c in ids)
        total = len(ids)
    progress = _progress(args, "exporting", total)
    counted = _counted(conversations, progress)
    try:
        with _output(args.output) as handle:
            for line in _export_lines(args.format, counted):
                handle.write(line + "\n")
    finally:
        progress.close()
    return 0


def _import(args: argparse.Namespace) -> int:
    _refuse_in_process(args.url, "import")
    if args.file == "-":
        conversations = read_export(sys.stdin.buffer, "<stdin>")
        name = "<stdin>"
    else:
        with open(args.file, "rb") as handle:
            conversations = read_export(handle, args.file)
        name = args.file
    # The whole file is checked: from here on only the store can refuse.
    repository = _open(args.url, args.options, closing=args.closing)
    progress = _progress(args, "importing", len(conversations))
    try:
        save_conversations(
            repository,
            ((c.conversation_id, c.messages) for c in conversations),
            on_saved=progress.update,
        )
    except BulkSaveError as exc:
        failed = conversations[exc.saved : exc.saved + len(exc.conversation_ids)]
        first, last = failed[0].lines[0], failed[-1].lines[-1]
        lines = f"line {first}" if first == last else f"lines {first}-{last}"
        raise ChatLedgerError(
            f"{name}:{first}: {_not_written(exc, 'imported into', args.url)} "
            f"({lines}): {exc}; {_written_before(exc)}"
        ) from exc
    finally:
        progress.close()
    total = sum(len(c.messages) for c in conversations)
    _out(
        f"imported {total} messages in {len(conversations)} conversations "
        f"into {redact_url(args.url)}"
    )
    return 0


def _not_written(exc: BulkSaveError, verb: str, url: str) -> str:
    """``conversation 'a' was not copied to URL``, or the range of a batch."""
    ids = exc.conversation_ids
    if len(ids) == 1:
        return f"conversation {ids[0]!r} was not {verb} {redact_url(url)}"
    return (
        f"conversations {ids[0]!r} to {ids[-1]!r} (one batch of {len(ids)}, none "
        f"of it written) were not {verb} {redact_url(url)}"
    )


def _written_before(exc: BulkSaveError) -> str:
    these = "it" if len(exc.conversation_ids) == 1 else "them"
    return f"the {exc.saved} conversations before {these} were"


def _refuse_in_process(url: str, command: str) -> None:
    """Refuse to write where nothing outlives this process."""
    family = url_scheme(url).partition("+")[0]
    path, _, query = url.partition("://")[2].partition("?")
    in_memory = family == "memory" or (
        family in ("sqlite", "duckdb")
        and (path in ("", "/", "/:memory:") or "mode=memory" in query)
    )
    if in_memory:
        raise UsageError(
            f"{redact_url(url)} keeps data in this process only: {command} would "
            "report success and the data would be gone when it exits; give a "
            "store that outlives it, such as sqlite:///chat.db"
        )


# --- copy ------------------------------------------------------------------


def _progress(
    args: argparse.Namespace, verb: str, total: int, unit: str = "conversations"
) -> Progress:
    return Progress(
        verb,
        total,
        unit,
        stream=sys.stderr,
        every=args.progress_every,
        enabled=not args.no_progress,
    )


def _counted(items: Iterable[_T], progress: Progress) -> Iterator[_T]:
    """Yield ``items``, telling ``progress`` after each one."""
    for done, item in enumerate(items, start=1):
        yield item
        progress.update(done)


def _copy(args: argparse.Namespace) -> int:
    _refuse_in_process(args.target, "copy")
    source = _open(args.source, args.options, create=False, closing=args.closing)
    target = _open(args.target, args.target_options, closing=args.closing)
    ids = sorted(source.find_conversation_ids())
    progress = _progress(args, "copying", len(ids))
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
            target, conversations(), on_saved=lambda _: progress.update(read)
        )
    except BulkSaveError as exc:
        raise ChatLedgerError(
            f"{_not_written(exc, 'copied to', args.target)}: {exc}; "
            f"{_written_before(exc)}"
        ) from exc
    finally:
        progress.close()
    _out(
        f"copied {len(copied)} conversations ({sum(copied)} messages) from "
        f"{redact_url(args.source)} to {redact_url(args.target)}"
    )
    return 0


# --- conformance -----------------------------------------------------------

_CONFORMANCE_MODULE = '''\
"""Generated by `chatledger conformance`: the suite against one live URL."""

import json
import os

import pytest

from chatledger import connect
from chatledger.testing import ChatMemoryRepositoryTests

URL = os.environ["CHATLEDGER_CONFORMANCE_URL"]
OPTIONS = json.loads(os.environ["CHATLEDGER_CONFORMANCE_OPTIONS"])


def _clear(repository):
    for conversation_id in repository.find_conversation_ids():
        repository.delete_by_conversation_id(conversation_id)


class TestConformance(ChatMemoryRepositoryTests):
    supports_atomic_append = os.environ["CHATLEDGER_CONFORMANCE_ATOMIC"] == "1"

    @pytest.fixture
    def repository(self):
        repository = connect(URL, **OPTIONS)
        _clear(repository)
        yield repository
        _clear(repository)
        close = getattr(repository, "close", None)
        if callable(close):
            close()
'''

_ASYNC_CONFORMANCE_MODULE = '''\
"""Generated by `chatledger conformance --async`: the suite on one live URL."""

import json
import os

import pytest

from chatledger import connect_async
from chatledger.testing import AsyncChatMemoryRepositoryTests

URL = os.environ["CHATLEDGER_CONFORMANCE_URL"]
OPTIONS = json.loads(os.environ["CHATLEDGER_CONFORMANCE_OPTIONS"])


async def _clear(repository):
    for conversation_id in await repository.find_conversation_ids():
        await repository.delete_by_conversation_id(conversation_id)


class TestAsyncConformance(AsyncChatMemoryRepositoryTests):
    supports_atomic_append = os.environ["CHATLEDGER_CONFORMANCE_ATOMIC"] == "1"

    @pytest.fixture
    def async_repository(self, async_runner):
        repository = connect_async(URL, **OPTIONS)
        async_runner.run(_clear(repository))
        yield repository
        async_runner.run(_clear(repository))
        aclose = getattr(repository, "aclose", None)
        if callable(aclose):
            async_runner.run(aclose())
'''


class _Tally:
    """A pytest plugin that counts outcomes, for the one-line summary and progress."""

    def __init__(self, progress: Callable[[int], Progress]) -> None:
        self.counts: dict[str, int] = {}
        self.failed: list[str] = []
        self.finished = 0
        self._make_progress = progress
        self.progress: Progress | None = None

    def pytest_collection_finish(self, session: Any) -> None:
        self.progress = self._make_progress(len(session.items))

    def pytest_runtest_logreport(self, report: Any) -> None:
        if report.when == "teardown" and self.progress is not None:
            self.finished += 1
            self.progress.update(self.finished)
        outcome: str | None = None
        if hasattr(report, "wasxfail"):
            outcome = "xfailed" if report.skipped else "xpassed"
        elif report.when == "call" or (report.when == "setup" and not report.passed):
            outcome = (
                "error" if report.failed and report.when != "call" else report.outcome
            )
        if outcome is not None:
            self.counts[outcome] = self.counts.get(outcome, 0) + 1
            if outcome in ("failed", "error"):
                self.failed.append(report.nodeid.rpartition("::")[2])


def _conformance(args: argparse.Namespace) -> int:
    try:
        import pytest
    except ImportError:
        raise ChatLedgerError(
            "the conformance suite needs pytest: pip install 'chatledger[testing]'"
        ) from None
    options = dict(args.options)
    if args.namespace_option:
        # Short and plain, so it passes every adapter's name allowlist.
        options[args.namespace_option] = f"clconf_{uuid.uuid4().hex[:12]}"
    if args.use_async:
        present, atomic = asyncio.run(_async_probe(args.url, options))
    else:
        probe = _open(args.url, options)
        present = len(probe.find_conversation_ids())
        atomic = isinstance(probe, SupportsWindowAppend)
    if present and not args.namespace_option:
        if not args.use_async:
            _close(probe)
        raise UsageError(
            f"{redact_url(args.url)} holds {present} conversations; the "
            "suite writes and deletes conversations, so it needs an empty store: "
            "use an empty database, or --namespace-option NAME to give the run "
            "its own table, key prefix or collection"
        )
    try:
        code, tally = _run_suite(pytest.main, args, options, atomic)
    finally:
        if args.use_async:
            if args.namespace_option:
                asyncio.run(_async_drop_namespace(args.url, options))
        else:
            if args.namespace_option:
                _drop_namespace(probe)
            _close(probe)
    counts = ", ".join(f"{n} {k}" for k, n in sorted(tally.counts.items()))
    capability = "atomic window append" if atomic else "no atomic window append"
    twin = " async" if args.use_async else ""
    _out(
        f"conformance of {redact_url(args.url)}{twin} ({capability}; TTL tests "
        f"need the adapter's own subclass): {counts or 'no test ran'}"
    )
    if tally.failed:
        _out("failed: " + ", ".join(tally.failed))
    return 0 if code == 0 else 1


async def _async_probe(url: str, options: dict[str, Any]) -> tuple[int, bool]:
    """How many conversations the async repository of ``url`` holds; atomic?"""
    repository = connect_async(url, **options)
    try:
        present = len(await repository.find_conversation_ids())
        return present, isinstance(repository, AsyncSupportsWindowAppend)
    finally:
        await _aclose(repository)


async def _async_drop_namespace(url: str, options: dict[str, Any]) -> None:
    """Remove the run's table, label set or key space through the async twin."""
    repository = connect_async(url, **options)
    try:
        drop = getattr(repository, "drop_schema", None)
        if callable(drop):
            await drop()
    finally:
        await _aclose(repository)


async def _aclose(repository: object) -> None:
    aclose = getattr(repository, "aclose", None)
    if callable(aclose):
        await aclose()


@contextmanager
def _closed_after() -> Iterator[list[object]]:
    """A list to put repositories in; each is closed, newest first, on leaving.

    A close that fails after the command succeeded is the command's error;
    after it failed, the command's own error is the one reported.
    """
    opened: list[object] = []
    try:
        yield opened
    except BaseException:
        for repository in reversed(opened):
            with suppress(Exception):
                _close(repository)
        raise
    for repository in reversed(opened):
        _close(repository)


def _close(repository: object) -> None:
    close = getattr(repository, "close", None)
    if callable(close):
        close()


def _drop_namespace(repository: object) -> None:
    """Remove the run's table, label set or key space, if the adapter can."""
    drop = getattr(repository, "drop_schema", None)
    if callable(drop):
        drop()


def _run_suite(
    run: Callable[..., Any],
    args: argparse.Namespace,
    options: dict[str, Any],
    atomic: bool,
) -> tuple[int, _Tally]:
    environment = {
        "CHATLEDGER_CONFORMANCE_URL": args.url,
        "CHATLEDGER_CONFORMANCE_OPTIONS": json.dumps(options),
        "CHATLEDGER_CONFORMANCE_ATOMIC": "1" if atomic else "0",
    }
    saved = {key: os.environ.get(key) for key in environment}
    tally = _Tally(lambda total: _progress(args, "testing", total, "tests"))
    with tempfile.TemporaryDirectory(prefix="chatledger-conformance-") as folder:
        module = Path(folder) / "test_conformance.py"
        module.write_text(
            _ASYNC_CONFORMANCE_MODULE if args.use_async else _CONFORMANCE_MODULE,
            encoding="utf-8",
        )
        (Path(folder) / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
        os.environ.update(environment)
        try:
            code = run(
                [
                    str(module),
                    "-c",
                    str(Path(folder) / "pytest.ini"),
                    "--rootdir",
                    folder,
                    "-p",
                    "no:cacheprovider",
                    "-q" if not args.verbose else "-v",
                    "--tb=short" if args.verbose else "--tb=line",
                    *args.pytest_args,
                ],
                plugins=[tally],
            )
        finally:
            if tally.progress is not None:
                tally.progress.close()
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
    return int(code), tally


# --- bench -----------------------------------------------------------------

_PLOT_HINT = "pip install 'chatledger[plot]'"


def _bench(args: argparse.Namespace) -> int:
    if args.plot is not None:
        _require_matplotlib()
    options = dict(args.options)
    if args.namespace_option:
        if args.namespace_option not in adapter_parameters(args.url):
            raise UsageError(
                f"the adapter of {redact_url(args.url)} takes no option "
                f"{args.namespace_option!r}; --namespace-option names its table, "
                "key prefix or collection option"
            )
        # Short and plain, so it passes every adapter's name allowlist.
        options[args.namespace_option] = f"clbench_{uuid.uuid4().hex[:12]}"
    # Without a namespace of its own, the run leaves the store as it found
    # it: its conversations are deleted, and a schema it created is dropped.
    created = not args.namespace_option and _bench_refuses_or_creates(args.url, options)
    repository = _open(args.url, options)
    try:
        measurement, floor_name = _measure(args, repository)
    finally:
        try:
            if args.namespace_option or created:
                _drop_namespace(repository)
        finally:
            _close(repository)
    results = _bench_results(measurement, args.windows)
    if args.json:
        _out(
            json.dumps(
                {
                    "url": redact_url(args.url),
                    "floor": floor_name,
                    "samples": args.samples,
                    "windows": list(args.windows),
                    "results": results,
                    "errors": measurement.errors,
                },
                indent=2,
            )
        )
    else:
        for line in _bench_table(args, floor_name, results, measurement.errors):
            _out(line)
    if args.plot is not None:
        _plot(args.plot, redact_url(args.url), floor_name, results)
        _err(f"plot written to {args.plot}")
    return 1 if measurement.errors else 0


def _bench_refuses_or_creates(url: str, options: dict[str, Any]) -> bool:
    """Refuse a store holding conversations; ``True`` when there is none yet."""
    try:
        probe = _open(url, options, create=False)
    except StoreNotFoundError:
        return True
    try:
        present = len(probe.find_conversation_ids())
    except StoreNotFoundError:
        return True
    finally:
        _close(probe)
    if present:
        raise UsageError(
            f"{redact_url(url)} holds {present} conversations; bench writes and "
            "deletes conversations of its own, so without --namespace-option NAME "
            "(the adapter's table, key prefix or collection option, given a "
            "fresh value for the run) it needs an empty store"
        )
    return False


def _measure(
    args: argparse.Namespace, repository: ChatMemoryRepository
) -> tuple[Measurement, str | None]:
    """Measure ours beside the floor (when the adapter has one), then drop it."""
    floor = (
        repository.benchmark_floor()
        if isinstance(repository, SupportsBenchmarkFloor)
        else None
    )
    if floor is None:
        _err("no floor for this backend: measuring chatledger only")
    total = count_steps(args.windows, args.samples, with_floor=floor is not None)
    progress = _progress(args, "benchmarking", total, "steps")
    try:
        measurement = measure_window_memory(
            repository,
            floor,
            args.windows,
            args.samples,
            on_step=lambda done, _: progress.update(done),
        )
    finally:
        try:
            progress.close()
        finally:
            if floor is not None:
                floor.close()
    return measurement, None if floor is None else floor.name


def _bench_results(
    measurement: Measurement, windows: Sequence[int]
) -> list[dict[str, Any]]:
    """One entry per window and operation: ours, the floor's, their ratio."""
    results: list[dict[str, Any]] = []
    for window in windows:
        for operation in OPERATIONS:
            ours = measurement.stats.get((f"ours_{operation}", window))
            floor = measurement.stats.get((f"floor_{operation}", window))
            results.append(
                {
                    "window": window,
                    "operation": operation,
                    "chatledger": _stats_json(ours),
                    "floor": _stats_json(floor),
                    "ratio": ratio(ours, floor),
                }
            )
    return results


def _stats_json(stats: Stats | None) -> dict[str, Any] | None:
    if stats is None:
        return None
    return {"p50_us": stats.p50, "p95_us": stats.p95, "samples": stats.n}


def _bench_table(
    args: argparse.Namespace,
    floor_name: str | None,
    results: list[dict[str, Any]],
    errors: list[str],
) -> Iterator[str]:
    floor = f"floor: {floor_name}" if floor_name else "no floor for this backend"
    yield f"{redact_url(args.url)} ({floor}), {args.samples} samples per figure"
    yield "Latency in microseconds, p50 / p95; x floor = chatledger p50 / floor p50."
    head = (
        f"{'W':>6} | {'operation':<9} | {'chatledger':>19} | {'floor':>19} | "
        f"{'x floor':>7}"
    )
    yield head
    yield "-" * len(head)
    for row in results:
        factor = "-" if row["ratio"] is None else f"{row['ratio']:.2f}"
        yield (
            f"{row['window']:>6} | {row['operation']:<9} | "
            f"{_bench_cell(row['chatledger'])} | {_bench_cell(row['floor'])} | "
            f"{factor:>7}"
        )
    for error in errors:
        yield f"ERROR {error}"


def _bench_cell(stats: dict[str, Any] | None) -> str:
    if stats is None:
        return f"{'-':>19}"
    return f"{_us(stats['p50_us']):>9} /{_us(stats['p95_us']):>9}"


def _us(value: float) -> str:
    return f"{value:.1f}" if value < 100 else f"{value:.0f}"


def _require_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise UsageError(f"--plot needs matplotlib: {_PLOT_HINT}") from None


def _plot(
    path: str, url: str, floor_name: str | None, results: list[dict[str, Any]]
) -> None:
    """Draw p50 (solid) and p95 (dashed) against W, one panel per operation."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot
    from matplotlib.ticker import NullLocator

    figure, panels = pyplot.subplots(1, len(OPERATIONS), figsize=(10, 4))
    try:
        for panel, operation in zip(panels, OPERATIONS, strict=True):
            rows = [r for r in results if r["operation"] == operation]
            for who, label in (("chatledger", "chatledger"), ("floor", floor_name)):
                points = [(r["window"], r[who]) for r in rows if r[who] is not None]
                if not points or label is None:
                    continue
                windows = [w for w, _ in points]
                line = panel.plot(
                    windows,
                    [s["p50_us"] for _, s in points],
                    "o-",
                    label=f"{label} p50",
                )
                panel.plot(
                    windows,
                    [s["p95_us"] for _, s in points],
                    "--",
                    color=line[0].get_color(),
                    label=f"{label} p95",
                )
            panel.set_xscale("log")
            panel.set_yscale("log")
            panel.xaxis.set_minor_locator(NullLocator())
            shown = sorted({r["window"] for r in rows})
            panel.set_xticks(shown, [str(w) for w in shown])
            panel.set_xlabel("window W (messages)")
            panel.set_ylabel("microseconds")
            panel.set_title(operation)
            panel.legend()
        figure.suptitle(url)
        figure.tight_layout()
        figure.savefig(path)
    finally:
        pyplot.close(figure)


# --- parser and main -------------------------------------------------------


def _option(text: str) -> tuple[str, Any]:
    key, equals, value = text.partition("=")
    if not equals or not key.isidentifier():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, not {text!r}")
    try:
        parsed: Any = json.loads(value)
    except ValueError:
        parsed = value
    return key, parsed


def _url(text: str) -> str:
    return _SECRETS.add_url(text)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        _err(f"{self.prog}: error: {message}")
        raise SystemExit(2)


def _add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-o",
        "--option",
        dest="option_pairs",
        metavar="KEY=VALUE",
        type=_option,
        action="append",
        default=[],
        help="an option for the adapter's from_url (VALUE is read as JSON when "
        "it parses, else as text); repeatable",
    )


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"expected seconds (0 or more), not {text!r}")
    return value


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, not {text!r}")
    return value


def _windows(text: str) -> tuple[int, ...]:
    try:
        values = tuple(_positive(part.strip()) for part in text.split(","))
    except argparse.ArgumentTypeError:
        values = ()
    if not values or len(set(values)) != len(values):
        raise argparse.ArgumentTypeError(
            f"expected distinct window sizes >= 1 separated by commas, not {text!r}"
        )
    return values


def _add_progress_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--no-progress",
        action="store_true",
        help="report no progress on stderr",
    )
    parser.add_argument(
        "--progress-every",
        type=_seconds,
        default=DEFAULT_EVERY,
        metavar="SECONDS",
        help="when stderr is not a terminal, one progress line (done/total, "
        f"rate) this often (default {DEFAULT_EVERY:g}; on a terminal a bar)",
    )


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of the ``chatledger`` command."""
    from chatledger import __version__

    parser = _Parser(
        prog=PROG,
        description="Conversation memory for LLM applications: demo, inspect, "
        "export, import and copy stored conversations, and measure a database.",
        epilog="URLs: memory://, sqlite:///file.db, duckdb:///file.duckdb, "
        "postgresql+psycopg://user@host/db, mysql+pymysql://..., redis://host:6379/0, "
        "mongodb://..., cassandra://host/keyspace, neo4j://... "
        "Passwords in URLs are never printed.",
    )
    parser.add_argument(
        "--version", action="version", version=f"%(prog)s {__version__}"
    )
    parser.add_argument(
        "--debug", action="store_true", help="show the traceback of an error"
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    demo = commands.add_parser(
        "demo", help="play a scripted conversation through a window memory"
    )
    demo.add_argument("--url", default=DEMO_URL, type=_url, help=f"default {DEMO_URL}")
    demo.add_argument(
        "--max-messages",
        type=int,
        default=8,
        metavar="N",
        help="window size (default 8)",
    )
    demo.add_argument(
        "--conversation",
        metavar="ID",
        help="continue this conversation (default: a new id per run)",
    )
    _add_options(demo)
    demo.set_defaults(run=_demo)

    ls = commands.add_parser("ls", help="list conversation ids")
    ls.add_argument("url", type=_url)
    ls.add_argument(
        "-l",
        "--long",
        action="store_true",
        help="also the message count, tab separated (counted by the store)",
    )
    ls.add_argument(
        "--times",
        action="store_true",
        help="also the count, first and last created_at (reads each conversation)",
    )
    _add_options(ls)
    ls.set_defaults(run=_ls)

    show = commands.add_parser("show", help="print one conversation")
    show.add_argument("url", type=_url)
    show.add_argument("id")
    _add_options(show)
    show.set_defaults(run=_show)

    export = commands.add_parser(
        "export", help="write conversations as JSON lines (all, or the ids given)"
    )
    export.add_argument("url", type=_url)
    export.add_argument("ids", nargs="*", metavar="ID")
    export.add_argument(
        "--format",
        choices=("jsonl", "openai", "anthropic"),
        default="jsonl",
        help="jsonl: one message per line in chatledger's codec, with its "
        "conversation_id (what import reads); openai / anthropic: one "
        "conversation per line in that API's request shape",
    )
    export.add_argument("--output", metavar="FILE", help="write here, not to stdout")
    _add_progress_options(export)
    _add_options(export)
    export.set_defaults(run=_export)

    imp = commands.add_parser(
        "import",
        help="read a jsonl export; each conversation in it replaces the stored one",
    )
    imp.add_argument("url", type=_url)
    imp.add_argument("file", help="a file written by export --format jsonl, or -")
    _add_progress_options(imp)
    _add_options(imp)
    imp.set_defaults(run=_import)

    copy = commands.add_parser(
        "copy",
        help="copy every conversation, ids and created_at kept (re-running is safe)",
    )
    copy.add_argument("source", type=_url, metavar="SRC_URL")
    copy.add_argument("target", type=_url, metavar="DST_URL")
    _add_progress_options(copy)
    _add_options(copy)
    copy.add_argument(
        "--target-option",
        dest="target_pairs",
        metavar="KEY=VALUE",
        type=_option,
        action="append",
        default=[],
        help="an option for the target's from_url (-o options go to the source)",
    )
    copy.set_defaults(run=_copy)

    rm = commands.add_parser("rm", help="delete conversations")
    rm.add_argument("url", type=_url)
    rm.add_argument("ids", nargs="+", metavar="ID")
    rm.add_argument(
        "-f", "--force", action="store_true", help="ignore ids that do not exist"
    )
    _add_options(rm)
    rm.set_defaults(run=_rm)

    conformance = commands.add_parser(
        "conformance",
        help="run the conformance suite against a live backend "
        "(needs chatledger[testing]; writes and deletes test conversations)",
        epilog="Arguments after -- go to pytest, e.g. -- -k window -x",
    )
    conformance.add_argument("url", type=_url)
    conformance.add_argument(
        "--namespace-option",
        metavar="NAME",
        help="the adapter option (table name, key prefix, collection) that gets "
        "a fresh value for this run; without it the store must be empty",
    )
    conformance.add_argument(
        "--async",
        dest="use_async",
        action="store_true",
        help="run the async suite on the adapter's async twin (connect_async)",
    )
    conformance.add_argument("-v", "--verbose", action="store_true")
    _add_progress_options(conformance)
    _add_options(conformance)
    conformance.set_defaults(run=_conformance)

    bench = commands.add_parser(
        "bench",
        help="measure append and read latency on a database, beside its driver's "
        "own INSERT and SELECT (writes and removes data of its own)",
    )
    bench.add_argument("url", type=_url)
    bench.add_argument(
        "--namespace-option",
        metavar="NAME",
        help="the adapter option (table name, key prefix, collection) that gets "
        "a fresh value for this run and is removed after it; without it the "
        "store must be empty",
    )
    bench.add_argument(
        "--windows",
        type=_windows,
        default=WINDOWS,
        metavar="W,W,...",
        help=f"window sizes to measure (default {','.join(str(w) for w in WINDOWS)})",
    )
    bench.add_argument(
        "--samples",
        type=_positive,
        default=200,
        metavar="N",
        help="timed operations per figure (default 200)",
    )
    bench.add_argument(
        "--json", action="store_true", help="print the figures as JSON, not a table"
    )
    bench.add_argument(
        "--plot",
        metavar="FILE.png",
        help=f"also draw the figures into FILE.png (needs matplotlib: {_PLOT_HINT})",
    )
    _add_progress_options(bench)
    _add_options(bench)
    bench.set_defaults(run=_bench)
    return parser


class _ScrubbingHandler(logging.Handler):
    """Shows driver log records on stderr with --debug, passwords scrubbed."""

    def emit(self, record: logging.LogRecord) -> None:
        _err(self.format(record))


def _configure_logging(debug: bool) -> None:
    # Without a handler of its own, Python prints a library's warnings on
    # stderr (logging.lastResort): an error would then span several lines.
    root = logging.getLogger()
    if debug:
        handler: logging.Handler = _ScrubbingHandler()
        handler.setFormatter(logging.Formatter("%(name)s: %(levelname)s: %(message)s"))
        root.setLevel(logging.DEBUG)
    else:
        handler = logging.NullHandler()
    root.addHandler(handler)


def _driver_hint(args: argparse.Namespace) -> str:
    """Name the install line when an adapter's database driver is missing."""
    hints = []
    for name in ("url", "source", "target"):
        url = getattr(args, name, None)
        if isinstance(url, str) and "://" in url:
            hint = install_hint(url_scheme(url))
            if hint and "[" in hint and hint not in hints:
                hints.append(hint)
    return f"; the database driver is missing: {' / '.join(hints)}" if hints else ""


# A missing driver (MissingDriverError, an UnknownBackendError, or an
# ImportError from a third-party adapter) is a usage error like a missing
# adapter: the command cannot work as installed.
_USAGE_ERRORS = (
    UsageError,
    UnknownBackendError,
    InvalidConversationIdError,
    InvalidOptionError,
    InvalidUrlError,
    ImportError,
)


def _run(args: argparse.Namespace) -> int:
    args.options = dict(args.option_pairs)
    args.target_options = dict(getattr(args, "target_pairs", []))
    if getattr(args, "max_messages", 1) < 1:
        raise UsageError("--max-messages must be at least 1")
    run: Callable[[argparse.Namespace], int] = args.run
    with _closed_after() as args.closing:
        return run(args)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line on ``argv`` (default ``sys.argv[1:]``).

    Returns:
        0 on success, 1 on a runtime error, 2 on a usage error.
    """
    parser = build_parser()
    arguments = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in arguments:
        cut = arguments.index("--")
        arguments, extra = arguments[:cut], arguments[cut + 1 :]
    try:
        args = parser.parse_args(arguments)
        if extra and args.command != "conformance":
            parser.error(f"only conformance takes arguments after --: {extra}")
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 2
    args.pytest_args = extra
    _configure_logging(args.debug)
    try:
        return _run(args)
    except KeyboardInterrupt:
        _err(f"{PROG}: interrupted")
        return 130
    except BrokenPipeError:
        # The reader went away (| head): not an error; silence the final flush.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except Exception as exc:
        if args.debug:
            _err(traceback.format_exc().rstrip())
        message = str(exc) or type(exc).__name__
        if not isinstance(exc, ChatLedgerError | OSError):
            # A driver's error seldom says which store it came from.
            urls = [
                redact_url(getattr(args, name))
                for name in ("url", "source", "target")
                if isinstance(getattr(args, name, None), str)
            ]
            where = f" ({', '.join(urls)})" if urls else ""
            message = f"{type(exc).__name__}: {message}{where}"
            if isinstance(exc, ImportError):
                message += _driver_hint(args)
        _err(f"{PROG}: error: {' '.join(message.split())}")
        return 2 if isinstance(exc, _USAGE_ERRORS) else 1
