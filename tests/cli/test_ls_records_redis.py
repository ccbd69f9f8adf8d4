"""``chatledger ls --owner X --long`` on Redis and Redis Cluster: records, newest first.

The listing reads the Redis adapter's index of records (no scan); the plain
``ls`` stays the ids of the conversations holding messages.
"""

from __future__ import annotations

import importlib.util
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from chatledger import Message
from tests.backends import backend_url
from tests.cli.conftest import Cli

HAVE_REDIS = importlib.util.find_spec("chatledger_redis") is not None


@pytest.fixture(params=["redis", "redis_cluster"])
def redis_records(request: pytest.FixtureRequest) -> Iterator[tuple[str, str, Any]]:
    """A URL, its key-prefix option and a repository of that prefix; emptied after."""
    if not HAVE_REDIS:
        pytest.skip(
            "chatledger-redis is not installed (pip install -e ./packages/redis)"
        )
    from chatledger_redis import RedisChatMemoryRepository

    url = backend_url(request.param)
    if request.param == "redis_cluster":
        url = url.replace("redis://", "redis+cluster://", 1)
    prefix = f"cli_{uuid.uuid4().hex[:10]}:"
    repository = RedisChatMemoryRepository.from_url(url, key_prefix=prefix)
    yield url, f"key_prefix={prefix}", repository
    repository.drop_schema()
    repository.close()


def _write(repository: Any, cid: str, count: int, **info: Any) -> None:
    if count:
        repository.save_all(cid, [Message.user(f"m{n}") for n in range(count)])
    repository.set_conversation_info(cid, **info)
    time.sleep(0.002)  # the next write is later, on a millisecond clock too


def test_ls_owner_long_lists_that_owners_records(
    cli: Cli, redis_records: tuple[str, str, Any]
) -> None:
    url, option, repository = redis_records
    _write(repository, "trip", 2, owner="ann", metadata={"title": "Rome"})
    _write(repository, "draft", 0, owner="ann", metadata={"title": "New chat"})
    _write(repository, "other", 1, owner="bob")
    _write(repository, "Ann's", 1, owner="Ann")
    done = cli("ls", url, "-o", option, "--owner", "ann", "--long")
    assert (done.code, done.err) == (0, "")
    expected = []
    for cid, count, title in [("draft", 0, "New chat"), ("trip", 2, "Rome")]:
        info = repository.get_conversation_info(cid)
        stamp = info.updated_at.isoformat(timespec="milliseconds")
        expected.append(f"{cid}\t{stamp}\t{count}\tann\t{title}")
    assert done.out.splitlines() == expected
    everyone = cli("ls", url, "-o", option, "--long").out.splitlines()
    assert [line.split("\t")[0] for line in everyone] == [
        "Ann's",
        "other",
        "draft",
        "trip",
    ]
    # The ids of the conversations holding messages: no draft.
    plain = cli("ls", url, "-o", option).out.splitlines()
    assert plain == ["Ann's", "other", "trip"]
    nobody = cli("ls", url, "-o", option, "--owner", "zed", "--long")
    assert (nobody.code, nobody.out) == (0, "")
    prefix = option.partition("=")[2]
    assert nobody.err == (
        f"no conversation of owner 'zed' is stored under the key prefix "
        f"{prefix!r} in {url}\n"
    )
