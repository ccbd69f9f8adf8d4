"""Who imports what: bridges use core's public API; no module imports itself back."""

from __future__ import annotations

from pathlib import Path

import pytest

import chatledger
from tests.import_graph import SourceRoot, cycles, import_graph, imports, modules

ROOT = Path(__file__).resolve().parents[2]
CORE = SourceRoot(ROOT / "core" / "src", "chatledger")

#: The framework bridges: each depends on core through its public API only.
BRIDGES = [
    SourceRoot(ROOT / "packages" / "langchain" / "src", "chatledger_langchain"),
    SourceRoot(ROOT / "packages" / "llama-index" / "src", "chatledger_llama_index"),
    SourceRoot(ROOT / "packages" / "openai-agents" / "src", "chatledger_openai_agents"),
]

#: What a bridge may import from core.
PUBLIC_CORE = {"chatledger", "chatledger.convert"}

#: The storage adapters whose imports from core are checked; add an adapter
#: here once it imports nothing else.
ADAPTERS = [
    SourceRoot(ROOT / "packages" / "sql" / "src", "chatledger_sql"),
    SourceRoot(ROOT / "packages" / "neo4j" / "src", "chatledger_neo4j"),
]

#: What a storage adapter may import from core: the public API and the
#: adapter toolkit.
ADAPTER_CORE = {"chatledger", "chatledger.adapters"}

#: The packages whose modules must not import one another in a cycle (imports
#: under ``if TYPE_CHECKING:`` aside); add a package here once it has none.
ACYCLIC_PACKAGES = [
    CORE,
    SourceRoot(ROOT, "bench"),
    *ADAPTERS,
]


@pytest.mark.parametrize("bridge", BRIDGES, ids=str)
def test_bridges_import_only_the_public_core(bridge: SourceRoot) -> None:
    known = modules([CORE, bridge])
    private = [
        f"{found.path.relative_to(ROOT)}:{found.line} imports {found.module}"
        for module, path in modules([bridge]).items()
        for found in imports(module, path, known)
        if found.module.partition(".")[0] == CORE.package
        and found.module not in PUBLIC_CORE
        # `from chatledger import connect` names the public function, which
        # shares its name with the module that defines it.
        and found.module.removeprefix("chatledger.") not in chatledger.__all__
    ]
    assert private == []


@pytest.mark.parametrize("adapter", ADAPTERS, ids=str)
def test_adapters_import_only_the_adapter_api(adapter: SourceRoot) -> None:
    known = modules([CORE, adapter])
    private = [
        f"{found.path.relative_to(ROOT)}:{found.line} imports {found.module}"
        for module, path in modules([adapter]).items()
        for found in imports(module, path, known)
        if found.module.partition(".")[0] == CORE.package
        and found.module not in ADAPTER_CORE
    ]
    assert private == []


@pytest.mark.parametrize("package", ACYCLIC_PACKAGES, ids=str)
def test_no_import_cycle(package: SourceRoot) -> None:
    graph = import_graph([package])
    assert len(graph) > 1  # the package was found
    assert cycles(graph) == []


def test_the_graph_finds_a_cycle_through_a_function_level_import(
    tmp_path: Path,
) -> None:
    package = tmp_path / "loop"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from loop.b import B\n")
    (package / "b.py").write_text("def f():\n    from loop import a\n")
    (package / "c.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from loop.a import B\n"
    )
    root = SourceRoot(tmp_path, "loop")

    assert cycles(import_graph([root])) == [["loop.a", "loop.b"]]
    assert import_graph([root])["loop.c"] == set()
    assert import_graph([root], type_checking=True)["loop.c"] == {"loop.a"}
