"""The per-conversation lock that makes one process's writers take turns."""

from __future__ import annotations

import asyncio
import contextlib
import threading

from chatledger_cassandra.locks import AsyncConversationLocks, ConversationLocks


def test_cassandra_writers_of_one_conversation_take_turns() -> None:
    locks = ConversationLocks()
    inside: list[int] = []
    most = 0
    guard = threading.Lock()
    start = threading.Barrier(8)

    def writer() -> None:
        nonlocal most
        start.wait()
        for _ in range(200):
            with locks.hold("c"):
                with guard:
                    inside.append(1)
                    most = max(most, len(inside))
                with guard:
                    inside.pop()

    threads = [threading.Thread(target=writer) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert most == 1
    assert len(locks) == 0  # no lock outlives its last user


def test_cassandra_other_conversations_do_not_wait() -> None:
    locks = ConversationLocks()
    with locks.hold("a"):
        entered = threading.Event()

        def other() -> None:
            with locks.hold("b"):
                entered.set()

        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
        assert entered.is_set()
        assert len(locks) == 1


def test_cassandra_lock_is_released_when_the_write_fails() -> None:
    locks = ConversationLocks()
    try:
        with locks.hold("c"):
            raise RuntimeError("crash")
    except RuntimeError:
        pass
    assert len(locks) == 0
    with locks.hold("c"):
        assert len(locks) == 1


def test_cassandra_tasks_of_one_conversation_take_turns() -> None:
    locks = AsyncConversationLocks()
    inside = most = 0

    async def writer() -> None:
        nonlocal inside, most
        for _ in range(50):
            async with locks.hold("c"):
                inside += 1
                most = max(most, inside)
                await asyncio.sleep(0)  # let the others try to enter
                inside -= 1

    async def main() -> None:
        await asyncio.gather(*(writer() for _ in range(8)))

    asyncio.run(main())
    assert most == 1
    assert len(locks) == 0


def test_cassandra_a_task_cancelled_while_waiting_leaves_the_lock() -> None:
    locks = AsyncConversationLocks()

    async def main() -> None:
        async with locks.hold("c"):
            waiter = asyncio.create_task(_hold(locks, "c"))
            await asyncio.sleep(0)
            assert len(locks) == 1
            waiter.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await waiter
        assert len(locks) == 0
        await _hold(locks, "c")  # free again

    asyncio.run(main())


async def _hold(locks: AsyncConversationLocks, conversation_id: str) -> None:
    async with locks.hold(conversation_id):
        await asyncio.sleep(0)
