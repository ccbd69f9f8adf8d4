"""What the steps of a call ask the driver for, and the driver statements that carry it.

Example:
    from chatledger_cassandra.requests import Pause, Read

    Read("select_version", ("c1",))   # one unpaged read of a prepared statement
    Pause(0.01)                       # wait before the next attempt

The steps of every repository call (:mod:`chatledger_cassandra.steps`) are
pure: they yield a :class:`Read`, a :class:`Commit` or a :class:`Pause` and are
sent back what it gave. The sync repository performs a request with
``session.execute`` and ``time.sleep``, the async one with
``session.execute_async`` and ``asyncio.sleep``; both turn a request into the
same driver statement with :func:`bind_read` and :func:`commit_statement`,
which do no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cassandra.query import UNSET_VALUE, BatchStatement, BatchType, BoundStatement

from chatledger_cassandra.plan import Plan, Write

__all__ = [
    "Commit",
    "Pause",
    "Read",
    "Request",
    "bind_read",
    "commit_statement",
    "configure_prepared",
]


@dataclass(frozen=True, slots=True)
class Read:
    """Run a prepared read and send back every row it returns.

    Attributes:
        statement: A key of :meth:`Statements.prepared`.
        params: Its bound values.
        fetch_size: Rows per page when the driver pages through the result,
            ``None`` for one unpaged request.
    """

    statement: str
    params: tuple[object, ...]
    fetch_size: int | None = None


@dataclass(frozen=True, slots=True)
class Commit:
    """Send a plan as one conditional statement or batch; send back its rows.

    Attributes:
        plan: The plan; its condition is never ``None``.
    """

    plan: Plan


@dataclass(frozen=True, slots=True)
class Pause:
    """Wait before the next attempt; send back ``None``.

    Attributes:
        seconds: How long.
    """

    seconds: float


Request = Read | Commit | Pause


def configure_prepared(prepared: Any, consistency: int, serial: int) -> Any:
    """Give a freshly prepared statement the repository's consistency levels."""
    prepared.consistency_level = consistency
    prepared.serial_consistency_level = serial
    return prepared


def _values(write: Write) -> tuple[object, ...]:
    """The values to bind for ``write``: a missing one is unset, never null.

    A bound null writes a tombstone cell; an insert of a message without a
    stored size would leave two, and a long conversation's reads would wade
    through (and at 100,000 by default, abort on) tombstones nobody deleted.
    """
    if write.statement != "insert":
        return write.params
    return tuple(UNSET_VALUE if value is None else value for value in write.params)


def bind_read(prepared: Any, read: Read) -> BoundStatement:
    """The bound statement of ``read``, with its paging."""
    bound: BoundStatement = prepared.bind(read.params)
    bound.fetch_size = read.fetch_size
    return bound


def commit_statement(
    plan: Plan, prepared: Callable[[str], Any], consistency: int, serial: int
) -> Any:
    """The statement that sends ``plan``: its condition alone, or one batch.

    Args:
        plan: A plan whose condition is not ``None``.
        prepared: Returns the prepared statement of a name.
        consistency: The commit's consistency level.
        serial: The consistency level of its Paxos phase.
    """
    condition = plan.condition
    assert condition is not None
    if not plan.writes:
        return prepared(condition.statement).bind(condition.params)
    batch = BatchStatement(
        batch_type=BatchType.UNLOGGED,
        consistency_level=consistency,
        serial_consistency_level=serial,
    )
    batch.add(prepared(condition.statement), condition.params)
    for write in plan.writes:
        batch.add(prepared(write.statement), _values(write))
    return batch
