"""Making the driver's cluster and connecting it, once more when a connect
fails on the protocol's frame checksums.

Example:
    from chatledger_cassandra.opening import open_cluster

    cluster, session = open_cluster({"contact_points": [("127.0.0.1", 9042)]})

With native protocol v5 the DataStax driver checks a CRC on every frame once
the connection has started, and now and then, on connect only, it rejects a
healthy node's first frame with ``CRC mismatch on header ...`` (a fault of
the driver, its ticket PYTHON-1337); the whole connect then fails with
``NoHostAvailable``. Nothing has been sent for the application by then, so a
connect that failed on every node for that reason alone is made again, with
a new cluster, up to ``CONNECT_ATTEMPTS`` times. Any other failure is raised
at once.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

__all__ = ["CONNECT_ATTEMPTS", "failed_on_checksums", "open_cluster"]

_log = logging.getLogger(__name__)

#: How many times a connect failing on frame checksums alone is made.
CONNECT_ATTEMPTS = 3


def failed_on_checksums(error: BaseException) -> bool:
    """Whether ``error`` is a ``NoHostAvailable`` whose every node failed on
    a frame checksum (the driver reports it as a CRC mismatch)."""
    from cassandra.cluster import NoHostAvailable

    if not isinstance(error, NoHostAvailable) or not error.errors:
        return False
    return all("CRC mismatch" in str(cause) for cause in error.errors.values())


def open_cluster(cluster_args: Mapping[str, Any]) -> tuple[Any, Any]:
    """A new ``cassandra.cluster.Cluster(**cluster_args)`` and its connected
    session; a cluster whose connect failed is shut down."""
    from cassandra.cluster import Cluster

    for attempt in range(1, CONNECT_ATTEMPTS + 1):
        cluster = Cluster(**cluster_args)
        try:
            return cluster, cluster.connect()
        except BaseException as error:
            cluster.shutdown()
            if attempt == CONNECT_ATTEMPTS or not failed_on_checksums(error):
                raise
            _log.warning(
                "Cassandra connect failed on frame checksums (attempt %d of %d), "
                "connecting again: %s",
                attempt,
                CONNECT_ATTEMPTS,
                error,
            )
    raise AssertionError("unreachable")  # pragma: no cover
