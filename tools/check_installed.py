"""Check, inside a fresh virtualenv, that one distribution's wheel works alone.

``nox -s wheels`` installs core's wheel and one other wheel of the family into
a new virtualenv and runs this file with that virtualenv's Python (which has
nothing of the repository on its path)::

    python tools/check_installed.py chatledger-sql chatledger_sql 0.3.0.dev0

It fails unless the family distributions installed are exactly core and that
one, both at the version given and both from wheel files (not a checkout or an
editable install); then it imports the package, loads every entry point the
distribution declares (the adapters' ``connect`` schemes, sync and async), and
reads the conformance suites the ``chatledger conformance`` command writes out
from core's package data.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import re
import sys


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _family() -> dict[str, importlib.metadata.Distribution]:
    found: dict[str, importlib.metadata.Distribution] = {}
    for distribution in importlib.metadata.distributions():
        name = _normalized(distribution.metadata["Name"])
        if name == "chatledger" or name.startswith("chatledger-"):
            found[name] = distribution
    return found


def _from_a_wheel(distribution: importlib.metadata.Distribution) -> bool:
    text = distribution.read_text("direct_url.json")
    if text is None:
        return False
    origin = json.loads(text)
    return str(origin.get("url", "")).endswith(".whl") and "dir_info" not in origin


def _adapter_entry_points(
    distribution: importlib.metadata.Distribution,
) -> list[importlib.metadata.EntryPoint]:
    """The entry points by which ``connect`` and ``connect_async`` find it."""
    return [e for e in distribution.entry_points if e.group.startswith("chatledger.")]


def check(name: str, module: str, version: str) -> list[str]:
    """What is wrong with the environment; an empty list when nothing is."""
    wanted = {"chatledger", _normalized(name)}
    family = _family()
    problems = []
    if set(family) != wanted:
        problems.append(
            f"installed chatledger distributions are {sorted(family)}, "
            f"not {sorted(wanted)}"
        )
    for distribution_name, distribution in sorted(family.items()):
        if distribution.version != version:
            problems.append(
                f"{distribution_name} is {distribution.version}, not {version}"
            )
        if not _from_a_wheel(distribution):
            problems.append(f"{distribution_name} was not installed from a wheel file")
    if problems:
        return problems
    importlib.import_module("chatledger")
    importlib.import_module(module)
    for entry in _adapter_entry_points(family[_normalized(name)]):
        if not callable(entry.load()):
            problems.append(f"entry point {entry.name} = {entry.value} is not callable")
    from chatledger.cli.conformance import suite_module

    for use_async in (False, True):
        if "ChatMemoryRepositoryTests, ConversationInfoTests):" not in suite_module(
            use_async
        ):
            problems.append("core's wheel lacks the conformance suite it writes out")
    return problems


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    name, module, version = argv
    problems = check(name, module, version)
    for problem in problems:
        print(f"{name}: {problem}", file=sys.stderr)
    if not problems:
        family = _family()[_normalized(name)]
        entries = sorted({e.name for e in _adapter_entry_points(family)})
        print(
            f"{name} {version} and chatledger {version}, from their wheels alone: "
            f"{module} imports"
            + (f"; entry points load: {', '.join(entries)}" if entries else "")
        )
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
