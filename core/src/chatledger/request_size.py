"""Whether one request fits under a server's size limit, and the refusal if not.

Example:
    from chatledger.request_size import RequestLimit, encoded_size

    packet = RequestLimit(16 * 1024 * 1024, overhead=4096, setting="max_allowed_packet")
    size = encoded_size(["a message's text", b"its media", None, 7])
    packet.fits(size)                          # True
    packet.check(size, "the append of 'c1'")   # MessageTooLargeError if not

Every server caps what one request, or one value of it, may carry:
MySQL's and MariaDB's ``max_allowed_packet``, Redis' ``proto-max-bulk-len``
per argument, MongoDB's 16 MiB document, Cassandra's
``native_transport_max_message_size`` and ``max_mutation_size``. Past the
cap the server drops the connection or refuses the write only once it has
arrived, and a driver that retries on a lost connection sends it again. An
adapter therefore measures what it is about to send, and asks here whether
it fits, before any I/O: the arithmetic and the wording of the refusal are
the same for every backend.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from chatledger.errors import MessageTooLargeError

__all__ = ["RequestLimit", "encoded_size"]

#: What a number takes at most on the wire: eight bytes.
_NUMBER_BYTES = 8


@dataclass(frozen=True, slots=True)
class RequestLimit:
    """A server's cap on one request (or one value of a request), in bytes.

    Attributes:
        limit: The most bytes the server accepts.
        overhead: What the request carries besides the measured values (the
            statement's text, headers, the other small columns): kept free
            below ``limit``.
        setting: What the cap is called on the server, for the error message
            (``"max_allowed_packet"``, ``"proto-max-bulk-len"``, ...).
    """

    limit: int
    overhead: int
    setting: str

    def fits(self, size: int) -> bool:
        """Whether values of ``size`` bytes, with the overhead, fit the limit."""
        return size + self.overhead <= self.limit

    def check(self, size: int, what: str) -> None:
        """Refuse ``what`` (values of ``size`` bytes) unless it fits.

        Raises:
            MessageTooLargeError: naming ``what``, its size with the overhead,
                the limit and the server setting; nothing has been sent.
        """
        if not self.fits(size):
            raise MessageTooLargeError(
                f"{what} would take about {size + self.overhead} bytes; at most "
                f"{self.limit} fit ({self.setting}); nothing was sent"
            )


def encoded_size(values: Iterable[object]) -> int:
    """The bytes ``values`` take once encoded: strings in UTF-8, bytes as they
    are, ``None`` as nothing and a number as at most eight bytes."""
    total = 0
    for value in values:
        if value is None:
            continue
        if isinstance(value, str):
            total += len(value.encode("utf-8"))
        elif isinstance(value, bytes | bytearray | memoryview):
            total += len(value)
        else:
            total += _NUMBER_BYTES
    return total
