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
- ``Awaitable[X]`` becomes ``X`` (so ``Callable[..., Awaitable[T]]`` becomes
  ``Callable[..., T]``); a bare ``Awaitable``, which the sources only import,
  becomes ``Callable`` (isort merges it into the ``Callable`` beside it).
- The same renames apply to the words of string literals, f-strings (however
  the running Python tokenizes them) and docstrings, whose examples lose
  ``await`` and ``async`` too. Examples await at their top level, as
  ``python -m asyncio`` does (tests/docs/examples.py runs them so), which
  leaves the sync example the same code without ``await``: ``asyncio.run(``
  in a string has no sync counterpart and is refused.
- ``if True:  # async`` keeps only its ``else:`` body in the sync module (none
  when it has no ``else:``), dedented to the ``if``, and as it is written:
  that body is sync code already, so no rename touches it. It is the place for
  what only one side does, such as a driver call with no sync counterpart.
- A statement whose first line (its ``def`` line, when decorated) ends with
  ``# async-only`` is left out. In an import, a line so marked must hold one
  name alone, and that name is left out: isort merges
  ``from x import a  # async-only`` with ``from x import b`` into
  ``from x import (a,  # async-only`` then ``b,)``, the mark still beside
  ``a``; merged from ``from x import a, c  # async-only`` it would end as
  ``from x import a, b, c  # async-only`` and take ``b`` with it.
- After either marker other comment text may follow, such as
  ``if True:  # async  # noqa: SIM108``.
- A marker the tool cannot act on is refused, naming the file and line:
  ``# async`` off an ``if True:`` line, ``# async-only`` off a statement's
  first line or on an import line of several names, an ``elif`` after
  ``if True:  # async``, a marker inside a sync-only ``else:`` body.

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
ASYNC_BLOCK = re.compile(r"#\s*async\s*(?:#.*)?")
ASYNC_ONLY = re.compile(r"#\s*async-only\s*(?:#.*)?")
WORD = re.compile(r"\b[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)*\b")
HEADER = "# Written by tools/async_to_sync.py from {source}: edit that one.\n"
AWAIT_IN_TEXT = re.compile(r"\bawait\s+|\basync\s+(?=(?:def|with|for)\b)")
ASYNCIO_RUN = re.compile(r"\basyncio\.run\(")
#: Tokens whose text is renamed word by word: strings, and from Python 3.12 on
#: the literal parts of f-strings (their fields are tokenized as code).
TEXT_TOKENS = {
    getattr(tokenize, name)
    for name in ("STRING", "FSTRING_MIDDLE", "TSTRING_MIDDLE")
    if hasattr(tokenize, name)
}


class ConversionError(Exception):
    """An async source the tool cannot convert faithfully; names file and line."""

    def __init__(self, source: Path, line: int, reason: str) -> None:
        shown = source.relative_to(ROOT) if source.is_relative_to(ROOT) else source
        super().__init__(f"{shown}:{line}: {reason}")


@dataclass(frozen=True)
class Twin:
    """An async source and the sync module written from it."""

    source: Path
    target: Path
    renames: dict[str, str]


@dataclass(frozen=True)
class _Line:
    """A line of the sync module before renaming, and where it comes from."""

    text: str
    number: int  # its line in the async source
    verbatim: bool  # sync-only text, which no rename touches


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


def _drop_async_statements(source: str, path: Path) -> list[_Line]:
    """The source's lines with ``if True:  # async`` and ``# async-only`` resolved.

    Only the outermost marked statements act: a marked statement inside a
    dropped one goes with it.
    """
    lines = source.splitlines(True)
    kept: list[_Line] = []
    at = 1
    for edit in _marked(source, path):
        if edit.first < at:
            continue
        kept += [_Line(lines[n - 1], n, False) for n in range(at, edit.first)]
        if edit.block is not None:
            kept += _else_body(edit.block, lines)
        at = edit.last + 1
    return kept + [_Line(lines[n - 1], n, False) for n in range(at, len(lines) + 1)]


@dataclass(frozen=True)
class _Edit:
    """Source lines ``first`` to ``last`` that the sync module leaves out."""

    first: int
    last: int
    block: ast.If | None = None  # an ``if True:  # async``: its else body stays


def _marked(source: str, path: Path) -> list[_Edit]:
    """What the markers leave out, in source order; refuses a stray marker."""
    source_lines = source.splitlines()
    comments = {
        tok.start[0]: tok.string
        for tok in tokenize.generate_tokens(io.StringIO(source).readline)
        if tok.type == tokenize.COMMENT
    }
    marks = {
        line
        for line, text in comments.items()
        if ASYNC_BLOCK.fullmatch(text) or ASYNC_ONLY.fullmatch(text)
    }
    statements = sorted(
        (node for node in ast.walk(ast.parse(source)) if isinstance(node, ast.stmt)),
        key=lambda node: (node.lineno, -(node.end_lineno or node.lineno)),
    )
    edits: list[_Edit] = []
    for stmt in statements:
        last = stmt.end_lineno or stmt.lineno
        if isinstance(stmt, ast.Import | ast.ImportFrom):
            lines = sorted(
                line
                for line in marks & set(range(stmt.lineno, last + 1))
                if ASYNC_ONLY.fullmatch(comments[line])
            )
            edits += _import_edits(stmt, lines, path)
            marks -= set(lines)
        if stmt.lineno not in marks:
            continue
        marks.remove(stmt.lineno)
        if ASYNC_ONLY.fullmatch(comments[stmt.lineno]):
            first = min([stmt.lineno] + [d.lineno for d in _decorators(stmt)])
            edits.append(_Edit(first, last))
        elif (
            isinstance(stmt, ast.If)
            and isinstance(stmt.test, ast.Constant)
            and stmt.test.value is True
        ):
            if stmt.orelse and source_lines[stmt.orelse[0].lineno - 1].lstrip(
                " "
            ).startswith("elif"):
                raise ConversionError(
                    path,
                    stmt.orelse[0].lineno,
                    "'if True:  # async' takes an 'else:', not an 'elif'",
                )
            edits.append(_Edit(stmt.lineno, last, stmt))
        else:
            raise ConversionError(
                path, stmt.lineno, "'# async' marks an 'if True:' line only"
            )
    for line in sorted(marks):
        raise ConversionError(
            path,
            line,
            f"{comments[line]!r} marks no statement: it goes at the end of a "
            "statement's first line",
        )
    for edit in edits:
        if edit.block is not None and edit.block.orelse:
            _refuse_markers_in_sync_branch(edit.block, edits, path)
    return sorted(edits, key=lambda edit: (edit.first, -edit.last))


def _decorators(stmt: ast.stmt) -> list[ast.expr]:
    return list(getattr(stmt, "decorator_list", []))


def _import_edits(
    stmt: ast.Import | ast.ImportFrom, marked: list[int], path: Path
) -> list[_Edit]:
    """The names of an import that ``# async-only`` lines leave out.

    A marked line must hold one name alone: isort merges the imports from one
    module and keeps each comment beside its name, so the mark then still
    tells which name is async-only, as it cannot for a line of several names.
    """
    last = stmt.end_lineno or stmt.lineno
    for line in marked:
        names = [alias for alias in stmt.names if alias.lineno == line]
        if len(names) != 1 or (stmt.lineno < last and line in (stmt.lineno, last)):
            raise ConversionError(
                path,
                line,
                "'# async-only' in an import goes on a line that holds one "
                "name alone: isort, merging imports, may put other names "
                "under it",
            )
    if len(marked) == len(stmt.names):
        return [_Edit(stmt.lineno, last)]
    return [_Edit(line, line) for line in marked]


def _refuse_markers_in_sync_branch(
    block: ast.If, edits: list[_Edit], path: Path
) -> None:
    sync_branch = range(block.orelse[0].lineno, (block.end_lineno or 0) + 1)
    for edit in edits:
        if edit.first in sync_branch:
            raise ConversionError(
                path, edit.first, "a marker inside a sync-only 'else:' body"
            )


def _else_body(block: ast.If, lines: list[str]) -> list[_Line]:
    if not block.orelse:
        return []
    else_line = next(
        n
        for n in range(block.orelse[0].lineno, block.lineno, -1)
        if lines[n - 1].lstrip().startswith("else")
    )
    last = block.end_lineno or block.lineno
    # The first statement, not the first line, tells the body's indent: the
    # body may open with a blank line or a comment indented otherwise.
    shift = block.orelse[0].col_offset - block.col_offset
    body = []
    for n in range(else_line + 1, last + 1):
        text = lines[n - 1]
        indent = len(text) - len(text.lstrip(" "))
        body.append(_Line(text[min(shift, indent) :], n, True))
    return body


def _sync_text(text: str, renames: dict[str, str]) -> str:
    """The words of a string (or an f-string's literal part) renamed."""
    text = AWAIT_IN_TEXT.sub("", text)
    return WORD.sub(lambda m: rename(m.group(), renames), text)


def _token_edits(
    text: str, renames: dict[str, str], lines: list[_Line], path: Path
) -> Iterator[tuple[int, int, str]]:
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
        if tok.start[0] <= len(lines) and lines[tok.start[0] - 1].verbatim:
            pass
        elif tok.type == tokenize.NAME and dropped and following is not None:
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
            if tokens[j].string == "Awaitable" and tokens[j + 1].string == "[":
                close = _closing_bracket(tokens, j + 1)
                yield offset(tok.start), offset(tokens[j + 1].end), ""
                yield offset(tokens[close].start), offset(tokens[close].end), ""
                j += 1
            elif (new := rename(chain, renames)) != chain:
                yield offset(tok.start), offset(tokens[j].end), new
            i = j
        elif tok.type in TEXT_TOKENS:
            # The source's own text, not tok.string: Python 3.12+ gives an
            # f-string's ``{{`` as ``{`` in the token but not in the source.
            start, end = offset(tok.start), offset(tok.end)
            old = text[start:end]
            run = ASYNCIO_RUN.search(old)
            if run is not None:
                row = tok.start[0] + old.count("\n", 0, run.start())
                raise ConversionError(
                    path,
                    lines[row - 1].number,
                    "'asyncio.run(' in a string has no sync counterpart: an "
                    "example awaits at its top level (tests/docs/examples.py "
                    "runs it in an event loop)",
                )
            new = _sync_text(old, renames)
            if new != old:
                yield start, end, new
        i += 1


def _closing_bracket(tokens: list[tokenize.TokenInfo], opening: int) -> int:
    depth = 0
    for k in range(opening, len(tokens)):
        depth += {"[": 1, "]": -1}.get(tokens[k].string, 0)
        if depth == 0:
            return k
    raise ValueError("unbalanced brackets")  # ast.parse accepted the source


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


def sync_source(source: str, renames: dict[str, str], path: Path) -> str:
    """The sync module's code written from the async ``source``, not yet formatted.

    Raises:
        ConversionError: for a marker the tool cannot act on faithfully.
    """
    lines = [
        line
        for line in _drop_async_statements(source, path)
        if not (TWIN_MARK.match(line.text) or RENAME_MARK.match(line.text))
    ]
    text = "".join(line.text for line in lines)
    pieces, at = [], 0
    for start, end, new in sorted(_token_edits(text, renames, lines, path)):
        pieces.append(text[at:start] + new)
        at = end
    return "".join(pieces) + text[at:]


def convert(source: str, renames: dict[str, str], path: Path, target: Path) -> str:
    """The sync module's text written from the async ``source`` at ``path``."""
    text = HEADER.format(source=path.name) + sync_source(source, renames, path)
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
        source = twin.source.read_text(encoding="utf-8")
        try:
            text = convert(source, twin.renames, twin.source, twin.target)
        except ConversionError as error:
            raise SystemExit(str(error)) from None
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
