"""Prove that a call did no I/O: no fault point reached, no statement or command sent.

Example:
    with no_io(repository), pytest.raises(InvalidConversationIdError):
        repository.append_to_window(None, [Message.user("x")], window)
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from chatledger.faults import FAULT_POINTS

__all__ = ["no_io"]


@contextmanager
def no_io(repository: Any) -> Iterator[list[str]]:
    """Record every fault point, SQL or CQL statement or Redis command sent inside.

    The block must send none: leaving it with any recorded fails the test.
    """
    seen: list[str] = []
    with ExitStack() as stack:
        points = getattr(repository, "fault_points", None)
        if points is not None:
            for point in FAULT_POINTS:
                points.on(point, seen.append)
            stack.callback(points.clear)
        for probe in _PROBES:
            probe(repository, seen, stack)
        yield seen
    assert seen == [], f"the call did I/O before failing: {seen[:5]}"


def _sql_probe(repository: Any, seen: list[str], stack: ExitStack) -> None:
    engine = getattr(repository, "engine", None)
    if engine is None or not hasattr(engine, "dialect"):
        return
    from sqlalchemy import event

    def record(*args: Any) -> None:
        seen.append(f"sql: {args[2]}")

    event.listen(engine, "before_cursor_execute", record)
    stack.callback(event.remove, engine, "before_cursor_execute", record)


def _redis_probe(repository: Any, seen: list[str], stack: ExitStack) -> None:
    client = getattr(repository, "client", None)
    if client is None or not hasattr(client, "execute_command"):
        return
    original = client.execute_command

    def execute_command(*args: Any, **options: Any) -> Any:
        seen.append(f"redis: {args[:1]}")
        return original(*args, **options)

    client.execute_command = execute_command
    stack.callback(delattr, client, "execute_command")


def _cassandra_probe(repository: Any, seen: list[str], stack: ExitStack) -> None:
    session = getattr(repository, "session", None)
    if session is None or not hasattr(session, "prepare"):
        return
    for name in ("execute", "execute_async", "prepare"):
        original = getattr(session, name)

        def sent(
            *args: Any, _name: str = name, _original: Any = original, **options: Any
        ) -> Any:
            seen.append(f"cassandra {_name}: {str(args[:1])[:80]}")
            return _original(*args, **options)

        setattr(session, name, sent)
        stack.callback(delattr, session, name)


_PROBES = [_sql_probe, _redis_probe, _cassandra_probe]
