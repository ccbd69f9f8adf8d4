"""The examples of the documentation: found, and run in a process of their own.

Two sources:

- every ``Example:`` section of a public module's docstring (the indented
  block under it), in ``core/src`` and ``packages/*/src``;
- every fenced ``python`` block of the READMEs (the repository's, the
  core's and each package's); the blocks of one README run in order, in one
  namespace, as a reader follows them, and the blocks of all the READMEs run
  one after another in one folder, as a reader who tries them all does, so
  that two examples which store into the same file or id would meet.

- every fenced ``python`` block of the documentation site's pages
  (``docs/**/*.md``), each page's blocks in order in one namespace, every
  page in one folder of their own.

An example that cannot run here says so where it is written, with the reason
the test reports when it skips it: ``Example (needs a Redis server):`` or
``Example (shell):`` in a docstring, ``<!-- example: needs a Redis server -->``
on the line before a README block or a page's block. A page's block that
needs one of the servers in :data:`SERVERS` is written with that server's
local URL and runs on its own, against the server its
``CHATLEDGER_TEST_<NAME>_URL`` names (that URL in place of the local one),
when that variable is set; it is skipped, saying which variable to set, when
it is not.

Run as a program, this module runs the examples whose names it is given,
each docstring example in a fresh temporary folder, the README blocks in one
and the pages' blocks in another, with TCP connections refused but during a
page's example that needs a server (an example that needs a server and is
not marked fails instead of writing to one), and prints a JSON object: each
name and its traceback, or ``null``.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import inspect
import json
import os
import re
import socket
import sys
import tempfile
import textwrap
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

_HEADER = re.compile(r"^(?P<indent>[ \t]*)Examples?(?: \((?P<note>.*)\))?:[ \t]*$")
_MARKER = re.compile(r"^<!--\s*example:\s*(?P<note>.*?)\s*-->\s*$")
_FENCE = re.compile(r"^```(?P<language>\S*)\s*$")


@dataclass(frozen=True)
class Example:
    """One example: where it is, its code, and why it is not run, if it is not.

    Attributes:
        name: ``path:line`` of its first line of code.
        code: The Python code.
        skip: The reason it is not run here, or ``None``.
        group: Examples of one group share a namespace (a README's blocks).
        folder: Examples of one folder run in one temporary folder, in order
            (every README block).
        server: The :data:`SERVERS` name of the server it runs against, or
            ``None`` for an example that runs offline.
    """

    name: str
    code: str
    skip: str | None
    group: str
    folder: str
    server: str | None = None


#: The servers a page's example may need, by the name its marker gives
#: (``<!-- example: needs a Redis server -->``): the variable that names the
#: server to run it against, and the URL it is written with, that of the local
#: server the README's development section starts.
SERVERS = {
    "PostgreSQL": (
        "CHATLEDGER_TEST_POSTGRESQL_URL",
        "postgresql+psycopg://postgres@127.0.0.1:5432/test",
    ),
    "MariaDB": (
        "CHATLEDGER_TEST_MARIADB_URL",
        "mysql+pymysql://root@127.0.0.1:3306/test",
    ),
    "Redis": ("CHATLEDGER_TEST_REDIS_URL", "redis://127.0.0.1:6379/0"),
    "MongoDB": ("CHATLEDGER_TEST_MONGODB_URL", "mongodb://127.0.0.1:27017/test"),
    "Cassandra": (
        "CHATLEDGER_TEST_CASSANDRA_URL",
        "cassandra://127.0.0.1:9042/chatledger_test",
    ),
    "Neo4j": ("CHATLEDGER_TEST_NEO4J_URL", "bolt://127.0.0.1:7687"),
}
_NEEDS_SERVER = re.compile(r"^needs an? (?P<server>\S+) server$")


def _skip_reason(note: str | None) -> str | None:
    if note is None:
        return None
    if note.startswith("needs "):
        return note
    if note.startswith("shell"):
        return "shell commands (tests/cli runs the command itself)"
    return None


def _public_modules() -> Iterator[Path]:
    for source in [ROOT / "core" / "src", *sorted((ROOT / "packages").glob("*/src"))]:
        for path in sorted(source.rglob("*.py")):
            parts = path.relative_to(source).parts
            if not any(p.startswith("_") and p != "__init__.py" for p in parts):
                yield path


def _docstrings(tree: ast.Module) -> Iterator[tuple[int, str]]:
    """``(line of the docstring's first line, its raw text)`` of every docstring."""
    nodes: list[Any] = [tree]
    nodes += [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
    ]
    for node in nodes:
        if node.body and isinstance(node.body[0], ast.Expr):
            value = node.body[0].value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                yield value.lineno, value.value


def docstring_examples() -> list[Example]:
    """Every ``Example:`` section of the public modules' docstrings."""
    found = []
    for path in _public_modules():
        relative = path.relative_to(ROOT).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for first_line, text in _docstrings(tree):
            lines = text.splitlines()
            for index, line in enumerate(lines):
                header = _HEADER.match(line)
                if header is None:
                    continue
                indent = len(header.group("indent").expandtabs())
                block: list[str] = []
                for following in lines[index + 1 :]:
                    width = len(following) - len(following.lstrip())
                    if following.strip() and width <= indent:
                        break
                    block.append(following)
                code = textwrap.dedent("\n".join(block)).strip("\n")
                name = f"{relative}:{first_line + index + 1}"
                skip = _skip_reason(header.group("note"))
                found.append(Example(name, code, skip, name, name))
    return found


_README_FOLDER = "READMEs"
_PAGES_FOLDER = "docs"


def _fenced_blocks(path: Path) -> Iterator[tuple[str, str | None, str]]:
    """``(path:line, the marker's note or None, code)`` of each ``python`` block."""
    relative = path.relative_to(ROOT).as_posix()
    lines = path.read_text(encoding="utf-8").splitlines()
    index = 0
    while index < len(lines):
        fence = _FENCE.match(lines[index])
        if fence is None or fence.group("language") != "python":
            index += 1
            continue
        start = index + 1
        end = start
        while end < len(lines) and not _FENCE.match(lines[end]):
            end += 1
        previous = lines[index - 1] if index else ""
        marker = _MARKER.match(previous)
        note = marker.group("note") if marker else None
        yield f"{relative}:{start + 1}", note, "\n".join(lines[start:end])
        index = end + 1


def readme_examples() -> list[Example]:
    """Every fenced ``python`` block of the READMEs, in document order."""
    readmes = [ROOT / "README.md", ROOT / "core" / "README.md"]
    readmes += sorted((ROOT / "packages").glob("*/README.md"))
    found = []
    for path in readmes:
        relative = path.relative_to(ROOT).as_posix()
        for name, note, code in _fenced_blocks(path):
            found.append(Example(name, code, note, relative, _README_FOLDER))
    return found


def page_examples() -> list[Example]:
    """Every fenced ``python`` block of the site's pages, in document order.

    A block that needs a server of :data:`SERVERS` is an example of its own
    (its group and folder its name), skipped when that server's variable is
    not set.
    """
    found = []
    for path in sorted((ROOT / "docs").rglob("*.md")):
        relative = path.relative_to(ROOT).as_posix()
        for name, note, code in _fenced_blocks(path):
            needs = _NEEDS_SERVER.match(note or "")
            if needs is None or needs.group("server") not in SERVERS:
                found.append(Example(name, code, note, relative, _PAGES_FOLDER))
                continue
            server = needs.group("server")
            variable, local = SERVERS[server]
            skip = None
            if not os.environ.get(variable):
                skip = f"{note}: set {variable} to run it (it stands for {local})"
            found.append(Example(name, code, skip, name, name, server))
    return found


def all_examples() -> list[Example]:
    """The README blocks, the pages' blocks, then the docstring examples."""
    return readme_examples() + page_examples() + docstring_examples()


def server_code(example: Example) -> str:
    """The code of a page's example that needs a server, on the server to test.

    Raises:
        ValueError: The example does not hold its server's local URL.
    """
    assert example.server is not None
    variable, local = SERVERS[example.server]
    if local not in example.code:
        raise ValueError(f"{example.name} needs {example.server} but has no {local}")
    return example.code.replace(local, os.environ[variable])


#: Whether the example running now may connect: one that needs a server.
_online = False


def _refuse_tcp(self: socket.socket, address: Any) -> Any:
    if not _online and self.family in (socket.AF_INET, socket.AF_INET6):
        raise ConnectionRefusedError(
            f"examples run offline: connecting to {address} was refused; mark an "
            "example that needs a server (see tests/docs/examples.py)"
        )
    return _connect(self, address)


_connect = socket.socket.connect


def _run_code(example: Example, namespace: dict[str, Any]) -> None:
    """Run one example; one that awaits at its top level runs in an event loop.

    An async module's examples read as in ``python -m asyncio``: ``await``
    without a function around it, so that the sync module written from that
    source shows the same example without it.
    """
    source = example.code if example.server is None else server_code(example)
    code = compile(source, example.name, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    if code.co_flags & inspect.CO_COROUTINE:
        asyncio.run(eval(code, namespace))
    else:
        exec(code, namespace)


def run(names: list[str]) -> dict[str, str | None]:
    """Run the examples called ``names``; return each one's traceback or ``None``."""
    global _online
    socket.socket.connect = _refuse_tcp  # type: ignore[method-assign,assignment]
    wanted = set(names)
    namespaces: dict[str, dict[str, Any]] = {}
    folders: dict[str, str] = {}
    results: dict[str, str | None] = {}
    home = Path.cwd()
    with contextlib.ExitStack() as stack:
        for example in all_examples():
            if example.name not in wanted:
                continue
            namespace = namespaces.setdefault(
                example.group, {"__name__": "__example__"}
            )
            if example.folder not in folders:
                made = tempfile.TemporaryDirectory(prefix="chatledger-example-")
                folders[example.folder] = stack.enter_context(made)
            os.chdir(folders[example.folder])
            _online = example.server is not None
            try:
                _run_code(example, namespace)
                results[example.name] = None
            except BaseException:
                results[example.name] = traceback.format_exc()
            finally:
                _online = False
                os.chdir(home)
    return results


if __name__ == "__main__":
    print(json.dumps(run(sys.argv[1:])))
