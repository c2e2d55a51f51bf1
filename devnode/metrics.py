"""The devnode's Prometheus metrics: requests counted by a middleware, the rest read from
the running :class:`~devnode.state.Devnode` at each scrape.

Exposed at ``GET /metrics`` from a registry of the app's own (no global state), by one
collector that turns the counts the devnode already keeps (those of ``/stats``) into
counter and gauge families. Its families carry no ``created`` timestamp, so the
exposition has no ``_created`` samples.

Names: ``devnode_http_requests_total{method,kind,status}`` (``kind``: object,
bucket_props, type_props, ping, stats, healthz, readyz, metrics, other),
``devnode_objects`` (records held, tombstones included), ``devnode_store_used_bytes``,
``devnode_object_bytes_written_total``, ``devnode_gets_total``, ``devnode_puts_total``,
``devnode_deletes_total``, ``devnode_expired_reads_total``, ``devnode_purged_total``,
``devnode_store_commits_total``, ``devnode_store_committed_writes_total``,
``devnode_hook_queued`` and ``devnode_hook_<counter>_total`` for each of the hook's
counters, named as the Erlang hook names them (the table in erlang_hooks/README.md):
``received``, ``dropped``, ``hook_errors``, ``parse_errors``, ``keys``,
``unroutable_keys``, ``no_companion``, ``posted``, ``failed``, ``timeouts``,
``breaker_open``, ``breaker_rejected``, ``lost``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from devnode.state import Devnode

_METHODS = frozenset({"GET", "HEAD", "PUT", "POST", "DELETE"})
_NODE_PATHS = {
    "/ping": "ping",
    "/stats": "stats",
    "/healthz": "healthz",
    "/readyz": "readyz",
    "/metrics": "metrics",
}


def path_kind(path: str) -> str:
    """The kind of resource ``path`` names (a bounded label, unlike the path itself)."""
    if path in _NODE_PATHS:
        return _NODE_PATHS[path]
    parts = path.split("/")
    # ['', 'types', T, 'props'] | [.., 'buckets', B, 'props'] | [.., 'buckets', B, 'keys', K..]
    if len(parts) == 4 and parts[1] == "types" and parts[3] == "props":
        return "type_props"
    base = 3 if parts[1:2] == ["types"] else 1
    if parts[base : base + 1] == ["buckets"] and len(parts) > base + 2:
        if parts[base + 2] == "props" and len(parts) == base + 3:
            return "bucket_props"
        if parts[base + 2] == "keys" and len(parts) > base + 3:
            return "object"
    return "other"


class RequestCounts:
    """Requests answered, by (method, kind, status). Touched only on the event loop."""

    def __init__(self) -> None:
        self.counts: Counter[tuple[str, str, str]] = Counter()

    def add(self, method: str, path: str, status: int) -> None:
        """Count one answered request."""
        label = method if method in _METHODS else "other"
        self.counts[(label, path_kind(path), str(status))] += 1


class RequestMetrics:
    """ASGI middleware: count every HTTP request by method, path kind and status.

    A request whose handler raised past the exception handlers counts as 500 (that is
    what the server error middleware outside this one answers).
    """

    def __init__(self, app: ASGIApp, counts: RequestCounts) -> None:
        self.app = app
        self.counts = counts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500

        async def counting_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, counting_send)
        finally:
            self.counts.add(scope["method"], scope["path"], status)


class DevnodeCollector(Collector):
    """Reads a devnode's counts at each scrape."""

    def __init__(self, devnode: Devnode, requests: RequestCounts) -> None:
        self._devnode = devnode
        self._requests = requests

    def collect(self) -> Iterator[Metric]:
        devnode = self._devnode
        requests = CounterMetricFamily(
            "devnode_http_requests",
            "HTTP requests answered, by method, path kind and status",
            labels=["method", "kind", "status"],
        )
        for labels, count in sorted(self._requests.counts.items()):
            requests.add_metric(list(labels), count)
        yield requests
        yield GaugeMetricFamily(
            "devnode_objects",
            "Records the store holds (objects and tombstones)",
            value=devnode.store.entries(),
        )
        yield GaugeMetricFamily(
            "devnode_store_used_bytes",
            "Bytes of the LMDB map in use",
            value=devnode.store.used_bytes(),
        )
        counters: dict[str, tuple[str, Callable[[], int]]] = {
            "devnode_object_bytes_written": (
                "Value bytes of objects stored by PUT",
                lambda: devnode.object_bytes_written,
            ),
            "devnode_gets": ("Object GETs", lambda: devnode.gets.total),
            "devnode_puts": ("Object PUTs stored", lambda: devnode.puts.total),
            "devnode_deletes": ("Object DELETEs stored", lambda: devnode.deletes.total),
            "devnode_expired_reads": (
                "Reads that found an expired object",
                lambda: devnode.expired_reads,
            ),
            "devnode_purged": (
                "Expired objects and tombstones reaped by the purge",
                lambda: devnode.purged,
            ),
            "devnode_store_commits": ("LMDB write transactions", lambda: devnode.store.commits),
            "devnode_store_committed_writes": (
                "Writes committed (several per transaction)",
                lambda: devnode.store.committed_ops,
            ),
        }
        for name, (documentation, read) in counters.items():
            yield CounterMetricFamily(name, documentation, value=read())
        for name, count in devnode.hook.counts().items():
            yield CounterMetricFamily(
                f"devnode_hook_{name}",
                f"Post-commit hook counter {name} (erlang_hooks/README.md)",
                value=count,
            )
        yield GaugeMetricFamily(
            "devnode_hook_queued",
            "Metadata writes waiting for the hook",
            value=devnode.hook.queued(),
        )


def registry_for(devnode: Devnode, requests: RequestCounts) -> CollectorRegistry:
    """A registry of its own holding ``devnode``'s collector."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(DevnodeCollector(devnode, requests))
    return registry


def exposition(registry: CollectorRegistry) -> tuple[bytes, str]:
    """The Prometheus text exposition of ``registry`` and its content type."""
    return generate_latest(registry), CONTENT_TYPE_LATEST
