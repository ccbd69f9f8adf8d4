"""The import graph of Python packages, read from their source with ``ast``.

Example:
    root = SourceRoot(Path("core/src"), "chatledger")
    graph = import_graph([root])
    graph["chatledger.cli.main"]    # {"chatledger.connect", ...}
    cycles(graph)                   # [] when no module imports itself back

Every import counts, at module level or inside a function, as either runs
when the code does; an import under ``if TYPE_CHECKING:`` counts only when
asked for, since it never runs. ``from package import name`` is an import of
the module ``package.name`` where there is one, else of ``package``.
Importing ``a.b.c`` also runs the ``__init__`` of ``a`` and ``a.b``, but that
is not an edge: a package importing its own submodules would otherwise be a
cycle with each of them.
"""

from __future__ import annotations

import ast
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Import", "SourceRoot", "cycles", "import_graph", "imports", "modules"]


@dataclass(frozen=True)
class SourceRoot:
    """One top-level package and the folder that holds it.

    Attributes:
        folder: The folder on ``sys.path`` for it, such as ``core/src``.
        package: The top-level package's name, such as ``chatledger``.
    """

    folder: Path
    package: str

    def __str__(self) -> str:
        return self.package


@dataclass(frozen=True)
class Import:
    """One imported module, and where the import is."""

    module: str
    path: Path
    line: int
    type_checking: bool


def modules(roots: Iterable[SourceRoot]) -> dict[str, Path]:
    """Every module under ``roots``, by dotted name (a package by its ``__init__``)."""
    found: dict[str, Path] = {}
    for root in roots:
        for path in sorted((root.folder / root.package).rglob("*.py")):
            parts = path.relative_to(root.folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def imports(module: str, path: Path, known: Collection[str]) -> Iterator[Import]:
    """The imports in ``path`` (the module ``module``), resolved against ``known``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node, type_checking in _walk(tree, False):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(alias.name, path, node.lineno, type_checking)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, package)
            targets = {
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                for alias in node.names
            }
            for target in sorted(targets):
                yield Import(target, path, node.lineno, type_checking)


def import_graph(
    roots: Iterable[SourceRoot], *, type_checking: bool = False
) -> dict[str, set[str]]:
    """Each module under ``roots`` and the modules under ``roots`` it imports.

    With ``type_checking=True`` the imports under ``if TYPE_CHECKING:`` count too.
    """
    found = modules(roots)
    return {
        module: {
            i.module
            for i in imports(module, path, found)
            if i.module in found and (type_checking or not i.type_checking)
        }
        for module, path in found.items()
    }


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles of ``graph``: each a sorted group of modules that
    import one another, directly or through each other (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(module: str) -> None:
        # Recursion depth is the longest import chain: a few dozen modules.
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in sorted(graph.get(module, ())):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            group: list[str] = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == module:
                    break
            if len(group) > 1 or module in graph.get(module, ()):
                found.append(sorted(group))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return sorted(found)


def _absolute(node: ast.ImportFrom, package: str) -> str:
    """The absolute module name of ``from ... import``, relative ones resolved."""
    if not node.level:
        return node.module or ""
    parts = package.split(".")
    base = ".".join(parts[: len(parts) - node.level + 1])
    return f"{base}.{node.module}" if node.module else base


def _walk(node: ast.AST, type_checking: bool) -> Iterator[tuple[ast.AST, bool]]:
    """Every node under ``node``, each with whether only a type checker runs it."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child.test):
            for statement in child.body:
                yield statement, True
                yield from _walk(statement, True)
            for statement in child.orelse:
                yield statement, type_checking
                yield from _walk(statement, type_checking)
            continue
        yield child, type_checking
        yield from _walk(child, type_checking)


def _is_type_checking(test: ast.expr) -> bool:
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
