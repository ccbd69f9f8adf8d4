"""The in-memory repositories: what both of them offer beyond the conformance suite."""

from __future__ import annotations

import asyncio

import pytest

from chatledger import (
    AsyncInMemoryChatMemoryRepository,
    InMemoryChatMemoryRepository,
    Message,
)


def test_the_sync_repository_closes_as_a_context_and_has_the_schema_calls() -> None:
    with InMemoryChatMemoryRepository() as repository:
        repository.create_schema()
        repository.save_all("a", [Message.user("hi")])
        repository.save_all("b", [Message.user("hey")])
        repository.drop_schema()
        assert repository.find_conversation_ids() == []
        repository.save_all("a", [Message.user("again")])
        assert [m.content for m in repository.find_by_conversation_id("a")] == ["again"]
    repository.close()


def test_the_async_repository_closes_as_a_context_and_has_the_schema_calls() -> None:
    async def scenario() -> None:
        async with AsyncInMemoryChatMemoryRepository() as repository:
            await repository.create_schema()
            await repository.save_all("a", [Message.user("hi")])
            await repository.drop_schema()
            assert await repository.find_conversation_ids() == []
        await repository.aclose()

    asyncio.run(scenario())


@pytest.mark.parametrize(
    "repository_class",
    [InMemoryChatMemoryRepository, AsyncInMemoryChatMemoryRepository],
)
def test_from_url_refuses_another_scheme_and_any_option_naming_the_class(
    repository_class: type[InMemoryChatMemoryRepository],
) -> None:
    assert repr(repository_class.from_url()) == (
        f"{repository_class.__name__}(conversations=0)"
    )
    with pytest.raises(ValueError, match=f"^{repository_class.__name__} takes a"):
        repository_class.from_url("sqlite://")
    with pytest.raises(TypeError, match="takes only the retention option, got a, b"):
        repository_class.from_url("memory://", b=1, a=2)
