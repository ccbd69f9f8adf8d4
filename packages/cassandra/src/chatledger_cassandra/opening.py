"""Making the driver's cluster and connecting it, once more when a connect
fails on the protocol's frame checksums.

Example (needs a Cassandra server):
    from chatledger_cassandra.opening import open_cluster

    cluster, session = open_cluster({"contact_points": [("127.0.0.1", 9042)]})

With native protocol v5 the DataStax driver checks a CRC on every frame once
a connection has started, and now and then it rejects a healthy node's first
frame on a new connection with ``CRC mismatch on header ...`` (a fault of the
driver, its ticket PYTHON-1337). On the control connection the connect fails
with ``NoHostAvailable``; on a session's pool the node is marked down and the
application's first request fails. So a connect reads one row through every
pool it opened (``system.local``, a round trip per node, in parallel) before
anything is sent for the application, and is made again, with a new cluster,
up to ``CONNECT_ATTEMPTS`` times:

- when the connect failed on every node on a checksum;
- when that first read found no pool left, or no node answered it, each
  because its connection was lost (on a checksum, or shut down with its pool,
  which is how the driver reports a pool lost to a checksum on a frame of
  its own).

Past that the failure is raised. Any other failure of the connect is raised
at once; one of the first read is left to the application's first request to
meet, as it would without the read.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

__all__ = ["CONNECT_ATTEMPTS", "failed_on_checksums", "open_cluster"]

_log = logging.getLogger(__name__)

#: How many times a connect failing on frame checksums alone is made.
CONNECT_ATTEMPTS = 3

_FIRST_READ = "SELECT release_version FROM system.local"


def failed_on_checksums(error: BaseException) -> bool:
    """Whether ``error`` is a ``NoHostAvailable`` whose every node failed on
    a frame checksum (the driver reports it as a CRC mismatch)."""
    from cassandra.cluster import NoHostAvailable

    if not isinstance(error, NoHostAvailable) or not isinstance(error.errors, dict):
        return False
    causes = error.errors.values()
    return bool(causes) and all("CRC mismatch" in str(cause) for cause in causes)


def open_cluster(cluster_args: Mapping[str, Any]) -> tuple[Any, Any]:
    """A new ``cassandra.cluster.Cluster(**cluster_args)`` and its connected
    session, each of its pools past its first frame; a cluster whose connect
    failed is shut down."""
    from cassandra.cluster import Cluster

    for attempt in range(1, CONNECT_ATTEMPTS + 1):
        cluster = Cluster(**cluster_args)
        try:
            session = cluster.connect()
            lost = _first_read_lost(session)
        except BaseException as error:
            cluster.shutdown()
            if attempt == CONNECT_ATTEMPTS or not failed_on_checksums(error):
                raise
            lost = error
        else:
            if lost is None:
                return cluster, session
            cluster.shutdown()
            if attempt == CONNECT_ATTEMPTS:
                raise lost
        _log.warning(
            "Cassandra connect lost its connections on frame checksums "
            "(attempt %d of %d), connecting again: %s",
            attempt,
            CONNECT_ATTEMPTS,
            lost,
        )
    raise AssertionError("unreachable")  # pragma: no cover


def _lost_with_its_connections(error: BaseException) -> bool:
    """Whether the read just after a connect failed for want of any node,
    each having lost its connection (on a checksum, or with its pool)."""
    from cassandra.cluster import NoHostAvailable
    from cassandra.connection import ConnectionException

    if not isinstance(error, NoHostAvailable):
        return False
    causes = error.errors.values() if isinstance(error.errors, dict) else ()
    return all(isinstance(cause, ConnectionException) for cause in causes)


def _first_read_lost(session: Any) -> BaseException | None:
    """Read one row through each node's pool, so that each connection's first
    frame comes now; the error when no pool is left or no node answered and
    every one was lost at the start, else ``None``."""
    from cassandra.cluster import NoHostAvailable

    reads = [
        session.execute_async(_FIRST_READ, host=host)
        for host in session.get_pool_state()
    ]
    if not reads:
        none_open: BaseException = NoHostAvailable(
            "No node's pool is open after connecting", {}
        )
        return none_open
    errors: list[BaseException] = []
    for read in reads:
        try:
            read.result()
        except Exception as error:
            errors.append(error)
    if len(errors) < len(reads):
        return None
    if all(_lost_with_its_connections(error) for error in errors):
        return errors[0]
    return None
