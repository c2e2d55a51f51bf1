"""Prometheus metrics of the companion, fed by the engine's signals.

Under gunicorn each worker is a process: prometheus-client's multiprocess mode is on
when ``PROMETHEUS_MULTIPROC_DIR`` is set before this module is imported (the CLI, the
only place that touches the environment, sets it to ``<state_dir>/prometheus`` and
empties it at start); ``/metrics`` then merges every worker's files. Without it (tests
in one process) the default registry is served.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
    multiprocess,
)

from companion.signals import EngineSignals

# No ``_created`` samples (the multiprocess collector has none; one process has one per
# series): nothing a dashboard or an alert reads. prometheus-client's switch is
# process-wide, and this module is where the companion's metrics are made.
disable_created_metrics()  # type: ignore[no-untyped-call]

__all__ = ["CONTENT_TYPE_LATEST", "connect", "render"]

KEY_GROUPS = Counter("companion_key_groups_total", "Key groups received from the hook")
CHUNKS = Counter("companion_chunks_total", "Chunks admitted or shed", ["outcome"])
RUNS = Counter(
    "companion_substream_runs_total", "Sandboxed runs by outcome", ["substream", "status", "kind"]
)
SECONDS = Histogram(
    "companion_substream_seconds",
    "Wall-clock time of one sandboxed run",
    ["substream"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
)
CPU_SECONDS = Counter(
    "companion_substream_cpu_seconds_total", "CPU time of sandboxed runs", ["substream"]
)
RESULTS = Counter("companion_results_stored_total", "Result values stored", ["status"])
# Why results were shed: "overload" (the node's inbox full, or a chunk waited over
# max_wait_s), "quarantine" (one substream's lane full or behind), "other" (a key
# no record can hold).
SHED = Counter("companion_results_shed_total", "Results marked shed, by cause", ["cause"])
RESULTS_NOT_STORED = Counter(
    "companion_results_not_stored_total", "Result writes that failed", ["substream"]
)
DISABLED = Counter(
    "companion_substreams_disabled_total", "Substreams disabled on this node", ["substream"]
)
# Every worker sees the node's shared inbox: the node's depth is any live worker's.
QUEUE_DEPTH = Gauge(
    "companion_queue_depth", "Chunks waiting in the node's inbox", multiprocess_mode="livemax"
)
# Every worker reads the master's ZooKeeper state file: the node's value is any live one's.
ZOOKEEPER_CONNECTED = Gauge(
    "companion_zookeeper_connected",
    "1 while the node's ZooKeeper session is connected, 0 otherwise (absent: not configured)",
    multiprocess_mode="livemax",
)
# The master's auditor gives up epochs older than audit_horizon_s (never silently).
AUDIT_GIVEN_UP = Counter(
    "companion_audit_given_up_total",
    "Epochs the auditor gave up (older than audit_horizon_s, or metadata never parseable)",
    ["dc"],
)
# Read from the master's cursor file by the worker that answers the scrape.
AUDIT_LAG = Gauge(
    "companion_audit_lag_seconds",
    "How far the auditor's cursor (oldest epoch not confirmed complete) is behind the "
    "newest epoch it may audit, seconds (0: caught up)",
    ["dc"],
    multiprocess_mode="livemax",
)
STAGE_SECONDS = Histogram(
    "companion_chunk_stage_seconds",
    "Time of one chunk in each stage: wait (in the inbox), fetch, decode, sandbox, store",
    ["stage"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
)
STAGE_CPU_SECONDS = Counter(
    "companion_chunk_stage_cpu_seconds_total",
    "CPU time per chunk stage: fetch, decode, sandbox, free, store (worker), plugins (children)",
    ["stage"],
)


class _Children:
    """A metric's labelled children, looked up once per label values: ``labels()``
    validates and locks on every call, and the chunk threads call it ~30 times a
    chunk. The child is the one ``labels()`` returns (prometheus-client keeps it)."""

    def __init__(self, metric: Any) -> None:
        self._metric = metric
        self._children: dict[tuple[str, ...], Any] = {}

    def __call__(self, *values: str) -> Any:
        child = self._children.get(values)
        if child is None:
            child = self._children[values] = self._metric.labels(*values)
        return child


def connect(signals: EngineSignals) -> None:
    """Subscribe the metrics to an engine's signals."""
    runs, run_seconds, cpu_seconds = _Children(RUNS), _Children(SECONDS), _Children(CPU_SECONDS)
    chunks, results = _Children(CHUNKS), _Children(RESULTS)
    stage_seconds, stage_cpu = _Children(STAGE_SECONDS), _Children(STAGE_CPU_SECONDS)

    def key_group(*, accepted: int, shed: int, **_: Any) -> None:
        KEY_GROUPS.inc()
        chunks("accepted").inc(accepted)
        if shed:
            chunks("shed_on_arrival").inc(shed)

    def run_finished(*, substream: str, kind: str, status: str, wall_s: float, cpu_s: float,
                     **_: Any) -> None:  # fmt: skip
        runs(substream, status, kind).inc()
        if status == "shed":  # not run: its lane was full or behind (quarantine.py)
            SHED.labels("quarantine").inc()
            return
        run_seconds(substream).observe(wall_s)
        cpu_seconds(substream).inc(cpu_s)

    def chunk_shed(*, substreams: Any = (), reason: str = "", **_: Any) -> None:
        chunks("shed").inc()
        SHED.labels("overload" if reason.startswith("overload:") else "other").inc(len(substreams))

    def chunk_unreadable(**_: Any) -> None:
        chunks("unreadable").inc()

    def chunk_failed(**_: Any) -> None:
        chunks("failed").inc()

    def chunk_processed(
        *, stages: dict[str, float], stages_cpu: dict[str, float], **_: Any
    ) -> None:
        chunks("processed").inc()
        for stage, seconds in stages.items():
            stage_seconds(stage).observe(seconds)
        for stage, seconds in stages_cpu.items():
            stage_cpu(stage).inc(seconds)

    def result_stored(*, status: str, **_: Any) -> None:
        results(status).inc()

    def result_not_stored(*, substream: str, **_: Any) -> None:
        RESULTS_NOT_STORED.labels(substream).inc()

    def substream_disabled(*, substream: str, **_: Any) -> None:
        DISABLED.labels(substream).inc()

    signals.key_group.connect(key_group)
    signals.run_finished.connect(run_finished)
    signals.chunk_shed.connect(chunk_shed)
    signals.chunk_unreadable.connect(chunk_unreadable)
    signals.chunk_failed.connect(chunk_failed)
    signals.chunk_processed.connect(chunk_processed)
    signals.result_stored.connect(result_stored)
    signals.result_not_stored.connect(result_not_stored)
    signals.substream_disabled.connect(substream_disabled)


def set_queue_depth(depth: int) -> None:
    QUEUE_DEPTH.set(depth)


def set_zookeeper_connected(connected: bool) -> None:
    ZOOKEEPER_CONNECTED.set(1 if connected else 0)


def set_audit_lag(lags: dict[str, float]) -> None:
    """``companion_audit_lag_seconds{dc}`` from the auditor's cursors (dc -> seconds)."""
    for dc, lag_s in lags.items():
        AUDIT_LAG.labels(dc).set(lag_s)


def render(multiprocess_dir: Path | None = None) -> bytes:
    """The exposition text of every worker (``multiprocess_dir`` given) or of this process."""
    if multiprocess_dir is not None:
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry, path=str(multiprocess_dir))  # type: ignore[no-untyped-call]
        return generate_latest(registry)
    return generate_latest(REGISTRY)
