"""What every distribution's folder must hold for its wheel and sdist.

A distribution is built from its own folder (``core/`` or ``packages/<name>/``),
so the files its wheel and sdist carry must sit there: the license text (the
build copies a ``LICENSE`` beside ``pyproject.toml`` into both), the README its
metadata names, and the ``py.typed`` marker of its typed package. ``nox -s
wheels`` builds them and checks the archives; these checks fail sooner.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = [
    ROOT / "core",
    *sorted(p.parent for p in ROOT.glob("packages/*/pyproject.toml")),
]


def _project(folder: Path) -> dict[str, Any]:
    project: dict[str, Any] = tomllib.loads(
        (folder / "pyproject.toml").read_text("utf-8")
    )["project"]
    return project


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda f: f.name)
def test_the_license_text_is_the_repository_s(folder: Path) -> None:
    assert (folder / "LICENSE").read_bytes() == (ROOT / "LICENSE").read_bytes()
    assert _project(folder)["license"] == "Apache-2.0"


def test_the_license_is_apache_2() -> None:
    text = (ROOT / "LICENSE").read_text("utf-8")
    assert "Apache License" in text
    assert "Version 2.0, January 2004" in text


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda f: f.name)
def test_the_readme_and_typed_marker_are_in_the_folder(folder: Path) -> None:
    project = _project(folder)
    assert (folder / project["readme"]).is_file()
    packages = tomllib.loads((folder / "pyproject.toml").read_text("utf-8"))["tool"][
        "hatch"
    ]["build"]["targets"]["wheel"]["packages"]
    assert packages
    for package in packages:
        assert (folder / package / "py.typed").is_file(), package
