"""``chatledger demo``: a scripted conversation through a window memory."""

from __future__ import annotations

import argparse

from chatledger.cli.output import out
from chatledger.cli.stores import open_store
from chatledger.connect import redact_url
from chatledger.demo import play
from chatledger.validation import validate_conversation_id

__all__ = ["DEMO_URL", "demo"]

DEMO_URL = "sqlite:///chatledger-demo.db"


def demo(args: argparse.Namespace) -> int:
    """Play the demo on ``args.url``."""
    if args.conversation is not None:
        validate_conversation_id(args.conversation)
    repository = open_store(args.url, args.options, closing=args.closing)
    play(
        repository,
        redact_url(args.url),
        max_messages=args.max_messages,
        conversation_id=args.conversation,
        write=out,
    )
    return 0
