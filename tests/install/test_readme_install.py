"""The README's install lines work as written, each in a fresh virtualenv.

Slow (every line installs its drivers from PyPI), so marked ``install`` and
skipped unless asked for::

    python -m pytest tests/install --run-install      # or CHATLEDGER_RUN_INSTALL=1

Each line runs in bash, from a folder whose ``core`` and ``packages`` are
this checkout's, with the new virtualenv first on ``PATH``, so ``pip`` and
``python`` are its own. Then the adapter must import, every driver its extra
names must be installed, and ``connect`` must find the adapter for the
row's URL. The framework bridges' table has no URL: a bridge's line must
install it and its framework, and the bridge must import.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import textwrap
import tomllib
import venv
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"

_CODE = re.compile(r"`([^`]*)`")
_REQUIREMENT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*")


@dataclass(frozen=True)
class InstallLine:
    """One README command and what it must leave installed.

    Attributes:
        backend: The row (or ``"first command"``).
        command: The command, as written.
        url: A URL of the backend, for ``connect`` to resolve (``""`` for a
            framework bridge, which has none).
        modules: The packages that must import.
        distributions: The driver distributions the extras must bring.
    """

    backend: str
    command: str
    url: str
    modules: tuple[str, ...]
    distributions: tuple[str, ...]


def _installed_by(command: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The modules and the extras' distributions a ``pip install`` line names."""
    modules: list[str] = []
    distributions: list[str] = []
    for word in shlex.split(command):
        if not word.startswith("./"):
            continue
        path, _, extras = word.partition("[")
        folder = ROOT / path
        project = tomllib.loads((folder / "pyproject.toml").read_text("utf-8"))
        modules.append(project["project"]["name"].replace("-", "_"))
        optional = project["project"].get("optional-dependencies", {})
        for extra in filter(None, extras.rstrip("]").split(",")):
            for requirement in optional[extra.strip()]:
                match = _REQUIREMENT_NAME.match(requirement)
                assert match is not None, requirement
                distributions.append(match.group(0))
    return tuple(modules), tuple(distributions)


def readme_install_lines() -> list[InstallLine]:
    """The README's first command, every "From a checkout" cell of its table and
    every "from a checkout: `pip install ...`" line of its prose (the bridges)."""
    text = README.read_text(encoding="utf-8")
    first = re.search(r"```bash\n(.*?)\n", text)
    assert first is not None, "the README starts with a bash block"
    lines = [
        InstallLine(
            "first command",
            first.group(1),
            "sqlite:///chatledger-demo.db",
            *_installed_by(first.group(1).partition("&&")[0]),
        )
    ]
    for table in _tables(text):
        header = _cells(table[0])
        if "From a checkout" not in header:
            continue
        column = header.index("From a checkout")
        for row in table[2:]:
            cells = _cells(row)
            commands = _CODE.findall(cells[column])
            # A bridge's table has no URL: its line must install and import.
            urls = _CODE.findall(cells[header.index("URL")]) if "URL" in header else []
            assert len(commands) == 1, row
            url = urls[0] if urls else ""
            lines.append(
                InstallLine(cells[0], commands[0], url, *_installed_by(commands[0]))
            )
    return lines


def _cells(row: str) -> list[str]:
    return [cell.strip() for cell in row.strip().strip("|").split("|")]


def _tables(text: str) -> list[list[str]]:
    """The README's tables, each as its lines (header, rule, rows)."""
    tables: list[list[str]] = []
    previous_was_row = False
    for line in text.splitlines():
        is_row = line.startswith("|")
        if is_row and not previous_was_row:
            tables.append([])
        if is_row:
            tables[-1].append(line)
        previous_was_row = is_row
    return tables


LINES = readme_install_lines()

_CHECK = textwrap.dedent(
    """
    import importlib, importlib.metadata, sys
    from chatledger.connect import adapter_parameters
    url, modules, distributions = sys.argv[1], sys.argv[2], sys.argv[3]
    for name in filter(None, modules.split(",")):
        importlib.import_module(name)
    for name in filter(None, distributions.split(",")):
        importlib.metadata.version(name)
    if url:
        adapter_parameters(url)
    print("ok")
    """
)


def test_the_table_is_parsed() -> None:
    backends = [line.backend for line in LINES]
    assert backends[:3] == ["first command", "in memory", "SQLite"]
    assert "Neo4j" in backends
    assert {"LangChain", "OpenAI Agents SDK", "LlamaIndex"} <= set(backends)
    assert all(line.command.startswith(("pip install", "python")) for line in LINES)


@pytest.mark.install
@pytest.mark.parametrize("line", LINES, ids=lambda line: line.backend)
def test_install_line_works_as_written(line: InstallLine, tmp_path: Path) -> None:
    environment = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True, clear=True).create(environment)
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    for name in ("core", "packages"):
        (checkout / name).symlink_to(ROOT / name, target_is_directory=True)
    binaries = environment / ("Scripts" if sys.platform == "win32" else "bin")
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env.update(
        PATH=f"{binaries}{os.pathsep}{env.get('PATH', '')}",
        VIRTUAL_ENV=str(environment),
        PIP_DISABLE_PIP_VERSION_CHECK="1",
    )
    done = subprocess.run(
        ["bash", "-c", line.command],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, f"{line.command}\n{done.stdout}\n{done.stderr}"
    checked = subprocess.run(
        [
            str(binaries / "python"),
            "-c",
            _CHECK,
            line.url,
            ",".join(line.modules),
            ",".join(line.distributions),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert checked.stdout.strip() == "ok", checked.stderr
    if line.backend == "first command":
        assert "the model is sent" in done.stdout
        assert (checkout / "chatledger-demo.db").exists()
