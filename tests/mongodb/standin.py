"""A stand-in client for tests: mongomock storage plus the pipeline evaluator.

Example:
    from tests.mongodb.standin import AsyncStandInClient, StandInClient

    repository = MongoDBChatMemoryRepository(StandInClient(), collection="t1")
    twin = AsyncMongoDBChatMemoryRepository(AsyncStandInClient(), collection="t1")

It is NOT a MongoDB server and proves nothing about one. mongomock keeps the
documents and answers the plain queries (an aggregation's ``$match``,
``$sort`` and ``$limit`` too, as a find with that sort and limit: no index
is involved, so nothing here says what a server's plan reads); update
pipelines and an aggregation's ``$project`` stages, which mongomock cannot
evaluate for the operators the adapter uses, go through
:mod:`tests.mongodb.aggregation`. One lock around every call stands in for the
server's single-document atomicity. What it checks: the adapter's Python side
and the window and log logic its pipelines encode, end to end.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import mongomock
from pymongo import ReturnDocument

from tests.mongodb.aggregation import project, run_pipeline

__all__ = ["AsyncStandInClient", "StandInClient"]


class _Cursor:
    """What pymongo's ``Cursor`` offers the repository, over mongomock's."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def sort(self, key: str, direction: int) -> _Cursor:
        self._inner = self._inner.sort(key, direction)
        return self

    def limit(self, limit: int) -> _Cursor:
        self._inner = self._inner.limit(limit)
        return self

    def to_list(self, length: int | None = None) -> list[Any]:
        found = list(self._inner)
        return found if length is None else found[:length]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._inner)


