"""The stored shape of a message and the one-document window-append update.

Example:
    from chatledger import Message, MessageWindow
    from chatledger.validation import stamp_messages, utc_now
    from chatledger_mongodb.pipeline import append_pipeline, encode_element

    now, window = utc_now(), MessageWindow(20)
    stamped_messages = stamp_messages([Message.user("hi")], now)
    batch = [encode_element(m, window) for m in stamped_messages]
    update = append_pipeline(batch, window, version="v2", expires_at=None, now=now)
    # collection.find_one_and_update({"_id": cid}, update, upsert=True, ...)

Nothing here does I/O: this module builds plain dicts. :func:`append_pipeline`
is :func:`chatledger.window.apply_window` written as MongoDB aggregation
expressions (server 4.2+; ``$reduce``, ``$filter``, ``$map``, ``$range``,
``$mergeObjects``), so the server applies the window rules to the stored
document while it holds it, in one atomic single-document update.

Every value from the caller (ids, payloads, counter names) enters the pipeline
inside ``$literal``, so a string that starts with ``$`` is never read as a field
path or an operator.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from chatledger.adapters import (
    Message,
    Role,
    Window,
    codec,
    system_key,
)

__all__ = [
    "RESULT_FIELD",
    "append_pipeline",
    "encode_element",
]

#: The field where an append leaves what it did; read back by the same command.
RESULT_FIELD = "last_append"

_TEMPORARIES = [
    "_old",
    "_seq",
    "_fresh",
    "_ssys",
    "_replace",
    "_merge",
    "_hist",
    "_sized",
    "_stale",
    "_ns",
    "_sys_size",
    "_cut",
    "_evict",
    "_gone",
]


def encode_element(message: Message, window: Window | None) -> dict[str, Any]:
    """Return the array element that stores ``message`` (``seq`` is set later).

    ``p`` is the codec's JSON text, so metadata keys such as ``"$set"`` or
    ``"a.b"`` never become BSON field names. ``sizes`` caches the message's
    size under the window's counter (``[{"c": counter_id, "n": size}]``).
    """
    element: dict[str, Any] = {
        "seq": None,
        "id": message.id,
        "role": message.role.value,
        "sizes": [],
        "p": codec.to_json(message),
    }
    if window is not None and window.counter_id is not None:
        element["sizes"] = [{"c": window.counter_id, "n": window.measure(message)}]
    if message.role is Role.SYSTEM:
        element["k"] = system_key(message)
    return element


def _is_role(variable: str, role: Role) -> dict[str, Any]:
    return {"$eq": [f"{variable}.role", role.value]}


def _size_of(variable: str, counter_id: str | None) -> Any:
    """The size of one element under the window's counter; null when not cached."""
    if counter_id is None:
        return 1
    return {
        "$let": {
            "vars": {
                "hit": {
                    "$filter": {
                        "input": {"$ifNull": [f"{variable}.sizes", []]},
                        "as": "s",
                        "cond": {"$eq": ["$$s.c", {"$literal": counter_id}]},
                    }
                }
            },
            "in": {
                "$cond": [
                    {"$gt": [{"$size": "$$hit"}, 0]},
                    {"$arrayElemAt": ["$$hit.n", 0]},
                    None,
                ]
            },
        }
    }


def _leading_tool_count() -> dict[str, Any]:
    """How many elements of ``_ns`` are tool responses before any other role."""
    walk = {
        "$reduce": {
            "input": "$_ns",
            "initialValue": {"n": 0, "open": True},
            "in": {
                "$cond": [
                    {"$and": ["$$value.open", _is_role("$$this", Role.TOOL)]},
                    {"n": {"$add": ["$$value.n", 1]}, "open": True},
                    {"n": "$$value.n", "open": False},
                ]
            },
        }
    }
    return {"$let": {"vars": {"w": walk}, "in": "$$w.n"}}


