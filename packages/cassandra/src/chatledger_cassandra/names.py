"""Validation of the keyspace, table and replication options that reach CQL text.

Example:
    from chatledger_cassandra.names import validate_name

    table = validate_name("chat_memory", "table")

CQL cannot bind identifiers or keyspace options as parameters, so everything
that is spliced into a statement is checked here by full match first. Names are
lower case only: Cassandra folds unquoted identifiers to lower case, so
accepting ``Chat`` would quietly mean ``chat`` in one place and a different,
quoted table in another.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from chatledger.adapters import (
    InvalidNameError,
)

__all__ = ["NAME_PATTERN", "render_replication", "validate_name"]

#: Keyspace and table names: a lower-case letter, then up to 47 more
#: lower-case letters, digits or underscores (Cassandra's 48-character limit).
NAME_PATTERN = re.compile(r"[a-z][a-z0-9_]{0,47}")

_OPTION_KEY = re.compile(r"[A-Za-z0-9_.\-]{1,128}")
_CLASS_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]{0,255}")
_FACTOR = re.compile(r"[1-9][0-9]{0,3}")


def validate_name(name: object, what: str) -> str:
    """Return ``name`` if it is a valid keyspace or table name, else raise.

    Args:
        name: The candidate name.
        what: What the name is for (``"keyspace"``, ``"table"``), for the message.

    Raises:
        InvalidNameError: if ``name`` is not a ``str`` matching :data:`NAME_PATTERN`.
    """
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise InvalidNameError(
            f"{what} name {name!r} is not allowed: use a lower-case letter followed "
            "by up to 47 lower-case letters, digits or underscores"
        )
    return name


def render_replication(replication: Mapping[str, object]) -> str:
    """Return the CQL map literal of a keyspace's replication options.

    ``replication`` holds ``"class"`` (``SimpleStrategy``,
    ``NetworkTopologyStrategy`` or a fully qualified class name) and replication
    factors: ``replication_factor`` or one entry per data centre. Factors are
    positive ints (or strings of digits).

    Raises:
        InvalidNameError: if a key, the class or a factor is not allowed.
    """
    if not isinstance(replication, Mapping) or "class" not in replication:
        raise InvalidNameError(
            "replication must be a mapping with a 'class' entry, e.g. "
            "{'class': 'NetworkTopologyStrategy', 'dc1': 3}"
        )
    parts: list[str] = []
    for key, value in replication.items():
        if not isinstance(key, str) or not _OPTION_KEY.fullmatch(key):
            raise InvalidNameError(f"replication option {key!r} is not allowed")
        if key == "class":
            if not isinstance(value, str) or not _CLASS_NAME.fullmatch(value):
                raise InvalidNameError(f"replication class {value!r} is not allowed")
            text = value
        else:
            text = str(value) if isinstance(value, int | str) else ""
            if isinstance(value, bool) or not _FACTOR.fullmatch(text):
                raise InvalidNameError(
                    f"replication factor {key}={value!r} must be a positive int"
                )
        parts.append(f"'{key}': '{text}'")
    if len(parts) < 2:
        raise InvalidNameError(
            "replication needs at least one replication factor beside 'class'"
        )
    return "{" + ", ".join(parts) + "}"
