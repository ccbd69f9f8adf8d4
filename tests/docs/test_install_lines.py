"""Every README example says, beside it, the ``pip install`` line it needs.

What an example needs: the distribution of each ``chatledger_*`` module it
imports (``chatledger[testing]`` for the conformance suite), and the adapter,
with the driver's extra, of each URL it opens (what
:func:`chatledger.backends.install_hint` names). Beside it means before it in
its own section (since the ``##`` heading above it); a package's README is
about that one package, so what it says before its first example counts for
every section. A line from a checkout (``./packages/sql[aiosqlite]``) counts
as the package's own.
"""

from __future__ import annotations

import ast
import re
import shlex
from pathlib import Path

import pytest

from chatledger.backends import install_hint
from tests.docs.examples import ROOT, Example, readme_examples

_URL = re.compile(r"[\"']([A-Za-z][A-Za-z0-9+.-]*)://")
_PIP = re.compile(r"pip install ([^`\n]+)")
_REQUIREMENT = re.compile(r"^(?P<name>[A-Za-z0-9._/-]+)(?:\[(?P<extras>[^\]]*)\])?$")

Requirement = tuple[str, frozenset[str]]


def _requirement(text: str) -> Requirement | None:
    """``chatledger-sql[aiosqlite]`` or ``./packages/sql[aiosqlite]`` as a pair."""
    match = _REQUIREMENT.match(text.strip("'\""))
    if match is None:
        return None
    name = match.group("name").lower().rstrip("/")
    if name == "./core":
        name = "chatledger"
    elif name.startswith("./packages/"):
        name = "chatledger-" + name.removeprefix("./packages/")
    extras = frozenset(e.strip() for e in (match.group("extras") or "").split(","))
    return name.replace("_", "-"), extras - {""}


def needed(code: str) -> set[Requirement]:
    """The distributions, with extras, that ``code`` imports or opens a URL of."""
    found: set[Requirement] = set()
    for scheme in _URL.findall(code):
        hint = install_hint(scheme)
        if hint is not None:
            requirement = _requirement(hint.removeprefix("pip install "))
            assert requirement is not None, hint
            found.add(requirement)
    for node in ast.walk(ast.parse(code)):
        modules = []
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules = [node.module]
        for module in modules:
            top = module.partition(".")[0]
            if top.startswith("chatledger_"):
                package = top.removeprefix("chatledger_").replace("_", "-")
                found.add((f"chatledger-{package}", frozenset()))
            elif module.startswith("chatledger.testing"):
                found.add(("chatledger", frozenset({"testing"})))
    return found


def _stated(text: str) -> set[Requirement]:
    """What the ``pip install`` lines in ``text`` install."""
    stated: set[Requirement] = set()
    for line in _PIP.findall(text):
        words = shlex.split(line.partition("#")[0].partition("&&")[0])
        for word in words:
            requirement = _requirement(word)
            if requirement is not None and not word.startswith("-"):
                stated.add(requirement)
    return stated


def _beside(example: Example) -> str:
    """The text before ``example`` in its section, and a package README's lead."""
    path, _, line = example.name.rpartition(":")
    lines = (ROOT / path).read_text(encoding="utf-8").splitlines()
    before = lines[: int(line) - 2]
    starts = [i for i, text in enumerate(before) if text.startswith("## ")]
    section = before[starts[-1] :] if starts else before
    lead: list[str] = []
    if Path(path).parts[0] == "packages":
        lead = lines[: lines.index("```python")]
    return "\n".join(lead + section)


def _missing(example: Example) -> list[str]:
    stated = _stated(_beside(example))
    return sorted(
        name + (f"[{','.join(sorted(extras))}]" if extras else "")
        for name, extras in needed(example.code)
        if not any(n == name and extras <= e for n, e in stated)
    )


@pytest.mark.parametrize("example", readme_examples(), ids=lambda e: e.name)
def test_an_example_states_its_install_line(example: Example) -> None:
    missing = _missing(example)
    assert not missing, (
        f"{example.name} needs {', '.join(missing)}: say `pip install ...` in "
        "its section, before it"
    )


def test_what_an_example_needs_is_read_from_its_code() -> None:
    code = (
        "from chatledger_openai_agents import ChatLedgerSession\n"
        "from chatledger.testing import ChatMemoryRepositoryTests\n"
        'connect_async("sqlite+aiosqlite:///agents.db")\n'
    )
    assert needed(code) == {
        ("chatledger-openai-agents", frozenset()),
        ("chatledger", frozenset({"testing"})),
        ("chatledger-sql", frozenset({"aiosqlite"})),
    }
    line = "`pip install chatledger-openai-agents 'chatledger-sql[aiosqlite]'`"
    assert _stated(line) == {
        ("chatledger-openai-agents", frozenset()),
        ("chatledger-sql", frozenset({"aiosqlite"})),
    }
    assert _stated("`pip install ./core './packages/sql[postgres,asyncio]'`") == {
        ("chatledger", frozenset()),
        ("chatledger-sql", frozenset({"postgres", "asyncio"})),
    }
