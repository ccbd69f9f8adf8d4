"""``AsyncRedisChatMemoryRepository``: conversations in Redis or Valkey, for asyncio.

Example (needs a Redis server):
    import asyncio

    from chatledger import AsyncMessageWindowChatMemory, Message
    from chatledger_redis import AsyncRedisChatMemoryRepository

    async def main():
        url = "redis://localhost:6379/0"
        repository = AsyncRedisChatMemoryRepository.from_url(url)
        memory = AsyncMessageWindowChatMemory(repository, max_messages=20)
        await memory.add("c1", Message.user("Hello"))
        await repository.aclose()

    asyncio.run(main())

The async twin of :class:`chatledger_redis.RedisChatMemoryRepository`, on
``redis.asyncio`` (``Redis`` or ``RedisCluster``): the same key layout, the
same Lua scripts with the same arguments (:mod:`chatledger_redis.steps`),
so both read and write the same conversations. Every write is one script or
one command, so it is atomic on the server: a cancelled call either reached
the server whole or not at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import NoScriptError, ResponseError

from chatledger.adapters import (
    AppendResult,
    AsyncClosingContext,
    ContentionError,
    ConversationPage,
    FaultPoints,
    Message,
    Window,
    stamp_messages,
    validate_conversation_id,
    validate_messages,
)
from chatledger_redis.bulk_limit import (
    PROTO_MAX_BULK_LEN,
    check_arguments,
    limit_from_reply,
    may_pass_smallest_limit,
)
from chatledger_redis.clients import async_redis_client
from chatledger_redis.steps import (
    RESIZE_ATTEMPTS,
    append_args,
    append_result,
    client_url,
    conversation_keys,
    ids_of_evicted_keys,
    ids_of_meta_keys,
    ordered_messages,
    page_of,
    resize_args,
    save_args,
    ttl_milliseconds,
)
from chatledger_redis.keys import (
    ConversationKeys,
    evicted_key_pattern,
    meta_key_pattern,
    validate_key_prefix,
)
from chatledger_redis.scripts import APPEND, RESIZE, SAVE

__all__ = ["AsyncRedisChatMemoryRepository"]

AsyncClient = Redis | RedisCluster


class AsyncRedisChatMemoryRepository(AsyncClosingContext):
    """An :class:`~chatledger.AsyncChatMemoryRepository` with atomic window appends.

    Args:
        client: A ``redis.asyncio.Redis`` or ``redis.asyncio.cluster.RedisCluster``;
            ``decode_responses`` may be on or off. The repository does not close
            a client it was given.
        key_prefix: Starts every key; letters, digits and ``_ : . -`` only.
        ttl: Time to live of a conversation after its last write
            (a ``timedelta`` or seconds), sliding; ``None`` keeps it forever.

    Raises:
        InvalidNameError: for a key prefix outside the allowlist.
        TypeError, ValueError: for a ttl that is not a positive duration.
    """

    def __init__(
        self,
        client: AsyncClient,
        *,
        key_prefix: str = "chatledger:",
        ttl: timedelta | float | None = None,
    ) -> None:
        """Store conversations through ``client`` under ``key_prefix``."""
        if not isinstance(client, (Redis, RedisCluster)):
            raise TypeError(
                "client must be a redis.asyncio.Redis or RedisCluster, not "
                f"{type(client).__name__}"
            )
        self.key_prefix = validate_key_prefix(key_prefix)
        self._ttl_ms = ttl_milliseconds(ttl)
        self.ttl = None if ttl is None else timedelta(milliseconds=self._ttl_ms)
        self.client = client
        self.fault_points = FaultPoints()
        self._owns_client = False
        self._append = client.register_script(APPEND)
        self._save = client.register_script(SAVE)
        self._resize = client.register_script(RESIZE)
        #: The server's proto-max-bulk-len, once a large argument needed it.
        self._max_bulk_bytes: int | None = None

    @classmethod
    def from_url(cls, url: str, **options: Any) -> AsyncRedisChatMemoryRepository:
        """Make a client for ``url`` that this repository owns (see :meth:`aclose`).

        No I/O: the client connects on the first call. ``redis://``,
        ``rediss://`` and ``unix://`` URLs make a ``redis.asyncio.Redis``;
        ``redis+cluster://`` and ``rediss+cluster://`` (or ``cluster=True``)
        make a ``redis.asyncio.cluster.RedisCluster``. ``key_prefix`` and
        ``ttl`` go to the repository, every other option to the client's
        ``from_url``.

        A ``Redis`` client made here takes its connections from a
        ``BlockingConnectionPool``: when ``max_connections`` (100 by default)
        calls are in flight, the next one waits for a connection (up to the
        pool's ``timeout``) instead of failing with "Too many connections",
        as an SQL engine's pool does. Pass ``connection_pool`` to choose.

        It sends a command again, on a new connection, when its connection
        broke, with the sync repository's policy (:mod:`chatledger_redis.clients`);
        pass ``retry`` to choose.
        """
        url, cluster, repository_options = client_url(url, options)
        client = async_redis_client(url, cluster=cluster, options=options)
        repository = cls(client, **repository_options)
        repository._owns_client = True
        return repository

    async def aclose(self) -> None:
        """Close the client if :meth:`from_url` made it; a given client stays open."""
        if self._owns_client:
            await self.client.aclose()

    def __repr__(self) -> str:
        return (
            f"AsyncRedisChatMemoryRepository(key_prefix={self.key_prefix!r}, "
            f"ttl={self.ttl!r})"
        )

    def _keys(self, conversation_id: str) -> ConversationKeys:
        return conversation_keys(self.key_prefix, conversation_id)[0]

    async def create_schema(self) -> None:
        """Do nothing: a conversation's keys appear with its first write."""

    async def drop_schema(self) -> None:
        """Delete every conversation under this repository's key prefix.

        Only keys of the layout this repository writes are touched, the
        evicted-id records of emptied conversations included.
        """
        pattern = evicted_key_pattern(self.key_prefix)
        records = [k async for k in self.client.scan_iter(match=pattern, count=1000)]
        doomed = set(await self.find_conversation_ids())
        doomed.update(ids_of_evicted_keys(self.key_prefix, records))
        for conversation_id in doomed:
            await self.client.unlink(*self._keys(conversation_id).all())

    async def find_conversation_ids(self) -> list[str]:
        """Return the id of every stored conversation (a SCAN of the meta keys).

        See :meth:`chatledger_redis.RedisChatMemoryRepository.find_conversation_ids`
        for why a SCAN, and what it costs.
        """
        pattern = meta_key_pattern(self.key_prefix)
        found = [key async for key in self.client.scan_iter(match=pattern, count=1000)]
        return ids_of_meta_keys(self.key_prefix, found)

    async def count_messages(self, conversation_id: str) -> int:
        """Return how many messages a conversation holds, in one command (``HLEN``)."""
        validate_conversation_id(conversation_id)
        return int(await self.client.hlen(self._keys(conversation_id).msgs))

    async def find_conversation_ids_page(
        self, cursor: str | None = None, limit: int = 100
    ) -> ConversationPage:
        """Return up to ``limit`` conversation ids after ``cursor``, in id order.

        Each page scans every meta key under the prefix, as the sync
        repository's does.
        """
        page_of([], cursor, limit)  # a bad cursor or limit: before any I/O
        return page_of(await self.find_conversation_ids(), cursor, limit)

    async def find_by_conversation_id(self, conversation_id: str) -> list[Message]:
        """Return one conversation, oldest first, in one command (``HGETALL``)."""
        validate_conversation_id(conversation_id)
        stored: dict[Any, Any] = await self.client.hgetall(
            self._keys(conversation_id).msgs
        )
        return ordered_messages(stored)

    async def save_all(self, conversation_id: str, messages: Sequence[Message]) -> None:
        """Replace one conversation in one script; an empty list removes it."""
        validate_conversation_id(conversation_id)
        batch = stamp_messages(validate_messages(messages))
        args = save_args(batch, self._ttl_ms)
        await self._check_arguments(args, first=3, per_message=4)
        # The script is the atomic unit: a fault before it leaves the old
        # conversation whole, a fault after it leaves the new one whole.
        for point in ("after_lock", "after_delete", "after_insert", "before_commit"):
            self.fault_points.reach(point)
        await self._save(keys=self._keys(conversation_id).all(), args=args)
        self.fault_points.reach("after_commit")

    async def delete_by_conversation_id(self, conversation_id: str) -> None:
        """Remove one conversation's keys in one command; an unknown id is a no-op."""
        validate_conversation_id(conversation_id)
        for point in ("after_lock", "after_delete", "before_commit"):
            self.fault_points.reach(point)
        await self.client.unlink(*self._keys(conversation_id).all())
        self.fault_points.reach("after_commit")

    async def append_to_window(
        self, conversation_id: str, messages: Sequence[Message], window: Window
    ) -> AppendResult:
        """Append and trim in one script (see ``AsyncSupportsWindowAppend``).

        One round trip when the stored sizes were measured by ``window``'s
        counter; otherwise the history is measured once with it first.
        """
        validate_conversation_id(conversation_id)
        batch = validate_messages(messages)
        if not batch:
            return AppendResult()
        stamped = stamp_messages(batch)
        counter = window.counter_id
        key_names = conversation_keys(self.key_prefix, conversation_id)[1]
        args = append_args(stamped, window, self._ttl_ms)
        await self._check_arguments(args, first=1, per_message=1)
        for point in ("after_lock", "after_insert", "after_evict", "before_commit"):
            self.fault_points.reach(point)
        for _ in range(RESIZE_ATTEMPTS):
            outcome = await self._run_append(key_names, args)
            if outcome != -1:
                break
            assert counter is not None  # the script asks only for a named counter
            await self._remeasure(self._keys(conversation_id), counter, window)
        else:
            raise ContentionError(
                conversation_id,
                RESIZE_ATTEMPTS,
                f"its history kept changing while measured with {counter!r}",
            )
        self.fault_points.reach("after_commit")
        return append_result(outcome, stamped)

    async def _check_arguments(
        self, args: list[Any], *, first: int, per_message: int
    ) -> None:
        """Refuse, before sending, a script argument the server would not read.

        The server's ``proto-max-bulk-len`` is asked once, and only when an
        argument may pass the smallest value a server allows
        (:mod:`chatledger_redis.bulk_limit`).
        """
        if not may_pass_smallest_limit(args):
            return
        if self._max_bulk_bytes is None:
            try:
                reply = await self.client.config_get(PROTO_MAX_BULK_LEN)
            except ResponseError:  # CONFIG refused (an ACL, a managed server)
                reply = None
            self._max_bulk_bytes = limit_from_reply(reply)
        check_arguments(
            args, self._max_bulk_bytes, first=first, per_message=per_message
        )

    async def _run_append(self, keys: tuple[str, ...], args: list[str]) -> Any:
        # EVALSHA sent directly, as the sync repository does; the script
        # object loads the script after a NOSCRIPT (a restarted server).
        try:
            return await self.client.execute_command(
                "EVALSHA", self._append.sha, len(keys), *keys, *args
            )
        except NoScriptError:
            return await self._append(keys=keys, args=args)

    async def _remeasure(
        self, keys: ConversationKeys, counter: str, window: Window
    ) -> None:
        """Measure the stored history with ``window`` and store its sizes.

        The write token is read before the messages, and the rewrite only
        happens if it is unchanged, so the sizes always match the markers.
        """
        pipe = self.client.pipeline(transaction=False)
        pipe.hget(keys.meta, "ver")
        pipe.hgetall(keys.msgs)
        token, stored = await pipe.execute()
        args = resize_args(counter, token, stored, window)
        if args is not None:
            await self._resize(keys=[keys.meta, keys.turns, keys.system], args=args)
