"""A removal sent twice removes once: the ``REMOVE`` script's receipts.

A client sends a command again when its reply did not come, though the
server may have run it. Run twice with the very same arguments (what a
retry sends), ``REMOVE`` answers the first run's messages the second time
and writes nothing: on Redis and on Redis Cluster, through the sync and the
async repository, for the newest and for named ids, after an append, a
``save_all`` or a removal that emptied the conversation. The receipts are
a ring of the latest removals with a deadline of their own; a delete and
``drop_schema`` take them. Then end to end: a proxy in front of the server
loses the reply of the first script it forwards, and the repository's own
retry sends the removal again; the popped messages come back once and
nothing else is lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import re
import socket
import threading
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from redis import Redis
from redis.asyncio import Redis as AsyncRedis
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.cluster import RedisCluster

from chatledger import Message
from chatledger_redis import AsyncRedisChatMemoryRepository, RedisChatMemoryRepository
from chatledger_redis.keys import ConversationKeys
from chatledger_redis.scripts import REMOVE
from chatledger_redis.steps import REMOVAL_RECEIPT_MS, removal_args
from tests.backends import backend_url
from tests.redis.test_log import _layout


def _ids(messages: list[Message]) -> list[str]:
    return [m.id for m in messages]


class Driven:
    """A sync or an async repository, called synchronously.

    Args:
        repository: The repository.
        loop: The event loop an async repository's calls run on.
    """

    def __init__(self, repository: Any, loop: asyncio.AbstractEventLoop) -> None:
        self.repository = repository
        self._loop = loop

    def __call__(self, name: str, *args: Any, **kwargs: Any) -> Any:
        result = getattr(self.repository, name)(*args, **kwargs)
        if inspect.isawaitable(result):
            result = self._loop.run_until_complete(result)
        return result

    def resend(self, conversation_id: str, args: list[Any]) -> list[Message]:
        """Run the removal of ``args``: what ``remove_*`` and their retries send."""
        removed: list[Message] = self("_removal", conversation_id, args)
        return removed


@pytest.fixture(
    params=[
        ("sync", "redis"),
        ("sync", "redis_cluster"),
        ("async", "redis"),
        ("async", "redis_cluster"),
    ],
    ids=lambda p: "-".join(p),
)
def target(request: pytest.FixtureRequest) -> Iterator[tuple[Driven, Any, str]]:
    """A repository on a plain server or a cluster, its inspecting client, prefix."""
    kind, backend = request.param
    url = backend_url(backend)
    cluster = backend == "redis_cluster"
    prefix = f"chatledger-test:{uuid.uuid4().hex[:12]}:"
    inspecting: Any = RedisCluster.from_url(url) if cluster else Redis.from_url(url)
    loop = asyncio.new_event_loop()
    client: Any
    if kind == "sync":
        client = inspecting
        repository: Any = RedisChatMemoryRepository(client, key_prefix=prefix)
    else:

        async def made() -> Any:
            return (
                AsyncRedisCluster.from_url(url) if cluster else AsyncRedis.from_url(url)
            )

        client = loop.run_until_complete(made())
        repository = AsyncRedisChatMemoryRepository(client, key_prefix=prefix)
    try:
        yield Driven(repository, loop), inspecting, prefix
    finally:
        for key in list(inspecting.scan_iter(match=f"{prefix}*", count=1000)):
            inspecting.unlink(key)
        if kind == "async":
            loop.run_until_complete(client.aclose())
        loop.close()
        inspecting.close()


def _dumps(client: Any, keys: ConversationKeys) -> list[Any]:
    """Every key's serialized value: equal lists mean nothing was written."""
    return [client.dump(key) for key in keys.every()]


def _log(repository: Driven, conversation_id: str, count: int) -> list[Message]:
    sent = [Message.system("be brief")]
    sent += [Message.user(f"q{n}") for n in range(count - 1)]
    repository("append_to_log", conversation_id, sent)
    return sent


@pytest.mark.parametrize("newest", [True, False], ids=["newest", "ids"])
def test_a_removal_sent_again_answers_the_same_and_writes_nothing(
    target: tuple[Driven, Any, str], newest: bool
) -> None:
    repository, client, prefix = target
    keys = ConversationKeys.of(prefix, "c")
    sent = _log(repository, "c", 6)
    values: list[Any] = [2] if newest else [sent[3].id, sent[0].id, "never-stored"]
    args = removal_args(newest, values, 0)
    first = repository.resend("c", args)
    expected = sent[4:] if newest else [sent[0], sent[3]]
    assert _ids(first) == _ids(expected)
    before = _dumps(client, keys)
    assert _ids(repository.resend("c", args)) == _ids(expected)
    assert _dumps(client, keys) == before
    kept = [m for m in sent if m.id not in _ids(expected)]
    assert _ids(repository("find_by_conversation_id", "c")) == _ids(kept)
    _layout(client, keys)
    # A removal of its own (a new token) does remove; a repository without
    # a TTL leaves the receipts their own deadline.
    assert _ids(repository("remove_newest", "c")) == _ids(kept[-1:])
    assert 0 < client.pttl(keys.removals) <= REMOVAL_RECEIPT_MS
    assert client.pttl(keys.meta) == -1


