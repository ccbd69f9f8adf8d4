"""The stored shape of a message and the two one-document appends: window and log.

Example:
    from chatledger import Message, MessageWindow
    from chatledger.validation import stamp_messages, utc_now
    from chatledger_mongodb.pipeline import append_pipeline, encode_element

    now, window = utc_now(), MessageWindow(20)
    stamped_messages = stamp_messages([Message.user("hi")], now)
    batch = [encode_element(m, window) for m in stamped_messages]
    update = append_pipeline(
        batch, window, version="v2", expires_at=None, now=now, evicted_ids_kept=1000
    )
    # collection.find_one_and_update({"_id": cid}, update, upsert=True, ...)

Nothing here does I/O: this module builds plain dicts. :func:`append_pipeline`
is :func:`chatledger.window.apply_window` written as MongoDB aggregation
expressions (server 4.2+; ``$reduce``, ``$filter``, ``$map``, ``$range``,
``$mergeObjects``), so the server applies the window rules to the stored
document while it holds it, in one atomic single-document update.
:func:`log_append_pipeline` is the log's append (``SupportsLog``): the same
first steps, then the new messages go after the stored ones and nothing
leaves.

The window pipeline is one ``$set`` stage per step of the window rule, each
made by its own builder below, in order: :func:`stored_state_stage` (an
expired document counts as empty), :func:`fresh_stage` (ids already stored,
or recorded as taken out of the window, are filtered out),
:func:`replace_system_stage` and :func:`merge_system_stage` (rule 1: system
messages compared with the current system set by
:func:`chatledger.adapters.system_key`), :func:`number_stage` (sequence
numbers and the batch), :func:`history_stage`, :func:`sizes_stage`,
:func:`size_totals_stage`, :func:`cut_stage` (eviction count, turn snap and
the orphan tool rule), :func:`evict_stage` and :func:`commit_stage`
(messages, counters, expiry, the record of evicted ids and the result); then
the temporary fields go. The log pipeline shares the steps up to
:func:`number_stage` and ends with :func:`log_commit_stage`. Before the
commit, both keep the conversation's record with :func:`record_stage`
(``updated_at`` at the server's ``$$NOW`` when the append stored or took
out a message; :mod:`chatledger_mongodb.records`). A step reads
the stored document and what the steps before it set.

The current system set (rule 1, :func:`chatledger.window_view.current_system`)
is the system messages of the latest append that stored any. Each system
element records its batch in ``b`` (the ``seq`` of the first message that
append stored) and the document records the current set's batch in
:data:`SYSTEM_BATCH_FIELD`; an element without ``b``, or a document without
that field, means batch 0, which is what ``save_all`` and the releases that
kept only the window wrote: there every stored system message is current.
So the current set is the system elements whose batch is at least the
document's. A log append that stores a system message keeps the superseded
ones (the log keeps everything) and moves the document's batch; a window
append replaces the current set only (its messages leave, their ids join the
record) and leaves superseded ones where they are.

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
    "CREATED_FIELD",
    "EVICTED_IDS_FIELD",
    "MATCH_FIELD",
    "METADATA_FIELD",
    "OWNER_FIELD",
    "RESULT_FIELD",
    "SYSTEM_BATCH_FIELD",
    "UPDATED_FIELD",
    "append_pipeline",
    "batch_of",
    "cached_size",
    "commit_stage",
    "cut_stage",
    "encode_element",
    "evict_stage",
    "expired_expression",
    "fresh_stage",
    "history_stage",
    "in_current_set",
    "log_append_pipeline",
    "log_commit_stage",
    "merge_system_stage",
    "number_stage",
    "record_stage",
    "replace_system_stage",
    "size_totals_stage",
    "sizes_stage",
    "stored_state_stage",
]

#: The field where an append (or a removal, :mod:`chatledger_mongodb.removal`)
#: leaves what it did; read back by the same command.
RESULT_FIELD = "last_append"

#: The field that records the ids appends took out of the window, oldest
#: first (see :mod:`chatledger.evicted_ids`); an append treats them as stored.
EVICTED_IDS_FIELD = "evicted_ids"

#: The field of the current system set's batch (see the module docstring);
#: absent means batch 0.
SYSTEM_BATCH_FIELD = "sb"

#: The conversation record's fields (:mod:`chatledger_mongodb.records`):
#: when it was made and when its messages were last written (BSON dates of
#: the server's clock), its owner (a string, or absent or null), its
#: metadata (compact JSON text, or absent or null for ``{}``) and the
#: equality keys of the metadata's top-level scalars, which the listing's
#: metadata filter compares.
CREATED_FIELD = "created_at"
UPDATED_FIELD = "updated_at"
OWNER_FIELD = "owner"
METADATA_FIELD = "meta"
MATCH_FIELD = "meta_eq"

_TEMPORARIES = [
    "_expired",
    "_old",
    "_record",
    "_seq",
    "_sb",
    "_fresh",
    "_ssys",
    "_replace",
    "_merge",
    "_new",
    "_nsb",
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


_SYSTEM = Role.SYSTEM.value


def batch_of(variable: str) -> dict[str, Any]:
    """The batch of the element ``variable`` (``$$m``): its ``b``, else 0."""
    return {"$ifNull": [f"{variable}.b", 0]}


def in_current_set(variable: str, batch: Any) -> dict[str, Any]:
    """True for a system element of the current set, whose batch is ``batch``."""
    return {
        "$and": [
            {"$eq": [f"{variable}.role", _SYSTEM]},
            {"$gte": [batch_of(variable), batch]},
        ]
    }


#: True in the stages after :func:`size_totals_stage` when a stored message lacks a
#: size under the window's counter: the append then changes no content.
_STALE: dict[str, Any] = {"$gt": [{"$size": "$_stale"}, 0]}


def expired_expression(now: datetime) -> dict[str, Any]:
    """True for a document whose ``expires_at`` passed by ``now``."""
    return {
        "$and": [
            {"$ne": [{"$ifNull": ["$expires_at", None]}, None]},
            {"$lte": ["$expires_at", {"$literal": now}]},
        ]
    }


def record_stage(written: Any, restart: Any) -> dict[str, Any]:
    """Keep the conversation's record beside a write of its messages.

    The record (:mod:`chatledger_mongodb.records`) is the document's
    :data:`CREATED_FIELD`, :data:`UPDATED_FIELD`, :data:`OWNER_FIELD`,
    :data:`METADATA_FIELD` and :data:`MATCH_FIELD`. The times are the
    server's clock, ``$$NOW``, one moment for the whole command:

    - ``written`` (an expression, evaluated before the stage) is true when
      the write stored or removed a message; ``updated_at`` then becomes
      ``$$NOW``, never earlier than it was (a clock that stepped back, or
      another member's, does not move it back). Otherwise it stays.
    - ``restart`` is true when the write starts the conversation anew over
      an expired document: a new record, made now, without owner or
      metadata.
    - A document without ``created_at`` (a new one) gets ``$$NOW``.

    Every value is read from the document as it was before the stage, so it
    can follow the stage that writes the messages.
    """
    kept = {"$ifNull": [f"${UPDATED_FIELD}", "$$NOW"]}
    moved = {"$max": ["$$NOW", f"${UPDATED_FIELD}"]}
    return {
        "$set": {
            CREATED_FIELD: {
                "$cond": [restart, "$$NOW", {"$ifNull": [f"${CREATED_FIELD}", "$$NOW"]}]
            },
            UPDATED_FIELD: {
                "$cond": [restart, "$$NOW", {"$cond": [written, moved, kept]}]
            },
            OWNER_FIELD: {"$cond": [restart, None, f"${OWNER_FIELD}"]},
            METADATA_FIELD: {"$cond": [restart, None, f"${METADATA_FIELD}"]},
            MATCH_FIELD: {"$cond": [restart, None, f"${MATCH_FIELD}"]},
        }
    }


def stored_state_stage(now: datetime) -> dict[str, Any]:
    """Read the stored messages, the record of evicted ids, the next seq, the batch.

    They go to ``_old``, ``_record``, ``_seq`` and ``_sb`` (the current
    system set's batch). A document whose ``expires_at`` passed by ``now``
    counts as empty, record included: the TTL monitor may not have removed
    it yet; ``_expired`` says so, for :func:`record_stage`.
    """
    expired = expired_expression(now)
    return {
        "$set": {
            "_expired": expired,
            "_old": {"$cond": [expired, [], {"$ifNull": ["$messages", []]}]},
            "_record": {
                "$cond": [expired, [], {"$ifNull": [f"${EVICTED_IDS_FIELD}", []]}]
            },
            "_seq": {"$cond": [expired, 0, {"$ifNull": ["$next_seq", 0]}]},
            "_sb": {"$cond": [expired, 0, {"$ifNull": [f"${SYSTEM_BATCH_FIELD}", 0]}]},
        }
    }


def fresh_stage(batch: list[dict[str, Any]]) -> dict[str, Any]:
    """Keep the batch elements whose id is neither stored nor recorded (``_fresh``).

    A retried append is a no-op this way, even after the window took its
    messages out. The current system set (``_ssys``) is set aside for the
    system-message rule.
    """
    return {
        "$set": {
            "_fresh": {
                "$filter": {
                    "input": {"$literal": batch},
                    "as": "b",
                    "cond": {
                        "$not": [
                            {
                                "$or": [
                                    {"$in": ["$$b.id", "$_old.id"]},
                                    {"$in": ["$$b.id", "$_record"]},
                                ]
                            }
                        ]
                    },
                }
            },
            "_ssys": {
                "$filter": {
                    "input": "$_old",
                    "as": "m",
                    "cond": in_current_set("$$m", "$_sb"),
                }
            },
        }
    }


def replace_system_stage() -> dict[str, Any]:
    """Decide whether the current system set is replaced (``_replace``).

    Any new system message whose key matches none of the set replaces it all.
    """
    return {
        "$set": {
            "_replace": {
                "$anyElementTrue": [
                    {
                        "$map": {
                            "input": {
                                "$filter": {
                                    "input": "$_fresh",
                                    "as": "b",
                                    "cond": {"$eq": ["$$b.role", _SYSTEM]},
                                }
                            },
                            "as": "b",
                            "in": {"$not": [{"$in": ["$$b.k", "$_ssys.k"]}]},
                        }
                    }
                ]
            }
        }
    }


def merge_system_stage() -> dict[str, Any]:
    """Drop new system messages equal to one kept before them (``_merge.kept``).

    Equality is the ``k`` key; what counts as kept before is the current
    system set (unless replaced) and the batch's earlier system messages.
    """
    return {
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
                                    {"$eq": ["$$this.role", _SYSTEM]},
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
                                                {"$eq": ["$$this.role", _SYSTEM]},
                                                ["$$this.k"],
                                                [],
                                            ]
                                        },
                                    ]
                                },
                                "kept": {"$concatArrays": ["$$value.kept", ["$$this"]]},
                            },
                        ]
                    },
                }
            }
        }
    }


def number_stage() -> dict[str, Any]:
    """Number the kept messages from ``_seq`` on (``_new``) and name the batch.

    The batch of this append is ``_seq``, the number of its first message;
    each new system element records it in ``b``. A new system message is
    kept only when the set is replaced, so ``_nsb``, the current set's batch
    after the append, is ``_seq`` then and ``_sb`` otherwise.
    """
    numbered = {
        "$let": {
            "vars": {"m": {"$arrayElemAt": ["$_merge.kept", "$$i"]}},
            "in": {
                "$mergeObjects": [
                    "$$m",
                    {"seq": {"$add": ["$_seq", "$$i"]}},
                    {
                        "$cond": [
                            _is_role("$$m", Role.SYSTEM),
                            {"b": "$_seq"},
                            {"$literal": {}},
                        ]
                    },
                ]
            },
        }
    }
    return {
        "$set": {
            "_new": {
                "$map": {
                    "input": {"$range": [0, {"$size": "$_merge.kept"}]},
                    "as": "i",
                    "in": numbered,
                }
            },
            "_nsb": {"$cond": ["$_replace", "$_seq", "$_sb"]},
        }
    }


def history_stage() -> dict[str, Any]:
    """Join what stays stored with the new messages (``_hist``).

    When the current system set is replaced, its messages leave and their ids
    go to ``_gone``; system messages it had superseded stay, as history.
    """
    return {
        "$set": {
            "_hist": {
                "$concatArrays": [
                    {
                        "$filter": {
                            "input": "$_old",
                            "as": "m",
                            "cond": {
                                "$not": [
                                    {
                                        "$and": [
                                            "$_replace",
                                            in_current_set("$$m", "$_sb"),
                                        ]
                                    }
                                ]
                            },
                        }
                    },
                    "$_new",
                ]
            },
            "_gone": {"$cond": ["$_replace", "$_ssys.id", []]},
        }
    }


def cached_size(variable: str, counter_id: str | None) -> Any:
    """The size of the element ``variable`` under ``counter_id``; null when not cached.

    Without a counter (a message window) every message weighs 1.
    """
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


def sizes_stage(counter_id: str | None) -> dict[str, Any]:
    """Pair each message the window holds with its size (``_sized``: id, role, n).

    Those are the messages of ``_hist`` less the system messages the current
    set superseded (history, outside any window). A message window counts
    every message as 1; a token window reads the size cached under
    ``counter_id``, null where none is.
    """
    windowed = {
        "$filter": {
            "input": "$_hist",
            "as": "m",
            "cond": {
                "$or": [
                    {"$ne": ["$$m.role", _SYSTEM]},
                    {"$gte": [batch_of("$$m"), "$_nsb"]},
                ]
            },
        }
    }
    return {
        "$set": {
            "_sized": {
                "$map": {
                    "input": windowed,
                    "as": "m",
                    "in": {
                        "id": "$$m.id",
                        "role": "$$m.role",
                        "n": cached_size("$$m", counter_id),
                    },
                }
            }
        }
    }


def size_totals_stage() -> dict[str, Any]:
    """Split ``_sized`` for the cut: the evictable ``_ns`` and ``_sys_size``.

    ``_ns`` holds the non-system messages, oldest first; ``_sys_size`` is the
    total size of the system messages, which are never evicted. ``_stale``
    lists the ids without a cached size.
    """
    return {
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
            "_ns": {
                "$filter": {
                    "input": "$_sized",
                    "as": "m",
                    "cond": {"$ne": ["$$m.role", _SYSTEM]},
                }
            },
            "_sys_size": {
                "$sum": {
                    "$map": {
                        "input": {
                            "$filter": {
                                "input": "$_sized",
                                "as": "m",
                                "cond": {"$eq": ["$$m.role", _SYSTEM]},
                            }
                        },
                        "as": "m",
                        "in": "$$m.n",
                    }
                }
            },
        }
    }


def _leading_tool_count() -> dict[str, Any]:
    """The orphan tool rule: how many of ``_ns`` are tool responses at its head.

    With no overflow, or with no user message to cut at, those are still
    evicted, as a tool response is never kept without the assistant message
    that called it.
    """
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


def _snapped_cut_walk() -> dict[str, Any]:
    """Eviction count and turn snap over ``_ns``, given ``$$excess`` > 0.

    Drops the oldest until ``excess`` is covered, then moves the cut forward
    to the next user message (``res``); with none after it, back to the last
    user message passed (``lu``); with none at all, the history is one turn
    in progress and only its leading tool responses go.
    """
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
            "vars": {"w": walk},
            "in": {
                "$ifNull": [
                    "$$w.res",
                    {"$ifNull": ["$$w.lu", _leading_tool_count()]},
                ]
            },
        }
    }


def _cut_expression(limit: int) -> dict[str, Any]:
    """:func:`chatledger.window.count_evictions` over ``_ns`` as ``$reduce`` walks."""
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
                    _snapped_cut_walk(),
                ]
            },
        }
    }


#: True in the window pipeline when the append stores or takes out a message.
_WINDOW_WRITTEN: dict[str, Any] = {
    "$and": [
        {"$not": [_STALE]},
        {
            "$gt": [
                {"$size": {"$concatArrays": ["$_new", "$_gone", "$_evict"]}},
                0,
            ]
        },
    ]
}


def cut_stage(limit: int) -> dict[str, Any]:
    """Count the oldest non-system messages to evict (``_cut``); 0 when stale."""
    return {"$set": {"_cut": {"$cond": [_STALE, 0, _cut_expression(limit)]}}}


def evict_stage() -> dict[str, Any]:
    """Name the evicted messages (``_evict``): the first ``_cut`` ids of ``_ns``.

    New messages the window drops at once are among them.
    """
    return {
        "$set": {
            "_evict": {
                "$cond": [
                    {"$gt": ["$_cut", 0]},
                    {"$slice": ["$_ns.id", "$_cut"]},
                    [],
                ]
            }
        }
    }


def commit_stage(
    version: str, expires_at: datetime | None, evicted_ids_kept: int
) -> dict[str, Any]:
    """Write the outcome: messages, counters, expiry, record and result.

    ``messages`` is ``_hist`` without the evicted, ``next_seq`` moves past the
    new messages, :data:`SYSTEM_BATCH_FIELD` takes ``_nsb`` and ``version``
    and ``expires_at`` take their new values.
    :data:`EVICTED_IDS_FIELD` gets the replaced system messages and the
    evicted ones (new messages dropped at once included) appended, then keeps
    its newest ``evicted_ids_kept``, as :func:`chatledger.adapters.kept_newest`
    does. When stale, only :data:`RESULT_FIELD` changes, to ``{"stale": ids}``.
    """
    if isinstance(evicted_ids_kept, bool) or evicted_ids_kept < 1:
        raise ValueError(f"evicted_ids_kept must be at least 1, not {evicted_ids_kept}")
    evicted = {"$concatArrays": ["$_gone", "$_evict"]}
    record = {
        "$slice": [
            {"$concatArrays": ["$_record", "$_gone", "$_evict"]},
            -evicted_ids_kept,
        ]
    }
    applied_messages = {
        "$filter": {
            "input": "$_hist",
            "as": "m",
            "cond": {"$not": [{"$in": ["$$m.id", "$_evict"]}]},
        }
    }
    return {
        "$set": {
            "messages": {"$cond": [_STALE, "$messages", applied_messages]},
            "next_seq": {
                "$cond": [
                    _STALE,
                    "$next_seq",
                    {"$add": ["$_seq", {"$size": "$_new"}]},
                ]
            },
            SYSTEM_BATCH_FIELD: {"$cond": [_STALE, f"${SYSTEM_BATCH_FIELD}", "$_nsb"]},
            "version": {"$cond": [_STALE, "$version", {"$literal": version}]},
            "expires_at": {"$cond": [_STALE, "$expires_at", {"$literal": expires_at}]},
            EVICTED_IDS_FIELD: {"$cond": [_STALE, f"${EVICTED_IDS_FIELD}", record]},
            RESULT_FIELD: {
                "$cond": [
                    _STALE,
                    {"stale": "$_stale"},
                    {"appended": "$_new.id", "evicted": evicted},
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
    evicted_ids_kept: int,
) -> list[dict[str, Any]]:
    """Return the update pipeline that appends ``batch`` and trims to ``window``.

    The steps follow the ``SupportsWindowAppend`` contract: drop elements whose
    id is stored or in the record of evicted ids, merge system messages,
    number the rest from ``next_seq``, count evictions over the cached sizes
    and drop that many of the oldest non-system messages, whose ids join the
    record. When a stored element has no size under the window's counter, the
    pipeline changes nothing but :data:`RESULT_FIELD`, which then lists the ids
    to measure (``stale``).

    Args:
        batch: Elements made by :func:`encode_element`, in order.
        window: The window to trim to.
        version: The new value of the document's ``version`` token.
        expires_at: The new expiry, or ``None`` for no TTL.
        now: The current time; a document that expired by then counts as empty.
        evicted_ids_kept: How many of the newest evicted ids the record keeps
            (:data:`chatledger.adapters.EVICTED_IDS_KEPT`).

    Raises:
        ValueError: if ``evicted_ids_kept`` is below 1.
    """
    return [
        stored_state_stage(now),
        fresh_stage(batch),
        replace_system_stage(),
        merge_system_stage(),
        number_stage(),
        history_stage(),
        sizes_stage(window.counter_id),
        size_totals_stage(),
        cut_stage(window.limit),
        evict_stage(),
        record_stage(_WINDOW_WRITTEN, {"$and": ["$_expired", {"$not": [_STALE]}]}),
        commit_stage(version, expires_at, evicted_ids_kept),
        {"$unset": _TEMPORARIES},
    ]


def log_commit_stage(version: str, expires_at: datetime | None) -> dict[str, Any]:
    """Write a log append: the new messages after the stored ones, nothing out.

    ``next_seq`` moves past them, :data:`SYSTEM_BATCH_FIELD` takes ``_nsb``,
    ``version`` and ``expires_at`` their new values; the record of evicted
    ids is kept as read (emptied when the document had expired), and
    :data:`RESULT_FIELD` names the appended ids, with none evicted, and
    ``next``, the new ``next_seq`` (the appended ones are numbered without a
    gap up to it, so a bounded log knows whether this append makes a trim
    due: :mod:`chatledger_mongodb.trim`).
    """
    return {
        "$set": {
            "messages": {"$concatArrays": ["$_old", "$_new"]},
            "next_seq": {"$add": ["$_seq", {"$size": "$_new"}]},
            SYSTEM_BATCH_FIELD: "$_nsb",
            "version": {"$literal": version},
            "expires_at": {"$literal": expires_at},
            EVICTED_IDS_FIELD: "$_record",
            RESULT_FIELD: {
                "appended": "$_new.id",
                "evicted": [],
                "next": {"$add": ["$_seq", {"$size": "$_new"}]},
            },
        }
    }


def log_append_pipeline(
    batch: list[dict[str, Any]],
    *,
    version: str,
    expires_at: datetime | None,
    now: datetime,
) -> list[dict[str, Any]]:
    """Return the update pipeline that appends ``batch`` to the log.

    The steps follow the ``SupportsLog`` contract: drop elements whose id is
    stored or in the record of evicted ids, drop system messages equal to
    one of the current set or to an earlier one of the batch (rule 1, by
    ``k``: the comparison the window pipeline makes), number the rest from
    ``next_seq`` and store them after the last message, recording the batch
    of their system messages. Nothing stored is changed or removed, and no
    size is read: an element carries the sizes it was encoded with.

    Args:
        batch: Elements made by :func:`encode_element`, in order.
        version: The new value of the document's ``version`` token.
        expires_at: The new expiry, or ``None`` for no TTL.
        now: The current time; a document that expired by then counts as empty.
    """
    return [
        stored_state_stage(now),
        fresh_stage(batch),
        replace_system_stage(),
        merge_system_stage(),
        number_stage(),
        record_stage({"$gt": [{"$size": "$_new"}, 0]}, "$_expired"),
        log_commit_stage(version, expires_at),
        {"$unset": _TEMPORARIES},
    ]
