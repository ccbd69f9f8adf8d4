"""The shell and TOML blocks of the site's pages hold what the tools take.

The pages' ``python`` blocks run (``test_examples.py``). Their shell blocks
install packages, start servers or write to them, so they are not run here:
each ``chatledger`` and ``python -m bench`` command in them is parsed by that
command's own parser, so a misspelt subcommand, option or option value fails,
and any other command must be one the README gives (the README's test command
and install lines are tested where the README is: CI runs its test command as
it is, ``tests/install`` its install lines). Each TOML block parses.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest

from bench.cli import _parse as parse_bench_arguments
from chatledger.cli.parser import build_parser
from tests.docs.examples import ROOT

_FENCE = re.compile(r"^```(?P<language>\S*)\s*$")


def _blocks(language: str) -> list[tuple[str, str]]:
    """``(path:line, text)`` of every fenced block of that language on a page."""
    found = []
    for path in sorted((ROOT / "docs").rglob("*.md")):
        lines = path.read_text(encoding="utf-8").splitlines()
        opened: int | None = None
        for index, line in enumerate(lines):
            fence = _FENCE.match(line)
            if fence is None:
                continue
            if opened is None:
                opened = index if fence.group("language") == language else -1
                continue
            if opened >= 0:
                name = f"{path.relative_to(ROOT).as_posix()}:{opened + 2}"
                found.append((name, "\n".join(lines[opened + 1 : index])))
            opened = None
    return found


def _commands() -> list[tuple[str, str]]:
    """``(where, command)`` of each command of the pages' shell blocks."""
    found = []
    for name, text in _blocks("bash"):
        for line in text.splitlines():
            for command in line.split("&&"):
                if shlex.split(command, comments=True):
                    found.append((name, command.strip()))
    return found


COMMANDS = _commands()
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_pages_have_shell_and_toml_blocks() -> None:
    assert any(command.startswith("chatledger ") for _, command in COMMANDS)
    assert _blocks("toml")


@pytest.mark.parametrize(("where", "command"), COMMANDS, ids=[c for _, c in COMMANDS])
def test_shell_command_is_one_the_tools_take(where: str, command: str) -> None:
    words = shlex.split(command, comments=True)
    parse: Callable[[list[str]], object]
    if words[0] == "chatledger" or words[:3] == ["python", "-m", "chatledger"]:
        arguments = words[1:] if words[0] == "chatledger" else words[3:]
        parse = build_parser().parse_args
    elif words[:3] == ["python", "-m", "bench"]:
        arguments = words[3:]
        parse = parse_bench_arguments
    else:
        assert command.split("#")[0].strip() in README, (
            f"{where}: {command!r} is neither a command parsed here nor the README's"
        )
        return
    usage = io.StringIO()
    try:
        with contextlib.redirect_stderr(usage):
            parse(arguments)
    except SystemExit:
        pytest.fail(f"{where}: {command!r} is refused: {usage.getvalue()}")


@pytest.mark.parametrize(("where", "text"), _blocks("toml"))
def test_toml_block_parses(where: str, text: str) -> None:
    assert tomllib.loads(text), where


def test_getting_started_gives_the_readmes_two_commands() -> None:
    page = (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")
    first = re.search(r"```bash\n(.*?)```", README, re.S)
    assert first is not None
    assert f"```bash\n{first.group(1)}```" in page


def test_no_page_is_left_out_of_the_site() -> None:
    site = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    pages = {
        path.relative_to(ROOT / "docs").as_posix()
        for path in Path(ROOT / "docs").rglob("*.md")
    }
    assert {page for page in pages if f": {page}\n" not in site} == set()
