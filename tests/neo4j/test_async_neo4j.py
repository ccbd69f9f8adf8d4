"""The async Neo4j repository: no I/O before the first call, one schema, cancellation.

The offline tests point the driver at a closed port, so any I/O would raise.
The server tests run against ``CHATLEDGER_TEST_NEO4J_URL`` (or a container).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from importlib.metadata import entry_points
from typing import Any

import pytest
from neo4j import GraphDatabase

from chatledger import (
    AppendResult,
    AsyncChatMemoryRepository,
    AsyncSupportsWindowAppend,
    InvalidConversationIdError,
    InvalidMessageError,
    InvalidNameError,
    Message,
    MessageWindow,
    connect_async,
)
from chatledger_neo4j import AsyncNeo4jChatMemoryRepository, Neo4jChatMemoryRepository
from tests.backends import backend_url

# Port 1 on loopback: nothing listens, so a query would fail at once.
NOWHERE = "bolt://127.0.0.1:1"


def _labels() -> tuple[str, str]:
    """A label pair of its own, so tests never see each other's nodes."""
    tag = uuid.uuid4().hex[:12]
    return f"ConversationY{tag}", f"MessageY{tag}"


# -- before any I/O ------------------------------------------------------------


@pytest.mark.parametrize("url", [NOWHERE, "neo4j://127.0.0.1:1", "bolt+s://x:1"])
def test_async_neo4j_connect_async_finds_the_adapter_without_io(url: str) -> None:
    async def main() -> None:
        repository = connect_async(url, create_schema=True)
        assert isinstance(repository, AsyncNeo4jChatMemoryRepository)
        assert isinstance(repository, AsyncChatMemoryRepository)
        assert isinstance(repository, AsyncSupportsWindowAppend)
        await repository.aclose()
        await repository.aclose()

    asyncio.run(main())


def test_async_neo4j_entry_points_resolve_to_from_url() -> None:
    found = {e.name: e for e in entry_points(group="chatledger.async_repositories")}
    for scheme in ("neo4j", "bolt"):
        assert found[scheme].load() == AsyncNeo4jChatMemoryRepository.from_url


def test_async_neo4j_from_url_reads_the_url_like_the_sync_one() -> None:
    async def main() -> None:
        async with AsyncNeo4jChatMemoryRepository.from_url(
            "bolt://neo4j:hunter2-secret@127.0.0.1:1/chatdb"
        ) as repository:
            assert repository.database == "chatdb"
            assert "hunter2" not in repr(repository)
        async with AsyncNeo4jChatMemoryRepository.from_url(
            "bolt://127.0.0.1:1/fromurl", database="explicit"
        ) as repository:
            assert repository.database == "explicit"

    asyncio.run(main())


def test_async_neo4j_refuses_a_sync_driver() -> None:
    driver = GraphDatabase.driver(NOWHERE)
    try:
        with pytest.raises(TypeError, match="AsyncDriver"):
            AsyncNeo4jChatMemoryRepository(driver)  # type: ignore[arg-type]
    finally:
        driver.close()


@pytest.mark.parametrize("label", ["a`b", "Message:Admin", "", "1abc"])
def test_async_neo4j_bad_label_fails_before_any_io(label: str) -> None:
    with pytest.raises(InvalidNameError):
        AsyncNeo4jChatMemoryRepository.from_url(NOWHERE, message_label=label)


def test_async_neo4j_bad_input_fails_before_any_io() -> None:
    async def main() -> None:
        async with AsyncNeo4jChatMemoryRepository.from_url(NOWHERE) as repository:
            window = MessageWindow(3)
            with pytest.raises(InvalidConversationIdError):
                await repository.find_by_conversation_id(" ")
            with pytest.raises(InvalidConversationIdError):
                await repository.count_messages("")
            with pytest.raises(InvalidConversationIdError):
                await repository.save_all("a\x00b", [Message.user("x")])
            with pytest.raises(InvalidConversationIdError):
                await repository.delete_by_conversation_id(None)  # type: ignore[arg-type]
            with pytest.raises(InvalidMessageError):
                await repository.append_to_window("c", [None], window)  # type: ignore[list-item]
            with pytest.raises(ValueError):
                await repository.find_conversation_ids_page(limit=0)
            assert await repository.append_to_window("c", [], window) == AppendResult()

    asyncio.run(main())


