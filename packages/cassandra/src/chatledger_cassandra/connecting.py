"""How a ``cassandra://`` URL becomes the driver's cluster and the repository's options.

Example:
    from chatledger_cassandra.connecting import url_settings

    cluster_args, options = url_settings(
        "cassandra://db1,db2/chat?table=memory&ttl=3600", {"create_keyspace": True}
    )
    cluster_args["contact_points"]   # [('db1', 9042), ('db2', 9042)]
    options                          # keyspace, table, ttl and create_keyspace

Both repositories' ``from_url`` split a URL here, without I/O; each makes the
``cassandra.cluster.Cluster`` and connects on its first call. Names, the TTL
and the replication are checked here too, so a bad one fails before anything
is opened.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from chatledger.adapters import to_retention
from chatledger_cassandra.errors import InvalidURLError
from chatledger_cassandra.names import render_replication
from chatledger_cassandra.statements import Statements
from chatledger_cassandra.steps import ttl_seconds
from chatledger_cassandra.url import parse_url

__all__ = ["url_settings"]

_N = TypeVar("_N", int, float)
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _flag(options: dict[str, Any], key: str) -> None:
    value = options.get(key)
    if isinstance(value, str):
        lowered = value.lower()
        if lowered not in _TRUE | _FALSE:
            raise InvalidURLError(f"{key} must be true or false, not {value!r}")
        options[key] = lowered in _TRUE


#: Seconds the driver's control connection waits for the schema and the
#: node list when it connects (the driver's own default is 2). A node busy
#: with compactions or schema changes answers slower than that now and then,
#: and the whole connect failed with ``NoHostAvailable``.
CONTROL_CONNECTION_TIMEOUT = 10.0


def _number(options: dict[str, Any], key: str, kind: type[_N]) -> _N:
    value = options.pop(key)
    try:
        return kind(value)
    except (TypeError, ValueError):
        raise InvalidURLError(
            f"{key} must be a {kind.__name__}, not {value!r}"
        ) from None


def url_settings(
    url: str, options: Mapping[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Return the keyword arguments of ``Cluster`` and of the repository.

    The URL's query options (``table``, ``ttl``, ``retention``, ``create_schema``,
    ``create_keyspace``, ``replication_factor``, ``local_dc``,
    ``protocol_version``, ``connect_timeout``, ``control_connection_timeout``)
    are applied first, then ``options`` override them.

    Raises:
        InvalidURLError: for a URL that cannot be parsed.
        InvalidNameError: for a bad keyspace, table or replication option.
        InvalidTTLError: for a bad ``ttl``.
        InvalidRetentionError: for a bad ``retention``.
    """
    from cassandra.auth import PlainTextAuthProvider
    from cassandra.cluster import EXEC_PROFILE_DEFAULT, ExecutionProfile
    from cassandra.policies import DCAwareRoundRobinPolicy, TokenAwarePolicy

    parsed = parse_url(url)
    settings: dict[str, Any] = dict(parsed.options)
    settings.update(options)
    cluster_args: dict[str, Any] = {"contact_points": parsed.contact_points}
    # Without local_dc the driver takes the data centre of the first contact
    # point, as it does by default; naming the policy keeps the driver from
    # warning that contact points without one will become an error.
    local_dc = settings.pop("local_dc", None) or None
    policy = TokenAwarePolicy(DCAwareRoundRobinPolicy(local_dc=local_dc))
    cluster_args["execution_profiles"] = {
        EXEC_PROFILE_DEFAULT: ExecutionProfile(load_balancing_policy=policy)
    }
    if "protocol_version" in settings:
        cluster_args["protocol_version"] = _number(settings, "protocol_version", int)
    if "connect_timeout" in settings:
        cluster_args["connect_timeout"] = _number(settings, "connect_timeout", float)
    cluster_args["control_connection_timeout"] = (
        _number(settings, "control_connection_timeout", float)
        if "control_connection_timeout" in settings
        else CONTROL_CONNECTION_TIMEOUT
    )
    if parsed.username is not None:
        cluster_args["auth_provider"] = PlainTextAuthProvider(
            username=parsed.username, password=parsed.password or ""
        )
    if "replication_factor" in settings:
        factor = _number(settings, "replication_factor", int)
        settings.setdefault(
            "replication", {"class": "SimpleStrategy", "replication_factor": factor}
        )
    if isinstance(settings.get("ttl"), str):
        settings["ttl"] = _number(settings, "ttl", float)
    for key in ("create_schema", "create_keyspace"):
        _flag(settings, key)
    if parsed.keyspace is not None:
        settings.setdefault("keyspace", parsed.keyspace)
    Statements(
        settings.get("keyspace", "chatledger"), settings.get("table", "chat_memory")
    )
    ttl_seconds(settings.get("ttl"))
    to_retention(settings.get("retention"))
    if settings.get("replication") is not None:
        render_replication(settings["replication"])
    return cluster_args, settings
