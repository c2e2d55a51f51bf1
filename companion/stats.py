"""Per-substream statistics of one worker process, and their merge across workers.

gunicorn's workers are separate processes; each keeps its own :class:`WorkerStats` and
writes a snapshot (JSON) to ``<state_dir>/status/<pid>.json`` every
``status_interval_s``. The status page reads every snapshot and merges them with
:func:`merge`. Snapshots of workers that are gone are ignored after ``stale_s``.

Pure logic except :func:`write_snapshot` / :func:`read_snapshots`.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from companion import defaults

__all__ = [
    "FAILURE_KINDS",
    "SubstreamStats",
    "WorkerStats",
    "merge",
    "percentile",
    "read_cluster_view",
    "read_snapshots",
    "version_conflicts",
    "write_cluster_view",
]

#: Kinds of a plugin's failures (a run that ended badly). ``shed`` is not one: the plugin
#: did not run (overload, or its quarantine lane full): counted apart, as ``shed``.
FAILURE_KINDS = ("exception", "too_large", "unencodable", "timeout", "memory", "killed")


def percentile(values: list[float], q: float) -> float | None:
    """The ``q`` quantile (0..1) of ``values`` by nearest rank, or None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(q * len(ordered) + 0.5) - 1))
    return ordered[rank]


@dataclass
class SubstreamStats:
    """Counters of one substream in one worker."""

    runs: int = 0
    ok: int = 0
    failures: dict[str, int] = field(default_factory=dict)
    #: Results marked shed (the plugin did not run): not failures of the plugin.
    shed: int = 0
    recent_ms: deque[float] = field(default_factory=lambda: deque(maxlen=defaults.RECENT_RUNS))
    last_error: str | None = None
    last_error_key: str | None = None
    last_error_at: float | None = None
    # series: bucket start (unix s) -> [runs, failures, max_ms]
    series: dict[int, list[float]] = field(default_factory=dict)
    #: The bucket of the last pruning of ``series``: only a record in another bucket
    #: can have points to drop (every point was added in a bucket pruned then).
    _pruned_at: int | None = field(default=None, repr=False, compare=False)

    def record(self, kind: str, wall_s: float, now: float, *, key: str, error: str | None) -> None:
        bucket = int(now // defaults.SERIES_STEP_S * defaults.SERIES_STEP_S)
        point = self.series.setdefault(bucket, [0, 0, 0.0])
        if kind == "shed":
            self.shed += 1
        else:
            self.runs += 1
            self.recent_ms.append(wall_s * 1000)
            point[0] += 1
            point[2] = max(point[2], wall_s * 1000)
        if kind == "ok":
            self.ok += 1
        elif kind != "shed":
            self.failures[kind] = self.failures.get(kind, 0) + 1
            point[1] += 1
            self.last_error, self.last_error_key, self.last_error_at = error or kind, key, now
        if bucket != self._pruned_at:  # the same bucket: nothing older to drop since
            horizon = bucket - defaults.SERIES_STEP_S * defaults.SERIES_POINTS
            for old in [b for b in self.series if b <= horizon]:
                del self.series[old]
            self._pruned_at = bucket

    def snapshot(self) -> dict[str, Any]:
        return {
            "runs": self.runs,
            "ok": self.ok,
            "failures": dict(self.failures),
            "shed": self.shed,
            "recent_ms": list(self.recent_ms),
            "last_error": self.last_error,
            "last_error_key": self.last_error_key,
            "last_error_at": self.last_error_at,
            "series": {str(k): v for k, v in self.series.items()},
        }


class WorkerStats:
    """Statistics of one worker process; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.substreams: dict[str, SubstreamStats] = {}
        self.counters: dict[str, int] = {
            "key_groups": 0,
            "chunks_accepted": 0,
            "chunks_processed": 0,
            "chunks_shed": 0,
            "chunks_unreadable": 0,
            "results_stored": 0,
            "results_not_stored": 0,
        }
        self.queue_depth = 0
        #: Wall and CPU seconds per chunk stage (signals.py), summed over chunks.
        self.stages_s: dict[str, float] = {}
        self.stages_cpu_s: dict[str, float] = {}
        #: Bumped on every change, so an unchanged snapshot need not be written again.
        self.changes = 0
        #: name -> version of the substreams this worker has loaded.
        self.loaded: dict[str, str] = {}
        #: Plugins this worker failed to load.
        self.load_failures = 0

    def set_loaded(self, loaded: dict[str, str], load_failures: int) -> None:
        with self._lock:
            if loaded != self.loaded or load_failures != self.load_failures:
                self.loaded, self.load_failures = dict(loaded), load_failures
                self.changes += 1

    def record_run(
        self, substream: str, kind: str, wall_s: float, *, key: str, error: str | None = None
    ) -> None:
        with self._lock:
            stats = self.substreams.get(substream)
            if stats is None:  # not setdefault: a SubstreamStats (and its deque) a run
                stats = self.substreams[substream] = SubstreamStats()
            stats.record(kind, wall_s, time.time(), key=key, error=error)
            self.changes += 1

    def add_stages(self, stages: dict[str, float], stages_cpu: dict[str, float]) -> None:
        with self._lock:
            for totals, add in ((self.stages_s, stages), (self.stages_cpu_s, stages_cpu)):
                for stage, seconds in add.items():
                    totals[stage] = totals.get(stage, 0.0) + seconds
            self.changes += 1

    def count(self, name: str, n: int = 1) -> None:
        with self._lock:
            self.counters[name] = self.counters.get(name, 0) + n
            self.changes += 1

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {
                "pid": os.getpid(),
                "at": time.time(),
                "queue_depth": self.queue_depth,
                "loaded": dict(self.loaded),
                "load_failures": self.load_failures,
                "counters": dict(self.counters),
                "stages_s": dict(self.stages_s),
                "stages_cpu_s": dict(self.stages_cpu_s),
                "substreams": {n: s.snapshot() for n, s in self.substreams.items()},
            }


def write_snapshot(directory: Path, snapshot: dict[str, Any]) -> None:
    """Write a worker's snapshot atomically (rename over the previous one)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{snapshot['pid']}.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(snapshot, separators=(",", ":")))
    tmp.replace(path)


def read_snapshots(directory: Path, *, stale_s: float = 60.0) -> list[dict[str, Any]]:
    """Every snapshot of a live worker younger than ``stale_s``; unreadable ones and
    those of processes that are gone (a worker killed without cleaning up) are skipped."""
    snapshots = []
    now = time.time()
    for path in sorted(directory.glob("*.json")) if directory.is_dir() else []:
        with contextlib.suppress(OSError, ValueError):
            snapshot = json.loads(path.read_text())
            if now - float(snapshot.get("at", 0)) <= stale_s and _alive(snapshot.get("pid")):
                snapshots.append(snapshot)
    return snapshots


def _alive(pid: object) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def merge(snapshots: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Merge worker snapshots into one node view with p50/p99 per substream."""
    counters: dict[str, int] = {}
    stages: dict[str, dict[str, float]] = {"stages_s": {}, "stages_cpu_s": {}}
    queue_depth = 0
    per: dict[str, dict[str, Any]] = {}
    loaded: dict[str, dict[str, int]] = {}
    load_failures: list[int] = []
    workers = 0
    for snap in snapshots:
        workers += 1
        load_failures.append(int(snap.get("load_failures", 0)))
        for name, version in snap.get("loaded", {}).items():
            versions = loaded.setdefault(name, {})
            versions[version] = versions.get(version, 0) + 1
        # The inbox is the node's: every worker reports the same queue.
        queue_depth = max(queue_depth, int(snap.get("queue_depth", 0)))
        for name, value in snap.get("counters", {}).items():
            counters[name] = counters.get(name, 0) + int(value)
        for field_name, totals in stages.items():
            for stage, seconds in snap.get(field_name, {}).items():
                totals[stage] = totals.get(stage, 0.0) + float(seconds)
        for name, s in snap.get("substreams", {}).items():
            m = per.setdefault(
                name,
                {"runs": 0, "ok": 0, "failures": {}, "shed": 0, "recent_ms": [], "series": {},
                 "last_error": None, "last_error_key": None, "last_error_at": None},
            )  # fmt: skip
            m["runs"] += s["runs"]
            m["ok"] += s["ok"]
            for kind, n in s["failures"].items():
                if kind == "shed":  # a snapshot of a worker from before shed was apart
                    m["shed"] += n
                else:
                    m["failures"][kind] = m["failures"].get(kind, 0) + n
            m["shed"] += int(s.get("shed", 0))
            m["recent_ms"].extend(s["recent_ms"])
            if s["last_error_at"] and (m["last_error_at"] or 0) < s["last_error_at"]:
                m["last_error"] = s["last_error"]
                m["last_error_key"] = s["last_error_key"]
                m["last_error_at"] = s["last_error_at"]
            for bucket, (runs, failures, max_ms) in s["series"].items():
                point = m["series"].setdefault(int(bucket), [0, 0, 0.0])
                point[0] += runs
                point[1] += failures
                point[2] = max(point[2], max_ms)
    for m in per.values():
        m["p50_ms"] = percentile(m["recent_ms"], 0.50)
        m["p99_ms"] = percentile(m["recent_ms"], 0.99)
        del m["recent_ms"]
    return {
        "workers": workers,
        "queue_depth": queue_depth,
        "counters": counters,
        # wall and CPU seconds per chunk stage, summed over chunks and workers
        **stages,
        "substreams": per,
        # name -> {version: number of workers that have it loaded}
        "loaded": loaded,
        # per worker: how many plugins it failed to load
        "load_failures": load_failures,
    }


_CLUSTER_FILE = "cluster.json"


def write_cluster_view(state_dir: Path, nodes: dict[str, Any]) -> None:
    """Store the live nodes' reports (node -> {substreams, updated_at}) by rename."""
    path = state_dir / _CLUSTER_FILE
    tmp = state_dir / f".{_CLUSTER_FILE}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps({"at": time.time(), "nodes": nodes}))
    tmp.replace(path)


def read_cluster_view(state_dir: Path, *, stale_s: float) -> dict[str, Any]:
    """node -> {substreams: {name: [versions]}, updated_at}; empty when there is no view
    or it is older than ``stale_s`` (ZooKeeper down: nothing is claimed about others)."""
    try:
        view = json.loads((state_dir / _CLUSTER_FILE).read_text())
    except (OSError, ValueError):
        return {}
    if time.time() - float(view.get("at", 0)) > stale_s:
        return {}
    nodes = view.get("nodes", {})
    return nodes if isinstance(nodes, dict) else {}


def version_conflicts(
    loaded: dict[str, dict[str, int]], node: str, cluster: dict[str, Any]
) -> dict[str, dict[str, Any]]:
    """Where versions of a substream disagree, between this node's workers or nodes.

    Args:
        loaded: :func:`merge`'s ``loaded``: name -> {version: workers that have it}.
        node: this node's name (left out of ``cluster``).
        cluster: :func:`read_cluster_view`.

    Returns:
        name -> {"workers": {version: n}} when this node's workers differ, and/or
        {"nodes": {node: [versions] or []}} for each other node whose versions differ
        from this node's (``[]``: that node has not loaded it).
    """
    conflicts: dict[str, dict[str, Any]] = {}
    others = {n: info.get("substreams", {}) for n, info in cluster.items() if n != node}
    for name in sorted(set(loaded).union(*others.values())):
        mine = loaded.get(name, {})
        entry: dict[str, Any] = {}
        if len(mine) > 1:
            entry["workers"] = dict(sorted(mine.items()))
        differing = {
            other: sorted(subs.get(name, []))
            for other, subs in sorted(others.items())
            if sorted(subs.get(name, [])) != sorted(mine)
        }
        if differing:
            entry["nodes"] = differing
        if entry:
            conflicts[name] = entry
    return conflicts
