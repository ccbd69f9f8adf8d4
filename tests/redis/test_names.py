"""Key prefixes, ttl values and conversation-id encoding: checked before any I/O."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from redis import Redis
from redis.crc import key_slot

from chatledger import InvalidNameError, InvalidOptionError
from chatledger.testing.samples import ODD_CONVERSATION_IDS
from chatledger_redis import RedisChatMemoryRepository
from chatledger_redis.keys import ConversationKeys, decode_tag, encode_tag

HOSTILE_PREFIXES: list[Any] = [
    "",
    "a{b}",
    "{",
    "}",
    "tag}:",
    "a*",
    "a?",
    "[ab]",
    "a\\b",
    "with space",
    "line\n",
    "nul\x00",
    "é",
    "a/b",
    None,
    5,
    b"bytes",
]

# Nothing listens here: a repository that tried to connect would fail differently.
UNREACHABLE = "redis://127.0.0.1:1/0"


@pytest.mark.parametrize("prefix", HOSTILE_PREFIXES, ids=repr)
def test_hostile_key_prefixes_are_rejected(prefix: Any) -> None:
    with pytest.raises(InvalidNameError):
        RedisChatMemoryRepository(Redis.from_url(UNREACHABLE), key_prefix=prefix)
    with pytest.raises(InvalidNameError):
        RedisChatMemoryRepository.from_url(UNREACHABLE, key_prefix=prefix)


@pytest.mark.parametrize("prefix", ["a", "chatledger:", "app.v2-chat_memory:x"])
def test_plain_key_prefixes_are_accepted(prefix: str) -> None:
    repository = RedisChatMemoryRepository.from_url(UNREACHABLE, key_prefix=prefix)
    assert repository.key_prefix == prefix
    repository.close()


@pytest.mark.parametrize("ttl", [0, -1, 0.0, float("nan"), float("inf"), timedelta(0)])
def test_non_positive_ttl_is_rejected(ttl: Any) -> None:
    with pytest.raises(ValueError, match="ttl"):
        RedisChatMemoryRepository(Redis.from_url(UNREACHABLE), ttl=ttl)


@pytest.mark.parametrize("ttl", ["60", True, [60]], ids=repr)
def test_ttl_of_another_type_is_rejected(ttl: Any) -> None:
    with pytest.raises(TypeError, match="ttl"):
        RedisChatMemoryRepository.from_url(UNREACHABLE, ttl=ttl)


@pytest.mark.parametrize(
    ("ttl", "expected"),
    [
        (None, None),
        (90, timedelta(seconds=90)),
        (1.5, timedelta(milliseconds=1500)),
        (timedelta(days=7), timedelta(days=7)),
    ],
)
def test_ttl_accepts_timedelta_and_seconds(ttl: Any, expected: Any) -> None:
    repository = RedisChatMemoryRepository(Redis.from_url(UNREACHABLE), ttl=ttl)
    assert repository.ttl == expected


@pytest.mark.parametrize(
    "conversation_id", [*ODD_CONVERSATION_IDS, "}{", "{a}", "a}:meta", "x" * 40]
)
def test_ids_encode_to_one_brace_free_slot(conversation_id: str) -> None:
    tag = encode_tag(conversation_id)
    assert "{" not in tag
    assert "}" not in tag
    assert decode_tag(tag) == conversation_id
    keys = ConversationKeys.of("p:", conversation_id).all()
    assert len({key_slot(key.encode()) for key in keys}) == 1
    assert all(key.startswith(f"p:{{{tag}}}:") for key in keys)


def test_distinct_ids_get_distinct_keys() -> None:
    metas = {ConversationKeys.of("p:", c).meta for c in ODD_CONVERSATION_IDS}
    assert len(metas) == len(ODD_CONVERSATION_IDS)


@pytest.mark.parametrize("tag", ["", "YQ=", "YR", "!!", "_w"])
def test_non_canonical_tags_name_no_conversation(tag: str) -> None:
    assert decode_tag(tag) is None


def test_an_unknown_option_is_refused_before_any_connection() -> None:
    """A typo in an option is named with the valid ones, before a client exists."""
    with pytest.raises(InvalidOptionError, match="takes no option 'key_prefx'") as e:
        RedisChatMemoryRepository.from_url("redis://127.0.0.1:1/0", key_prefx="a:")
    assert "key_prefix" in str(e.value)
    assert isinstance(e.value, TypeError)


def test_client_options_still_reach_the_client() -> None:
    repository = RedisChatMemoryRepository.from_url(
        "redis://127.0.0.1:1/0", socket_timeout=2, socket_connect_timeout=1
    )
    assert isinstance(repository.client, Redis)
    try:
        kwargs = repository.client.connection_pool.connection_kwargs
        assert kwargs["socket_timeout"] == 2
        assert kwargs["socket_connect_timeout"] == 1
    finally:
        repository.close()
