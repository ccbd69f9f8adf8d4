"""One async Neo4j repository serves any event loop: one after another, or several
at once from threads each running ``asyncio.run`` (the Agents SDK's
``Runner.run_sync`` runs a fresh loop in a new thread). Each loop's driver is
closed on that loop; a driver the caller gave serves its first loop and says
so on any other."""

from __future__ import annotations

import asyncio
import gc
import os
import socket
import threading
import uuid
import warnings
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
from neo4j import AsyncDriver, AsyncGraphDatabase
from neo4j.exceptions import DriverError

from chatledger import AsyncMessageWindowChatMemory, Message, MessageWindow
from chatledger.adapters import LoopClosedFirstWarning
from chatledger_neo4j import (
    AsyncNeo4jChatMemoryRepository,
    Neo4jChatMemoryRepository,
    parse_url,
)
from tests.backends import backend_url

THREADS = 4
ROUNDS = 5


@pytest.fixture(scope="module")
def neo4j_url(required: set[str]) -> str:
    return backend_url("neo4j", required)


@pytest.fixture
def labels(neo4j_url: str) -> Iterator[tuple[str, str]]:
    """A label pair of its own; its nodes and schema go after the test."""
    tag = uuid.uuid4().hex[:12]
    conversation, message = f"ConvLoop{tag}", f"MsgLoop{tag}"
    yield conversation, message
    with Neo4jChatMemoryRepository.from_url(
        neo4j_url,
        conversation_label=conversation,
        message_label=message,
        create_schema=False,
    ) as repository:
        repository.drop_schema()


def _open(url: str, labels: tuple[str, str]) -> AsyncNeo4jChatMemoryRepository:
    conversation, message = labels
    return AsyncNeo4jChatMemoryRepository.from_url(
        url, conversation_label=conversation, message_label=message
    )


def _server_sockets(url: str) -> set[tuple[str, int]]:
    """The local ends of this process's open TCP connections to the server."""
    if not os.path.isdir("/proc/self/fd"):
        pytest.skip("lists open sockets through /proc/self/fd")
    address = urlsplit(parse_url(url).uri)
    port = address.port or 7687
    hosts = {info[4][0] for info in socket.getaddrinfo(address.hostname, port)}
    found = set()
    for name in os.listdir("/proc/self/fd"):
        try:
            if not os.readlink(f"/proc/self/fd/{name}").startswith("socket:"):
                continue
            copy = socket.socket(fileno=os.dup(int(name)))
        except OSError:
            continue  # closed meanwhile
        try:
            peer = copy.getpeername()
            if isinstance(peer, tuple) and peer[0] in hosts and peer[1] == port:
                found.add(copy.getsockname()[:2])
        except OSError:
            pass  # not connected
        finally:
            copy.close()  # the copy only: the connection stays as it was
    return found


def test_asyncio_run_twice_on_one_repository(
    neo4j_url: str, labels: tuple[str, str]
) -> None:
    repository = _open(neo4j_url, labels)
    memory = AsyncMessageWindowChatMemory(repository, max_messages=10)
    drivers: list[AsyncDriver] = []

    async def add(n: int) -> None:
        await memory.add("c1", Message.user(f"m{n}", id=f"m{n}"))
        drivers.append(repository.driver)

    for n in range(3):
        asyncio.run(add(n))
    assert [m.id for m in asyncio.run(memory.get("c1"))] == ["m0", "m1", "m2"]
    assert len({id(driver) for driver in drivers}) == 3  # one per loop
    asyncio.run(repository.aclose())


