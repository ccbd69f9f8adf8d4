"""``chatledger migrate``: a store an earlier release wrote, brought to this schema."""

from __future__ import annotations

import argparse

from chatledger.cli.output import out
from chatledger.cli.stores import open_store
from chatledger.connect import redact_url
from chatledger.repository import SupportsSchemaUpgrade

__all__ = ["migrate"]


def migrate(args: argparse.Namespace) -> int:
    """Make the schema changes the store lacks and print each; a re-run is safe.

    The store is opened without its creation flag, so the changes come from
    the adapter's ``upgrade_schema`` alone, which says what it changed and
    refuses a store that does not exist. A backend without that capability
    keeps no schema of its own: every release reads its stores as they are.
    """
    repository = open_store(args.url, args.options, create=False, closing=args.closing)
    where = redact_url(args.url)
    if not isinstance(repository, SupportsSchemaUpgrade):
        out(
            f"{where}: already current: this backend keeps no schema to upgrade "
            "(every release reads its stores as they are)"
        )
        return 0
    changes = repository.upgrade_schema()
    for change in changes:
        out(change)
    if changes:
        out(f"{where}: upgraded ({len(changes)} {_changes(len(changes))})")
    else:
        out(f"{where}: already current")
    return 0


def _changes(count: int) -> str:
    return "change" if count == 1 else "changes"
