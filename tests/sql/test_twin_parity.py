"""What the sync repository does, its async twin does too: save_many, naming a
missing table, refusing an unknown option, disposing the engine of a failed
from_url, and the driver's benchmark floor."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, event, inspect

from chatledger import AsyncSupportsSaveMany, Message
from chatledger.adapters import (
    InvalidMessageError,
    InvalidNameError,
    InvalidOptionError,
    StoreNotFoundError,
)
from chatledger_sql import async_repository, repository
from chatledger_sql.async_repository import AsyncSqlChatMemoryRepository
from chatledger_sql.repository import SqlChatMemoryRepository
from tests.sql.conftest import unique_table
from tests.sql.test_async_repository import async_urls, url_of


def _run_on(
    url: str, scenario: Callable[[AsyncSqlChatMemoryRepository], Any], **options: Any
) -> None:
    """Run ``scenario`` on a fresh repository, then drop its tables and close."""

    async def main() -> None:
        repository = AsyncSqlChatMemoryRepository.from_url(
            url, table_name=unique_table(), **options
        )
        try:
            await scenario(repository)
        finally:
            try:
                await repository.drop_schema()
            finally:
                await repository.aclose()

    asyncio.run(main())


@pytest.mark.parametrize(("backend", "driver"), async_urls())
def test_async_save_many_replaces_several_conversations_at_once(
    backend: str, driver: str | None, tmp_path: Path
) -> None:
    async def scenario(repository: AsyncSqlChatMemoryRepository) -> None:
        assert isinstance(repository, AsyncSupportsSaveMany)
        await repository.save_all("old", [Message.user("gone soon")])
        await repository.save_all("kept", [Message.user("before")])
        batch = {
            "a": [Message.user("q"), Message.assistant("r")],
            "kept": [Message.user("after")],
            "old": [],
        }
        await repository.save_many(batch)
        assert sorted(await repository.find_conversation_ids()) == ["a", "kept"]
        assert await repository.find_by_conversation_id("a") == batch["a"]
        assert await repository.find_by_conversation_id("kept") == batch["kept"]
        bad: Any = [Message.user("fine"), None]
        with pytest.raises(InvalidMessageError, match="conversation 'b'"):
            await repository.save_many({"c": [Message.user("x")], "b": bad})
        assert sorted(await repository.find_conversation_ids()) == ["a", "kept"]

    _run_on(url_of(backend, driver, tmp_path), scenario)


@pytest.mark.parametrize(("backend", "driver"), async_urls())
def test_async_reader_names_a_missing_table(
    backend: str, driver: str | None, tmp_path: Path
) -> None:
    url = url_of(backend, driver, tmp_path)
    table = unique_table()

    async def scenario() -> None:
        repository = AsyncSqlChatMemoryRepository.from_url(
            url, table_name=table, create_schema=False
        )
        try:
            missing = f"table '{table}' does not exist"
            with pytest.raises(StoreNotFoundError, match=missing):
                await repository.find_conversation_ids()
            with pytest.raises(StoreNotFoundError, match=missing):
                await repository.find_by_conversation_id("c1")
            with pytest.raises(StoreNotFoundError, match=missing):
                await repository.save_all("c1", [Message.user("hi")])
        finally:
            await repository.aclose()

    if backend == "sqlite":
        (tmp_path / "chat.db").touch()  # the file exists, the table does not
    asyncio.run(scenario())


@pytest.fixture
def engines(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, list[Engine]]]:
    """The engines each from_url makes, and those disposed."""
    seen: dict[str, list[Engine]] = {"made": [], "disposed": []}
    for module, name in (
        (repository, "create_engine"),
        (async_repository, "create_async_engine"),
    ):
        make = getattr(module, name)

        def recording(*args: Any, _make: Any = make, **kwargs: Any) -> Any:
            engine = _make(*args, **kwargs)
            seen["made"].append(getattr(engine, "sync_engine", engine))
            return engine

        monkeypatch.setattr(module, name, recording)

    def disposed(engine: Engine) -> None:
        seen["disposed"].append(engine)

    event.listen(Engine, "engine_disposed", disposed)
    yield seen
    event.remove(Engine, "engine_disposed", disposed)


REPOSITORIES = [
    pytest.param(SqlChatMemoryRepository, "sqlite", id="sync"),
    pytest.param(AsyncSqlChatMemoryRepository, "sqlite+aiosqlite", id="async"),
]


@pytest.mark.parametrize(("cls", "scheme"), REPOSITORIES)
def test_an_unknown_option_is_refused_and_leaves_no_engine(
    cls: Any, scheme: str, tmp_path: Path, engines: dict[str, list[Engine]]
) -> None:
    url = f"{scheme}:///{tmp_path / 'chat.db'}"
    with pytest.raises(InvalidOptionError, match="takes no option 'tablename'") as e:
        cls.from_url(url, tablename="x")
    assert "table_name" in str(e.value)
    assert all(engine in engines["disposed"] for engine in engines["made"])
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("cls", "scheme"), REPOSITORIES)
def test_a_failed_from_url_disposes_the_engine_it_made(
    cls: Any, scheme: str, tmp_path: Path, engines: dict[str, list[Engine]]
) -> None:
    url = f"{scheme}:///{tmp_path / 'chat.db'}"
    with pytest.raises(InvalidNameError):
        cls.from_url(url, table_name="x; DROP")
    assert len(engines["made"]) == 1
    assert engines["disposed"] == engines["made"]


@pytest.mark.parametrize(("backend", "driver"), async_urls())
def test_async_benchmark_floor_inserts_and_selects_then_leaves_nothing(
    backend: str, driver: str | None, tmp_path: Path
) -> None:
    async def scenario(repository: AsyncSqlChatMemoryRepository) -> None:
        floor = await repository.benchmark_floor()
        try:
            await floor.insert("c1", 0, '{"role":"user"}')
            await floor.insert("c1", 1, '{"role":"assistant"}')
            await floor.insert("c2", 0, '{"role":"user"}')
            rows = await floor.select("c1")
            assert [row[0] for row in rows] == [
                '{"role":"user"}',
                '{"role":"assistant"}',
            ]
        finally:
            await floor.aclose()
        name = floor.table.rpartition(".")[2]
        async with repository.engine.connect() as connection:
            tables = await connection.run_sync(lambda c: inspect(c).get_table_names())
        assert name not in tables

    _run_on(url_of(backend, driver, tmp_path), scenario)
