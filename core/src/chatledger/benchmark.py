"""Measuring a chat memory against its driver's floor: workload, loop, figures.

Example:
    from chatledger import InMemoryChatMemoryRepository, MessageWindowChatMemory
    from chatledger.benchmark import Variant, history, ratio, run_interleaved, stream

    repository = InMemoryChatMemoryRepository()
    repository.save_all("c1", history(20))      # a full window of 20
    memory = MessageWindowChatMemory(repository, max_messages=20)
    messages = stream(100)                      # user, assistant, user, ...
    append = Variant(("append", 20), lambda: memory.add("c1", next(messages)), 40)
    read = Variant(("read", 20), lambda: memory.get("c1"), 40)
    stats, errors = run_interleaved([append, read], rounds=4, warmup=5)
    stats[("append", 20)].p50                   # microseconds
    ratio(stats[("append", 20)], stats[("read", 20)])   # on p50, or None

This is what both ``chatledger bench URL`` and the repository's ``bench``
package measure with, so their figures mean the same thing. Every variant runs
in the same round-robin loop, a batch each per round in a shuffled order,
after an untimed warm-up: a neighbour's burst on a shared machine slows all
variants alike instead of one.

A floor is the least the backend's own driver does per operation: one
INSERT of a pre-encoded row in its own transaction (RPUSH on Redis), one
ordered SELECT of a conversation (LRANGE). An adapter offers it through
``benchmark_floor()`` (:class:`SupportsBenchmarkFloor`).
"""

from __future__ import annotations

import functools
import gc
import itertools
import json
import random
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from chatledger import codec
from chatledger.memory import MessageWindowChatMemory
from chatledger.messages import Message, ToolCall, ToolResponse
from chatledger.repository import ChatMemoryRepository
from chatledger.validation import stamp_messages

__all__ = [
    "OPERATIONS",
    "WINDOWS",
    "BenchmarkFloor",
    "Measurement",
    "Stats",
    "SupportsBenchmarkFloor",
    "Variant",
    "count_steps",
    "history",
    "measure_window_memory",
    "ratio",
    "run_interleaved",
    "stream",
]

#: The window sizes measured unless told otherwise.
WINDOWS = (20, 200, 2000)
#: What :func:`measure_window_memory` times, for ours and for the floor.
OPERATIONS = ("append", "read")

_QUESTION = (
    "Could you look at the attached order {n} and tell me whether the delivery "
    "window still holds, and if not, what the earliest alternative would be?"
)
_ANSWER = (
    "Order {n} is on schedule: it left the warehouse this morning and the carrier "
    "still shows delivery between 14:00 and 16:00 tomorrow. I will keep watching "
    "it and tell you if that changes."
)
_SYSTEM = (
    "You are a concise logistics assistant. Answer in at most three sentences, "
    "call the tracking tool when an order number is mentioned, and never invent "
    "a delivery date."
)


def _turn(n: int) -> list[Message]:
    """One turn: a question, and every third turn a tool round trip first."""
    turn = [Message.user(_QUESTION.format(n=n))]
    if n % 3 == 0:
        call_id = f"call_{n}"
        arguments = json.dumps({"order": n, "detail": "full"})
        data = json.dumps({"order": n, "status": "in_transit", "eta": "14-16"})
        turn.append(
            Message.assistant(
                tool_calls=[
                    ToolCall(id=call_id, name="track_order", arguments=arguments)
                ]
            )
        )
        turn.append(
            Message.tool(ToolResponse(id=call_id, name="track_order", data=data))
        )
    turn.append(Message.assistant(_ANSWER.format(n=n)))
    return turn


def history(size: int) -> list[Message]:
    """Return exactly ``size`` messages: a system prompt, then whole turns.

    Every third turn carries a tool call and its response. The last turn may
    be cut short to hit ``size``; the window only needs a user message to cut
    on. Every call makes fresh message ids.
    """
    messages = [Message.system(_SYSTEM)]
    for n in itertools.count():
        if len(messages) >= size:
            break
        messages.extend(_turn(n))
    return messages[:size]


def stream(count: int, start: int = 0) -> Iterator[Message]:
    """Yield ``count`` fresh messages, alternating user and assistant.

    On a full window every other append then evicts a whole turn.
    """
    for n in range(start, start + count):
        if n % 2 == 0:
            yield Message.user(_QUESTION.format(n=n))
        else:
            yield Message.assistant(_ANSWER.format(n=n))