class _Collection:
    def __init__(self, inner: Any, lock: threading.RLock) -> None:
        self._inner = inner
        self._lock = lock

    def find(self, *args: Any, **kwargs: Any) -> _Cursor:
        with self._lock:
            return _Cursor(self._inner.find(*args, **kwargs))

    def aggregate(self, pipeline: list[dict[str, Any]]) -> _Cursor:
        """``$match``, then ``$sort`` and ``$limit``, by mongomock; each
        ``$project`` after them by the evaluator."""
        (kind, query), *rest = (next(iter(stage.items())) for stage in pipeline)
        assert kind == "$match", "the stand-in aggregates from a $match"
        with self._lock:
            cursor = self._inner.find(query)
            while rest and rest[0][0] in ("$sort", "$limit"):
                kind, spec = rest.pop(0)
                if kind == "$sort":
                    cursor = cursor.sort(list(spec.items()))
                else:
                    cursor = cursor.limit(spec)
            found = [copy.deepcopy(d) for d in cursor]
        for kind, spec in rest:
            assert kind == "$project", f"the stand-in does not run {kind}"
            found = [project(document, spec) for document in found]
        return _Cursor(iter(found))

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._inner, name)
        if not callable(attribute):
            return attribute

        def locked(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                return attribute(*args, **kwargs)

        return locked

    def find_one_and_update(
        self,
        filter: dict[str, Any],
        update: Any,
        projection: dict[str, Any] | None = None,
        upsert: bool = False,
        return_document: bool = ReturnDocument.BEFORE,
        **kwargs: Any,
    ) -> Any:
        if not isinstance(update, list):
            with self._lock:
                return self._inner.find_one_and_update(
                    filter,
                    update,
                    projection,
                    upsert=upsert,
                    return_document=return_document,
                    **kwargs,
                )
        # An upsert must know the _id it creates; without one, mongomock
        # matches the filter.
        assert not upsert or set(filter) == {"_id"}, "the stand-in upserts by _id"
        with self._lock:
            before = self._inner.find_one(filter)
            if before is None and not upsert:
                return None
            start = before if before is not None else {"_id": filter["_id"]}
            after = run_pipeline(copy.deepcopy(start), update)
            self._inner.replace_one({"_id": start["_id"]}, after, upsert=True)
            shown = after if return_document == ReturnDocument.AFTER else before
            if shown is None or projection is None:
                return copy.deepcopy(shown)
            keep = {k for k, v in projection.items() if v}
            return {k: copy.deepcopy(v) for k, v in shown.items() if k in keep}

    def update_one(
        self, filter: dict[str, Any], update: Any, upsert: bool = False, **kwargs: Any
    ) -> Any:
        """mongomock's, but an update pipeline goes through the evaluator.

        The filter picks the document as mongomock matches it; a pipeline
        upserts by ``_id`` only.
        """
        if not isinstance(update, list):
            with self._lock:
                return self._inner.update_one(filter, update, upsert=upsert, **kwargs)
        assert not upsert or set(filter) == {"_id"}, "the stand-in upserts by _id"
        with self._lock:
            before = self._inner.find_one(filter)
            if before is None and not upsert:
                return _Updated(0, 0)
            start = before if before is not None else {"_id": filter["_id"]}
            after = run_pipeline(copy.deepcopy(start), update)
            self._inner.replace_one({"_id": start["_id"]}, after, upsert=True)
            return _Updated(int(before is not None), int(after != before))


class _Updated:
    """What pymongo's ``UpdateResult`` tells of an update the stand-in ran."""

    def __init__(self, matched_count: int, modified_count: int) -> None:
        self.matched_count = matched_count
        self.modified_count = modified_count


class _Database:
    def __init__(self, inner: Any, lock: threading.RLock) -> None:
        self._inner = inner
        self._lock = lock

    def __getitem__(self, name: str) -> _Collection:
        return _Collection(self._inner[name], self._lock)

    def drop_collection(self, name: str) -> None:
        self._inner.drop_collection(name)


class StandInClient:
    """mongomock storage, evaluated update pipelines, one lock: not a server."""

    def __init__(self) -> None:
        """Start with an empty in-process store."""
        self._inner: Any = mongomock.MongoClient(tz_aware=True)
        self._lock = threading.RLock()

    def __getitem__(self, name: str) -> _Database:
        return _Database(self._inner[name], self._lock)

    def close(self) -> None:
        """Close the mongomock client."""
        self._inner.close()


class _AsyncCursor:
    """What pymongo's ``AsyncCursor`` offers the repository, over a sync cursor."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def sort(self, key: str, direction: int) -> _AsyncCursor:
        self._inner = self._inner.sort(key, direction)
        return self

    def limit(self, limit: int) -> _AsyncCursor:
        self._inner = self._inner.limit(limit)
        return self

    async def to_list(self, length: int | None = None) -> list[Any]:
        found = list(self._inner)
        return found if length is None else found[:length]

    def __aiter__(self) -> AsyncIterator[Any]:
        async def walk() -> AsyncIterator[Any]:
            for document in list(self._inner):
                yield document

        return walk()


class _AsyncCollection:
    """pymongo's ``AsyncCollection`` calls the repository makes, on the stand-in.

    Each is a coroutine where pymongo's is one (``find`` is not: it returns a
    cursor), and awaits nothing: one call runs whole under the stand-in's
    lock, as one server-side operation does.
    """

    def __init__(self, inner: _Collection) -> None:
        self._inner = inner

    @property
    def name(self) -> str:
        return str(self._inner.name)

    def find(self, *args: Any, **kwargs: Any) -> _AsyncCursor:
        return _AsyncCursor(self._inner.find(*args, **kwargs))

    async def aggregate(self, pipeline: list[dict[str, Any]]) -> _AsyncCursor:
        return _AsyncCursor(iter(list(self._inner.aggregate(pipeline))))

    async def find_one(self, *args: Any, **kwargs: Any) -> Any:
        return self._inner.find_one(*args, **kwargs)

    async def find_one_and_update(self, *args: Any, **kwargs: Any) -> Any:
        return self._inner.find_one_and_update(*args, **kwargs)

    async def update_one(self, *args: Any, **kwargs: Any) -> Any:
        return self._inner.update_one(*args, **kwargs)

    async def delete_one(self, *args: Any, **kwargs: Any) -> Any:
        return self._inner.delete_one(*args, **kwargs)

    async def create_index(self, *args: Any, **kwargs: Any) -> Any:
        return self._inner.create_index(*args, **kwargs)

    async def create_indexes(self, *args: Any, **kwargs: Any) -> Any:
        return self._inner.create_indexes(*args, **kwargs)

    async def index_information(self) -> Any:
        return self._inner.index_information()

    async def drop(self) -> None:
        self._inner.drop()


class _AsyncDatabase:
    def __init__(self, inner: _Database) -> None:
        self._inner = inner

    def __getitem__(self, name: str) -> _AsyncCollection:
        return _AsyncCollection(self._inner[name])


class AsyncStandInClient:
    """The stand-in behind pymongo's async API: NOT a server either.

    Wraps a :class:`StandInClient` (a new one unless given), so a sync and an
    async repository can share its storage.
    """

    def __init__(self, sync: StandInClient | None = None) -> None:
        """Serve ``sync``'s storage (a fresh stand-in by default)."""
        self.sync = sync if sync is not None else StandInClient()

    def __getitem__(self, name: str) -> _AsyncDatabase:
        return _AsyncDatabase(self.sync[name])

    async def close(self) -> None:
        """Close the wrapped stand-in."""
        self.sync.close()
