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


def check_no_overrides(instance: object, suite_bases: tuple[type, ...]) -> list[str]:
    """Return the names of suite tests the class of ``instance`` overrides illegally."""
    offenders = []
    for base in suite_bases:
        for name, original in inspect.getmembers(base, inspect.isfunction):
            if not name.startswith("test_"):
                continue
            current = getattr(type(instance), name, None)
            if (
                current is not None
                and current is not original
                and not _has_xfail_reason(current)
            ):
                offenders.append(name)
    return sorted(set(offenders))
