"""The devnode: a single-node stand-in for Riak KV's HTTP API, for development and CI.

It is NOT a distributed database: one process, one embedded LMDB store, no replication,
no handoff. It serves the subset of Riak's HTTP API our components use, keeps bucket
types and their props, expires objects per bucket type, computes preflists over a
configured ring of logical nodes, and runs the Python twin of the Erlang post-commit
hook. See ``DESIGN.md`` beside this file.
"""

from __future__ import annotations

from devnode.app import create_app
from devnode.settings import DevnodeSettings, load

__all__ = ["DevnodeSettings", "create_app", "load"]
