"""The messages the benchmarks store: a realistic window and a steady stream.

Example:
    from bench.workload import history, stream

    prefill = history(200)            # system prompt, turns, some tool calls
    for message in stream(10):        # user, assistant, user, ...
        memory.add("c1", message)

Every call makes fresh message ids, so a stream never collides with what a
conversation already holds (an id the store has seen would be a no-op). The
workload is core's (:mod:`chatledger.benchmark`), the one ``chatledger bench``
measures with.
"""

from __future__ import annotations

from chatledger.benchmark import history, stream

__all__ = ["history", "stream"]
