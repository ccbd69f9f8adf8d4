"""The ``chatledger`` command line: a demo, and tools to inspect and move memory.

Example (shell):
    chatledger demo                        # a SQLite file; needs chatledger-sql
    chatledger ls sqlite:///chat.db --long   # ids and message counts
    chatledger show sqlite:///chat.db c1
    chatledger export sqlite:///chat.db --format openai > chats.jsonl
    chatledger copy sqlite:///chat.db postgresql+psycopg://app@db/chat
    chatledger migrate postgresql+psycopg://app@db/chat   # after an upgrade
    chatledger conformance redis://127.0.0.1:6379/0 --namespace-option key_prefix
    chatledger conformance --async sqlite:///conformance.db
    chatledger bench postgresql+psycopg://app@db/chat --namespace-option table_name

Exit codes: 0 success, 1 runtime error (a store, conversation or file content
not as expected, a server that fails), 2 usage error (a bad argument, URL or
option value, a file argument that cannot be read or written, an unknown URL
scheme, a missing adapter, driver or package the command needs). An error
is one line on stderr; ``--debug`` adds the traceback. Passwords in URLs are
never printed. Commands that only read create nothing; long commands report
progress on stderr, a bar on a terminal and a line every few seconds elsewhere.

Layout: :mod:`~chatledger.cli.parser` builds the arguments, one module per
command runs it (``demo``, ``conversations`` for ls, show and rm,
``export_import``, ``copy``, ``migrate``, ``conformance``, ``bench``), and
:mod:`~chatledger.cli.entry_point` runs a command and maps its errors to exit
codes.
"""

from __future__ import annotations

from chatledger.cli.entry_point import main
from chatledger.cli.errors import UsageError
from chatledger.cli.parser import build_parser

__all__ = ["UsageError", "build_parser", "main"]
