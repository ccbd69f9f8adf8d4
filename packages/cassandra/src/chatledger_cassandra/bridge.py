"""The driver's callbacks, delivered to an asyncio event loop.

Example (needs a Cassandra server):
    import asyncio

    from cassandra.cluster import Cluster
    from chatledger_cassandra.bridge import all_rows

    async def main(session):
        return await all_rows(session.execute_async("SELECT now() FROM system.local"))

    session = Cluster(["127.0.0.1"]).connect()
    asyncio.run(main(session))

cassandra-driver answers on its own event-loop thread: ``execute_async``
returns a ``ResponseFuture`` whose callbacks run there. :func:`all_rows` hands
each page of rows (or the error) to the asyncio loop that awaits it with
``loop.call_soon_threadsafe``, and fetches the next page when there is one. A
cancelled await leaves the request to finish on the server; its answer is
then dropped. Nothing blocks the event loop and no thread is started for a
statement.

The driver has no asynchronous way to connect, prepare a statement or shut a
cluster down; :func:`off_loop` runs such a call, once in a repository's life,
on a thread of its own and delivers its outcome the same way.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["all_rows", "off_loop"]

T = TypeVar("T")


def _settle(
    future: asyncio.Future[Any], result: object, error: BaseException | None
) -> None:
    if future.done():
        return  # its awaiter was cancelled: nobody wants the answer
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


def _deliver(
    loop: asyncio.AbstractEventLoop,
    future: asyncio.Future[Any],
    result: object,
    error: BaseException | None,
) -> bool:
    """Settle ``future`` on ``loop``; False when the loop is closed."""
    try:
        loop.call_soon_threadsafe(_settle, future, result, error)
    except RuntimeError:
        return False
    return True


def _current_page(
    response: Any, loop: asyncio.AbstractEventLoop
) -> asyncio.Future[Any]:
    future: asyncio.Future[Any] = loop.create_future()
    response.add_callbacks(
        lambda rows: _deliver(loop, future, rows, None),
        lambda error: _deliver(loop, future, None, error),
    )
    return future


async def all_rows(response: Any) -> list[Any]:
    """Await every row of a driver ``ResponseFuture``, fetching page after page.

    Raises:
        Exception: the driver's error, unchanged.
    """
    loop = asyncio.get_running_loop()
    rows: list[Any] = []
    while True:
        page = await _current_page(response, loop)
        if page is not None:
            rows.extend(page)
        if not response.has_more_pages:
            return rows
        # The callbacks of the page just read would fire again for the next.
        response.clear_callbacks()
        response.start_fetching_next_page()


def off_loop(
    call: Callable[[], T], discard: Callable[[T], object] | None = None
) -> asyncio.Future[T]:
    """Run a blocking driver call on a thread of its own; await its outcome.

    Args:
        call: What to run, e.g. connecting a cluster.
        discard: Releases the result if the event loop closed before it came.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def run() -> None:
        try:
            result = call()
        except BaseException as error:
            _deliver(loop, future, None, error)
            return
        if not _deliver(loop, future, result, None) and discard is not None:
            discard(result)

    threading.Thread(target=run, name="chatledger-cassandra", daemon=True).start()
    return future
