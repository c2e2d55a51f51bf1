"""Substreams disabled on this node, shared by every worker through marker files.

A substream that fails ``disable_after`` times in a row (in one worker) is disabled on
the node: ``<state_dir>/disabled/<name>.json`` names the version and the reason. Every
worker skips a disabled (name, version); a new version of the plugin is enabled again
by itself (the marker names the old version); an operator re-enables with
``POST /v1/substreams/<name>/enable``, which removes the marker.
"""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path
from typing import Any

from eventstore.names import check_bucket_name

__all__ = ["DisabledSet"]


class DisabledSet:
    """The disabled markers in one directory, re-read at most every ``ttl_s``."""

    def __init__(self, directory: Path, *, ttl_s: float = 0.5) -> None:
        self.directory = directory
        self._ttl_s = ttl_s
        self._cache: dict[str, dict[str, Any]] = {}
        self._read_at = 0.0

    def _refresh(self) -> None:
        now = time.monotonic()
        if now - self._read_at < self._ttl_s:
            return
        markers: dict[str, dict[str, Any]] = {}
        if self.directory.is_dir():
            for path in self.directory.glob("*.json"):
                with contextlib.suppress(OSError, ValueError):
                    markers[path.stem] = json.loads(path.read_text())
        self._cache, self._read_at = markers, now

    def all(self) -> dict[str, dict[str, Any]]:
        """name -> {version, reason, at}."""
        self._refresh()
        return dict(self._cache)

    def is_disabled(self, name: str, version: str) -> bool:
        """Whether this version of ``name`` is disabled on this node."""
        self._refresh()
        marker = self._cache.get(name)
        return marker is not None and marker.get("version") == version

    def disable(self, name: str, version: str, reason: str) -> None:
        """Disable ``name`` at ``version`` on this node."""
        check_bucket_name(name, "substream")
        self.directory.mkdir(parents=True, exist_ok=True)
        marker = {"version": version, "reason": reason, "at": time.time()}
        tmp = self.directory / f".{name}.tmp"
        tmp.write_text(json.dumps(marker))
        tmp.replace(self.directory / f"{name}.json")
        self._cache[name] = marker

    def enable(self, name: str) -> bool:
        """Remove the marker; returns whether there was one."""
        check_bucket_name(name, "substream")
        self._cache.pop(name, None)
        self._read_at = 0.0
        try:
            (self.directory / f"{name}.json").unlink()
        except FileNotFoundError:
            return False
        return True
