"""Check the wheels and sdists ``python -m build`` made for every distribution.

For each distribution of the family (``core/`` and every ``packages/*/``) the
folder given must hold exactly one wheel and one sdist at the distribution's
version, and each must carry what an installed copy needs::

    python tools/check_dists.py dist

- the wheel: every package the distribution ships with its ``py.typed``, the
  license text in ``.dist-info/licenses/``, metadata naming the license, the
  README as the long description and the version; for core, the conformance
  suites that ``chatledger conformance`` reads as package data;
- the sdist: ``pyproject.toml``, ``PKG-INFO``, the README, the license text and
  the same packages, so a wheel built from it is the same wheel;
- neither: compiled bytecode or ``__pycache__`` folders.

Prints one line per distribution; exits 1 naming every missing file.
"""

from __future__ import annotations

import re
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

#: Files a distribution's wheel must hold beyond its modules and py.typed,
#: because the code reads them at run time.
PACKAGE_DATA = {
    "chatledger": [
        "chatledger/cli/conformance_suites/sync_suite.py",
        "chatledger/cli/conformance_suites/async_suite.py",
    ],
}


def _project(folder: Path) -> dict[str, Any]:
    data: dict[str, Any] = tomllib.loads((folder / "pyproject.toml").read_text("utf-8"))
    return data


def _stem(name: str) -> str:
    """A project name as wheel and sdist file names spell it (``chatledger_sql``)."""
    return re.sub(r"[-_.]+", "_", name).lower()


def check(folder: Path, dist: Path) -> list[str]:
    """What is missing or wrong in ``folder``'s wheel and sdist under ``dist``."""
    data = _project(folder)
    project = data["project"]
    stem, version = _stem(project["name"]), project["version"]
    packages = [
        p.removeprefix("src/")
        for p in data["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"]
    ]
    wheels = sorted(dist.glob(f"{stem}-*.whl"))
    sdists = sorted(dist.glob(f"{stem}-*.tar.gz"))
    problems = []
    if [w.name for w in wheels] != [f"{stem}-{version}-py3-none-any.whl"]:
        problems.append(f"wheels {[w.name for w in wheels]}, not one at {version}")
    if [s.name for s in sdists] != [f"{stem}-{version}.tar.gz"]:
        problems.append(f"sdists {[s.name for s in sdists]}, not one at {version}")
    if problems:
        return problems

    with zipfile.ZipFile(wheels[0]) as wheel:
        names = set(wheel.namelist())
        info = f"{stem}-{version}.dist-info"
        metadata = wheel.read(f"{info}/METADATA").decode("utf-8")
    wanted = [f"{info}/licenses/LICENSE", *PACKAGE_DATA.get(project["name"], [])]
    wanted += [f"{package}/py.typed" for package in packages]
    wanted += [f"{package}/__init__.py" for package in packages]
    problems += [f"the wheel lacks {name}" for name in wanted if name not in names]
    headers = dict(
        line.split(": ", 1)
        for line in metadata.split("\n\n", 1)[0].splitlines()
        if ": " in line
    )
    expected = {
        "Version": version,
        "License-Expression": project["license"],
        "License-File": "LICENSE",
        "Description-Content-Type": "text/markdown",
    }
    for header, value in expected.items():
        if headers.get(header) != value:
            problems.append(
                f"the wheel's {header} is {headers.get(header)!r}, not {value!r}"
            )
    if len(metadata.split("\n\n", 1)[-1].strip()) < 200:
        problems.append("the wheel's metadata carries no README")

    with tarfile.open(sdists[0]) as sdist:
        members = {m.name: m for m in sdist.getmembers()}
    top = f"{stem}-{version}"
    wanted = ["pyproject.toml", "PKG-INFO", project["readme"], "LICENSE"]
    wanted += [f"src/{package}/py.typed" for package in packages]
    for name in wanted:
        member = members.get(f"{top}/{name}")
        if member is None or not member.isfile():
            problems.append(f"the sdist lacks the file {name}")

    for archive, listed in (("wheel", names), ("sdist", set(members))):
        stray = sorted(n for n in listed if n.endswith(".pyc") or "__pycache__" in n)
        if stray:
            problems.append(f"the {archive} holds bytecode: {stray[:3]}")
    return problems


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    dist = Path(argv[0])
    folders = [
        ROOT / "core",
        *sorted(p.parent for p in ROOT.glob("packages/*/pyproject.toml")),
    ]
    failed = False
    for folder in folders:
        problems = check(folder, dist)
        where = folder.relative_to(ROOT).as_posix()
        for problem in problems:
            print(f"{where}: {problem}", file=sys.stderr)
        if not problems:
            print(f"{where}: wheel and sdist hold every file")
        failed = failed or bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