@dataclass(frozen=True)
class Stats:
    """Percentiles of one variant, in microseconds.

    ``cpu`` is the mean CPU time of the measuring thread per operation: the
    client's own work (driver and Python, and for embedded engines the engine),
    without waiting for a server or a disk. It is steadier than wall time on a
    busy machine and tells code cost apart from I/O.
    """

    p50: float
    p95: float
    n: int
    cpu: float = 0.0

    @classmethod
    def of(cls, samples_ns: Sequence[int], cpu_ns: int = 0) -> Stats:
        """Summarise samples given in nanoseconds (and their total CPU time)."""
        if not samples_ns:
            raise ValueError("no samples to summarise")
        ordered = sorted(samples_ns)

        def pct(q: float) -> float:
            return ordered[min(len(ordered) - 1, int(q * len(ordered)))] / 1000

        return cls(pct(0.50), pct(0.95), len(ordered), cpu_ns / len(ordered) / 1000)


def ratio(measured: Stats | None, reference: Stats | None) -> float | None:
    """``measured.p50 / reference.p50``; ``None`` when either is missing.

    Over 1 means ``measured`` is slower than ``reference``.
    """
    if measured is None or reference is None or reference.p50 <= 0:
        return None
    return measured.p50 / reference.p50


@dataclass
class Variant:
    """One measured operation: its key, the call, and how many samples it gets.

    Attributes:
        key: ``(name, window)``, the key of its :class:`Stats`.
        op: One operation; each call must do fresh work (a new message).
        samples: Timed calls over the whole run (warm-up calls come on top).
        taken: The timings so far, nanoseconds.
        cpu_ns: CPU time of the measuring thread over the timed batches.
    """

    key: tuple[str, int]
    op: Callable[[], object]
    samples: int
    taken: list[int] = field(default_factory=list)
    cpu_ns: int = 0


