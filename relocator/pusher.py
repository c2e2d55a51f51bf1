"""Pushing batches to one cluster: chunks first (with the events bucket's w), then the
metadata merge, then the durable "this cluster holds it" record.

One :class:`ClusterPusher` per configured cluster, each with its own thread, its own
backlog (batches sealed but not yet held by that cluster, rebuilt from the state store
at start) and at most ``parallel`` batches in flight; a batch's chunks go through the
cluster client's own pool. Clusters never wait for each other: a down cluster backs off
(doubling to ``backoff_max_s``) while its backlog grows, and catches up when it returns.

A batch starts only when ``may_push(batch_id)`` says so (the daemon's ZooKeeper rule:
the writer id registered, the spool unit owned); a held batch stays in the backlog and
is looked at again when something changes or every ``_IDLE_WAIT_S``.

Failure semantics: ``State.mark_pushed`` runs only after every chunk PUT and the metadata
merge succeeded, so a crash anywhere before it re-pushes the batch: identical keys and
bytes, and a metadata merge that is a no-op when our entries are already there.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from eventstore.names import Namespaces
from eventstore.ratelog import LogSummary
from eventstore.riak import PutItem, RiakClient, RiakError
from relocator.errors import PushFailed, RelocatorError
from relocator.metadata import MetadataWriter
from relocator.metrics import Metrics
from relocator.settings import ClusterSettings
from relocator.state import State

log = logging.getLogger(__name__)

#: Longest wait of an idle pusher before it looks at its held batches again, seconds
#: (new batches and finished pushes wake it at once).
_IDLE_WAIT_S = 0.2


class ClusterPusher:
    """The backlog of one cluster and the thread that drains it."""

    def __init__(
        self,
        cluster: ClusterSettings,
        *,
        state: State,
        namespaces: Namespaces,
        metadata: MetadataWriter,
        metrics: Metrics,
        parallel: int,
        backoff_s: float,
        backoff_max_s: float,
        on_pushed: Callable[[str, str], None],
        may_push: Callable[[str], bool] | None = None,
    ) -> None:
        """Args (beyond the stages it uses): ``parallel`` batches in flight at most;
        ``backoff_s`` .. ``backoff_max_s`` seconds after a failure (doubling);
        ``on_pushed(cluster, batch_id)`` after the cluster holds a batch; ``may_push``
        says whether a batch may start now (None: always)."""
        self.name = cluster.name
        self._nodes = cluster.riak.nodes
        self._w = cluster.w
        self.client: RiakClient = cluster.riak.client()
        self._state = state
        self._ns = namespaces
        self._metadata = metadata
        self._metrics = metrics
        self._parallel = parallel
        self._backoff_s = backoff_s
        self._backoff_max_s = backoff_max_s
        self._on_pushed = on_pushed
        self._may_push = may_push
        self._pending: dict[str, None] = {}
        self._inflight: set[str] = set()
        self._cv = threading.Condition()
        self._stopping = False
        self._retry_at = 0.0
        self._delay = backoff_s
        # Each failed push is logged at DEBUG; a cluster that keeps failing gets one
        # WARNING line a minute (a down cluster must not flood the log).
        self._failures = LogSummary(
            log,
            "push: cluster=%(key)s: %(count)d batch pushes failed in the last "
            "%(seconds).0f s, retried with backoff; last: %(last)s",
        )
        self.events_pushed = 0  # since start: events of batches this cluster now holds
        self._pool = ThreadPoolExecutor(parallel, thread_name_prefix=f"push-{self.name}")
        self._thread = threading.Thread(target=self._run, name=f"pusher-{self.name}", daemon=True)

    def start(self, backlog: list[str]) -> None:
        """Start with the batches this cluster does not hold yet."""
        self.offer(backlog)
        self._thread.start()

    def offer(self, batch_ids: list[str]) -> None:
        """Add newly sealed batches to the backlog."""
        with self._cv:
            for b in batch_ids:
                self._pending[b] = None
            self._metrics.backlog.labels(self.name).set(len(self._pending))
            self._cv.notify()

    def reachable(self) -> bool:
        """Whether at least one node of this cluster answers ``/ping`` now (one try per
        node, the client's timeout)."""
        return any(self.client.ping(node) for node in self._nodes)

    def backlog(self) -> int:
        """Batches this cluster does not hold yet."""
        with self._cv:
            return len(self._pending)

    def stop(self, drain_s: float = 0.0) -> None:
        """Stop after the in-flight pushes (and, for ``drain_s`` seconds, the backlog)."""
        deadline = time.monotonic() + drain_s
        with self._cv:
            while self._pending and time.monotonic() < deadline:
                self._cv.wait(0.1)
            self._stopping = True
            self._cv.notify_all()
        self._thread.join()
        self._pool.shutdown(wait=True)
        self.client.close()
        self._failures.flush()

    def _ready(self, free: int) -> list[str]:
        """Up to ``free`` pending batches not in flight that may start now (under _cv)."""
        out: list[str] = []
        for b in self._pending:
            if len(out) >= free:
                break
            if b not in self._inflight and (self._may_push is None or self._may_push(b)):
                out.append(b)
        return out

    def _run(self) -> None:
        while True:
            with self._cv:
                todo: list[str] = []
                while not self._stopping:
                    wait = self._retry_at - time.monotonic()
                    if wait <= 0 and len(self._inflight) < self._parallel:
                        todo = self._ready(self._parallel - len(self._inflight))
                        if todo:
                            break
                    self._cv.wait(min(_IDLE_WAIT_S, wait) if wait > 0 else _IDLE_WAIT_S)
                if self._stopping:
                    return
                self._inflight.update(todo)
            for b in todo:
                future = self._pool.submit(self._push, b)
                future.add_done_callback(functools.partial(self._done, b))

    def _done(self, batch_id: str, future: Future[None]) -> None:
        error = future.exception()
        if error is not None and not isinstance(error, PushFailed):
            log.error(
                "push: cluster=%s batch=%s: unexpected error", self.name, batch_id, exc_info=error
            )
        with self._cv:
            self._inflight.discard(batch_id)
            if error is None:
                self._pending.pop(batch_id, None)
                self._delay = self._backoff_s
            else:
                self._retry_at = time.monotonic() + self._delay
                self._delay = min(self._delay * 2, self._backoff_max_s)
            self._metrics.backlog.labels(self.name).set(len(self._pending))
            self._cv.notify_all()
        if error is None:
            self._on_pushed(self.name, batch_id)

    def _push(self, batch_id: str) -> None:
        batch = self._state.get(batch_id)
        if batch is None:  # complete and pruned meanwhile
            return
        started = time.monotonic()
        try:
            if batch.keys:
                items = [
                    PutItem(k.format(), v) for k, v in zip(batch.keys, batch.values, strict=True)
                ]
                self.client.multi_put(
                    self._ns.events_bucket_type,
                    self._ns.events_bucket,
                    items,
                    **({"w": self._w} if self._w is not None else {}),
                )
                self._metadata.merge(self.name, self.client, batch.epoch, batch.dc, batch.refs)
        except (RiakError, RelocatorError) as e:
            detail = f"epoch={batch.epoch} dc={batch.dc} batch={batch.id}: {e}"
            log.debug("push: cluster=%s %s; will retry", self.name, detail)
            self._failures.note(self.name, detail)
            raise PushFailed(str(e)) from e
        self._state.mark_pushed(self.name, batch_id)
        with self._cv:
            self.events_pushed += sum(batch.events)
        self._metrics.events_pushed.labels(self.name).inc(sum(batch.events))
        self._metrics.chunks.labels(self.name).inc(len(batch.keys))
        self._metrics.bytes.labels(self.name).inc(batch.nbytes)
        self._metrics.epochs.labels(self.name).inc()
        self._metrics.push_seconds.labels(self.name).observe(time.monotonic() - started)
        self._metrics.epoch_lag.observe(max(0.0, time.time() - (batch.epoch + 1)))
        log.debug(
            "push: cluster=%s epoch=%d dc=%s batch=%s %d chunks stored",
            self.name,
            batch.epoch,
            batch.dc,
            batch.id,
            len(batch.keys),
        )
