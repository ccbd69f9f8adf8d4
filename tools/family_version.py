"""One version for every distribution of the repository, set in one command.

The family is core (``core/``) and every ``packages/*/`` with a
``pyproject.toml``. They are released together under one version, core's, and
each names its siblings at that version: ``chatledger>=V,<N`` where ``N`` is
the next minor version (the adapter API, ``chatledger.adapters``, is stable
within a minor version). A distribution's ``__version__``, where its top-level
``__init__.py`` has one, is that version too.

Usage::

    python tools/family_version.py           # print it; fail on a disagreement
    python tools/family_version.py 0.3.0     # write it everywhere

``tests/unit/test_family_version.py`` fails when any of them disagrees.
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_VERSION_LINE = re.compile(r'^version = "(?P<version>[^"]*)"$', re.MULTILINE)
_DUNDER_VERSION = re.compile(r'^__version__ = "(?P<version>[^"]*)"$', re.MULTILINE)
_RELEASE = re.compile(r"^(?P<major>\d+)\.(?P<minor>\d+)(\.\d+)*")
_REQUIREMENT = re.compile(
    r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)\s*(?P<extras>\[[^\]]*\])?"
    r"\s*(?P<specifier>[^;]*?)\s*(?P<marker>;.*)?$"
)


@dataclass(frozen=True)
class Distribution:
    """One distribution of the family, as its files declare it.

    Attributes:
        folder: The folder of its ``pyproject.toml``.
        name: Its normalized project name (``chatledger-sql``).
        version: The ``version`` its ``pyproject.toml`` declares.
        requirements: Every requirement string it declares, dependencies and
            optional dependencies alike.
        init_files: The ``src/*/__init__.py`` files that assign ``__version__``.
    """

    folder: Path
    name: str
    version: str
    requirements: tuple[str, ...]
    init_files: tuple[Path, ...]


def normalized(name: str) -> str:
    """A project name as package indexes compare them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def folders(root: Path = ROOT) -> list[Path]:
    """The folders of the family's distributions: core first, then packages/."""
    packages = sorted(p.parent for p in (root / "packages").glob("*/pyproject.toml"))
    return [root / "core", *packages]


def read(folder: Path) -> Distribution:
    """The distribution whose ``pyproject.toml`` is in ``folder``."""
    project = tomllib.loads((folder / "pyproject.toml").read_text("utf-8"))["project"]
    requirements = list(project.get("dependencies", []))
    for extra in project.get("optional-dependencies", {}).values():
        requirements.extend(extra)
    init_files = tuple(
        path
        for path in sorted(folder.glob("src/*/__init__.py"))
        if _DUNDER_VERSION.search(path.read_text("utf-8"))
    )
    return Distribution(
        folder,
        normalized(project["name"]),
        project["version"],
        tuple(requirements),
        init_files,
    )


def sibling_specifier(version: str) -> str:
    """What a distribution requires of a sibling when the family is ``version``."""
    release = _RELEASE.match(version)
    if release is None:
        raise ValueError(f"{version!r} is not a version (major.minor[.micro]...)")
    upper = f"{release['major']}.{int(release['minor']) + 1}"
    return f">={version},<{upper}"


def disagreements(root: Path = ROOT) -> list[str]:
    """Every place that does not hold core's version, one line each."""
    family = [read(folder) for folder in folders(root)]
    version = family[0].version
    names = {d.name for d in family}
    wanted = sibling_specifier(version)
    found = []
    for distribution in family:
        where = distribution.folder.relative_to(root)
        if distribution.version != version:
            found.append(f"{where}: version {distribution.version}, not {version}")
        for requirement in distribution.requirements:
            parts = _REQUIREMENT.match(requirement)
            if parts is None or normalized(parts["name"]) not in names:
                continue
            specifier = parts["specifier"].replace(" ", "")
            if specifier != wanted:
                found.append(
                    f"{where}: requires {requirement!r}, not {parts['name']}{wanted}"
                )
        for path in distribution.init_files:
            match = _DUNDER_VERSION.search(path.read_text("utf-8"))
            assert match is not None
            if match["version"] != version:
                found.append(
                    f"{path.relative_to(root)}: __version__ {match['version']}, "
                    f"not {version}"
                )
    return found


def write(version: str, root: Path = ROOT) -> list[Path]:
    """Set the family to ``version`` everywhere; return the files changed."""
    wanted = sibling_specifier(version)
    family = [read(folder) for folder in folders(root)]
    names = {d.name for d in family}
    changed = []
    for distribution in family:
        pyproject = distribution.folder / "pyproject.toml"
        text = pyproject.read_text("utf-8")
        new, count = _VERSION_LINE.subn(f'version = "{version}"', text)
        if count != 1:
            raise SystemExit(f"{pyproject}: expected one 'version = ' line")
        for requirement in distribution.requirements:
            parts = _REQUIREMENT.match(requirement)
            if parts is None or normalized(parts["name"]) not in names:
                continue
            pinned = f"{parts['name']}{parts['extras'] or ''}{wanted}"
            if parts["marker"]:
                pinned += f"; {parts['marker'][1:].strip()}"
            new = new.replace(f'"{requirement}"', f'"{pinned}"')
        changed += _replace(pyproject, text, new)
        for path in distribution.init_files:
            text = path.read_text("utf-8")
            new = _DUNDER_VERSION.sub(f'__version__ = "{version}"', text)
            changed += _replace(path, text, new)
    return changed


def _replace(path: Path, old: str, new: str) -> list[Path]:
    if new == old:
        return []
    path.write_text(new, "utf-8")
    return [path]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("version", nargs="?", help="the version to set everywhere")
    args = parser.parse_args(argv)
    if args.version is not None:
        for path in write(args.version):
            print(f"wrote {path.relative_to(ROOT)}")
    found = disagreements()
    for line in found:
        print(line, file=sys.stderr)
    if not found:
        print(read(ROOT / "core").version)
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
