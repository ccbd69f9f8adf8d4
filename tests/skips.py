"""The summary of a run's skips: ten lines at most, each saying how to run them.

A run without servers skips thousands of tests for a few causes. Each cause
gets one line, with its count:

- tests that need a server: one line for every server backend, with the
  count per backend and the variable that gives it a URL;
- documentation examples marked as needing a server or code of your own;
- tests behind an option (``run with --run-slow``), one line per option;
- a skip whose reason says how to run it (``pip install ...``), as written;
- the cases that do not apply where they were collected (a capability the
  backend lacks), in one line: other backends run them.

When the reasons of the last two kinds do not fit in ten lines, the last
line counts them all and names ``pytest -rs``, which lists every skip with
its reason.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

__all__ = ["MAX_LINES", "skip_lines"]

#: The most lines the summary takes.
MAX_LINES = 10

_SERVER = re.compile(r"CHATLEDGER_TEST_(\w+)_URL")
_OPTION = re.compile(r"run with (--[\w-]+)")
#: Words of a reason that says how to run what it skipped.
_HOW = re.compile(r"pip install|run under|run with|set [A-Z_]+")
#: Where the documentation's examples are tested.
_EXAMPLES = "tests/docs/"


def _line(count: int, text: str) -> str:
    return f"{count:6d}  {text}"


def skip_lines(skips: Iterable[tuple[str, str]]) -> list[str]:
    """Sum up ``(node id, reason)`` of each skipped test in at most ten lines."""
    servers: Counter[str] = Counter()
    examples = 0
    options: Counter[str] = Counter()
    said: dict[str, str] = {}
    stated: Counter[str] = Counter()
    absent: Counter[str] = Counter()
    for nodeid, reason in skips:
        if server := _SERVER.search(reason):
            servers[server.group(1).lower()] += 1
        elif nodeid.startswith(_EXAMPLES):
            examples += 1
        elif option := _OPTION.search(reason):
            options[option.group(1)] += 1
            said.setdefault(option.group(1), reason)
        elif _HOW.search(reason):
            stated[reason] += 1
        else:
            absent[reason] += 1
    lines = []
    if servers:
        each = ", ".join(f"{name} {n}" for name, n in sorted(servers.items()))
        lines.append(
            _line(
                servers.total(),
                f"need a server ({each}): set CHATLEDGER_TEST_<BACKEND>_URL to "
                "one, or start a Docker daemon for testcontainers",
            )
        )
    if examples:
        lines.append(
            _line(
                examples,
                "documentation examples that need a server or code of your own "
                "(they say which): run them by hand against one",
            )
        )
    for flag, count in sorted(options.items()):
        lines.append(_line(count, said[flag]))
    kept = sorted(stated.items())
    over: Counter[str] = Counter()
    if len(lines) + len(kept) + (1 if absent else 0) > MAX_LINES:
        room = MAX_LINES - len(lines) - 1
        over.update(dict(kept[room:]))
        kept = kept[:room]
    lines += [_line(count, reason) for reason, count in kept]
    if over:
        lines.append(
            _line(
                over.total() + absent.total(),
                f"skipped for {len(over) + len(absent)} more reasons, each saying "
                "how to run them or that the case does not apply: pytest -rs "
                "lists them",
            )
        )
    elif absent:
        lines.append(
            _line(
                absent.total(),
                "do not apply where they were collected (a capability the "
                "backend lacks): the backends that have it run them; pytest -rs "
                "lists each reason",
            )
        )
    return lines
