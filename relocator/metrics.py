"""The relocator's Prometheus metrics, in a registry of its own (no global state).

Names (STYLE.md): ``relocator_events_received_total{intake}``,
``relocator_events_dropped_total{reason}``, ``relocator_events_late_total``,
``relocator_chunks_written_total{cluster}``, ``relocator_bytes_written_total{cluster}``,
``relocator_epochs_committed_total{cluster}``, ``relocator_push_seconds{cluster}``,
``relocator_epoch_lag_seconds`` (end of epoch -> metadata committed on a cluster),
``relocator_backlog_epochs{cluster}`` (batches sealed but not yet held by that cluster),
``relocator_metadata_repairs_total{cluster}``, ``relocator_spool_files_total{outcome}``,
``relocator_owned_units``, ``relocator_zookeeper_connected``,
``relocator_zookeeper_errors_total{op}``, ``relocator_journal_skipped_bytes_total{reason}``,
``relocator_tcp_events_total{producer}`` (``idempotent``: producers with ids, ``legacy``:
without), ``relocator_events_deduplicated_total``, ``relocator_producers``,
``relocator_producers_forgotten_total{reason}``.
"""

from __future__ import annotations

import math

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
)

_LAG_BUCKETS = (0.5, 1, 2, 2.5, 3, 3.5, 4, 5, 6, 8, 10, 15, 20, 30, 60, 120, 300, 600)


class Metrics:
    """Every metric of one relocator process."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        # No ``_created`` samples: half the exposition, and nothing a dashboard or an
        # alert reads (prometheus-client's switch is process-wide).
        disable_created_metrics()  # type: ignore[no-untyped-call]
        self.registry = registry or CollectorRegistry()
        r = self.registry

        def counter(name: str, doc: str, *labels: str) -> Counter:
            return Counter(name, doc, labels, registry=r)

        def gauge(name: str, doc: str, *labels: str) -> Gauge:
            return Gauge(name, doc, labels, registry=r)

        self.received = counter(
            "relocator_events_received_total", "Events accepted by intake", "intake"
        )
        self.dropped = counter(
            "relocator_events_dropped_total", "Events not stored, by reason", "reason"
        )
        self.late = counter(
            "relocator_events_late_total", "Events that arrived after their epoch closed"
        )
        self.chunks = counter("relocator_chunks_written_total", "Chunks stored", "cluster")
        self.bytes = counter("relocator_bytes_written_total", "Chunk bytes stored", "cluster")
        self.events_pushed = counter(
            "relocator_events_pushed_total",
            "Events in batches whose chunks and metadata a cluster holds",
            "cluster",
        )
        self.epochs = counter(
            "relocator_epochs_committed_total", "Metadata writes committed", "cluster"
        )
        self.push_seconds = Histogram(
            "relocator_push_seconds",
            "Time to push one batch (chunks + metadata)",
            ["cluster"],
            registry=r,
        )
        self.epoch_lag = Histogram(
            "relocator_epoch_lag_seconds",
            "From the end of an epoch to its metadata committed on a cluster",
            buckets=_LAG_BUCKETS,
            registry=r,
        )
        self.backlog = gauge(
            "relocator_backlog_epochs", "Sealed batches a cluster does not hold yet", "cluster"
        )
        self.repairs = counter(
            "relocator_metadata_repairs_total",
            "Metadata re-reads that found our entries missing and rewrote them",
            "cluster",
        )
        self.spool_files = counter(
            "relocator_spool_files_total", "Spool files, by outcome", "outcome"
        )
        self.owned_units = gauge("relocator_owned_units", "Spool work units this relocator owns")
        self.zookeeper_connected = gauge(
            "relocator_zookeeper_connected",
            "1 while connected to ZooKeeper with the writer id registered (pushing), else 0;"
            " NaN without ZooKeeper",
        )
        # NaN until the first ZooKeeper tick sets it: a relocator without ZooKeeper is not
        # "disconnected" (an alert on == 0 must not fire for it).
        self.zookeeper_connected.set(math.nan)
        self.zookeeper_errors = counter(
            "relocator_zookeeper_errors_total",
            "ZooKeeper calls that failed (retried at the next tick), by operation",
            "op",
        )
        self.tcp_events = counter(
            "relocator_tcp_events_total",
            "Events received over TCP, by producer kind (idempotent: with a producer id,"
            " exactly once; legacy: without, at-least-once)",
            "producer",
        )
        self.deduplicated = counter(
            "relocator_events_deduplicated_total",
            "Frames a producer resent that were already held: acknowledged, not stored again",
        )
        self.producers = gauge(
            "relocator_producers", "Producers with ids whose high mark intake holds"
        )
        self.producers_forgotten = counter(
            "relocator_producers_forgotten_total",
            "Producer high marks forgotten, by reason (idle: producer_idle_s without a"
            " frame; cap: above max_producers)",
            "reason",
        )
        self.journal_skipped = counter(
            "relocator_journal_skipped_bytes_total",
            "Journal bytes replay did not read as records, by reason (corrupt: skipped up"
            " to the next valid record; torn_tail: the newest segment's unfinished last"
            " write, truncated)",
            "reason",
        )
