"""How far a long command has got, told on stderr whether or not it is a terminal.

Example:
    import io

    from chatledger.progress import Progress

    log = io.StringIO()
    progress = Progress("copying", 2000, "conversations", stream=log, every=0)
    progress.update(500)
    progress.close()
    log.getvalue()   # 'copying: 500/2000 conversations (... /s)\\n'

On a terminal a bar is redrawn in place. Elsewhere (a log file, a CI job, a
pipe) one line is written every ``every`` seconds, so a long run shows that
it moves and how fast, without flooding the log.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import IO

__all__ = ["DEFAULT_EVERY", "Progress"]

#: Seconds between two progress lines when the stream is not a terminal.
DEFAULT_EVERY = 5.0

_BAR_WIDTH = 30


class Progress:
    """Reports ``done/total`` and the rate of one long command.

    Args:
        verb: What the command does, as a present participle (``"copying"``).
        total: How many units there are to do.
        unit: Their name, plural (``"conversations"``).
        stream: Where to write (the command's stderr).
        every: Seconds between two lines when ``stream`` is not a terminal;
            ``0`` writes one per update.
        enabled: ``False`` writes nothing at all.
        clock: Seconds, monotonic (tests and callers rarely pass it).
    """

    def __init__(
        self,
        verb: str,
        total: int,
        unit: str,
        *,
        stream: IO[str],
        every: float = DEFAULT_EVERY,
        enabled: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Start counting now."""
        self.verb = verb
        self.total = total
        self.unit = unit
        self.stream = stream
        self.every = every
        self.enabled = enabled and total > 0
        self.terminal = self.enabled and _is_terminal(stream)
        self._clock = clock
        self._started = self._last = clock()
        self._drawn = False

    def update(self, done: int) -> None:
        """Record that ``done`` units are done; write if it is time to."""
        if not self.enabled:
            return
        now = self._clock()
        if self.terminal:
            filled = _BAR_WIDTH * done // self.total
            bar = "#" * filled + "." * (_BAR_WIDTH - filled)
            self.stream.write(
                f"\r{self.verb} [{bar}] {done}/{self.total} {self._rate(done, now)}"
            )
            self._drawn = True
        elif now - self._last >= self.every:
            self.stream.write(
                f"{self.verb}: {done}/{self.total} {self.unit} "
                f"({self._rate(done, now)})\n"
            )
            self._last = now
        else:
            return
        self.stream.flush()

    def close(self) -> None:
        """End the bar's line on a terminal; nothing otherwise."""
        if self._drawn:
            self.stream.write("\n")
            self.stream.flush()

    def _rate(self, done: int, now: float) -> str:
        elapsed = now - self._started
        if elapsed <= 0:
            return "- /s"
        return f"{done / elapsed:.1f}/s"


def _is_terminal(stream: IO[str]) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())