def _cut_expression(limit: int) -> dict[str, Any]:
    """:func:`chatledger.window.count_evictions` over ``_ns`` as ``$reduce`` walks."""
    walk = {
        "$reduce": {
            "input": "$_ns",
            "initialValue": {"i": 0, "d": 0, "lu": None, "res": None},
            "in": {
                "$cond": [
                    {"$ne": ["$$value.res", None]},
                    "$$value",
                    {
                        "$cond": [
                            {"$gte": ["$$value.d", "$$excess"]},
                            {
                                "i": {"$add": ["$$value.i", 1]},
                                "d": "$$value.d",
                                "lu": "$$value.lu",
                                "res": {
                                    "$cond": [
                                        _is_role("$$this", Role.USER),
                                        "$$value.i",
                                        None,
                                    ]
                                },
                            },
                            {
                                "i": {"$add": ["$$value.i", 1]},
                                "d": {"$add": ["$$value.d", "$$this.n"]},
                                "lu": {
                                    "$cond": [
                                        _is_role("$$this", Role.USER),
                                        "$$value.i",
                                        "$$value.lu",
                                    ]
                                },
                                "res": None,
                            },
                        ]
                    },
                ]
            },
        }
    }
    return {
        "$let": {
            "vars": {
                "excess": {
                    "$subtract": [
                        {"$add": ["$_sys_size", {"$sum": "$_ns.n"}]},
                        {"$literal": limit},
                    ]
                }
            },
            "in": {
                "$cond": [
                    {"$lte": ["$$excess", 0]},
                    _leading_tool_count(),
                    {
                        "$let": {
                            "vars": {"w": walk},
                            "in": {
                                "$ifNull": [
                                    "$$w.res",
                                    {"$ifNull": ["$$w.lu", {"$size": "$_ns"}]},
                                ]
                            },
                        }
                    },
                ]
            },
        }
    }


