"""Every distribution of the repository is released under one version.

Core and each adapter and bridge declare it in their ``pyproject.toml``, name
one another at it (``chatledger>=V,<next minor``), and a ``__version__`` says
it too; ``CHANGELOG.md`` opens with its release. The checks here read the
files with ``tomllib`` and ``packaging``, not with ``tools/family_version.py``,
which writes them.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import shutil
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]


def _tool() -> Any:
    spec = importlib.util.spec_from_file_location(
        "family_version", ROOT / "tools" / "family_version.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


tool = _tool()


def _folders(root: Path) -> list[Path]:
    return [
        root / "core",
        *sorted(p.parent for p in root.glob("packages/*/pyproject.toml")),
    ]


def _project(folder: Path) -> dict[str, Any]:
    project: dict[str, Any] = tomllib.loads(
        (folder / "pyproject.toml").read_text("utf-8")
    )["project"]
    return project


def _requirements(project: dict[str, Any]) -> list[Requirement]:
    strings = list(project.get("dependencies", []))
    for extra in project.get("optional-dependencies", {}).values():
        strings += extra
    return [Requirement(text) for text in strings]


def _version_attribute(path: Path) -> str | None:
    for node in ast.parse(path.read_text("utf-8")).body:
        if (
            isinstance(node, ast.Assign)
            and [getattr(t, "id", None) for t in node.targets] == ["__version__"]
            and isinstance(node.value, ast.Constant)
        ):
            return str(node.value.value)
    return None


def problems(root: Path) -> list[str]:
    """Every disagreement with core's version under ``root``, one line each."""
    projects = {folder: _project(folder) for folder in _folders(root)}
    version = Version(projects[root / "core"]["version"])
    names = {canonicalize_name(p["name"]) for p in projects.values()}
    sibling = SpecifierSet(f">={version},<{version.major}.{version.minor + 1}")
    found = []
    for folder, project in projects.items():
        where = folder.relative_to(root).as_posix()
        if Version(project["version"]) != version or project["version"] != str(version):
            found.append(f"{where} is {project['version']}")
        for requirement in _requirements(project):
            if canonicalize_name(requirement.name) not in names:
                continue
            if requirement.specifier != sibling:
                found.append(f"{where} requires {requirement}")
            elif not requirement.specifier.contains(version):
                found.append(f"{where}: {requirement} refuses {version}")
        for init in sorted(folder.glob("src/*/__init__.py")):
            attribute = _version_attribute(init)
            if attribute is not None and attribute != str(version):
                found.append(f"{init.relative_to(root).as_posix()} says {attribute}")
    return found


def test_the_family_is_core_and_every_package() -> None:
    names = [canonicalize_name(_project(f)["name"]) for f in _folders(ROOT)]
    assert names[0] == "chatledger"
    assert {
        "chatledger-sql",
        "chatledger-redis",
        "chatledger-mongodb",
        "chatledger-cassandra",
        "chatledger-neo4j",
        "chatledger-langchain",
        "chatledger-openai-agents",
        "chatledger-llama-index",
    } <= set(names)
    assert len(names) == len(set(names))


def test_every_distribution_and_pin_has_the_family_version() -> None:
    assert problems(ROOT) == []
    assert tool.disagreements(ROOT) == []


def test_version_attributes_are_checked() -> None:
    """Core and SQL say their version in code: neither may be missed."""
    assert _version_attribute(ROOT / "core/src/chatledger/__init__.py") is not None
    assert (
        _version_attribute(ROOT / "packages/sql/src/chatledger_sql/__init__.py")
        is not None
    )


def test_every_adapter_requires_core() -> None:
    for folder in _folders(ROOT)[1:]:
        required = {r.name for r in _requirements(_project(folder))}
        assert "chatledger" in required, folder


def test_the_changelog_opens_with_the_family_release() -> None:
    version = Version(_project(ROOT / "core")["version"])
    headings = re.findall(
        r"^## (.+)$", (ROOT / "CHANGELOG.md").read_text("utf-8"), re.M
    )
    assert headings, "CHANGELOG.md has no '## <version>' heading"
    assert headings[0].split()[0] == version.base_version
    if version.is_prerelease:
        assert "unreleased" in headings[0].lower()


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of every file the family's version lives in."""
    for folder in _folders(ROOT):
        target = tmp_path / folder.relative_to(ROOT)
        target.mkdir(parents=True)
        shutil.copy(folder / "pyproject.toml", target)
        for init in folder.glob("src/*/__init__.py"):
            (target / init.parent.relative_to(folder)).mkdir(parents=True)
            shutil.copy(init, target / init.relative_to(folder))
    return tmp_path


def test_the_tool_writes_one_version_everywhere(tree: Path) -> None:
    tool.write("1.4.0.dev2", tree)
    assert problems(tree) == []
    assert tool.disagreements(tree) == []
    sql = _project(tree / "packages" / "sql")
    assert sql["version"] == "1.4.0.dev2"
    assert "chatledger>=1.4.0.dev2,<1.5" in sql["dependencies"]
    core = _project(tree / "core")["optional-dependencies"]
    assert core["sql"] == ["chatledger-sql>=1.4.0.dev2,<1.5"]
    assert _version_attribute(tree / "packages/sql/src/chatledger_sql/__init__.py") == (
        "1.4.0.dev2"
    )


@pytest.mark.parametrize(
    ("path", "old", "new", "named"),
    [
        (
            "packages/redis/pyproject.toml",
            'version = "',
            'version = "9',
            "packages/redis",
        ),
        ("packages/neo4j/pyproject.toml", "<0.", "<9.", "packages/neo4j"),
        ("core/pyproject.toml", "chatledger-sql>=", "chatledger-sql>9", "core"),
        (
            "packages/sql/src/chatledger_sql/__init__.py",
            '__version__ = "',
            '__version__ = "9',
            "chatledger_sql",
        ),
    ],
)
def test_a_disagreement_is_named(
    tree: Path, path: str, old: str, new: str, named: str
) -> None:
    tool.write("0.7.1", tree)
    file = tree / path
    text = file.read_text("utf-8")
    assert old in text
    file.write_text(text.replace(old, new, 1), "utf-8")
    found = problems(tree)
    assert len(found) == 1
    assert named in found[0]
    assert len(tool.disagreements(tree)) == 1
