"""Drafts: frozen slotted objects built at the cost of plain attribute stores.

A frozen dataclass refuses ``setattr``, so code that builds one field by field
(the codec's decoder, a view's rows) pays a descriptor call per field. A
*draft* of the class has the same slots and no ``__setattr__`` of its own: an
object is filled in as a draft, then becomes the frozen class by ``__class__``
assignment, which Python allows between classes of the same layout. A decoded
message is built in about half the time the descriptors take.

Example:
    from chatledger.drafts import draft_of

    class Point:
        __slots__ = ("x", "y")

        def __setattr__(self, name, value):
            raise AttributeError("a Point is frozen")

    POINT_DRAFT = draft_of(Point)
    point = object.__new__(POINT_DRAFT)
    point.x, point.y = 1, 2
    point.__class__ = Point
    assert (type(point), point.x, point.y) == (Point, 1, 2)
"""

from __future__ import annotations

from typing import Any

__all__ = ["draft_of"]


def draft_of(cls: type) -> Any:
    """Return a class with the slots of ``cls`` whose objects may become ``cls``.

    Args:
        cls: A slotted class with no base but ``object`` and no ``__dict__``
            or ``__weakref__`` slot (a ``@dataclass(slots=True)``).

    Raises:
        TypeError: if ``cls`` has another layout, found here rather than at
            the first ``__class__`` assignment.
    """
    slots = cls.__dict__.get("__slots__")
    if cls.__bases__ != (object,) or not isinstance(slots, tuple):
        raise TypeError(f"{cls.__name__} is not a slotted class on object alone")
    draft = type(
        f"{cls.__name__}Draft", (), {"__slots__": slots, "__module__": cls.__module__}
    )
    probe: Any = object.__new__(draft)
    probe.__class__ = cls  # the layout check, once
    return draft