# -- against a server ----------------------------------------------------------


@pytest.fixture(scope="module")
def neo4j_url(required: set[str]) -> str:
    return backend_url("neo4j", required)


class _CountingRepository(AsyncNeo4jChatMemoryRepository):
    schema_calls = 0

    async def create_schema(self) -> None:
        type(self).schema_calls += 1
        await asyncio.sleep(0.05)  # long enough for every racer to arrive
        await super().create_schema()


def test_async_neo4j_schema_is_made_once_under_concurrent_first_calls(
    neo4j_url: str,
) -> None:
    conversation, message = _labels()

    async def main() -> None:
        repository = _CountingRepository.from_url(
            neo4j_url, conversation_label=conversation, message_label=message
        )
        try:
            await asyncio.gather(
                *(repository.find_conversation_ids() for _ in range(10)),
                *(
                    repository.append_to_window(
                        f"c{n}", [Message.user("x")], MessageWindow(5)
                    )
                    for n in range(10)
                ),
            )
            assert _CountingRepository.schema_calls == 1
            names = set(repository.statements.index_names.values())
            async with repository._session() as session:
                shown = await (await session.run("SHOW INDEXES YIELD name")).value()
            assert names <= set(shown)
            assert len(await repository.find_conversation_ids()) == 10
        finally:
            try:
                await repository.drop_schema()
            finally:
                await repository.aclose()

    asyncio.run(main())


def test_async_neo4j_shares_conversations_and_evicted_ids_with_the_sync_one(
    neo4j_url: str,
) -> None:
    """Both twins read and write one graph; a late retry is a no-op in either."""
    conversation, message = _labels()
    window = MessageWindow(2)
    first = [Message.user("U1"), Message.assistant("A1")]
    second = [Message.user("U2"), Message.assistant("A2")]
    with Neo4jChatMemoryRepository.from_url(
        neo4j_url, conversation_label=conversation, message_label=message
    ) as sync:

        async def main() -> None:
            async with AsyncNeo4jChatMemoryRepository.from_url(
                neo4j_url, conversation_label=conversation, message_label=message
            ) as repository:
                await repository.append_to_window("shared", first, window)
                sync.append_to_window("shared", second, window)
                assert await repository.find_by_conversation_id("shared") == second
                # The sync append evicted what the async one wrote: retried
                # through either twin, it stores nothing.
                retried = await repository.append_to_window("shared", first, window)
                assert retried == AppendResult()
                assert sync.append_to_window("shared", first, window) == AppendResult()
                assert sync.find_by_conversation_id("shared") == second
                assert await repository.count_messages("shared") == 2

        try:
            asyncio.run(main())
        finally:
            sync.drop_schema()


def _ids(messages: list[Message]) -> list[str]:
    return [m.id for m in messages]


def test_async_neo4j_cancelled_append_leaves_old_or_new_state(neo4j_url: str) -> None:
    """A task cancelled during an evicting append: the old state or the new.

    The append evicts across several pages of old messages, so it is many
    awaits long; the cancellation lands on each in turn. Either way the
    record of evicted ids went with it: a retry of the same batch stores it
    whole if the append was undone, and is a no-op if it committed.
    """
    history = [
        Message.user(f"u{i}") if i % 2 == 0 else Message.assistant(f"a{i}")
        for i in range(300)
    ]

    conversation, message = _labels()

    async def main() -> None:
        repository = AsyncNeo4jChatMemoryRepository.from_url(
            neo4j_url, conversation_label=conversation, message_label=message
        )
        memory_window = MessageWindow(300)
        outcomes = {"old": 0, "new": 0}
        try:
            await repository.append_to_window("c", history, memory_window)
            # How many loop turns a whole append takes here, measured once on
            # another conversation of the same size.
            await repository.append_to_window("probe", history, memory_window)
            timed = asyncio.create_task(
                repository.append_to_window(
                    "probe", [Message.user("x")], MessageWindow(2)
                )
            )
            needed = 0
            while not timed.done():
                await asyncio.sleep(0)
                needed += 1
            await timed
            # Loop turns spin while the task waits on the server: growing
            # steps land on the early awaits one by one and still reach past
            # the commit.
            sweep = sorted({int(1.4**k) for k in range(60) if 1.4**k < 2 * needed})
            for turns in [0, *sweep]:
                before = _ids(await repository.find_by_conversation_id("c"))
                batch = [Message.user(f"new{turns}"), Message.assistant("reply")]
                # A window of 2 evicts every stored message: 2 pages or more.
                task = asyncio.create_task(
                    repository.append_to_window("c", batch, MessageWindow(2))
                )
                for _ in range(turns):
                    await asyncio.sleep(0)
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
                after = _ids(await repository.find_by_conversation_id("c"))
                assert after in (before, _ids(batch)), "a part of an append is visible"
                retried = await repository.append_to_window(
                    "c", batch, MessageWindow(2)
                )
                outcomes["old" if after == before else "new"] += 1
                # Messages and record went together: the retry stores the whole
                # batch (the append was undone) or nothing (it committed; a
                # COMMIT already sent may land just after the read above).
                if after != before:
                    assert retried == AppendResult()
                else:
                    assert _ids(retried.appended) in ([], _ids(batch))
                assert _ids(await repository.find_by_conversation_id("c")) == _ids(
                    batch
                )
                # Back to a long history for the next round.
                await repository.save_all("c", history)
            assert outcomes["old"] > 0
            assert outcomes["new"] > 0
        finally:
            try:
                await repository.drop_schema()
            finally:
                await repository.aclose()

    asyncio.run(main())


