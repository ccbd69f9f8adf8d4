"""Concurrent writers and readers that record a history for :mod:`.history`.

Example:
    target = Target("memory", "chatledger:InMemoryChatMemoryRepository")
    run = run_threads(target.build(), ["c1"], writers_per_conversation=16,
                      appends_per_writer=200, window=MessageWindow(10_000))
    assert check(run.appends, run.reads, run.final).valid

Every batch is one turn: a user message, then nothing, an assistant answer, or
an assistant tool call and its tool response. Message ids carry the tag
``<run>/<conversation>/<writer>/<counter>/<index>``, so the checker needs
nothing but what the store returns.
"""

from __future__ import annotations

import importlib
import multiprocessing
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from chatledger import ChatLedgerError, Message, ToolCall, ToolResponse
from chatledger.memory import WindowChatMemory
from chatledger.window import MessageWindow, Window
from tests.reliability.history import Append, Observation, Read
from tests.window_append_memory import WindowAppendMemory

__all__ = ["Run", "Target", "make_batch", "run_processes", "run_threads"]


@dataclass(frozen=True)
class Target:
    """How to build a repository, in this process or in a fresh one.

    Attributes:
        name: The backend name.
        factory: ``"module:attribute"`` of a callable returning a repository.
        args: Positional arguments of the callable.
        kwargs: Keyword arguments of the callable.
        no_processes: Why several processes cannot share this store, if so.
    """

    name: str
    factory: str
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    no_processes: str | None = None

    def pooled(self, connections: int) -> Target:
        """This target, a SQL one with a pool as large as the threads that use it.

        With SQLAlchemy's default pool (5 + 10), threads beyond 15 wait for a
        connection; a writer that just committed takes its connection back
        before a waiting thread wakes, so the waiter can starve past the 30 s
        pool timeout (SQLite too: its writers queue on the database lock).
        """
        if self.name not in ("postgresql", "mariadb", "sqlite"):
            return self
        options = {"pool_size": connections, "max_overflow": 0, "pool_timeout": 120}
        return replace(self, kwargs={**self.kwargs, "engine_options": options})

    def build(self) -> Any:
        """Make a repository."""
        module, _, attribute = self.factory.partition(":")
        target: Any = importlib.import_module(module)
        for part in attribute.split("."):
            target = getattr(target, part)
        return target(*self.args, **dict(self.kwargs))


@dataclass
class Run:
    """What a run recorded."""

    appends: list[Append] = field(default_factory=list)
    reads: list[Read] = field(default_factory=list)
    final: dict[str, Observation] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0


def make_batch(tag: str, counter: int) -> list[Message]:
    """One turn whose shape depends on ``counter``; ids carry ``tag``."""
    shape = counter % 3
    batch = [
        Message.user(f"question {tag}", id=f"{tag}/0", metadata={"tag": tag}),
    ]
    if shape == 1:
        batch.append(Message.assistant(f"answer {tag}", id=f"{tag}/1"))
    elif shape == 2:
        call = ToolCall(id=f"call {tag}", name="lookup", arguments='{"q": "ü"}')
        batch.append(Message.assistant(None, tool_calls=[call], id=f"{tag}/1"))
        batch.append(
            Message.tool(
                ToolResponse(id=call.id, name="lookup", data="42"), id=f"{tag}/2"
            )
        )
    return batch


def _append(
    memory: Any, conversation: str, writer: str, counter: int, run: str
) -> tuple[Append, str | None]:
    batch = make_batch(f"{run}/{conversation}/{writer}/{counter}", counter)
    ids = tuple(m.id for m in batch)
    roles = tuple(m.role.value for m in batch)
    invoke = time.monotonic_ns()
    try:
        result = memory.add(conversation, batch)
    except ChatLedgerError as exc:
        complete = time.monotonic_ns()
        record = Append(
            conversation, writer, counter, ids, roles, invoke, complete, "fail"
        )
        return record, f"{writer}#{counter}: {exc!r}"
    except Exception as exc:  # the outcome of a driver error is unknown
        complete = time.monotonic_ns()
        record = Append(
            conversation, writer, counter, ids, roles, invoke, complete, "info"
        )
        return record, f"{writer}#{counter}: {exc!r}"
    complete = time.monotonic_ns()
    appended = [m.id for m in result.appended]
    error = None
    if appended != list(ids):
        error = f"{writer}#{counter}: appended {appended}, sent {list(ids)}"
    record = Append(
        conversation,
        writer,
        counter,
        ids,
        roles,
        invoke,
        complete,
        "ok",
        tuple(result.evicted_ids),
    )
    return record, error


def _observe(repository: Any, conversation: str) -> Observation:
    messages = repository.find_by_conversation_id(conversation)
    return Observation(
        tuple(m.id for m in messages), tuple(m.role.value for m in messages)
    )


