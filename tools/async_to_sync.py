"""Write each sync module from its async source, so an operation is written once.

The async module is the source of truth. It names the sync module it generates
in a comment among its first lines::

    # sync twin: repository.py
    # sync rename: redis.asyncio -> redis

The conversion is mechanical and the same for every module:

- ``async def``, ``async with`` and ``async for`` lose ``async``; ``await`` goes.
- Names are renamed: first the ``# sync rename:`` lines of the module and
  :data:`RENAMES` (dotted names, longest match first), then by pattern:
  ``AsyncName`` -> ``Name``, ``async_name`` -> ``name``, ``name_async`` -> ``name``.
  The same renames apply to the words of string literals and docstrings,
  whose examples lose ``await`` and ``async`` too.
- ``if True:  # async`` keeps only its ``else:`` body in the sync module (none
  when it has no ``else:``): the place for what only one side does, such as a
  driver call with no sync counterpart.
- A statement whose first line ends with ``# async-only`` is left out.

The result is formatted by ruff with the repository's settings. ``--check``
writes nothing and fails when a checked-in sync module differs from what this
tool would write; the test suite and the lint session run it.

Usage::

    python tools/async_to_sync.py            # regenerate every sync module
    python tools/async_to_sync.py --check    # fail on a stale one
    python tools/async_to_sync.py packages/sql   # only the sources under a path
"""

from __future__ import annotations

import argparse
import ast
import io
import re
import subprocess
import sys
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE_ROOTS = ("core/src", "packages")

#: Names whose sync counterpart no pattern gives; dotted names match a whole
#: attribute chain or its head.
RENAMES: dict[str, str] = {
    "aclose": "close",
    "__aenter__": "__enter__",
    "__aexit__": "__exit__",
    "__aiter__": "__iter__",
    "__anext__": "__next__",
    "anext": "next",
    "StopAsyncIteration": "StopIteration",
    "asynccontextmanager": "contextmanager",
    "asyncio.Lock": "threading.Lock",
    "asyncio.sleep": "time.sleep",
    "asyncio.TimeoutError": "TimeoutError",
    "asyncio.iscoroutinefunction": "callable",
    "is_async_repository": "is_repository",
    "AsyncExitStack": "ExitStack",
    "Awaitable": "Callable",
}

TWIN_MARK = re.compile(r"^# sync twin: (?P<target>\S+\.py)\s*$", re.MULTILINE)
RENAME_MARK = re.compile(
    r"^# sync rename: (?P<old>[\w.]+) -> (?P<new>[\w.]+)\s*$", re.MULTILINE
)
ASYNC_BLOCK = re.compile(r"^\s*if True:\s*# async\s*$")
ASYNC_ONLY = re.compile(r"#\s*async-only\s*$")
WORD = re.compile(r"\b[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)*\b")
HEADER = "# Written by tools/async_to_sync.py from {source}: edit that one.\n"
AWAIT_IN_TEXT = re.compile(r"\bawait\s+|\basync\s+(?=(?:def|with|for)\b)")


@dataclass(frozen=True)
class Twin:
    """An async source and the sync module written from it."""

    source: Path
    target: Path
    renames: dict[str, str]


def find_twins(root: Path = ROOT) -> list[Twin]:
    """Every async source under the source roots that names a sync twin."""
    twins = []
    for top in SOURCE_ROOTS:
        for path in sorted((root / top).rglob("*.py")):
            if "/tests/" in path.as_posix():
                continue
            head = "".join(path.read_text(encoding="utf-8").splitlines(True)[:12])
            mark = TWIN_MARK.search(head)
            if mark is None:
                continue
            renames = dict(RENAMES)
            for m in RENAME_MARK.finditer(path.read_text(encoding="utf-8")):
                renames[m["old"]] = m["new"]
            twins.append(Twin(path, path.with_name(mark["target"]), renames))
    return twins