def run_interleaved(
    variants: Sequence[Variant],
    rounds: int,
    warmup: int,
    *,
    on_batch: Callable[[], None] | None = None,
    seed: int = 42,
) -> tuple[dict[tuple[str, int], Stats], list[str]]:
    """Time every variant in ``rounds`` rounds of shuffled batches.

    Each variant first runs ``warmup`` untimed calls, then about
    ``samples / rounds`` timed calls per round. A variant that raises is
    dropped and its error listed; the others go on. ``on_batch`` is called
    after every batch (for progress).

    Returns:
        ``(stats, errors)``: the :class:`Stats` of every variant that took a
        sample, and one line per failure.
    """
    errors: list[str] = []
    live: list[Variant] = []
    for variant in variants:
        try:
            for _ in range(warmup):
                variant.op()
            live.append(variant)
        except Exception as exc:  # a broken variant must not hide the others
            errors.append(f"{variant.key}: {type(exc).__name__}: {exc}")
    clock = time.perf_counter_ns
    shuffler = random.Random(seed)
    # Every batch starts with a collection so that none runs inside it;
    # what existed before the run (a test runner's or an application's
    # objects) is set aside, so that each collection scans only the run's own.
    gc.collect()
    gc.freeze()
    try:
        for round_index in range(rounds):
            shuffler.shuffle(live)
            for variant in list(live):
                batch = -(-variant.samples // rounds)
                batch = min(batch, variant.samples - len(variant.taken))
                gc.collect()
                op = variant.op
                taken = variant.taken
                cpu_start = time.thread_time_ns()
                try:
                    for _ in range(batch):
                        start = clock()
                        op()
                        taken.append(clock() - start)
                    variant.cpu_ns += time.thread_time_ns() - cpu_start
                except Exception as exc:
                    failure = f"{type(exc).__name__}: {exc}"
                    errors.append(f"{variant.key} round {round_index}: {failure}")
                    live.remove(variant)
                if on_batch is not None:
                    on_batch()
    finally:
        gc.unfreeze()
    stats = {v.key: Stats.of(v.taken, v.cpu_ns) for v in variants if v.taken}
    return stats, errors


class BenchmarkFloor(Protocol):
    """The driver's cheapest append and read, on a table or keys of its own.

    Rows hold pre-encoded messages (``codec.to_json``); nothing is decoded.
    """

    #: The driver, as a person reading a report knows it (``"psycopg"``).
    name: str

    def insert(self, conversation_id: str, seq: int, payload: str) -> None:
        """Store one encoded message at position ``seq``, committed."""
        ...

    def select(self, conversation_id: str) -> Sequence[Any]:
        """Return the stored rows of one conversation in order, undecoded."""
        ...

    def close(self) -> None:
        """Remove the table or keys this floor created, and release its connection."""
        ...


@runtime_checkable
class SupportsBenchmarkFloor(Protocol):
    """A repository that can make its driver's floor, on its own connection settings.

    ``benchmark_floor()`` creates the floor's storage (a table, a key
    space) beside the repository's and must leave nothing behind once the
    floor is closed.
    """

    def benchmark_floor(self) -> BenchmarkFloor:
        """Return a new floor on the repository's connection settings."""
        ...


@dataclass
class Measurement:
    """What :func:`measure_window_memory` found.

    Attributes:
        stats: ``(variant, window) -> Stats``; variants are ``ours_append``,
            ``ours_read``, ``floor_append`` and ``floor_read``.
        errors: One line per variant that failed.
    """

    stats: dict[tuple[str, int], Stats]
    errors: list[str]


def _rounds(samples: int) -> tuple[int, int]:
    """Rounds and warm-up calls for ``samples`` timed calls per variant."""
    return min(10, samples), min(20, max(1, samples // 10))


def count_steps(windows: Sequence[int], samples: int, *, with_floor: bool) -> int:
    """How many steps :func:`measure_window_memory` reports: fills, then batches."""
    rounds, _ = _rounds(samples)
    variants = 4 if with_floor else 2
    return len(windows) * (1 + rounds * variants)


def measure_window_memory(
    repository: ChatMemoryRepository,
    floor: BenchmarkFloor | None,
    windows: Sequence[int] = WINDOWS,
    samples: int = 200,
    *,
    on_step: Callable[[int, int], None] | None = None,
    prefix: str = "bench",
) -> Measurement:
    """Time a window memory's append and read beside the floor's, interleaved.

    For every window W: ``append`` is ``MessageWindowChatMemory.add`` on a
    conversation already holding a full window (so every other append evicts
    a whole turn), ``read`` is ``memory.get`` of a conversation of exactly W
    messages; the floor's are one INSERT of a pre-encoded row and one SELECT
    of W rows. Every variant gets ``samples`` timed calls.

    The conversations it writes (``<prefix>-...``) are deleted before it
    returns, also on an error or an interrupt; the floor is left to the
    caller to close. ``on_step(done, total)`` reports progress.
    """
    rounds, warmup = _rounds(samples)
    total = count_steps(windows, samples, with_floor=floor is not None)
    done = 0

    def step() -> None:
        nonlocal done
        done += 1
        if on_step is not None:
            on_step(done, total)

    written: list[str] = []
    try:
        variants: list[Variant] = []
        for window in windows:
            memory = MessageWindowChatMemory(repository, max_messages=window)
            appended, read = f"{prefix}-append-{window}", f"{prefix}-read-{window}"
            for conversation_id in (appended, read):
                written.append(conversation_id)
                repository.save_all(conversation_id, history(window))
            # Built before timing: making a Message is the caller's work (the
            # floor's rows are made and encoded beforehand too).
            messages = iter(list(stream(samples + warmup)))
            variants.append(
                Variant(
                    ("ours_append", window),
                    functools.partial(_add_next, memory, appended, messages),
                    samples,
                )
            )
            variants.append(
                Variant(
                    ("ours_read", window), functools.partial(memory.get, read), samples
                )
            )
            if floor is not None:
                variants.extend(
                    _floor_variants(floor, window, samples + warmup, samples)
                )
            step()
        stats, errors = run_interleaved(variants, rounds, warmup, on_batch=step)
        return Measurement(stats, errors)
    finally:
        for conversation_id in written:
            repository.delete_by_conversation_id(conversation_id)


def _add_next(
    memory: MessageWindowChatMemory, conversation_id: str, messages: Iterator[Message]
) -> None:
    memory.add(conversation_id, next(messages))


def _floor_variants(
    floor: BenchmarkFloor, window: int, count: int, samples: int
) -> list[Variant]:
    """Fill the floor's two conversations of W rows; its append and read."""
    appended, read = f"floor-append-{window}", f"floor-read-{window}"
    for conversation_id in (appended, read):
        for seq, message in enumerate(stamp_messages(history(window))):
            floor.insert(conversation_id, seq, codec.to_json(message))
    payloads = iter([codec.to_json(m) for m in stamp_messages(stream(count))])
    seqs = iter(range(window, window + count))
    insert = floor.insert

    def append() -> None:
        insert(appended, next(seqs), next(payloads))

    return [
        Variant(("floor_append", window), append, samples),
        Variant(("floor_read", window), functools.partial(floor.select, read), samples),
    ]