@pytest.mark.parametrize("newest", [True, False], ids=["newest", "ids"])
def test_a_resent_removal_that_emptied_the_log_leaves_a_later_append(
    target: tuple[Driven, Any, str], newest: bool
) -> None:
    """The receipt outlives the keys the emptying removal deleted."""
    repository, client, prefix = target
    keys = ConversationKeys.of(prefix, "e")
    sent = _log(repository, "e", 3)
    args = removal_args(newest, [10] if newest else _ids(sent), 60_000)
    assert _ids(repository.resend("e", args)) == _ids(sent)
    assert [k for k in keys.every() if client.exists(k)] == [keys.removals]
    assert 0 < client.pttl(keys.removals) <= REMOVAL_RECEIPT_MS
    later = Message.user("later")
    repository("append_to_log", "e", [later])
    assert _ids(repository.resend("e", args)) == _ids(sent)
    assert _ids(repository("find_by_conversation_id", "e")) == [later.id]
    _layout(client, keys)


def test_a_resent_removal_leaves_what_save_all_wrote(
    target: tuple[Driven, Any, str],
) -> None:
    repository, client, prefix = target
    keys = ConversationKeys.of(prefix, "s")
    sent = _log(repository, "s", 4)
    args = removal_args(True, [1], 0)
    assert _ids(repository.resend("s", args)) == _ids(sent[-1:])
    saved = [Message.user("x"), Message.assistant("y")]
    repository("save_all", "s", saved)
    assert _ids(repository.resend("s", args)) == _ids(sent[-1:])
    assert _ids(repository("find_by_conversation_id", "s")) == _ids(saved)
    _layout(client, keys)


def test_a_delete_takes_the_receipts(target: tuple[Driven, Any, str]) -> None:
    """They hold removed messages: a delete leaves none of it behind."""
    repository, client, prefix = target
    keys = ConversationKeys.of(prefix, "d")
    sent = _log(repository, "d", 3)
    args = removal_args(True, [1], 0)
    assert _ids(repository.resend("d", args)) == _ids(sent[-1:])
    assert client.exists(keys.removals)
    repository("delete_by_conversation_id", "d")
    assert not [k for k in keys.every() if client.exists(k)]
    assert repository.resend("d", args) == []


def test_drop_schema_takes_receipts_left_alone(
    target: tuple[Driven, Any, str],
) -> None:
    """An emptied conversation may leave only its receipts: they go too."""
    repository, client, prefix = target
    _log(repository, "a", 2)
    _log(repository, "b", 2)
    repository("remove_newest", "a", 5)
    repository("remove_newest", "b", 1)
    repository("drop_schema")
    assert not list(client.scan_iter(match=f"{prefix}*", count=1000))


def test_a_removal_of_nothing_leaves_no_receipt(
    target: tuple[Driven, Any, str],
) -> None:
    repository, client, prefix = target
    assert repository("remove_newest", "none", 3) == []
    _log(repository, "n", 2)
    assert repository("remove_messages", "n", ["unknown"]) == []
    for conversation_id in ("none", "n"):
        keys = ConversationKeys.of(prefix, conversation_id)
        assert not client.exists(keys.removals)


def test_the_receipts_are_a_ring_of_the_latest_removals(
    target: tuple[Driven, Any, str],
) -> None:
    """Only the latest ``receipts`` removals answer a resend; the key expires.

    A resend older than the ring is a removal of its own again.
    """
    repository, client, prefix = target
    keys = ConversationKeys.of(prefix, "r")
    sent = _log(repository, "r", 9)
    runs = [
        removal_args(True, [1], 60_000, receipts=3, receipt_ms=5_000) for _ in range(5)
    ]
    for n, args in enumerate(runs):
        assert _ids(repository.resend("r", args)) == [sent[8 - n].id]
    # Three tokens, the three slots naming them, the count.
    assert client.hlen(keys.removals) == 7
    # The receipts keep their deadline, the conversation's keys theirs.
    assert 0 < client.pttl(keys.removals) <= 5_000
    assert client.pttl(keys.meta) > 5_000
    for n, args in list(enumerate(runs))[2:]:
        assert _ids(repository.resend("r", args)) == [sent[8 - n].id]
    assert _ids(repository("find_by_conversation_id", "r")) == _ids(sent[:4])
    assert _ids(repository.resend("r", runs[0])) == [sent[3].id]


