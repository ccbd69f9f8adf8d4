"""Benchmarks of chatledger's window append and read against raw-driver floors.

Example:
    python -m bench                      # every backend that answers, 10-25 minutes
    python -m bench --no-long-log        # without the 100,000-message logs, ~3
    python -m bench --backends postgresql,redis --quick

Not a test: nothing here passes or fails a build. It prints a table of
latencies (p50/p95, microseconds), the ratios of our append and read to the
cheapest thing the same driver can do, and whether each target is met. See
``bench/README.md`` for what the figures mean.
"""

from __future__ import annotations