def test_threads_each_running_their_own_loop_share_one_repository(
    neo4j_url: str, labels: tuple[str, str]
) -> None:
    # First use included: no loop has touched the repository before the threads.
    repository = _open(neo4j_url, labels)
    memory = AsyncMessageWindowChatMemory(repository, max_messages=100)
    start = threading.Barrier(THREADS)
    failures: list[BaseException] = []

    def worker(n: int) -> None:
        async def rounds() -> None:
            for r in range(ROUNDS):
                await memory.add(f"c{n}", Message.user(f"{n}.{r}", id=f"m{n}.{r}"))
                await memory.add("shared", Message.user(f"{n}.{r}", id=f"s{n}.{r}"))
                assert len(await memory.get(f"c{n}")) == r + 1

        try:
            start.wait()
            asyncio.run(rounds())
        except BaseException as error:  # reported below, with its thread's number
            failures.append(error)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a thread's loop hung"
    assert not failures, failures

    async def read() -> tuple[list[list[str]], list[str]]:
        try:
            own = [[m.id for m in await memory.get(f"c{n}")] for n in range(THREADS)]
            return own, [m.id for m in await memory.get("shared")]
        finally:
            await repository.aclose()

    own, shared = asyncio.run(read())
    assert own == [[f"m{n}.{r}" for r in range(ROUNDS)] for n in range(THREADS)]
    assert sorted(shared) == sorted(
        f"s{n}.{r}" for n in range(THREADS) for r in range(ROUNDS)
    )
    for n in range(THREADS):  # each thread's own appends keep their order
        mine = [i for i in shared if i.startswith(f"s{n}.")]
        assert mine == [f"s{n}.{r}" for r in range(ROUNDS)]


def test_log_calls_serve_loops_one_after_another_and_at_once(
    neo4j_url: str, labels: tuple[str, str]
) -> None:
    """Log appends, views and pages from loops in turn and from threads at once.

    They run on their own (auto-commit) and retry by themselves: each loop's
    driver and the shared bookmarks serve them as they serve transactions.
    """
    repository = _open(neo4j_url, labels)
    window = MessageWindow(4)

    async def append(n: int) -> list[str]:
        await repository.append_to_log("log", [Message.user(f"u{n}", id=f"u{n}")])
        return [m.id for m in await repository.find_window("log", window)]

    assert asyncio.run(append(0)) == ["u0"]
    assert asyncio.run(append(1)) == ["u0", "u1"]
    start = threading.Barrier(THREADS)
    failures: list[BaseException] = []

    def worker(n: int) -> None:
        async def rounds() -> None:
            for r in range(ROUNDS):
                batch = [Message.user(f"{n}.{r}", id=f"t{n}.{r}")]
                await repository.append_to_log("log", batch)
                page = await repository.find_messages_page("log", limit=1)
                assert len(page.messages) == 1

        try:
            start.wait()
            asyncio.run(rounds())
        except BaseException as error:  # reported below
            failures.append(error)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a thread's loop hung"
    assert not failures, failures

    async def read() -> list[str]:
        try:
            page = await repository.find_messages_page(
                "log", limit=1000, newest_first=False
            )
            return [m.id for m in page.messages]
        finally:
            await repository.aclose()

    ids = asyncio.run(read())
    assert ids[:2] == ["u0", "u1"]
    assert sorted(ids[2:]) == sorted(
        f"t{n}.{r}" for n in range(THREADS) for r in range(ROUNDS)
    )


def test_a_loop_s_driver_is_closed_when_the_loop_shuts_down(
    neo4j_url: str, labels: tuple[str, str]
) -> None:
    repository = _open(neo4j_url, labels)
    before = _server_sockets(neo4j_url)

    async def use() -> tuple[AsyncDriver, set[tuple[str, int]]]:
        # Two calls at once hold two connections.
        await asyncio.gather(
            repository.save_all("a", [Message.user("x")]),
            repository.save_all("b", [Message.user("y")]),
        )
        return repository.driver, _server_sockets(neo4j_url) - before

    driver, opened = asyncio.run(use())
    assert opened, "the calls went through no connection of this process"
    assert not opened & _server_sockets(neo4j_url), "a socket outlived its loop"
    with pytest.raises(DriverError):
        driver.session()  # closed, by asyncio.run's shutdown
    # The repository goes on, on a driver of the next loop.
    assert asyncio.run(repository.count_messages("a")) == 1
    asyncio.run(repository.aclose())


