"""What the command prints: its lines, its progress, never a password it was given."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Iterator
from typing import TypeVar

from chatledger.connect import hide_secrets, url_secrets
from chatledger.progress import Progress

__all__ = ["SECRETS", "Secrets", "counted", "err", "out", "progress", "remember_url"]

_T = TypeVar("_T")


class Secrets:
    """Every password seen on the command line, so no output ever shows one."""

    def __init__(self) -> None:
        self.values: set[str] = set()

    def add_url(self, url: str) -> str:
        self.values.update(url_secrets(url))
        return url

    def scrub(self, text: str) -> str:
        return hide_secrets(text, self.values)


#: The passwords of this process's command line; a test replaces it per run.
SECRETS = Secrets()


def remember_url(url: str) -> str:
    """Return ``url``, its password kept to be hidden from every later line."""
    return SECRETS.add_url(url)


def out(text: str = "") -> None:
    """Print a line on stdout, passwords hidden."""
    print(SECRETS.scrub(text))


def err(text: str) -> None:
    """Print a line on stderr, passwords hidden."""
    print(SECRETS.scrub(text), file=sys.stderr)


def progress(
    args: argparse.Namespace, verb: str, total: int, unit: str = "conversations"
) -> Progress:
    """The progress report on stderr that the command's options ask for."""
    return Progress(
        verb,
        total,
        unit,
        stream=sys.stderr,
        every=args.progress_every,
        enabled=not args.no_progress,
    )


def counted(items: Iterable[_T], progress: Progress) -> Iterator[_T]:
    """Yield ``items``, telling ``progress`` after each one."""
    for done, item in enumerate(items, start=1):
        yield item
        progress.update(done)
