"""The read-modify-write step of a memory whose repository has no window append.

Example:
    from chatledger import Message, MessageWindow
    from chatledger.window_rewrite import rewrite_window

    stored = [Message.user("U1"), Message.assistant("A1")]
    update = rewrite_window(stored, [Message.user("U2")], MessageWindow(2))
    update.messages   # the window to save back: [U2]

A memory reads the conversation, calls :func:`rewrite_window` and saves the
result with ``save_all``; the sync and the async memories share this step.
Unlike an atomic window append it is not safe against concurrent writers.
"""

from __future__ import annotations

from collections.abc import Sequence

from chatledger.messages import Message
from chatledger.window import Window, WindowUpdate, apply_window

__all__ = ["rewrite_window"]


def rewrite_window(
    stored: Sequence[Message], batch: Sequence[Message], window: Window
) -> WindowUpdate | None:
    """The read-modify-write step: the window to save back, or ``None`` for no write.

    Messages of ``batch`` whose id ``stored`` already holds are skipped (a
    retried add is a no-op); ``None`` when nothing is left to add.
    """
    known = {m.id for m in stored}
    fresh = [m for m in batch if m.id not in known]
    if not fresh:
        return None
    return apply_window(stored, fresh, window)
