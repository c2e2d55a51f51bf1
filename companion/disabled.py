"""Substreams disabled on this node, and the failure counts that disable them, shared
by every worker through files.

Every worker counts a substream's consecutive failures in one file per substream,
``<state_dir>/disabled/<name>.failures`` (``{"version", "count"}``, updated under an
exclusive ``flock``), so the count is the node's, whichever worker ran the chunk; an ok
run removes the file. At ``disable_after`` the substream is disabled on the node:
``<state_dir>/disabled/<name>.json`` names the version and the reason. Every worker
skips a disabled (name, version); a new version of the plugin is enabled again by
itself (the marker and the count name the old version); an operator re-enables with
``POST /v1/substreams/<name>/enable``, which removes the marker and the count.

Failure semantics: an ok run costs one ``stat`` (no file, nothing to reset); "in a row"
is in the order the workers finish runs. A file that cannot be read counts as zero.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from eventstore.names import check_bucket_name

__all__ = ["DisabledSet"]


class DisabledSet:
    """The disabled markers in one directory, re-read at most every ``ttl_s``."""

    def __init__(self, directory: Path, *, ttl_s: float = 0.5) -> None:
        self.directory = directory
        self._prefix = f"{directory}{os.sep}"  # the files' paths as str (per-run stats)
        self._ttl_s = ttl_s
        self._cache: dict[str, dict[str, Any]] = {}
        self._read_at = 0.0

    def _refresh(self, *, fresh: bool = False) -> None:
        now = time.monotonic()
        if not fresh and now - self._read_at < self._ttl_s:
            return
        markers: dict[str, dict[str, Any]] = {}
        if self.directory.is_dir():
            for path in self.directory.glob("*.json"):
                with contextlib.suppress(OSError, ValueError):
                    markers[path.stem] = json.loads(path.read_text())
        self._cache, self._read_at = markers, now

    def all(self) -> dict[str, dict[str, Any]]:
        """name -> {version, reason, at}, read now: a status request in one worker
        must show what an operator's request to another worker just changed."""
        self._refresh(fresh=True)
        return dict(self._cache)

    def is_disabled(self, name: str, version: str, *, fresh: bool = False) -> bool:
        """Whether this version of ``name`` is disabled on this node.

        Args:
            fresh: read its marker now (one small file) instead of the markers read at
                most ``ttl_s`` ago: before a run that may cost a whole timeout.
        """
        if fresh:
            with contextlib.suppress(OSError, ValueError):
                marker = json.loads((self.directory / f"{name}.json").read_text())
                return bool(marker.get("version") == version)
            return False
        self._refresh()
        marker = self._cache.get(name)
        return marker is not None and marker.get("version") == version

    def disable(self, name: str, version: str, reason: str) -> bool:
        """Disable ``name`` at ``version`` on this node; False if it already was."""
        check_bucket_name(name, "substream")
        self.directory.mkdir(parents=True, exist_ok=True)
        marker = {"version": version, "reason": reason, "at": time.time()}
        path = self.directory / f"{name}.json"
        with self._locked(name):
            with contextlib.suppress(OSError, ValueError):
                if json.loads(path.read_text()).get("version") == version:
                    return False
            tmp = self.directory / f".{name}.{os.getpid()}.tmp"
            tmp.write_text(json.dumps(marker))
            tmp.replace(path)
        self._cache[name] = marker
        return True

    def count_failure(self, name: str, version: str) -> int:
        """Count one more failure of ``name`` at ``version`` on the node; returns the
        failures in a row so far (a count of another version starts again at 1)."""
        check_bucket_name(name, "substream")
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / f"{name}.failures"
        with self._locked(name):
            count = 0
            with contextlib.suppress(OSError, ValueError):
                state = json.loads(path.read_text())
                if state.get("version") == version:
                    count = int(state.get("count", 0))
            count += 1
            tmp = self.directory / f".{name}.{os.getpid()}.failures.tmp"
            tmp.write_text(json.dumps({"version": version, "count": count}))
            tmp.replace(path)
        return count

    def has_failures(self, name: str) -> bool:
        """Whether ``name`` failed since its last ok run on the node (any version,
        any worker). One ``stat``, no lock: read on every chunk by the quarantine."""
        return os.path.exists(f"{self._prefix}{name}.failures")

    def clear_failures(self, name: str) -> None:
        """An ok run: the failures of ``name`` in a row start again from zero."""
        path = f"{self._prefix}{name}.failures"  # a str: no Path built per run
        if not os.path.exists(path):
            return
        with self._locked(name), contextlib.suppress(FileNotFoundError):
            os.unlink(path)

    @contextlib.contextmanager
    def _locked(self, name: str) -> Iterator[None]:
        fd = os.open(self.directory / f".{name}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def enable(self, name: str) -> bool:
        """Remove the marker and the failure count; returns whether there was a marker."""
        check_bucket_name(name, "substream")
        self._cache.pop(name, None)
        self._read_at = 0.0
        with contextlib.suppress(FileNotFoundError):
            (self.directory / f"{name}.failures").unlink()
        try:
            (self.directory / f"{name}.json").unlink()
        except FileNotFoundError:
            return False
        return True
