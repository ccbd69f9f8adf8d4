"""Fail a suite subclass that overrides a suite test without ``xfail(reason=...)``."""

from __future__ import annotations

import inspect
from typing import Any

__all__ = ["check_no_overrides"]


def _has_xfail_reason(function: Any) -> bool:
    for mark in getattr(function, "pytestmark", ()):
        if mark.name == "xfail" and mark.kwargs.get("reason"):
            return True
    return False


def check_no_overrides(subject: object, suite_bases: tuple[type, ...]) -> list[str]:
    """Return the names of suite tests ``subject`` (a class or an instance) drops.

    Dropping is overriding a suite test, or setting its name to anything
    else (``None`` included), without ``pytest.mark.xfail(reason=...)``.
    """
    cls = subject if isinstance(subject, type) else type(subject)
    offenders = []
    for base in suite_bases:
        for name, original in inspect.getmembers(base, inspect.isfunction):
            if not name.startswith("test_"):
                continue
            # A name set to None (or anything else) drops the case: that is an
            # override too, and only an xfail with a reason is allowed.
            current = getattr(cls, name, None)
            if current is not original and not _has_xfail_reason(current):
                offenders.append(name)
    return sorted(set(offenders))
