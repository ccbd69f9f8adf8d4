"""What the async MongoDB repository adds to the suite: no I/O before use,
the same options as the sync twin, closing, the TTL index made once, and one
document layout shared with the sync repository.

Tests that touch storage run on :class:`tests.mongodb.standin.AsyncStandInClient`
(mongomock storage plus a test-only pipeline evaluator behind pymongo's async
calls), which is NOT a MongoDB server.
"""

from __future__ import annotations

import asyncio
import uuid
from importlib.metadata import entry_points
from typing import Any

import pytest
from pymongo import AsyncMongoClient, MongoClient
from pymongo.errors import InvalidOperation, ServerSelectionTimeoutError

from chatledger import (
    AsyncMessageWindowChatMemory,
    InvalidNameError,
    InvalidTTLError,
    Message,
    MessageWindow,
    MessageWindowChatMemory,
    TokenWindow,
    connect_async,
)
from chatledger.tokens import estimate_tokens
from chatledger_mongodb import (
    AsyncMongoDBChatMemoryRepository,
    MongoDBChatMemoryRepository,
)

pytest.importorskip("mongomock")

from tests.mongodb.standin import AsyncStandInClient, StandInClient


def _unreachable(**options: Any) -> AsyncMongoDBChatMemoryRepository:
    return AsyncMongoDBChatMemoryRepository.from_url(
        "mongodb://127.0.0.1:1/app", serverSelectionTimeoutMS=200, **options
    )


def test_async_mongodb_from_url_does_no_io_and_the_first_call_connects() -> None:
    async def scenario() -> None:
        repository = _unreachable()
        assert repository.collection.database.name == "app"
        with pytest.raises(ServerSelectionTimeoutError):
            await repository.find_by_conversation_id("c")
        await repository.aclose()

    asyncio.run(scenario())


def test_async_mongodb_from_url_resolves_no_srv_name() -> None:
    # A name that cannot resolve: making the repository must not try to.
    repository = AsyncMongoDBChatMemoryRepository.from_url(
        "mongodb+srv://cluster.example.invalid/app"
    )
    assert repository.collection.database.name == "app"
    asyncio.run(repository.aclose())


@pytest.mark.parametrize(
    "options",
    [
        {"database": "a.b"},
        {"database": ""},
        {"collection": "$cmd"},
        {"collection": "system_profile"},
        {"ttl": 0},
        {"ttl": "60"},
    ],
    ids=repr,
)
def test_async_mongodb_options_are_checked_like_the_sync_twin(
    options: dict[str, Any],
) -> None:
    expected = InvalidTTLError if "ttl" in options else InvalidNameError
    async_client: AsyncMongoClient[Any] = AsyncMongoClient("mongodb://127.0.0.1:1")
    sync_client: MongoClient[Any] = MongoClient("mongodb://127.0.0.1:1", connect=False)
    try:
        with pytest.raises(expected):
            _unreachable(**options)
        with pytest.raises(expected):
            AsyncMongoDBChatMemoryRepository(async_client, **options)
        with pytest.raises(expected):
            MongoDBChatMemoryRepository(sync_client, create_indexes=False, **options)
    finally:
        asyncio.run(async_client.close())
        sync_client.close()


def test_async_mongodb_refuses_a_sync_client() -> None:
    client: MongoClient[Any] = MongoClient("mongodb://127.0.0.1:1", connect=False)
    with pytest.raises(TypeError, match="AsyncMongoClient"):
        AsyncMongoDBChatMemoryRepository(client)  # type: ignore[arg-type]
    client.close()


def test_async_mongodb_is_found_by_connect_async() -> None:
    found = {
        e.name: e.value for e in entry_points(group="chatledger.async_repositories")
    }
    target = "chatledger_mongodb:AsyncMongoDBChatMemoryRepository.from_url"
    assert found["mongodb"] == found["mongodb+srv"] == target
    repository = connect_async("mongodb://127.0.0.1:1/app", collection="x", ttl=60)
    assert isinstance(repository, AsyncMongoDBChatMemoryRepository)
    assert repository.collection.name == "x"
    assert repository.ttl is not None
    assert repository.ttl.total_seconds() == 60
    asyncio.run(repository.aclose())


