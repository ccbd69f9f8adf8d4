"""The ``chatledger`` command line."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    print("chatledger: the command line is not built yet", file=sys.stderr)
    return 2