def _reader(
    repository: Any,
    conversations: Sequence[str],
    stop: threading.Event,
    reads: list[Read],
    errors: list[str],
    pause: float,
) -> None:
    turn = 0
    while not stop.is_set():
        conversation = conversations[turn % len(conversations)]
        turn += 1
        invoke = time.monotonic_ns()
        try:
            seen = _observe(repository, conversation)
        except Exception as exc:
            errors.append(f"reader: {exc!r}")
            return
        complete = time.monotonic_ns()
        reads.append(Read(conversation, invoke, complete, seen.ids, seen.roles))
        # Rest four times as long as the read took (up to two seconds), so
        # that readers decoding a long history hold the GIL a fifth of the
        # time at most and never starve the writers (or swamp the checker).
        stop.wait(min(max(pause, 4 * (complete - invoke) / 1e9), 2.0))


def _with_readers(
    repository: Any,
    conversations: Sequence[str],
    readers: int,
    pause: float,
    run: Run,
    body: Callable[[], None],
) -> None:
    stop = threading.Event()
    threads = [
        threading.Thread(
            target=_reader,
            args=(repository, conversations, stop, run.reads, run.errors, pause),
            daemon=True,
        )
        for _ in range(readers)
    ]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    try:
        body()
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    run.seconds = time.perf_counter() - started
    for conversation in conversations:
        run.final[conversation] = _observe(repository, conversation)


def run_threads(
    repository: Any,
    conversations: Sequence[str],
    *,
    writers_per_conversation: int,
    appends_per_writer: int,
    window: Window,
    threads: int | None = None,
    readers: int = 2,
    read_pause: float = 0.01,
    window_append: bool = False,
) -> Run:
    """Append from threads (one per writer unless ``threads`` caps it) and read.

    With ``threads`` set, writer ``k`` runs on thread ``k % threads`` and each
    thread interleaves its writers, so the writers of one conversation still
    race each other on different threads. With ``window_append`` the writers
    call ``append_to_window`` (the store keeps the window only) instead of
    the memory's log append.
    """
    tag = uuid.uuid4().hex[:8]
    memory: Any = (
        WindowAppendMemory(repository, window)
        if window_append
        else WindowChatMemory(repository, window)
    )
    writers = [
        (conversation, f"w{number}")
        for conversation in conversations
        for number in range(writers_per_conversation)
    ]
    count = len(writers) if threads is None else threads
    lanes: list[list[tuple[str, str]]] = [[] for _ in range(count)]
    for number, writer in enumerate(writers):
        lanes[number % count].append(writer)
    run = Run()
    barrier = threading.Barrier(count)
    lock = threading.Lock()

    def lane(mine: list[tuple[str, str]]) -> None:
        barrier.wait()
        records: list[Append] = []
        problems: list[str] = []
        for counter in range(appends_per_writer):
            for conversation, writer in mine:
                record, error = _append(memory, conversation, writer, counter, tag)
                records.append(record)
                if error:
                    problems.append(error)
        with lock:
            run.appends.extend(records)
            run.errors.extend(problems)

    def body() -> None:
        workers = [threading.Thread(target=lane, args=(m,)) for m in lanes]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()

    _with_readers(repository, conversations, readers, read_pause, run, body)
    return run


def _process_writer(
    target: Target,
    conversation: str,
    writer: str,
    appends: int,
    window_limit: int,
    run_tag: str,
    barrier: Any,
    results: Any,
) -> None:
    records: list[Append] = []
    problems: list[str] = []
    try:
        repository = target.build()
        memory = WindowChatMemory(repository, MessageWindow(window_limit))
        # Bounded: a sibling that died before the barrier must not hang us.
        barrier.wait(timeout=300)
        for counter in range(appends):
            record, error = _append(memory, conversation, writer, counter, run_tag)
            records.append(record)
            if error:
                problems.append(error)
        close = getattr(repository, "close", None)
        if callable(close):
            close()
    except BaseException as exc:
        problems.append(f"{writer}: {exc!r}")
        barrier.abort()
    results.put((records, problems))


def run_processes(
    target: Target,
    repository: Any,
    conversation: str,
    *,
    processes: int,
    appends_per_writer: int,
    window_limit: int,
    readers: int = 2,
    read_pause: float = 0.01,
) -> Run:
    """Append from ``processes`` fresh processes while this one reads."""
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(processes)
    results = context.Queue()
    tag = uuid.uuid4().hex[:8]
    workers = [
        context.Process(
            target=_process_writer,
            args=(
                target,
                conversation,
                f"p{n}",
                appends_per_writer,
                window_limit,
                tag,
                barrier,
                results,
            ),
        )
        for n in range(processes)
    ]
    run = Run()

    def body() -> None:
        for worker in workers:
            worker.start()
        try:
            for _ in workers:
                records, problems = results.get(timeout=600)
                run.appends.extend(records)
                run.errors.extend(problems)
            for worker in workers:
                worker.join(timeout=60)
        finally:
            # A writer that never reported must not outlive the test.
            for worker in workers:
                if worker.is_alive():
                    worker.terminate()
                    worker.join(timeout=10)

    _with_readers(repository, [conversation], readers, read_pause, run, body)
    return run
