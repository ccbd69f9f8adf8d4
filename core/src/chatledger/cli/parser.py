"""The argument parser of the ``chatledger`` command: its commands and options."""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from typing import Any, NoReturn

from chatledger.benchmark import WINDOWS
from chatledger.cli.bench import bench
from chatledger.cli.conformance import conformance
from chatledger.cli.conversations import DEFAULT_SHOWN, ls, rm, show
from chatledger.cli.copy import copy
from chatledger.cli.demo import DEMO_URL, demo
from chatledger.cli.export_import import export, import_
from chatledger.cli.migrate import migrate
from chatledger.cli.output import err, remember_url
from chatledger.cli.plot import PLOT_HINT
from chatledger.conversation_info import validate_owner
from chatledger.errors import InvalidConversationInfoError
from chatledger.move_in.formats import FORMATS
from chatledger.progress import DEFAULT_EVERY

__all__ = ["PROG", "build_parser"]

PROG = "chatledger"


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
    return remember_url(text)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        err(f"{self.prog}: error: {message}")
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


def _owner(text: str) -> str:
    if not text:
        raise argparse.ArgumentTypeError("expected an owner, not ''")
    try:
        return validate_owner(text)
    except InvalidConversationInfoError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


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


_IMPORT_DESCRIPTION = f"""\
{PROG} import URL FILE reads a file written by export --format jsonl (or -
for stdin) into the store at URL; each conversation in it replaces the
stored one.

{PROG} import --from FORMAT SOURCE TARGET_URL reads the conversations of
another library's store and appends each one whole to its log in TARGET_URL,
in one atomic write, with message ids derived from the source's rows: a
re-run adds only what is new. What cannot be carried is said on stderr, per
conversation, and makes the exit code 1."""


