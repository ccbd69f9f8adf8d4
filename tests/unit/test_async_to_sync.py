"""The sync modules are written from their async sources, and none is stale."""

from __future__ import annotations

import importlib.util
import sys
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


def _convert(source: str) -> str:
    out: str = tool.convert(
        source, dict(tool.RENAMES), "async_x.py", ROOT / "tools" / "x.py"
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
