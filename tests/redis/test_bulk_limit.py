"""Redis closes the connection on an argument longer than ``proto-max-bulk-len``.

The repositories ask the server for the setting once and refuse such a
message with ``MessageTooLargeError`` before sending anything; a batch whose
messages each fit is stored whatever its total. The server's setting is
lowered to its smallest value (1 MiB) for the few commands of each test and
restored at once: other clients of the test server see it meanwhile.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from redis import Redis

from chatledger import Message, MessageTooLargeError, MessageWindow
from chatledger_redis import AsyncRedisChatMemoryRepository, RedisChatMemoryRepository
from chatledger_redis.bulk_limit import (
    DEFAULT_MAX_BULK_BYTES,
    MIN_MAX_BULK_BYTES,
    check_arguments,
    limit_from_reply,
    may_pass_smallest_limit,
)

LIMIT = MIN_MAX_BULK_BYTES


@contextmanager
def smallest_bulk_limit(client: Redis) -> Iterator[None]:
    """``proto-max-bulk-len`` at 1 MiB for the block, then as it was."""
    old = client.config_get("proto-max-bulk-len")["proto-max-bulk-len"]
    assert old is not None
    client.config_set("proto-max-bulk-len", LIMIT)
    try:
        yield
    finally:
        client.config_set("proto-max-bulk-len", old)


def _each_fits() -> list[Message]:
    # Each one an argument of about 0.6 MiB; together past 1 MiB.
    return [Message.user(letter * (LIMIT * 3 // 5)) for letter in "abc"]


def test_redis_refuses_a_message_past_proto_max_bulk_len_before_sending(
    client: Redis, prefix: str
) -> None:
    repository = RedisChatMemoryRepository(client, key_prefix=prefix)
    before = [Message.user("kept"), *_each_fits()]
    huge = Message.user("x" * LIMIT)
    with smallest_bulk_limit(client):
        repository.save_all("c", before)
        for write in (
            lambda: repository.append_to_window("c", [huge], MessageWindow(20)),
            lambda: repository.save_all("c", [*before, huge]),
        ):
            with pytest.raises(MessageTooLargeError, match=f"at most {LIMIT} "):
                write()
    assert repository.find_by_conversation_id("c") == before


def test_redis_appends_a_batch_past_proto_max_bulk_len_whose_messages_fit(
    client: Redis, prefix: str
) -> None:
    repository = RedisChatMemoryRepository(client, key_prefix=prefix)
    batch = _each_fits()
    with smallest_bulk_limit(client):
        repository.append_to_window("c", batch, MessageWindow(20))
    assert repository.find_by_conversation_id("c") == batch


def test_async_redis_refuses_a_message_past_proto_max_bulk_len(
    client: Redis, redis_url: str, prefix: str
) -> None:
    before = [Message.user("kept"), *_each_fits()]
    huge = Message.user("x" * LIMIT)

    async def scenario() -> None:
        async with AsyncRedisChatMemoryRepository.from_url(
            redis_url, key_prefix=prefix
        ) as repository:
            with smallest_bulk_limit(client):
                await repository.append_to_window("c", before, MessageWindow(20))
                with pytest.raises(MessageTooLargeError, match="messages\\[1\\]"):
                    await repository.save_all("c", [before[0], huge])
                with pytest.raises(MessageTooLargeError, match=f"at most {LIMIT} "):
                    await repository.append_to_window(
                        "c", [Message.user("fits"), huge], MessageWindow(20)
                    )
            assert await repository.find_by_conversation_id("c") == before

    asyncio.run(scenario())


def test_only_a_long_argument_needs_the_servers_setting() -> None:
    assert not may_pass_smallest_limit(["h", "x" * (MIN_MAX_BULK_BYTES // 4), 7])
    assert may_pass_smallest_limit(["h", "x" * (MIN_MAX_BULK_BYTES // 4 + 1)])


def test_the_setting_is_read_from_any_reply_shape() -> None:
    assert limit_from_reply({"proto-max-bulk-len": "1048576"}) == 1048576
    assert limit_from_reply({b"proto-max-bulk-len": b"2097152"}) == 2097152
    per_node = {"a:1": {"proto-max-bulk-len": "3000000"}, "b:2": {"x": "2000000"}}
    assert limit_from_reply(per_node) == 2000000
    assert limit_from_reply(None) == DEFAULT_MAX_BULK_BYTES
    assert limit_from_reply({}) == DEFAULT_MAX_BULK_BYTES


def test_the_refusal_names_the_message_by_its_arguments() -> None:
    args = ["t", "w", 2, "id1", "u", "", "x" * 10, "id2", "u", "", "é" * 6]
    check_arguments(args, 12, first=3, per_message=4)
    with pytest.raises(MessageTooLargeError, match=r"messages\[1\].*about 12 bytes"):
        check_arguments(args, 11, first=3, per_message=4)