def test_aclose_closes_the_driver_of_another_open_loop(
    neo4j_url: str, labels: tuple[str, str]
) -> None:
    repository = _open(neo4j_url, labels)
    before = _server_sockets(neo4j_url)
    other = asyncio.new_event_loop()
    thread = threading.Thread(target=other.run_forever)
    thread.start()
    try:

        async def use() -> AsyncDriver:
            await repository.save_all("c", [Message.user("x")])
            return repository.driver

        driver = asyncio.run_coroutine_threadsafe(use(), other).result()
        opened = _server_sockets(neo4j_url) - before
        assert opened

        asyncio.run(repository.aclose())

        async def closings_done() -> None:
            # aclose handed the closing to this loop; it runs as a task here.
            pending = asyncio.all_tasks() - {asyncio.current_task()}
            await asyncio.gather(*pending)

        asyncio.run_coroutine_threadsafe(closings_done(), other).result()
        with pytest.raises(DriverError):
            driver.session()
        assert not opened & _server_sockets(neo4j_url)
        # Closed for good, on every loop.
        with pytest.raises(DriverError, match="closed"):
            asyncio.run(repository.count_messages("c"))
        with pytest.raises(DriverError, match="closed"):
            asyncio.run_coroutine_threadsafe(
                repository.count_messages("c"), other
            ).result()
    finally:
        other.call_soon_threadsafe(other.stop)
        thread.join()
        other.run_until_complete(other.shutdown_asyncgens())
        other.close()


def test_a_loop_closed_without_its_shutdown_leaves_a_warning_not_a_leak(
    neo4j_url: str, labels: tuple[str, str]
) -> None:
    """``loop.close()`` alone never closes the async generators, so never the driver."""
    repository = _open(neo4j_url, labels)
    before = _server_sockets(neo4j_url)
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(repository.save_all("c", [Message.user("x")]))
    finally:
        loop.close()
    opened = _server_sockets(neo4j_url) - before
    assert opened  # still open: nothing could close them on a closed loop
    with warnings.catch_warnings():
        # The dropped driver's and its transports' own ResourceWarnings.
        warnings.simplefilter("ignore", ResourceWarning)
        with pytest.warns(LoopClosedFirstWarning, match="shutdown_asyncgens"):
            # The next loop to arrive drops the closed loop's driver.
            assert asyncio.run(repository.count_messages("c")) == 1
        gc.collect()
    assert not opened & _server_sockets(neo4j_url)
    asyncio.run(repository.aclose())


def test_the_loops_share_their_bookmarks(
    neo4j_url: str, labels: tuple[str, str]
) -> None:
    """A write's session starts from the bookmark the previous loop's write left."""
    repository = _open(neo4j_url, labels)

    async def write(content: str) -> set[str]:
        await repository.save_all("c", [Message.user(content)])
        _, bookmarks = repository._connection()
        return set(await bookmarks.get_bookmarks())

    first = asyncio.run(write("one"))
    second = asyncio.run(write("two"))
    assert first
    assert second
    # The second loop's session began from ``first`` and handed back its own:
    # a manager of that driver alone would still hold ``first`` beside it.
    assert not first & second
    asyncio.run(repository.aclose())


def test_a_given_driver_serves_its_first_loop_and_refuses_another(
    neo4j_url: str, labels: tuple[str, str]
) -> None:
    settings = parse_url(neo4j_url)
    driver = AsyncGraphDatabase.driver(settings.uri, auth=settings.auth)
    repository = AsyncNeo4jChatMemoryRepository(
        driver,
        database=settings.database,
        conversation_label=labels[0],
        message_label=labels[1],
    )
    refused: list[BaseException] = []

    def from_a_thread() -> None:
        try:
            asyncio.run(repository.count_messages("c"))
        except RuntimeError as error:
            refused.append(error)

    with asyncio.Runner() as home:
        try:
            home.run(repository.save_all("c", [Message.user("x")]))
            with pytest.raises(RuntimeError, match="serves one event loop"):
                asyncio.run(repository.count_messages("c"))
            thread = threading.Thread(target=from_a_thread)
            thread.start()
            thread.join(timeout=120)
            assert not thread.is_alive(), "another thread's loop hung"
            assert len(refused) == 1
            assert "from_url" in str(refused[0])
            # Its own loop goes on, and the repository never closes it.
            assert home.run(repository.count_messages("c")) == 1
            home.run(repository.aclose())
            assert home.run(repository.count_messages("c")) == 1
        finally:
            home.run(driver.close())
