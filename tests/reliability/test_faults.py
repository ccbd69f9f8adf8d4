"""Faults at every named point of a write: the result is old or new, never partial.

Two kinds of fault, at each point an append or a ``save_all`` reaches
(:mod:`chatledger.faults`):

- ``kill``: the server drops the repository's connection, from a second
  connection (PostgreSQL ``pg_terminate_backend``, MariaDB ``KILL``, Redis
  ``CLIENT KILL``);
- ``crash``: the process fails right there (the hook raises), on every backend
  with fault points.

Afterwards the conversation holds exactly its old messages or exactly its new
ones (the new ones whenever the write returned normally or the fault came after
the commit); retrying the same write (same message ids) gives the new state
exactly once, and the next write succeeds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from chatledger import Message
from chatledger.faults import FAULT_POINTS
from chatledger.window import MessageWindow
from tests.reliability.conftest import record_summary
from tests.reliability.killers import Killer, killer_for
from tests.reliability.workload import Target

WINDOW = MessageWindow(1000)


class InjectedCrash(Exception):
    """Raised by a hook to stand for the process failing at that point."""


@pytest.fixture
def repository(target: Target) -> Iterator[Any]:
    built = target.build()
    if getattr(built, "fault_points", None) is None:
        pytest.skip(f"{target.name}: the repository has no fault points")
    try:
        yield built
    finally:
        built.fault_points.clear()
        close = getattr(built, "close", None)
        if callable(close):
            close()


def _ids(messages: list[Message]) -> list[str]:
    return [m.id for m in messages]


def _operations(
    repository: Any, conversation: str
) -> dict[str, tuple[Callable[[], object], list[str]]]:
    """What each write does and the ids it leaves, given the old state."""
    old = _ids(repository.find_by_conversation_id(conversation))
    added = [Message.user("new question"), Message.assistant("new answer")]
    replacement = [Message.system("fresh start"), Message.user("replaced")]
    return {
        "append": (
            lambda: repository.append_to_window(conversation, added, WINDOW),
            old + _ids(added),
        ),
        "save_all": (
            lambda: repository.save_all(conversation, replacement),
            _ids(replacement),
        ),
    }


def _points_reached(repository: Any, operation: str) -> list[str]:
    reached: list[str] = []
    for point in FAULT_POINTS:
        repository.fault_points.on(point, reached.append)
    try:
        _operations(repository, "dry-run")[operation][0]()
    finally:
        repository.fault_points.clear()
    repository.delete_by_conversation_id("dry-run")
    return reached


def _fault(
    kind: str, killer: Killer | None, repository: Any
) -> Callable[[str], object]:
    if kind == "crash":

        def crash(point: str) -> None:
            raise InjectedCrash(point)

        return crash
    assert killer is not None
    return lambda point: killer.kill(repository)


@pytest.mark.parametrize("operation", ["append", "save_all"])
@pytest.mark.parametrize("kind", ["kill", "crash"])
def test_fault_at_every_point_leaves_old_or_new_state(
    target: Target, repository: Any, kind: str, operation: str
) -> None:
    killer = killer_for(target) if kind == "kill" else None
    if kind == "kill" and killer is None:
        pytest.skip(f"{target.name}: no server connection to kill")
    if killer is not None:
        killer.arm(repository)
    points = _points_reached(repository, operation)
    assert points, f"{target.name} {operation} reaches no fault point"
    assert "after_commit" in points
    results = []
    for point in points:
        conversation = f"fault-{kind}-{operation}-{point}"
        repository.append_to_window(
            conversation,
            [Message.user("old question"), Message.assistant("old")],
            WINDOW,
        )
        old = _ids(repository.find_by_conversation_id(conversation))
        run, new = _operations(repository, conversation)[operation]
        repository.fault_points.on(point, _fault(kind, killer, repository))
        error: BaseException | None = None
        try:
            run()
        except Exception as exc:  # the fault's error: a driver's or our crash
            error = exc
        finally:
            repository.fault_points.clear()
        if kind == "kill" and killer is not None:
            assert killer.killed > 0, f"{point}: no connection was killed"
            killer.killed = 0
            killer.after(repository)
        state = _recover_read(repository, conversation)
        where = f"{target.name} {operation} {kind} at {point} ({error!r})"
        assert state in (old, new), f"{where}: partial state {state}"
        if error is None or point == "after_commit":
            assert state == new, f"{where}: acknowledged or committed, yet old"
        elif kind == "crash":
            assert state == old, f"{where}: failed before commit, yet applied"
        # A retry of the same write (same message ids) converges on the new
        # state exactly once, whether or not the first attempt was applied.
        run()
        assert _ids(repository.find_by_conversation_id(conversation)) == new, where
        # The next write succeeds and continues from there.
        follow = Message.user("next write")
        repository.append_to_window(conversation, [follow], WINDOW)
        assert _ids(repository.find_by_conversation_id(conversation)) == [
            *new,
            follow.id,
        ], where
        results.append(
            f"{point}:{'new' if state == new else 'old'}"
            f"{'' if error is None else '/raised'}"
        )
    record_summary(f"{target.name:<10} {kind:<5} {operation:<8} " + " ".join(results))


def _recover_read(repository: Any, conversation: str) -> list[str]:
    """Read the state: the first call after the fault must already work."""
    return _ids(repository.find_by_conversation_id(conversation))
