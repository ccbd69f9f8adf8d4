"""``chatledger demo``: a scripted conversation through a window memory."""

from __future__ import annotations

import argparse

from chatledger.cli.output import out
from chatledger.cli.stores import open_store
from chatledger.connect import redact_url
from chatledger.demo import play

__all__ = ["DEMO_URL", "demo"]

DEMO_URL = "sqlite:///chatledger-demo.db"


def demo(args: argparse.Namespace) -> int:
    """Play the demo on ``args.url``."""
    repository = open_store(args.url, args.options, closing=args.closing)
    play(
        repository,
        redact_url(args.url),
        max_messages=args.max_messages,
        conversation_id=args.conversation,
        write=out,
    )
    return 0
