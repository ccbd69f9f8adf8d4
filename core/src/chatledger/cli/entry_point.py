"""The entry point of the ``chatledger`` command: run it, map errors to exit codes."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import traceback
from collections.abc import Callable, Sequence

from chatledger.cli.errors import UsageError
from chatledger.cli.output import err
from chatledger.cli.parser import PROG, build_parser
from chatledger.cli.stores import closed_after
from chatledger.connect import install_hint, redact_url, url_scheme
from chatledger.errors import (
    ChatLedgerError,
    InvalidConversationIdError,
    InvalidNameError,
    InvalidOptionError,
    InvalidTTLError,
    InvalidUrlError,
    UnknownBackendError,
)

__all__ = ["main"]


class _ScrubbingHandler(logging.Handler):
    """Shows driver log records on stderr with --debug, passwords scrubbed."""

    def emit(self, record: logging.LogRecord) -> None:
        err(self.format(record))


def _configure_logging(debug: bool) -> logging.Handler:
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
    return handler


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
# adapter: the command cannot work as installed. So is an option value an
# adapter refuses before any I/O (a table name, a ttl).
_USAGE_ERRORS = (
    UsageError,
    UnknownBackendError,
    InvalidConversationIdError,
    InvalidNameError,
    InvalidOptionError,
    InvalidTTLError,
    InvalidUrlError,
    ImportError,
)


def _run(args: argparse.Namespace) -> int:
    args.options = dict(args.option_pairs)
    args.target_options = dict(getattr(args, "target_pairs", []))
    if getattr(args, "max_messages", 1) < 1:
        raise UsageError("--max-messages must be at least 1")
    run: Callable[[argparse.Namespace], int] = args.run
    with closed_after() as args.closing:
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
    handler = _configure_logging(args.debug)
    try:
        return _run(args)
    except KeyboardInterrupt:
        err(f"{PROG}: interrupted")
        return 130
    except BrokenPipeError:
        # The reader went away (| head): not an error; silence the final flush.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except Exception as exc:
        if args.debug:
            err(traceback.format_exc().rstrip())
        # A driver's background thread (a pool monitor, say) may still log:
        # the one-line error must stay the last line on stderr.
        logging.getLogger().removeHandler(handler)
        with handler.lock or contextlib.nullcontext():
            pass  # wait for a record being written when it was removed
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
        err(f"{PROG}: error: {' '.join(message.split())}")
        return 2 if isinstance(exc, _USAGE_ERRORS) else 1
