"""Views read a row or two at a time, for the log suite's runs that cross every read."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from chatledger import Window


def small_reads(window: Window) -> Iterator[int]:
    """One row first, then two a read: every view walks back through further reads."""
    yield 1
    yield from itertools.repeat(2)
