"""The command's own error: arguments that cannot work."""

from __future__ import annotations

from chatledger.errors import ChatLedgerError

__all__ = ["UsageError"]


class UsageError(ChatLedgerError, ValueError):
    """A command was called with arguments that cannot work (exit code 2)."""
