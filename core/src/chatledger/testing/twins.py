"""The check that a sync class and its async twin offer the same operations.

Example (an adapter with both classes proves they match)::

    from chatledger.testing import assert_same_operations

    def test_acme_twins_match():
        assert_same_operations(AcmeChatMemoryRepository, AsyncAcmeChatMemoryRepository)

Every public method of either class must exist on the other with the same
parameters (names, kinds and defaults), and a coroutine function on the async
class for each plain method of the sync one. ``close``/``aclose`` and
``__enter__``/``__aenter__`` pairs count as one. Public properties and class
attributes must match by name. A capability (``save_many``, ``count_messages``,
``find_conversation_ids_page``, ``ttl``, ``benchmark_floor``, the schema
calls) is therefore present on both or absent on both.
"""

from __future__ import annotations

import inspect
from typing import Any

__all__ = ["assert_same_operations", "operations_of"]

#: Async names that stand for a sync one.
_SYNC_NAME = {
    "aclose": "close",
    "__aenter__": "__enter__",
    "__aexit__": "__exit__",
    "__aiter__": "__iter__",
    "__anext__": "__next__",
}
#: Protocol methods every class has from ``object`` or dunders nobody calls twice.
_DUNDERS = {"__enter__", "__exit__", "__iter__", "__next__"}


def operations_of(cls: type) -> dict[str, Any]:
    """The public members of ``cls`` by their sync name (``aclose`` -> ``close``)."""
    members: dict[str, Any] = {}
    for name in dir(cls):
        sync_name = _SYNC_NAME.get(name, name)
        if name.startswith("_") and sync_name not in _DUNDERS:
            continue
        members[sync_name] = inspect.getattr_static(cls, name)
    return members


def _signature(member: Any) -> inspect.Signature | None:
    target = (
        member.__func__ if isinstance(member, (classmethod, staticmethod)) else member
    )
    if not callable(target):
        return None
    try:
        signature = inspect.signature(target)
    except (TypeError, ValueError):
        return None
    return signature.replace(return_annotation=inspect.Signature.empty)


def _parameters(signature: inspect.Signature) -> list[tuple[str, Any, Any]]:
    return [(p.name, p.kind, p.default) for p in signature.parameters.values()]


def _kind(member: Any) -> str:
    if isinstance(member, property):
        return "property"
    if isinstance(member, classmethod):
        return "classmethod"
    if isinstance(member, staticmethod):
        return "staticmethod"
    if callable(member):
        return "method"
    return "attribute"


#: Methods of an async class that are rightly not coroutine functions.
NOT_AWAITED = frozenset({"turn"})


def assert_same_operations(
    sync_cls: type, async_cls: type, *, not_awaited: frozenset[str] = NOT_AWAITED
) -> None:
    """Fail, naming every difference, unless the two classes offer the same calls.

    Raises:
        AssertionError: a member missing on one side, a different kind
            (method, property, class method), different parameters, or a
            plain method on the async class: each must be a coroutine
            function, an async generator, or named in ``not_awaited`` (as
            ``turn``, which returns an async context manager).
    """
    sync_ops, async_ops = operations_of(sync_cls), operations_of(async_cls)
    problems = [
        f"{name}: only on {sync_cls.__name__}"
        for name in sorted(sync_ops - async_ops.keys())
    ] + [
        f"{name}: only on {async_cls.__name__}"
        for name in sorted(async_ops.keys() - sync_ops.keys())
    ]
    for name in sorted(sync_ops.keys() & async_ops.keys()):
        sync_member, async_member = sync_ops[name], async_ops[name]
        if _kind(sync_member) != _kind(async_member):
            problems.append(
                f"{name}: {_kind(sync_member)} on {sync_cls.__name__}, "
                f"{_kind(async_member)} on {async_cls.__name__}"
            )
            continue
        if (
            _kind(async_member) == "method"
            and name not in not_awaited
            and not inspect.iscoroutinefunction(async_member)
            and not inspect.isasyncgenfunction(async_member)
        ):
            problems.append(f"{name}: not a coroutine function on {async_cls.__name__}")
        sync_sig, async_sig = _signature(sync_member), _signature(async_member)
        if sync_sig is None or async_sig is None:
            continue
        if _parameters(sync_sig) != _parameters(async_sig):
            problems.append(f"{name}: parameters {sync_sig} differ from {async_sig}")
    assert not problems, (
        f"{sync_cls.__name__} and {async_cls.__name__} differ:\n  "
        + "\n  ".join(problems)
    )
