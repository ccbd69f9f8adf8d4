"""A test-only evaluator of the aggregation operators the adapter's pipeline uses.

Example:
    from tests.mongodb.aggregation import run_pipeline

    after = run_pipeline(before, [{"$set": {"n": {"$add": ["$n", 1]}}}])

It is NOT MongoDB. No MongoDB server runs where these tests are written, and
mongomock does not implement ``$reduce``, ``$range``, ``$mergeObjects`` or
``$anyElementTrue``. This evaluator follows the operator semantics documented in
the MongoDB manual (missing versus null, truthiness, field paths through arrays)
for exactly the operators the update pipelines and the log's reads use, and
raises on anything else, so the window logic written as pipeline expressions
can be checked against :func:`chatledger.window.apply_window`, and the reads'
``$project`` stages against the log. It proves the logic, not the server.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

__all__ = ["MISSING", "evaluate", "now_variable", "project", "run_pipeline"]


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()

Vars = dict[str, Any]


def _nullish(value: Any) -> bool:
    return value is None or value is MISSING


def _truthy(value: Any) -> bool:
    if _nullish(value) or value is False:
        return False
    return not (
        isinstance(value, int | float) and not isinstance(value, bool) and value == 0
    )


def _get_path(value: Any, parts: list[str]) -> Any:
    for index, part in enumerate(parts):
        if isinstance(value, list):
            rest = parts[index:]
            found = [_get_path(item, rest) for item in value if isinstance(item, dict)]
            return [item for item in found if item is not MISSING]
        if not isinstance(value, dict) or part not in value:
            return MISSING
        value = value[part]
    return value


def _utc(value: datetime) -> datetime:
    value = value if value.tzinfo else value.replace(tzinfo=UTC)
    value = value.astimezone(UTC)
    return value.replace(microsecond=value.microsecond // 1000 * 1000)


def _rank(value: Any) -> int:
    if _nullish(value):
        return 1
    if isinstance(value, bool):
        return 8
    if isinstance(value, int | float):
        return 2
    if isinstance(value, str):
        return 3
    if isinstance(value, dict):
        return 4
    if isinstance(value, list):
        return 5
    if isinstance(value, datetime):
        return 9
    raise TypeError(f"cannot compare {value!r}")


def _compare(left: Any, right: Any) -> int:
    """BSON comparison order, for the types the pipeline compares."""
    rank_left, rank_right = _rank(left), _rank(right)
    if rank_left != rank_right:
        return -1 if rank_left < rank_right else 1
    if rank_left == 1:
        return 0
    if rank_left == 9:
        left, right = _utc(left), _utc(right)
    if left == right:
        return 0
    return -1 if left < right else 1


def _array(value: Any, operator: str) -> list[Any]:
    if not isinstance(value, list):
        raise TypeError(f"{operator} needs an array, got {value!r}")
    return value


def evaluate(expression: Any, root: dict[str, Any], variables: Vars) -> Any:
    """Evaluate one aggregation expression against ``root``."""
    if isinstance(expression, str):
        if expression.startswith("$$"):
            name, *parts = expression[2:].split(".")
            base = root if name == "ROOT" else variables[name]
            return _get_path(base, parts) if parts else base
        if expression.startswith("$"):
            return _get_path(root, expression[1:].split("."))
        return expression
    if isinstance(expression, list):
        values = [evaluate(item, root, variables) for item in expression]
        return [None if v is MISSING else v for v in values]
    if isinstance(expression, dict):
        if len(expression) == 1:
            ((key, argument),) = expression.items()
            if key.startswith("$"):
                return _operator(key, argument, root, variables)
        result = {}
        for key, item in expression.items():
            value = evaluate(item, root, variables)
            if value is not MISSING:
                result[key] = value
        return result
    return expression


def _operator(name: str, arg: Any, root: dict[str, Any], variables: Vars) -> Any:
    def ev(expression: Any, extra: Vars | None = None) -> Any:
        return evaluate(expression, root, {**variables, **(extra or {})})

    def args() -> list[Any]:
        return [ev(a) for a in (arg if isinstance(arg, list) else [arg])]

    if name == "$literal":
        return arg
    if name == "$ifNull":
        values = args()
        for value in values[:-1]:
            if not _nullish(value):
                return value
        return values[-1]
    if name == "$cond":
        test, yes, no = (
            (arg["if"], arg["then"], arg["else"]) if isinstance(arg, dict) else arg
        )
        return ev(yes) if _truthy(ev(test)) else ev(no)
    if name == "$and":
        return all(_truthy(ev(a)) for a in arg)
    if name == "$or":
        return any(_truthy(ev(a)) for a in arg)
    if name == "$not":
        return not _truthy(args()[0])
    comparisons: dict[str, Callable[[int], bool]] = {
        "$eq": lambda c: c == 0,
        "$ne": lambda c: c != 0,
        "$gt": lambda c: c > 0,
        "$gte": lambda c: c >= 0,
        "$lt": lambda c: c < 0,
        "$lte": lambda c: c <= 0,
    }
    if name in comparisons:
        left, right = args()
        return comparisons[name](_compare(left, right))
    if name == "$in":
        needle, haystack = args()
        return any(_compare(needle, item) == 0 for item in _array(haystack, name))
    if name == "$max":
        values = args()
        items = (
            values[0] if len(values) == 1 and isinstance(values[0], list) else values
        )
        present = [v for v in items if not _nullish(v)]
        if not present:
            return None
        highest = present[0]
        for value in present[1:]:
            if _compare(value, highest) > 0:
                highest = value
        return highest
    if name == "$size":
        return len(_array(args()[0], name))
    if name == "$add":
        values = args()
        if any(_nullish(v) for v in values):
            return None
        dates = [v for v in values if isinstance(v, datetime)]
        total = sum(v for v in values if not isinstance(v, datetime))
        return dates[0] + timedelta(milliseconds=total) if dates else total
    if name == "$subtract":
        left, right = args()
        return None if _nullish(left) or _nullish(right) else left - right
    if name == "$sum":
        values = args()
        items = (
            values[0] if len(values) == 1 and isinstance(values[0], list) else values
        )
        return sum(
            v for v in items if isinstance(v, int | float) and not isinstance(v, bool)
        )
    if name == "$arrayElemAt":
        array, index = args()
        array = _array(array, name)
        return array[index] if -len(array) <= index < len(array) else MISSING
    if name == "$slice":
        array, count = args()
        array = _array(array, name)
        return array[:count] if count >= 0 else array[count:]
    if name == "$concatArrays":
        values = args()
        if any(_nullish(v) for v in values):
            return None
        return [item for v in values for item in _array(v, name)]
    if name == "$mergeObjects":
        merged: dict[str, Any] = {}
        for value in args():
            if not _nullish(value):
                merged.update(value)
        return merged
    if name == "$anyElementTrue":
        return any(_truthy(v) for v in _array(args()[0], name))
    if name == "$range":
        start, end = args()
        return list(range(start, end))
    if name == "$let":
        bound = {k: ev(v) for k, v in arg["vars"].items()}
        return ev(arg["in"], bound)
    if name in ("$filter", "$map"):
        source = ev(arg["input"])
        if _nullish(source):
            return None
        alias = arg.get("as", "this")
        out = []
        for item in _array(source, name):
            if name == "$filter":
                if _truthy(ev(arg["cond"], {alias: item})):
                    out.append(item)
            else:
                value = ev(arg["in"], {alias: item})
                out.append(None if value is MISSING else value)
        return out
    if name == "$reduce":
        source = ev(arg["input"])
        if _nullish(source):
            return None
        value = ev(arg["initialValue"])
        for item in _array(source, name):
            value = ev(arg["in"], {"value": value, "this": item})
        return value
    raise NotImplementedError(f"the test evaluator does not implement {name}")


def _set_path(document: dict[str, Any], path: str, value: Any) -> None:
    *parents, last = path.split(".")
    target = document
    for part in parents:
        target = target.setdefault(part, {})
    target[last] = value


def now_variable() -> datetime:
    """``$$NOW`` as the server gives it: the current UTC time, in milliseconds."""
    return _utc(datetime.now(UTC))


def run_pipeline(
    document: dict[str, Any], stages: list[dict[str, Any]]
) -> dict[str, Any]:
    """Apply ``$set`` and ``$unset`` stages to a copy of ``document``.

    ``$$NOW`` is one moment for the whole pipeline, as it is for a command.
    """
    current = dict(document)
    variables = {"NOW": now_variable()}
    for stage in stages:
        ((kind, spec),) = stage.items()
        if kind == "$set":
            values = {path: evaluate(e, current, variables) for path, e in spec.items()}
            current = dict(current)
            for path, value in values.items():
                if value is not MISSING:
                    _set_path(current, path, value)
        elif kind == "$unset":
            current = {k: v for k, v in current.items() if k not in spec}
        else:
            raise NotImplementedError(f"the test evaluator does not implement {kind}")
    return current


def project(document: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    """Apply one ``$project`` stage: ``_id: 0``, fields kept by 1, computed fields."""
    shown: dict[str, Any] = {}
    if spec.get("_id", 1) and "_id" in document:
        shown["_id"] = document["_id"]
    for path, expression in spec.items():
        if path == "_id":
            continue
        if expression is True or expression == 1:
            if path in document:
                shown[path] = document[path]
            continue
        if isinstance(expression, bool | int):
            raise NotImplementedError("the test evaluator does not exclude fields")
        value = evaluate(expression, document, {})
        if value is not MISSING:
            _set_path(shown, path, value)
    return shown
