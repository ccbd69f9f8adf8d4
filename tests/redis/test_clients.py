"""The clients ``from_url`` makes retry a broken connection, sync and async alike."""

from __future__ import annotations

from typing import Any

from chatledger_redis import AsyncRedisChatMemoryRepository, RedisChatMemoryRepository
from chatledger_redis.clients import RETRIES

# Nothing listens here, and nothing below connects.
UNREACHABLE = "redis://127.0.0.1:1/0"


def _retry(repository: Any) -> Any:
    return repository.client.connection_pool.connection_kwargs["retry"]


def test_sync_and_async_clients_share_one_retry_policy() -> None:
    sync = RedisChatMemoryRepository.from_url(UNREACHABLE)
    asynchronous = AsyncRedisChatMemoryRepository.from_url(UNREACHABLE)
    single = AsyncRedisChatMemoryRepository.from_url(
        UNREACHABLE, single_connection_client=True
    )
    try:
        for repository in (sync, asynchronous, single):
            assert _retry(repository).get_retries() == RETRIES
        sync_backoff, async_backoff = (
            _retry(sync)._backoff,
            _retry(asynchronous)._backoff,
        )
        assert type(sync_backoff) is type(async_backoff)
        assert vars(sync_backoff) == vars(async_backoff)
    finally:
        sync.close()


def test_the_retry_option_takes_precedence() -> None:
    sync = RedisChatMemoryRepository.from_url(UNREACHABLE, retry=None)
    asynchronous = AsyncRedisChatMemoryRepository.from_url(UNREACHABLE, retry=None)
    try:
        assert _retry(sync) is None
        assert _retry(asynchronous) is None
    finally:
        sync.close()
