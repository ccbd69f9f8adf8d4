"""How big one write is, checked against the server's limits before it is sent.

Example:
    from chatledger import Message, MessageWindow
    from chatledger_cassandra.steps import Snapshot, plan_append_batch
    from chatledger_cassandra.sizes import DEFAULT_MAX_WRITE_BYTES, check_write

    plan = plan_append_batch(
        "c1", Snapshot(None, []), [Message.user("hi")], MessageWindow(20), ttl=0
    )
    check_write(plan, DEFAULT_MAX_WRITE_BYTES, "c1")   # MessageTooLargeError if not

Every write of a conversation is one conditional batch: one request to the
coordinator and one mutation of the partition. Cassandra refuses a request
larger than ``native_transport_max_message_size`` and a mutation larger than
``max_mutation_size`` (half of ``commitlog_segment_size``); both are 16 MiB by
default. A refused write changes nothing, but the error comes late and reads
as a server fault, so the repository estimates the size of every plan and
refuses a write that cannot fit with :class:`chatledger.MessageTooLargeError`
before sending it. The estimate errs on the large side: it counts every bound
value in full, plus a generous allowance per statement and per batch for what
the request and the mutation add around the values.
"""

from __future__ import annotations

from chatledger.adapters import RequestLimit, encoded_size
from chatledger_cassandra.steps import Plan

__all__ = ["DEFAULT_MAX_WRITE_BYTES", "check_write", "write_bytes"]

#: Cassandra's default limit of one request and of one mutation: 16 MiB.
DEFAULT_MAX_WRITE_BYTES = 16 * 1024 * 1024

# Per statement: its id and value lengths in the request; the row's clustering,
# timestamps, TTLs and cell headers in the mutation.
_STATEMENT_BYTES = 128
# Per batch: the request and frame headers, the partition key and the mutation
# and commit log entry headers.
_BATCH_BYTES = 64 * 1024


def _statements_bytes(plan: Plan) -> int:
    statements = [] if plan.condition is None else [plan.condition]
    statements += plan.writes
    return sum(
        _STATEMENT_BYTES + encoded_size(statement.params) for statement in statements
    )


def write_bytes(plan: Plan) -> int:
    """Return an upper estimate of the request and mutation size of ``plan``."""
    return _BATCH_BYTES + _statements_bytes(plan)


def check_write(plan: Plan, limit: int, conversation_id: str) -> None:
    """Refuse ``plan`` if it may not fit in one request and one mutation.

    Raises:
        MessageTooLargeError: if :func:`write_bytes` exceeds ``limit``.
    """
    RequestLimit(
        limit,
        _BATCH_BYTES,
        "max_write_bytes; the server's native_transport_max_message_size and "
        "max_mutation_size are 16 MiB by default",
    ).check(
        _statements_bytes(plan),
        f"the write of conversation {conversation_id!r} (one batch, one mutation)",
    )