# -- the log -----------------------------------------------------------------------


def test_async_neo4j_log_calls_are_one_request_each(
    neo4j_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As the sync twin: a log append, a view and a page send one request each."""
    import socket

    writes = 0
    send = socket.socket.send
    sendall = socket.socket.sendall

    def counted_send(sock: socket.socket, *args: Any) -> Any:
        nonlocal writes
        writes += 1
        return send(sock, *args)

    def counted_sendall(sock: socket.socket, *args: Any) -> Any:
        nonlocal writes
        writes += 1
        return sendall(sock, *args)

    conversation, message = _labels()

    async def main() -> list[int]:
        nonlocal writes
        repository = AsyncNeo4jChatMemoryRepository.from_url(
            neo4j_url, conversation_label=conversation, message_label=message
        )
        try:
            await repository.append_to_log(
                "c", [Message.system("s"), Message.user("u")]
            )
            monkeypatch.setattr(socket.socket, "send", counted_send)
            monkeypatch.setattr(socket.socket, "sendall", counted_sendall)
            counts = []
            for call in (
                lambda: repository.append_to_log("c", [Message.assistant("a")]),
                lambda: repository.find_window("c", MessageWindow(5)),
                lambda: repository.find_messages_page("c", limit=1),
            ):
                writes = 0
                await call()
                counts.append(writes)
            monkeypatch.undo()
            return counts
        finally:
            monkeypatch.undo()
            await repository.drop_schema()
            await repository.aclose()

    assert asyncio.run(main()) == [1, 1, 1]


def test_async_neo4j_cancelled_log_append_is_stored_whole_or_not_at_all(
    neo4j_url: str,
) -> None:
    """A log append cancelled at any await: the log holds its batch or none of it.

    The statement commits on the server once sent, so a cancellation after
    that waits for its answer: when it returns, a read shows what stays.
    """
    conversation, message = _labels()

    async def main() -> dict[str, int]:
        repository = AsyncNeo4jChatMemoryRepository.from_url(
            neo4j_url, conversation_label=conversation, message_label=message
        )
        outcomes = {"old": 0, "new": 0}
        try:
            await repository.append_to_log("c", [Message.user("first")])
            for turns in range(0, 40, 2):
                before = _ids(await repository.find_by_conversation_id("c"))
                batch = [Message.user(f"u{turns}"), Message.assistant("a")]
                task = asyncio.create_task(repository.append_to_log("c", batch))
                for _ in range(turns):
                    await asyncio.sleep(0)
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
                after = _ids(await repository.find_by_conversation_id("c"))
                assert after in (before, before + _ids(batch)), "a part landed"
                outcomes["old" if after == before else "new"] += 1
                retried = await repository.append_to_log("c", batch)
                assert _ids(retried.appended) == (
                    [] if after != before else _ids(batch)
                )
                assert _ids(await repository.find_by_conversation_id("c")) == (
                    before + _ids(batch)
                )
            return outcomes
        finally:
            await repository.drop_schema()
            await repository.aclose()

    outcomes = asyncio.run(main())
    assert outcomes["old"] > 0
    assert outcomes["new"] > 0