def append_pipeline(
    batch: list[dict[str, Any]],
    window: Window,
    *,
    version: str,
    expires_at: datetime | None,
    now: datetime,
) -> list[dict[str, Any]]:
    """Return the update pipeline that appends ``batch`` and trims to ``window``.

    The steps follow the ``SupportsWindowAppend`` contract: drop elements whose
    id is stored, merge system messages, number the rest from ``next_seq``,
    count evictions over the cached sizes and drop that many of the oldest
    non-system messages. When a stored element has no size under the window's
    counter, the pipeline changes nothing but :data:`RESULT_FIELD`, which then
    lists the ids to measure (``stale``).

    Args:
        batch: Elements made by :func:`encode_element`, in order.
        window: The window to trim to.
        version: The new value of the document's ``version`` token.
        expires_at: The new expiry, or ``None`` for no TTL.
        now: The current time; a document that expired by then counts as empty.
    """
    counter = window.counter_id
    expired = {
        "$and": [
            {"$ne": [{"$ifNull": ["$expires_at", None]}, None]},
            {"$lte": ["$expires_at", {"$literal": now}]},
        ]
    }
    system = Role.SYSTEM.value
    not_system = {"$ne": ["$$m.role", system]}
    stale = {"$gt": [{"$size": "$_stale"}, 0]}
    applied_messages = {
        "$filter": {
            "input": "$_hist",
            "as": "m",
            "cond": {"$not": [{"$in": ["$$m.id", "$_evict"]}]},
        }
    }
    return [
        {
            "$set": {
                "_old": {"$cond": [expired, [], {"$ifNull": ["$messages", []]}]},
                "_seq": {"$cond": [expired, 0, {"$ifNull": ["$next_seq", 0]}]},
            }
        },
        {
            "$set": {
                "_fresh": {
                    "$filter": {
                        "input": {"$literal": batch},
                        "as": "b",
                        "cond": {"$not": [{"$in": ["$$b.id", "$_old.id"]}]},
                    }
                },
                "_ssys": {
                    "$filter": {
                        "input": "$_old",
                        "as": "m",
                        "cond": {"$eq": ["$$m.role", system]},
                    }
                },
            }
        },
        {
            "$set": {
                # merge_system: any new system message unlike every stored one
                # replaces them all.
                "_replace": {
                    "$anyElementTrue": [
                        {
                            "$map": {
                                "input": {
                                    "$filter": {
                                        "input": "$_fresh",
                                        "as": "b",
                                        "cond": {"$eq": ["$$b.role", system]},
                                    }
                                },
                                "as": "b",
                                "in": {"$not": [{"$in": ["$$b.k", "$_ssys.k"]}]},
                            }
                        }
                    ]
                }
            }
        },
        {
            "$set": {
                "_merge": {
                    "$reduce": {
                        "input": "$_fresh",
                        "initialValue": {
                            "seen": {"$cond": ["$_replace", [], "$_ssys.k"]},
                            "kept": [],
                        },
                        "in": {
                            "$cond": [
                                {
                                    "$and": [
                                        {"$eq": ["$$this.role", system]},
                                        {"$in": ["$$this.k", "$$value.seen"]},
                                    ]
                                },
                                "$$value",
                                {
                                    "seen": {
                                        "$concatArrays": [
                                            "$$value.seen",
                                            {
                                                "$cond": [
                                                    {"$eq": ["$$this.role", system]},
                                                    ["$$this.k"],
                                                    [],
                                                ]
                                            },
                                        ]
                                    },
                                    "kept": {
                                        "$concatArrays": ["$$value.kept", ["$$this"]]
                                    },
                                },
                            ]
                        },
                    }
                }
            }
        },
        {
            "$set": {
                "_hist": {
                    "$concatArrays": [
                        {
                            "$filter": {
                                "input": "$_old",
                                "as": "m",
                                "cond": {"$or": [{"$not": ["$_replace"]}, not_system]},
                            }
                        },
                        {
                            "$map": {
                                "input": {"$range": [0, {"$size": "$_merge.kept"}]},
                                "as": "i",
                                "in": {
                                    "$mergeObjects": [
                                        {"$arrayElemAt": ["$_merge.kept", "$$i"]},
                                        {"seq": {"$add": ["$_seq", "$$i"]}},
                                    ]
                                },
                            }
                        },
                    ]
                },
                "_gone": {"$cond": ["$_replace", "$_ssys.id", []]},
            }
        },
        {
            "$set": {
                "_sized": {
                    "$map": {
                        "input": "$_hist",
                        "as": "m",
                        "in": {
                            "id": "$$m.id",
                            "role": "$$m.role",
                            "n": _size_of("$$m", counter),
                        },
                    }
                }
            }
        },
        {
            "$set": {
                "_stale": {
                    "$map": {
                        "input": {
                            "$filter": {
                                "input": "$_sized",
                                "as": "m",
                                "cond": {"$eq": ["$$m.n", None]},
                            }
                        },
                        "as": "m",
                        "in": "$$m.id",
                    }
                },
                "_ns": {"$filter": {"input": "$_sized", "as": "m", "cond": not_system}},
                "_sys_size": {
                    "$sum": {
                        "$map": {
                            "input": {
                                "$filter": {
                                    "input": "$_sized",
                                    "as": "m",
                                    "cond": {"$eq": ["$$m.role", system]},
                                }
                            },
                            "as": "m",
                            "in": "$$m.n",
                        }
                    }
                },
            }
        },
        {"$set": {"_cut": {"$cond": [stale, 0, _cut_expression(window.limit)]}}},
        {
            "$set": {
                "_evict": {
                    "$cond": [
                        {"$gt": ["$_cut", 0]},
                        {"$slice": ["$_ns.id", "$_cut"]},
                        [],
                    ]
                }
            }
        },
        {
            "$set": {
                "messages": {"$cond": [stale, "$messages", applied_messages]},
                "next_seq": {
                    "$cond": [
                        stale,
                        "$next_seq",
                        {"$add": ["$_seq", {"$size": "$_merge.kept"}]},
                    ]
                },
                "version": {"$cond": [stale, "$version", {"$literal": version}]},
                "expires_at": {
                    "$cond": [stale, "$expires_at", {"$literal": expires_at}]
                },
                RESULT_FIELD: {
                    "$cond": [
                        stale,
                        {"stale": "$_stale"},
                        {
                            "appended": "$_merge.kept.id",
                            "evicted": {"$concatArrays": ["$_gone", "$_evict"]},
                        },
                    ]
                },
            }
        },
        {"$set": {f"{RESULT_FIELD}.left": {"$size": {"$ifNull": ["$messages", []]}}}},
        {"$unset": _TEMPORARIES},
    ]