def test_async_mongodb_closes_only_the_client_it_made() -> None:
    async def scenario() -> None:
        async with _unreachable() as owned:
            pass
        with pytest.raises(InvalidOperation):
            await owned.find_by_conversation_id("c")
        given = AsyncStandInClient()
        async with AsyncMongoDBChatMemoryRepository(given) as repository:  # type: ignore[arg-type]
            await repository.save_all("c", [Message.user("a")])
        reopened = AsyncMongoDBChatMemoryRepository(given)  # type: ignore[arg-type]
        assert [m.content for m in await reopened.find_by_conversation_id("c")] == ["a"]

    asyncio.run(scenario())


# --- on the stand-in (mongomock + evaluator; NOT a server) --------------------


class _CountingIndexes(AsyncStandInClient):
    """Counts ``create_indexes`` calls; each yields once, as a server call would."""

    def __init__(self) -> None:
        super().__init__()
        self.created = 0

    def __getitem__(self, name: str) -> Any:
        database = super().__getitem__(name)
        client = self

        class Database:
            def __getitem__(self, collection: str) -> Any:
                inner = database[collection]
                create = inner.create_indexes

                async def counted(*args: Any, **kwargs: Any) -> Any:
                    client.created += 1
                    await asyncio.sleep(0)
                    return await create(*args, **kwargs)

                inner.create_indexes = counted  # type: ignore[method-assign]
                return inner

        return Database()


def test_async_mongodb_stand_in_creates_the_ttl_index_once_before_writes() -> None:
    client = _CountingIndexes()
    repository = AsyncMongoDBChatMemoryRepository(client, collection="c")  # type: ignore[arg-type]

    async def scenario() -> None:
        assert await repository.find_by_conversation_id("x") == []
        assert client.created == 0
        window = MessageWindow(10)
        await asyncio.gather(
            *(
                repository.append_to_window(f"c{i}", [Message.user("u")], window)
                for i in range(10)
            )
        )
        await repository.save_all("s", [Message.user("a")])
        assert client.created == 1
        info = await repository.collection.index_information()
        assert info["chatledger_expires_at"]["expireAfterSeconds"] == 0
        await repository.drop_schema()
        await repository.save_all("s", [Message.user("a")])
        assert client.created == 2
        assert (
            "chatledger_expires_at" in await repository.collection.index_information()
        )

    asyncio.run(scenario())


def test_async_mongodb_stand_in_create_indexes_false_leaves_it_to_create_schema() -> (
    None
):
    client = _CountingIndexes()
    repository = AsyncMongoDBChatMemoryRepository(
        client,  # type: ignore[arg-type]
        collection="c",
        create_indexes=False,
    )

    async def scenario() -> None:
        await repository.save_all("s", [Message.user("a")])
        assert client.created == 0
        await repository.create_schema()
        await repository.create_schema()
        assert client.created == 2
        assert (
            "chatledger_expires_at" in await repository.collection.index_information()
        )

    asyncio.run(scenario())


def test_async_mongodb_stand_in_shares_one_layout_with_the_sync_twin() -> None:
    storage = StandInClient()
    name = f"c_{uuid.uuid4().hex}"
    sync = MongoDBChatMemoryRepository(storage, collection=name)  # type: ignore[arg-type]
    repository = AsyncMongoDBChatMemoryRepository(
        AsyncStandInClient(storage),  # type: ignore[arg-type]
        collection=name,
    )
    first = [Message.user("U1"), Message.assistant("A1")]

    async def scenario() -> None:
        memory = AsyncMessageWindowChatMemory(repository, max_messages=2)
        await memory.add("c", first)
        MessageWindowChatMemory(sync, max_messages=2).add(
            "c", [Message.user("U2"), Message.assistant("A2")]
        )
        assert [m.content for m in await memory.get("c")] == ["U2", "A2"]
        # The record the sync append kept makes the async retry a no-op.
        retried = await repository.append_to_window("c", first, MessageWindow(2))
        assert retried.appended == []
        # A token window measures what the sync repository stored, once.
        window = TokenWindow(1000, estimate_tokens, counter_id="t")
        await repository.append_to_window("c", [Message.user("U3")], window)
        assert await repository.count_messages("c") == 3
        assert sync.find_conversation_ids() == ["c"]
        assert (await repository.find_conversation_ids_page(limit=1)).ids == ["c"]
        await repository.drop_schema()

    asyncio.run(scenario())
    assert sync.find_conversation_ids() == []
