"""The sync modules are written from their async sources, and none is stale."""

from __future__ import annotations

import ast
import importlib.util
import re
import shutil
import subprocess
import sys
import tokenize
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _tool() -> Any:
    spec = importlib.util.spec_from_file_location(
        "async_to_sync", ROOT / "tools" / "async_to_sync.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


tool = _tool()


SOURCE = ROOT / "tools" / "async_x.py"


def _convert(source: str) -> str:
    out: str = tool.convert(
        source, dict(tool.RENAMES), SOURCE, SOURCE.with_name("x.py")
    )
    return out


def test_no_sync_module_is_stale() -> None:
    assert tool.main(["--check"]) == 0


def test_every_twin_is_generated_next_to_its_source() -> None:
    for twin in tool.find_twins():
        assert twin.target.parent == twin.source.parent
        assert twin.target.read_text(encoding="utf-8").startswith(
            f"# Written by tools/async_to_sync.py from {twin.source.name}"
        )


def test_async_and_await_go_and_names_lose_their_async_mark() -> None:
    out = _convert(
        "from chatledger.async_repository import AsyncChatMemoryRepository\n\n\n"
        "async def load_async(repo: AsyncChatMemoryRepository) -> None:\n"
        '    """Load through :class:`AsyncChatMemoryRepository`: ``await x()``."""\n'
        "    async with repo:\n"
        "        await repo.aclose()\n"
    )
    assert "from chatledger.repository import ChatMemoryRepository" in out
    assert "def load(repo: ChatMemoryRepository) -> None:" in out
    assert "Load through :class:`ChatMemoryRepository`: ``x()``." in out
    assert "    with repo:\n        repo.close()\n" in out
    assert "async" not in out.split("\n", 1)[1]
    assert "await" not in out


def test_an_async_block_keeps_only_its_else_body_in_sync() -> None:
    out = _convert(
        "import asyncio  # async-only\n\n\n"
        "async def f() -> int:\n"
        "    if True:  # async\n"
        "        x = await asyncio.sleep(0)\n"
        "        y = 1\n"
        "    else:\n"
        "        y = 2\n"
        "        if y:\n"
        "            y = 3\n"
        "    return y\n"
    )
    assert "import asyncio" not in out
    assert "def f() -> int:\n    y = 2\n    if y:\n        y = 3\n    return y\n" in out


def test_an_async_block_without_else_is_left_out() -> None:
    out = _convert(
        "def f() -> int:\n    if True:  # async\n        return 1\n    return 2\n"
    )
    assert "def f() -> int:\n    return 2\n" in out


def test_dotted_renames_match_the_longest_head() -> None:
    renames = {**tool.RENAMES, "redis.asyncio": "redis"}
    assert tool.rename("redis.asyncio.Redis", renames) == "redis.Redis"
    assert tool.rename("asyncio.sleep", renames) == "time.sleep"
    assert tool.rename("self.connect_async", renames) == "self.connect"
    assert tool.rename("asyncio", renames) == "asyncio"


@pytest.mark.parametrize(
    ("word", "sync"),
    [
        ("AsyncEngine", "Engine"),
        ("Asynchronous", "Asynchronous"),
        ("async_memory", "memory"),
        ("connect_async", "connect"),
        ("execute_async", "execute"),
        ("async_", "async_"),
        ("__aenter__", "__enter__"),
    ],
)
def test_name_patterns(word: str, sync: str) -> None:
    assert tool.rename(word, tool.RENAMES) == sync


@pytest.mark.parametrize(
    "opening",
    ["\n", "# sync: a comment at the body's indent\n", "  # a comment indented less\n"],
)
def test_the_else_body_keeps_its_code_whatever_line_opens_it(opening: str) -> None:
    out = _convert(
        "def f() -> int:\n"
        "    if True:  # async\n"
        "        y = 1\n"
        "    else:\n"
        f"{'        ' + opening if opening.startswith('#') else opening}"
        "        y = 2\n"
        "        if y:\n"
        "            y = 3\n"
        "    return y\n"
    )
    assert "    y = 2\n    if y:\n        y = 3\n    return y\n" in out
    assert "y = 1" not in out


def test_awaitable_of_a_type_is_that_type_in_sync() -> None:
    out = _convert(
        "from collections.abc import Awaitable, Callable\n\n"
        "Work = Callable[[int], Awaitable[dict[str, int]]]\n"
        "Call = Awaitable[int] | None\n"
    )
    assert "from collections.abc import Callable\n" in out
    assert "Work = Callable[[int], dict[str, int]]\n" in out
    assert "Call = int | None\n" in out
    assert "Awaitable" not in out


def test_the_sync_only_branch_is_kept_as_written() -> None:
    out = _convert(
        "def f(engine: AsyncEngine) -> str:\n"
        "    if True:  # async\n"
        '        return "AsyncEngine"\n'
        "    else:\n"
        '        return "not an AsyncEngine: use async_engine_from_config"\n'
    )
    assert "def f(engine: Engine) -> str:\n" in out
    assert 'return "not an AsyncEngine: use async_engine_from_config"\n' in out


def test_strings_outside_the_sync_only_branch_are_renamed() -> None:
    out = _convert('X = "an AsyncEngine from async_engine_from_config"\n')
    assert 'X = "an Engine from engine_from_config"\n' in out


def test_names_and_text_in_f_strings_are_renamed() -> None:
    out = _convert(
        "async def f(x: int, width_async: int) -> str:\n"
        '    return f"{{AsyncEngine}} {await async_name(x)!r:>{width_async}} X"\n'
    )
    assert 'return f"{{Engine}} {name(x)!r:>{width}} X"\n' in out


def _pythons_that_tokenize_f_strings() -> list[str]:
    """This Python and those on PATH that split f-strings into tokens (3.12+)."""
    found = [sys.executable] if hasattr(tokenize, "FSTRING_MIDDLE") else []
    for name in ("python3.12", "python3.13", "python3.14"):
        exe = shutil.which(name)
        if exe is None:
            continue
        probe = [exe, "-c", "import tokenize; tokenize.FSTRING_MIDDLE"]
        if subprocess.run(probe, capture_output=True, check=False).returncode == 0:
            found.append(exe)
    return found


def test_f_strings_are_renamed_where_python_splits_them_into_tokens() -> None:
    pythons = _pythons_that_tokenize_f_strings()
    if not pythons:
        pytest.skip(
            "no Python 3.12+ here to tokenize f-strings as FSTRING_MIDDLE: run "
            "under Python 3.12 or later"
        )
    program = (
        "import importlib.util, sys\n"
        "spec = importlib.util.spec_from_file_location('t', sys.argv[1])\n"
        "tool = importlib.util.module_from_spec(spec)\n"
        "sys.modules['t'] = tool\n"
        "spec.loader.exec_module(tool)\n"
        "source = sys.stdin.read()\n"
        "path = tool.Path(sys.argv[2])\n"
        "print(tool.sync_source(source, tool.RENAMES, path), end='')\n"
    )
    source = (
        "async def f(x: int, width_async: int) -> str:\n"
        '    return f"""{{AsyncEngine}} {await async_name(x)!r:>{width_async}}\n'
        '    an AsyncEngine"""\n'
    )
    expected = (
        "def f(x: int, width: int) -> str:\n"
        '    return f"""{{Engine}} {name(x)!r:>{width}}\n'
        '    an Engine"""\n'
    )
    for python in pythons:
        done = subprocess.run(
            [
                python,
                "-c",
                program,
                str(ROOT / "tools" / "async_to_sync.py"),
                str(SOURCE),
            ],
            input=source,
            capture_output=True,
            text=True,
            check=True,
        )
        assert done.stdout == expected, python


def test_an_example_that_calls_asyncio_run_is_refused() -> None:
    source = (
        '"""Run it.\n\n'
        "Example:\n"
        "    async def main() -> None:\n"
        "        await work_async()\n\n"
        "    asyncio.run(main())\n"
        '"""\n'
    )
    with pytest.raises(
        tool.ConversionError, match=r"tools/async_x\.py:7: 'asyncio\.run\("
    ):
        _convert(source)


def test_a_marker_may_carry_more_comment_text() -> None:
    out = _convert(
        "import asyncio  # async-only  # noqa: F401\n\n\n"
        "def f(a: int) -> int:\n"
        "    if True:  # async  # noqa: SIM108\n"
        "        y = a\n"
        "    else:\n"
        "        y = 2\n"
        "    return y\n"
    )
    assert "import asyncio" not in out
    assert "def f(a: int) -> int:\n    y = 2\n    return y\n" in out


def test_an_async_only_import_line_leaves_out_its_one_name() -> None:
    # As isort leaves "from x import a  # async-only" merged with "from x import b".
    out = _convert(
        "from x import (\n"
        "    a,  # async-only\n"
        "    b,\n"
        ")\n"
        "from y import c as d  # async-only\n"
        "import e  # async-only\n"
        "import f\n"
    )
    imported = [
        alias.name
        for node in ast.parse(out).body
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    ]
    assert imported == ["f", "b"]


@pytest.mark.parametrize(
    ("source", "line", "reason"),
    [
        ("from x import a, b  # async-only\n", 1, "one name alone"),
        ("import a, b  # async-only\n", 1, "one name alone"),
        ("from x import (  # async-only\n    a,\n)\n", 1, "one name alone"),
        ("from x import (\n    a, b,  # async-only\n    c,\n)\n", 2, "one name alone"),
        ("x = (\n    1  # async-only\n)\n", 2, "marks no statement"),
        ("@decorate  # async-only\ndef f() -> None:\n    pass\n", 1, "no statement"),
        ("x = 1  # async\n", 1, "an 'if True:' line only"),
        ("if x:  # async\n    pass\n", 1, "an 'if True:' line only"),
        (
            "if True:  # async\n    a = 1\nelif b:\n    a = 2\n",
            3,
            "not an 'elif'",
        ),
        (
            "if True:  # async\n    a = 1\nelse:\n    a = 2  # async-only\n",
            4,
            "inside a sync-only 'else:' body",
        ),
    ],
)
def test_a_marker_the_tool_cannot_act_on_is_refused_with_its_line(
    source: str, line: int, reason: str
) -> None:
    with pytest.raises(tool.ConversionError) as refused:
        _convert(source)
    assert str(refused.value).startswith(f"tools/async_x.py:{line}: ")
    assert reason in str(refused.value)


def test_main_names_the_file_and_line_it_refuses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "async_x.py"
    source.write_text("# sync twin: x.py\nfrom x import a, b  # async-only\n")
    monkeypatch.setattr(
        tool, "find_twins", lambda: [tool.Twin(source, tmp_path / "x.py", {})]
    )
    with pytest.raises(
        SystemExit, match=re.escape(f"{source}:2: '# async-only' in an import")
    ):
        tool.main([])
    assert not (tmp_path / "x.py").exists()
