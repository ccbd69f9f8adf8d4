"""What the README says the core depends on is what its pyproject declares."""

from __future__ import annotations

import re
import tomllib

from tests.docs.examples import ROOT

_NAME = re.compile(r"[A-Za-z0-9._-]+")


def _core_paragraph() -> str:
    """The README's paragraph on the core's dependencies."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    for paragraph in text.split("\n\n"):
        if paragraph.startswith("The core (`chatledger`)"):
            return " ".join(paragraph.split())
    raise AssertionError("README.md has no paragraph on the core's dependencies")


def test_the_readme_names_each_dependency_of_the_core() -> None:
    project = tomllib.loads((ROOT / "core" / "pyproject.toml").read_text("utf-8"))
    required = project["project"]["dependencies"]
    names = [match.group(0) for r in required if (match := _NAME.match(r))]
    paragraph = _core_paragraph()
    assert "no third-party" not in paragraph
    for name in names:
        assert f"`{name}`" in paragraph, f"the README does not name {name}"
