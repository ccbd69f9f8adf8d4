"""Whether a window reads as fast from a long log as from a short one.

Example:
    found, errors = measure_log_size(repository, size=100_000, reads=1000, rounds=40)
    found.ratio                    # long log's read / short log's read, on p50
    found.load_seconds             # what loading the long log took

One conversation of ``size`` messages and one of :data:`SHORT_LOG` end in the
same 99 messages (the same texts, fresh ids), so the view of the last
:data:`LOG_WINDOW` messages both show has the same shape and the same bytes;
what differs is only the history behind it. Both are built as a log grows,
by appends (in batches, so that loading stays a small part of the run).
``memory.get`` of each then runs in one round-robin loop, batches of the two
alternating, so that a neighbour's burst on the shared machine slows both
alike. A log whose view reads only the newest rows (``SupportsLog``) gives a
ratio near 1 however long the log grows.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass

from bench.workload import history
from chatledger import ChatMemoryRepository, Message, MessageWindowChatMemory
from chatledger.benchmark import Stats, Variant, ratio, run_interleaved
from chatledger.bulk import MAX_BATCH_MESSAGES
from chatledger.errors import MessageTooLargeError
from chatledger.repository import SupportsLog

__all__ = [
    "LOAD_BATCH",
    "LOG_WINDOW",
    "MIN_READS",
    "READ_BUDGET_SECONDS",
    "SHORT_LOG",
    "LogSizeResults",
    "bulk_load",
    "long_log",
    "measure_log_size",
]

#: The messages of the short log, which the long one is compared with.
SHORT_LOG = 100
#: The window both reads show.
LOG_WINDOW = 20
#: Messages per append of a load: the batch ``chatledger copy`` and
#: ``import`` close at.
LOAD_BATCH = MAX_BATCH_MESSAGES
#: Untimed reads of each log before the first round.
_WARMUP = 20
#: Seconds the timed reads of both logs may take together, at most: a store
#: whose view reads the whole log (or table) gets fewer samples instead of
#: minutes of them.
READ_BUDGET_SECONDS = 30.0
#: The fewest timed reads of each log, whatever they cost.
MIN_READS = 40


@dataclass(frozen=True)
class LogSizeResults:
    """What the long-log read measured on one backend.

    Attributes:
        size: Messages in the long log.
        load_seconds: Wall time of loading the long log.
        batch: Messages per append of the load: :data:`LOAD_BATCH`, or less
            when the repository refused a write that large.
        long: The read of the long log's window, ``None`` if it failed.
        short: The read of the short log's window, ``None`` if it failed.
        seconds: Wall time of the whole measurement: making the messages,
            loading both logs, the reads.
    """

    size: int
    load_seconds: float
    batch: int
    long: Stats | None
    short: Stats | None
    seconds: float

    @property
    def ratio(self) -> float | None:
        """Long log's read / short log's read, on p50; ``None`` if either failed."""
        return ratio(self.long, self.short)


def long_log(size: int) -> list[Message]:
    """Return ``size`` messages ending as ``history(SHORT_LOG)`` ends.

    A system prompt, then turns of the workload as filler, then the last
    ``SHORT_LOG - 1`` messages of :func:`~bench.workload.history` with fresh
    ids: the same texts and the same turns as the short log's.

    Raises:
        ValueError: ``size`` is not larger than :data:`SHORT_LOG`.
    """
    if size <= SHORT_LOG:
        raise ValueError(f"a long log holds more than {SHORT_LOG} messages, not {size}")
    filler = history(size - SHORT_LOG + 1)[1:]
    head, *tail = history(SHORT_LOG)
    return [head, *filler, *tail]


def bulk_load(
    repository: ChatMemoryRepository,
    conversation_id: str,
    messages: list[Message],
    *,
    batch: int = LOAD_BATCH,
    settle: Callable[[], None] | None = None,
) -> int:
    """Store ``messages`` as one new conversation, appended in batches.

    On a repository that keeps logs, each batch is one ``append_to_log``, as
    a log grows; a batch the repository refuses as too large
    (``MessageTooLargeError``, raised before any I/O, so nothing is written
    twice) is halved until it fits. Any other repository gets one
    ``save_all``. ``settle`` runs after the first batch and after the last
    (see ``Setup.refresh_statistics``).

    A ``save_all`` of a log would be faster, but it is not how a log grows,
    and the view of a log it wrote may read the whole of it (``README.md``,
    "Long logs").

    Returns:
        The size of the batch the load ended with (at most the whole log).
    """
    if not isinstance(repository, SupportsLog):
        repository.save_all(conversation_id, messages)
        if settle is not None:
            settle()
        return len(messages)
    done = 0
    while done < len(messages):
        chunk = messages[done : done + batch]
        try:
            repository.append_to_log(conversation_id, chunk)
        except MessageTooLargeError:
            if batch == 1:
                raise
            batch //= 2
            continue
        if settle is not None and done == 0:
            settle()
        done += len(chunk)
    if settle is not None:
        settle()
    return min(batch, len(messages))


def measure_log_size(
    repository: ChatMemoryRepository,
    *,
    size: int,
    reads: int,
    rounds: int,
    batch: int = LOAD_BATCH,
    settle: Callable[[], None] | None = None,
) -> tuple[LogSizeResults, list[str]]:
    """Load a log of ``size`` messages and one of 100, then read both, interleaved.

    The long log is appended ``batch`` messages at a time (:func:`bulk_load`).
    Each log gets ``reads`` timed reads of its :data:`LOG_WINDOW`-message
    view (``MessageWindowChatMemory.get``), in ``rounds`` rounds, or as many
    as fit in :data:`READ_BUDGET_SECONDS` at the pace of the warm-up (never
    fewer than :data:`MIN_READS`). Both views are checked to show the same
    roles in the same order first: otherwise the two reads would not do the
    same work, and the comparison is reported as an error instead of a
    figure.

    Returns:
        ``(results, errors)``: the figures, and one line per failure.
    """
    started = time.perf_counter()
    long_id, short_id = f"log-{size}", f"log-{SHORT_LOG}"
    messages = long_log(size)
    bulk_load(repository, short_id, history(SHORT_LOG))
    began = time.perf_counter()
    batch = bulk_load(repository, long_id, messages, batch=batch, settle=settle)
    load_seconds = time.perf_counter() - began
    del messages
    memory = MessageWindowChatMemory(repository, max_messages=LOG_WINDOW)
    shapes = {
        key: [m.role.value for m in memory.get(key)] for key in (long_id, short_id)
    }
    if shapes[long_id] != shapes[short_id]:
        failure = (
            f"log_read: the views differ, {size} messages show {shapes[long_id]}, "
            f"{SHORT_LOG} show {shapes[short_id]}"
        )
        spent = time.perf_counter() - started
        return LogSizeResults(size, load_seconds, batch, None, None, spent), [failure]
    reads = min(reads, _affordable(memory, (long_id, short_id)))
    variants = [
        Variant(("log_read", n), functools.partial(memory.get, key), reads)
        for n, key in ((size, long_id), (SHORT_LOG, short_id))
    ]
    stats, errors = run_interleaved(variants, min(rounds, reads), _WARMUP)
    found = LogSizeResults(
        size,
        load_seconds,
        batch,
        stats.get(("log_read", size)),
        stats.get(("log_read", SHORT_LOG)),
        time.perf_counter() - started,
    )
    return found, errors


def _affordable(
    memory: MessageWindowChatMemory, conversation_ids: tuple[str, ...]
) -> int:
    """How many reads of each conversation fit in the budget, after a warm-up."""
    pace = 0.0
    for conversation_id in conversation_ids:
        began = time.perf_counter()
        for _ in range(_WARMUP):
            memory.get(conversation_id)
        pace += (time.perf_counter() - began) / _WARMUP
    return max(MIN_READS, int(READ_BUDGET_SECONDS / max(pace, 1e-9)))