def _formats_epilog() -> str:
    width = max(len(name) for name in FORMATS)
    entries = [("jsonl", "chatledger's own export, a file (as without --from)")]
    for name, source_format in FORMATS.items():
        summary = source_format.summary
        if source_format.source != "a SQLAlchemy URL":
            summary += f"; SOURCE is {source_format.source}"
        entries.append((name, summary))
    lines = ["FORMAT (SOURCE is a SQLAlchemy URL unless said):"]
    for name, summary in entries:
        lines += textwrap.wrap(
            summary,
            width=79,
            initial_indent=f"  {name:<{width}}  ",
            subsequent_indent=" " * (width + 4),
        )
    lines += [
        "",
        "Example:",
        f"  {PROG} import --from spring-ai-jdbc \\",
        "      postgresql+psycopg://app@db/app sqlite:///chat.db",
    ]
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of the ``chatledger`` command."""
    from chatledger import __version__

    parser = _Parser(
        prog=PROG,
        description="Conversation memory for LLM applications: demo, inspect, "
        "export, import and copy stored conversations, upgrade a store, and "
        "measure a database.",
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

    demo_parser = commands.add_parser(
        "demo", help="play a scripted conversation through a window memory"
    )
    demo_parser.add_argument(
        "--url", default=DEMO_URL, type=_url, help=f"default {DEMO_URL}"
    )
    demo_parser.add_argument(
        "--max-messages",
        type=int,
        default=8,
        metavar="N",
        help="window size (default 8)",
    )
    demo_parser.add_argument(
        "--conversation",
        metavar="ID",
        help="continue this conversation (default: a new id per run)",
    )
    _add_options(demo_parser)
    demo_parser.set_defaults(run=demo)

    ls_parser = commands.add_parser(
        "ls",
        help="list conversation ids (with --owner or --long: their records, "
        "newest first)",
        description="List the conversations of a store: their ids in id order, "
        "or, with --owner or --long, their records newest first (a store whose "
        "adapter keeps conversation records).",
    )
    ls_parser.add_argument("url", type=_url)
    ls_parser.add_argument(
        "--owner",
        type=_owner,
        metavar="X",
        help="only the conversations of owner X, newest first",
    )
    shape = ls_parser.add_mutually_exclusive_group()
    shape.add_argument(
        "-l",
        "--long",
        action="store_true",
        help="one record per line, newest first, tab separated: id, updated_at, "
        "message count, owner, title (- where none)",
    )
    shape.add_argument(
        "--times",
        action="store_true",
        help="also the count, first and last created_at (reads each conversation)",
    )
    ls_parser.add_argument(
        "--limit",
        type=_positive,
        metavar="N",
        help="list at most N conversations (the first N of the order listed)",
    )
    _add_options(ls_parser)
    ls_parser.set_defaults(run=ls)

    show_parser = commands.add_parser(
        "show", help="print the newest messages of one conversation"
    )
    show_parser.add_argument("url", type=_url)
    show_parser.add_argument("id")
    shown = show_parser.add_mutually_exclusive_group()
    shown.add_argument(
        "--all", action="store_true", help="print every message, oldest first"
    )
    shown.add_argument(
        "--last",
        type=_positive,
        default=DEFAULT_SHOWN,
        metavar="N",
        help=f"print the newest N messages (default {DEFAULT_SHOWN})",
    )
    _add_options(show_parser)
    show_parser.set_defaults(run=show)

    export_parser = commands.add_parser(
        "export", help="write conversations as JSON lines (all, or the ids given)"
    )
    export_parser.add_argument("url", type=_url)
    export_parser.add_argument("ids", nargs="*", metavar="ID")
    export_parser.add_argument(
        "--format",
        choices=("jsonl", "openai", "openai-responses", "anthropic"),
        default="jsonl",
        help="jsonl: one message per line in chatledger's codec, with its "
        "conversation_id (what import reads); openai / openai-responses / "
        "anthropic: one conversation per line in that API's request shape "
        "(messages=, input=, or system= and messages=)",
    )
    export_parser.add_argument(
        "--output", metavar="FILE", help="write here, not to stdout"
    )
    _add_progress_options(export_parser)
    _add_options(export_parser)
    export_parser.set_defaults(run=export)

    import_parser = commands.add_parser(
        "import",
        help="read a jsonl export (each conversation in it replaces the stored "
        "one), or move in from another library's store (--from)",
        usage=f"{PROG} import [options] URL FILE\n"
        f"       {PROG} import [options] --from FORMAT SOURCE TARGET_URL",
        description=_IMPORT_DESCRIPTION,
        epilog=_formats_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    import_parser.add_argument(
        "first",
        type=_url,
        metavar="URL|SOURCE",
        help="the store to import into; with --from, the store to read",
    )
    import_parser.add_argument(
        "second",
        type=_url,
        metavar="FILE|TARGET_URL",
        help="the export to read; with --from, the store to import into",
    )
    import_parser.add_argument(
        "--from",
        dest="source_format",
        choices=["jsonl", *FORMATS],
        metavar="FORMAT",
        help="the format of SOURCE (listed below); then SOURCE comes first",
    )
    import_parser.add_argument(
        "--table",
        metavar="NAME",
        help="the source's table, NAME or SCHEMA.NAME (default: the format's own)",
    )
    import_parser.add_argument(
        "--source-timezone",
        default="UTC",
        metavar="ZONE",
        help="the zone of the source's times that carry none, such as a JVM's "
        "for Spring AI's TIMESTAMP on PostgreSQL (default UTC)",
    )
    import_parser.add_argument(
        "--drop-uncarriable",
        action="store_true",
        help="import a conversation without the rows that cannot be carried "
        "(each still said, the exit code still 1); by default such a "
        "conversation is not imported",
    )
    _add_progress_options(import_parser)
    _add_options(import_parser)
    import_parser.set_defaults(run=import_)

    copy_parser = commands.add_parser(
        "copy",
        help="copy every conversation, ids and created_at kept (re-running is safe)",
    )
    copy_parser.add_argument("source", type=_url, metavar="SRC_URL")
    copy_parser.add_argument("target", type=_url, metavar="DST_URL")
    _add_progress_options(copy_parser)
    _add_options(copy_parser)
    copy_parser.add_argument(
        "--target-option",
        dest="target_pairs",
        metavar="KEY=VALUE",
        type=_option,
        action="append",
        default=[],
        help="an option for the target's from_url (-o options go to the source)",
    )
    copy_parser.set_defaults(run=copy)

    rm_parser = commands.add_parser("rm", help="delete conversations")
    rm_parser.add_argument("url", type=_url)
    rm_parser.add_argument("ids", nargs="+", metavar="ID")
    rm_parser.add_argument(
        "-f", "--force", action="store_true", help="ignore ids that do not exist"
    )
    _add_options(rm_parser)
    rm_parser.set_defaults(run=rm)

    migrate_parser = commands.add_parser(
        "migrate",
        help="bring a store an earlier release wrote to this release's schema "
        "and print each change (a re-run changes nothing)",
    )
    migrate_parser.add_argument("url", type=_url)
    _add_options(migrate_parser)
    migrate_parser.set_defaults(run=migrate)

    conformance_parser = commands.add_parser(
        "conformance",
        help="run the conformance suite against a live backend "
        "(needs chatledger[testing]; writes and deletes test conversations)",
        epilog="Arguments after -- go to pytest, e.g. -- -k window -x",
    )
    conformance_parser.add_argument("url", type=_url)
    conformance_parser.add_argument(
        "--namespace-option",
        metavar="NAME",
        help="the adapter option (table name, key prefix, collection) that gets "
        "a fresh value for this run; without it the store must be empty",
    )
    conformance_parser.add_argument(
        "--async",
        dest="use_async",
        action="store_true",
        help="run the async suite on the adapter's async twin (connect_async)",
    )
    conformance_parser.add_argument("-v", "--verbose", action="store_true")
    _add_progress_options(conformance_parser)
    _add_options(conformance_parser)
    conformance_parser.set_defaults(run=conformance)

    bench_parser = commands.add_parser(
        "bench",
        help="measure append and read latency on a database, beside its driver's "
        "own INSERT and SELECT (writes and removes data of its own)",
    )
    bench_parser.add_argument("url", type=_url)
    bench_parser.add_argument(
        "--namespace-option",
        metavar="NAME",
        help="the adapter option (table name, key prefix, collection) that gets "
        "a fresh value for this run and is removed after it; without it the "
        "store must be empty",
    )
    bench_parser.add_argument(
        "--windows",
        type=_windows,
        default=WINDOWS,
        metavar="W,W,...",
        help=f"window sizes to measure (default {','.join(str(w) for w in WINDOWS)})",
    )
    bench_parser.add_argument(
        "--samples",
        type=_positive,
        default=200,
        metavar="N",
        help="timed operations per figure (default 200)",
    )
    bench_parser.add_argument(
        "--json", action="store_true", help="print the figures as JSON, not a table"
    )
    bench_parser.add_argument(
        "--plot",
        metavar="FILE.png",
        help=f"also draw the figures into FILE.png (needs matplotlib: {PLOT_HINT})",
    )
    _add_progress_options(bench_parser)
    _add_options(bench_parser)
    bench_parser.set_defaults(run=bench)
    return parser
