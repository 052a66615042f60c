"""The cluster tests' data: `peers.problems.cluster` (shared with ``bench/cluster.py``)."""

from peers.problems.cluster import mixture  # noqa: F401
