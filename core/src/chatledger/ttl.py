"""The ``ttl`` option every adapter takes: what it accepts and what it rejects.

Example:
    from datetime import timedelta
    from chatledger.ttl import to_ttl

    to_ttl(90) == timedelta(seconds=90)
    to_ttl(timedelta(days=7)) == timedelta(days=7)
    to_ttl(None) is None

A TTL means the same on every backend: the whole conversation expires ``ttl``
after its last write (sliding). It is checked when the repository is made,
before any I/O, so a bad value never reaches the database. Adapters convert the
``timedelta`` to their own unit and may pass a lower ``maximum`` (Cassandra
caps TTLs at 20 years); the default bound keeps ``now + ttl`` inside every
database's timestamp range.
"""

from __future__ import annotations

import math
from datetime import timedelta

from chatledger.errors import InvalidTTLError

__all__ = ["MAX_TTL", "InvalidTTLError", "to_ttl"]

#: The longest TTL accepted: far beyond any use, far below the year 9999.
MAX_TTL = timedelta(days=100 * 366)


def to_ttl(ttl: object, *, maximum: timedelta = MAX_TTL) -> timedelta | None:
    """Return ``ttl`` as a ``timedelta`` (``None`` stays ``None``), or raise.

    Args:
        ttl: A ``datetime.timedelta``, seconds as an ``int`` or ``float``, or
            ``None`` for no expiry.
        maximum: The longest TTL the backend can keep.

    Raises:
        InvalidTTLError: for another type (``bool`` and numeric strings
            included), for a value that is not finite, is zero or negative,
            rounds to less than a microsecond, or exceeds ``maximum``.
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
        if ttl > maximum.total_seconds():
            raise InvalidTTLError(f"ttl must be at most {maximum}, not {ttl!r} s")
        value = timedelta(seconds=ttl)
    else:
        raise InvalidTTLError(
            "ttl must be a datetime.timedelta, seconds as an int or float, or "
            f"None, not {type(ttl).__name__}"
        )
    if value <= timedelta(0):
        raise InvalidTTLError(f"ttl must be positive, not {ttl!r}")
    if value > maximum:
        raise InvalidTTLError(f"ttl must be at most {maximum}, not {value}")
    return value
