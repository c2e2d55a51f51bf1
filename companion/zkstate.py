"""The node's ZooKeeper state, shared by the master (which holds the session) and the
workers (which answer ``/readyz``, ``/v1/status`` and ``/metrics``), through one file:
``<state_dir>/zookeeper.json``.

The master rewrites it, by rename, at every session state change and every health
refresh: ``{"configured", "connected", "state", "registered", "session_id", "since",
"updated_at"}``. A file not rewritten for ``max(30 s, 3 refreshes)`` (a master that
stopped refreshing) reads as not connected. No kazoo here: the workers never import it.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from companion.settings import CompanionSettings

__all__ = ["STATE_FILE", "read_zookeeper_state", "write_zookeeper_state"]

STATE_FILE = "zookeeper.json"


def write_zookeeper_state(state_dir: Path, state: dict[str, Any]) -> None:
    """Replace the state file with ``state`` plus ``updated_at`` (unix seconds)."""
    path = state_dir / STATE_FILE
    # One temporary file per thread: kazoo's connection thread (state changes) and the
    # refresh thread both write, and a shared name let one rename the other's file away.
    tmp = state_dir / f".{STATE_FILE}.{os.getpid()}.{threading.get_ident()}.tmp"
    tmp.write_text(json.dumps({**state, "configured": True, "updated_at": time.time()}))
    tmp.replace(path)


def read_zookeeper_state(settings: CompanionSettings) -> dict[str, Any] | None:
    """The node's ZooKeeper state; ``None`` when ZooKeeper is not configured.

    Before the master's first write (or when the file is unreadable or stale) it reads
    as ``{"configured": True, "connected": False, "state": "unknown"}``.
    """
    if not settings.zk_hosts:
        return None
    unknown: dict[str, Any] = {"configured": True, "connected": False, "state": "unknown"}
    with contextlib.suppress(OSError, ValueError):
        state = json.loads((settings.state_dir / STATE_FILE).read_text())
        if not isinstance(state, dict):
            return unknown
        stale_s = max(30.0, 3 * settings.zk_health_interval_s)
        if time.time() - float(state.get("updated_at", 0)) > stale_s:
            return {**state, "connected": False, "state": "stale"}
        return state
    return unknown