def rename(name: str, renames: dict[str, str]) -> str:
    """The sync name of one dotted ``name``."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        head = ".".join(parts[:cut])
        if head in renames:
            rest = [_rename_word(p, renames) for p in parts[cut:]]
            return ".".join([renames[head], *rest])
    return ".".join(_rename_word(p, renames) for p in parts)


def _rename_word(word: str, renames: dict[str, str]) -> str:
    if word in renames:
        return renames[word]
    if re.match(r"Async[A-Z]", word):
        return word[len("Async") :]
    if word.startswith("async_") and len(word) > len("async_"):
        return word[len("async_") :]
    if word.endswith("_async") and len(word) > len("_async"):
        return word[: -len("_async")]
    return word


def _drop_async_statements(text: str) -> str:
    """Resolve ``if True:  # async`` blocks and ``# async-only`` statements.

    One at a time, outermost first, re-parsing after each: nested markers and
    line numbers then never go stale.
    """
    while True:
        lines = text.splitlines(True)
        edit = _first_marked(ast.parse(text), lines)
        if edit is None:
            return text
        first, last, kept = edit
        text = "".join(lines[: first - 1] + kept + lines[last:])


def _first_marked(tree: ast.AST, lines: list[str]) -> tuple[int, int, list[str]] | None:
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody", "handlers"):
            block = getattr(node, field, [])
            for stmt in block if isinstance(block, list) else []:
                if not isinstance(stmt, ast.stmt):
                    continue
                first = min(
                    [stmt.lineno]
                    + [d.lineno for d in getattr(stmt, "decorator_list", [])]
                )
                last = stmt.end_lineno or stmt.lineno
                opening = lines[stmt.lineno - 1]
                if isinstance(stmt, ast.If) and ASYNC_BLOCK.match(opening):
                    return first, last, _else_body(stmt, lines)
                if ASYNC_ONLY.search(opening):
                    return first, last, []
    return None


def _else_body(block: ast.If, lines: list[str]) -> list[str]:
    if not block.orelse:
        return []
    if_line = lines[block.lineno - 1]
    else_at = next(
        i
        for i in range(block.orelse[0].lineno - 1, block.lineno - 1, -1)
        if lines[i - 1].strip().startswith("else:")
    )
    body = lines[else_at : block.end_lineno]
    outer = len(if_line) - len(if_line.lstrip())
    inner = len(body[0]) - len(body[0].lstrip())
    return [line[inner - outer :] if line.strip() else line for line in body]


def _token_edits(text: str, renames: dict[str, str]) -> Iterator[tuple[int, int, str]]:
    """(start, end, replacement) offsets in ``text`` for the token-level changes."""
    starts = [0]
    for line in text.splitlines(True):
        starts.append(starts[-1] + len(line))

    def offset(pos: tuple[int, int]) -> int:
        return starts[pos[0] - 1] + pos[1]

    tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        following = tokens[i + 1] if i + 1 < len(tokens) else None
        dropped = tok.string == "await" or (
            tok.string == "async"
            and following is not None
            and following.string in ("def", "with", "for")
        )
        if tok.type == tokenize.NAME and dropped and following is not None:
            yield offset(tok.start), offset(following.start), ""
        elif tok.type == tokenize.NAME:
            j = i
            while (
                j + 2 < len(tokens)
                and tokens[j + 1].string == "."
                and tokens[j + 2].type == tokenize.NAME
            ):
                j += 2
            chain = "".join(t.string for t in tokens[i : j + 1])
            new = rename(chain, renames)
            if new != chain:
                yield offset(tok.start), offset(tokens[j].end), new
            i = j
        elif tok.type == tokenize.STRING:
            new = AWAIT_IN_TEXT.sub("", tok.string)
            new = WORD.sub(lambda m: rename(m.group(), renames), new)
            if new != tok.string:
                yield offset(tok.start), offset(tok.end), new
        i += 1


def _ruff(args: list[str], text: str, target: Path) -> str:
    command = [
        sys.executable,
        "-m",
        "ruff",
        *args,
        "--stdin-filename",
        str(target),
        "-",
    ]
    done = subprocess.run(
        command, input=text, capture_output=True, text=True, cwd=ROOT, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"ruff {' '.join(args)} failed on {target}:\n{done.stderr}")
    return done.stdout


def convert(
    source: str, renames: dict[str, str], source_name: str, target: Path
) -> str:
    """The sync module's text written from the async ``source``."""
    text = _drop_async_statements(source)
    text = "".join(
        line
        for line in text.splitlines(True)
        if not (TWIN_MARK.match(line) or RENAME_MARK.match(line))
    )
    edits = sorted(_token_edits(text, renames))
    pieces, at = [], 0
    for start, end, new in edits:
        pieces.append(text[at:start] + new)
        at = end
    text = HEADER.format(source=source_name) + "".join(pieces) + text[at:]
    text = _ruff(["check", "--fix", "--select", "I", "--exit-zero", "-q"], text, target)
    return _ruff(["format", "-q"], text, target)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="fail when a sync module is stale"
    )
    parser.add_argument(
        "paths",
        nargs="*",
        type=Path,
        help="only the async sources under these paths (default: all)",
    )
    args = parser.parse_args(argv)
    only = [p.resolve() for p in args.paths]
    stale = []
    for twin in find_twins():
        if only and not any(twin.source.is_relative_to(p) for p in only):
            continue
        text = convert(
            twin.source.read_text(encoding="utf-8"),
            twin.renames,
            twin.source.name,
            twin.target,
        )
        current = (
            twin.target.read_text(encoding="utf-8") if twin.target.exists() else ""
        )
        if current == text:
            continue
        stale.append(twin.target.relative_to(ROOT))
        if not args.check:
            twin.target.write_text(text, encoding="utf-8")
    if args.check and stale:
        names = "\n  ".join(str(p) for p in stale)
        print(f"stale sync modules (run python tools/async_to_sync.py):\n  {names}")
        return 1
    for path in stale:
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
