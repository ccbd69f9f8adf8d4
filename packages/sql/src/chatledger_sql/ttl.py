"""The ``ttl`` option of a SQL chat memory: what it accepts and what it rejects.

Example:
    from datetime import timedelta
    from chatledger_sql.ttl import to_ttl

    to_ttl(90) == timedelta(seconds=90)
    to_ttl(timedelta(days=7)) == timedelta(days=7)
    to_ttl(None) is None

A TTL is checked when the repository is made, before any I/O, so a bad value
never reaches the database. The expiry it leads to (``now + ttl``) is stored in
a timestamp column, and every supported database keeps years up to 9999 at
least, hence the upper bound.
"""

from __future__ import annotations

import math
from datetime import timedelta

from chatledger.errors import ChatLedgerError

__all__ = ["MAX_TTL", "InvalidTTLError", "to_ttl"]

#: The longest TTL accepted: far beyond any use, far below the year 9999.
MAX_TTL = timedelta(days=100 * 366)


class InvalidTTLError(ChatLedgerError, ValueError, TypeError):
    """A ``ttl`` is not a positive duration (a ``timedelta`` or seconds).

    It is both a ``ValueError`` and a ``TypeError`` so that callers may catch
    whichever builtin fits their code.
    """


def to_ttl(ttl: object) -> timedelta | None:
    """Return ``ttl`` as a ``timedelta`` (``None`` stays ``None``), or raise.

    Args:
        ttl: A ``datetime.timedelta``, seconds as an ``int`` or ``float``, or
            ``None`` for no expiry.

    Raises:
        InvalidTTLError: for another type (``bool`` and numeric strings
            included), for a value that is not finite, is zero or negative,
            rounds to less than a microsecond, or exceeds :data:`MAX_TTL`.
    """
    if ttl is None:
        return None
    if isinstance(ttl, timedelta):
        value = ttl
    elif isinstance(ttl, int | float) and not isinstance(ttl, bool):
        if not math.isfinite(ttl):
            raise InvalidTTLError(f"ttl must be a finite number of seconds, not {ttl}")
        if ttl <= 0:
            raise InvalidTTLError(f"ttl must be positive, not {ttl!r}")
        if ttl > MAX_TTL.total_seconds():
            raise InvalidTTLError(f"ttl must be at most {MAX_TTL}, not {ttl!r} s")
        value = timedelta(seconds=ttl)
    else:
        raise InvalidTTLError(
            "ttl must be a datetime.timedelta, seconds as an int or float, or "
            f"None, not {type(ttl).__name__}"
        )
    if value <= timedelta(0):
        raise InvalidTTLError(f"ttl must be positive, not {ttl!r}")
    if value > MAX_TTL:
        raise InvalidTTLError(f"ttl must be at most {MAX_TTL}, not {value}")
    return value