class DroppingProxy:
    """A TCP proxy to a Redis server that loses one script's reply.

    It forwards every connection's bytes both ways, but when the server
    answers the first ``EVAL`` or ``EVALSHA`` a client sent through it, it
    closes that client's connection instead of forwarding the answer: the
    server ran the script, the client never hears of it. Later connections
    and scripts pass.

    Args:
        upstream: The server's ``(host, port)``.
    """

    _SCRIPT = re.compile(rb"\$(?:4\r\nEVAL|7\r\nEVALSHA)\r\n", re.IGNORECASE)

    def __init__(self, upstream: tuple[str, int]) -> None:
        self._upstream = upstream
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._spent = False
        self._sockets: list[socket.socket] = [self._listener]
        #: How many replies were lost, and how many connections were made.
        self.dropped = 0
        self.connections = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:  # closed
                return
            server = socket.create_connection(self._upstream)
            pending = threading.Event()
            with self._lock:
                self._sockets += [client, server]
                self.connections += 1
            threading.Thread(
                target=self._requests, args=(client, server, pending), daemon=True
            ).start()
            threading.Thread(
                target=self._replies, args=(server, client, pending), daemon=True
            ).start()

    def _requests(
        self, client: socket.socket, server: socket.socket, pending: threading.Event
    ) -> None:
        tail = b""
        try:
            while chunk := client.recv(65536):
                window = tail + chunk
                tail = window[-16:]
                if self._SCRIPT.search(window):
                    with self._lock:
                        if not self._spent:
                            self._spent = True
                            # Set before the command reaches the server, so
                            # its answer is the next thing the server sends.
                            pending.set()
                server.sendall(chunk)
        except OSError:
            pass
        finally:
            _close(server)

    def _replies(
        self, server: socket.socket, client: socket.socket, pending: threading.Event
    ) -> None:
        try:
            while chunk := server.recv(65536):
                if pending.is_set():
                    with self._lock:
                        self.dropped += 1
                    break
                client.sendall(chunk)
        except OSError:
            pass
        finally:
            _close(client)
            _close(server)

    def close(self) -> None:
        """Close the listener and every connection."""
        with self._lock:
            for sock in self._sockets:
                _close(sock)


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):  # closed already
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()


@pytest.fixture
def proxy(redis_url: str) -> Iterator[DroppingProxy]:
    parts = urlsplit(redis_url)
    dropping = DroppingProxy((parts.hostname or "127.0.0.1", parts.port or 6379))
    yield dropping
    dropping.close()


@pytest.mark.parametrize("kind", ["sync", "async"])
@pytest.mark.parametrize("newest", [True, False], ids=["newest", "ids"])
def test_a_lost_reply_and_the_client_s_retry_remove_once(
    redis_url: str,
    client: Redis,
    prefix: str,
    proxy: DroppingProxy,
    kind: str,
    newest: bool,
) -> None:
    """The repository's client sends the removal again on a new connection.

    The server ran it the first time; the second run answers the same
    messages, so they come back once, and the others stay.
    """
    direct = RedisChatMemoryRepository(client, key_prefix=prefix)
    sent = [Message.user(f"q{n}") for n in range(6)]
    direct.append_to_log("c", sent)
    client.script_load(REMOVE)  # the first script through the proxy is the removal
    database = urlsplit(redis_url).path or "/0"
    url = f"redis://127.0.0.1:{proxy.port}{database}"
    expected = sent[4:] if newest else [sent[1], sent[2]]
    if kind == "sync":
        repository = RedisChatMemoryRepository.from_url(url, key_prefix=prefix)
        try:
            removed = (
                repository.remove_newest("c", 2)
                if newest
                else repository.remove_messages("c", [sent[2].id, sent[1].id])
            )
        finally:
            repository.close()
    else:

        async def remove() -> list[Message]:
            async with AsyncRedisChatMemoryRepository.from_url(
                url, key_prefix=prefix
            ) as repository:
                if newest:
                    return await repository.remove_newest("c", 2)
                return await repository.remove_messages("c", [sent[2].id, sent[1].id])

        removed = asyncio.run(remove())
    assert proxy.dropped == 1
    assert proxy.connections >= 2
    assert _ids(removed) == _ids(expected)
    stored = direct.find_by_conversation_id("c")
    assert _ids(stored) == [m.id for m in sent if m.id not in _ids(expected)]
    _layout(client, ConversationKeys.of(prefix, "c"))
