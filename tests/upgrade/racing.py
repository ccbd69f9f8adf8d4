"""Two processes that meet a store at the same moment (``at_once.py`` each).

Example:
    with RacingPair(tmp_path) as pair:
        first, second = pair.run("migrate", url, {"table_name": "chat"})
        first.code, first.out

Both are sent a request, each imports what it needs and says it is ready;
then both are told to go together, so their schema changes race. They
serve the requests of a whole test session, paying their imports once.
"""

from __future__ import annotations

import json
import select
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self

__all__ = ["Outcome", "RacingPair"]

#: The script each process runs.
AT_ONCE = Path(__file__).with_name("at_once.py")
#: How long a process may take to answer: a bound for a stuck server only.
ANSWER_SECONDS = 300


@dataclass(frozen=True)
class Outcome:
    """What one process's request did: its exit code and what it printed."""

    code: int
    out: str
    err: str


class RacingPair:
    """Two ``at_once.py`` processes, each serving one request at a time."""

    def __init__(self, folder: Path) -> None:
        """Start both; each writes what else it has to say in ``folder``."""
        self._logs = [folder / f"at_once_{index}.log" for index in range(2)]
        self._processes = [
            subprocess.Popen(
                [sys.executable, str(AT_ONCE), str(log)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            for log in self._logs
        ]

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """End both processes (their input closed, or killed if they hang)."""
        for process in self._processes:
            if process.stdin is not None and not process.stdin.closed:
                process.stdin.close()
        for process in self._processes:
            try:
                process.wait(timeout=ANSWER_SECONDS)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def run(self, mode: str, url: str, options: dict[str, Any]) -> list[Outcome]:
        """Have both do ``mode`` on the store at once; what each did."""
        request = json.dumps({"mode": mode, "url": url, "options": options})
        self._send(request)
        for index in range(2):
            self._expect(index, "ready")
        self._send("go")
        return [Outcome(**json.loads(self._line(index))) for index in range(2)]

    def _send(self, line: str) -> None:
        for process in self._processes:
            stdin: IO[str] | None = process.stdin
            assert stdin is not None
            stdin.write(line + "\n")
            stdin.flush()

    def _expect(self, index: int, text: str) -> None:
        line = self._line(index)
        if line != text:
            raise AssertionError(f"process {index} said {line!r}, not {text!r}")

    def _line(self, index: int) -> str:
        """The next line of process ``index``; its stderr when there is none."""
        process = self._processes[index]
        stdout = process.stdout
        assert stdout is not None
        ready, _, _ = select.select([stdout], [], [], ANSWER_SECONDS)
        line = stdout.readline() if ready else ""
        if not line:
            log = self._logs[index]
            said = log.read_text(encoding="utf-8") if log.exists() else ""
            raise AssertionError(
                f"process {index} of the pair answered nothing "
                f"(exit code {process.poll()}):\n{said[-4000:]}"
            )
        return line.rstrip("\n")
