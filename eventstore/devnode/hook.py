"""The post-commit hook twin: hand each metadata write to companions, off the put path.

Objectives, in order: (1) never block, slow down or fail the write that fired it;
(2) memory stays bounded whatever the companions do; (3) deliver each group once,
promptly, to the right companion; (4) count every outcome so /stats shows losses.

Algorithm: after the write is committed, the request handler calls :meth:`submit`,
which only does a non-blocking put into a bounded queue (full: the write is counted
``dropped`` and nothing else happens). ``workers`` threads take writes from the queue,
route them (``routing.route``) and POST each group as JSON to
``<companion URL><path>`` with a short timeout, one attempt (like the Erlang hook's
async httpc request). A 2xx answer counts ``sent``; anything else ``failed``.

Failure scenarios:
1. A companion is down or slow: its POST fails after at most ``timeout_s``; counted
   ``failed``; the write was answered long before.
2. All companions hang: workers are all busy for ``timeout_s`` each, the queue fills,
   later writes are ``dropped``. Writes keep succeeding.
3. Malformed metadata: counted ``invalid``, logged (rate-limited); nothing sent.
4. A node has no companion URL configured: its group is counted ``no_companion``.
5. Devnode stops: queued, unsent writes are dropped (the hook is at-most-once, as in
   Riak, where a post-commit hook's work dies with the node).
"""

from __future__ import annotations

import http.client
import logging
import queue
import threading
import time
from collections.abc import Collection
from dataclasses import dataclass
from urllib.parse import urlsplit

from eventstore.devnode.routing import route
from eventstore.devnode.settings import HookSettings
from eventstore.errors import InvalidName
from eventstore.keygroup import KeyGroup
from eventstore.ring import Ring

log = logging.getLogger(__name__)

_STOP = None
_LOG_EVERY_S = 10.0


@dataclass
class HookCounters:
    """What the hook did since start (reported in /stats)."""

    enqueued: int = 0
    dropped: int = 0
    sent: int = 0
    failed: int = 0
    invalid: int = 0
    no_companion: int = 0
    unroutable_keys: int = 0


class HookDispatcher:
    """A bounded queue of metadata writes drained by worker threads posting to companions."""

    def __init__(
        self,
        settings: HookSettings,
        ring: Ring,
        *,
        companions: dict[str, str],
        down: Collection[str],
        n_val: int,
    ) -> None:
        """Args:
        settings: queue size, workers, timeout, companion path, data bucket.
        ring: the ring of logical nodes.
        companions: logical node -> companion base URL.
        down: logical nodes treated as down.
        n_val: the data bucket type's n_val.
        """
        self._settings = settings
        self._ring = ring
        self._companions = dict(companions)
        self._down = frozenset(down)
        self._n_val = n_val
        self._queue: queue.Queue[tuple[str, bytes] | None] = queue.Queue(settings.queue_max)
        self._lock = threading.Lock()
        self._last_log = 0.0
        self.counters = HookCounters()
        self._threads = [
            threading.Thread(target=self._work, name=f"devnode-hook-{i}", daemon=True)
            for i in range(max(1, settings.workers))
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, metadata_key: str, value: bytes) -> None:
        """Queue one committed metadata write; never blocks, never raises."""
        try:
            self._queue.put_nowait((metadata_key, value))
        except queue.Full:
            self._count("dropped")
            self._rate_limited_warning("hook: queue full, dropped metadata %s", metadata_key)
            return
        self._count("enqueued")

    def queued(self) -> int:
        """Writes waiting in the queue now."""
        return self._queue.qsize()

    def close(self, timeout_s: float = 1.0) -> None:
        """Stop the workers; writes still queued are dropped (and counted)."""
        while True:
            try:
                self._queue.get_nowait()
            except queue.Empty:
                break
            self._count("dropped")
        for _ in self._threads:
            try:
                self._queue.put(_STOP, timeout=timeout_s)
            except queue.Full:
                break
        deadline = time.monotonic() + timeout_s
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    # -- workers ---------------------------------------------------------------------

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            metadata_key, value = item
            try:
                routing = route(
                    metadata_key,
                    value,
                    self._ring,
                    bucket_type=self._settings.data_bucket_type,
                    bucket=self._settings.data_bucket,
                    n_val=self._n_val,
                    down=self._down,
                )
            except InvalidName as e:
                self._count("invalid")
                self._rate_limited_warning("hook: metadata %s not routed: %s", metadata_key, e)
                continue
            if routing.unroutable:
                self._count("unroutable_keys", len(routing.unroutable))
            for node in routing.groups:
                self._post(metadata_key, node, routing.group(node))

    def _post(self, metadata_key: str, node: str, group: KeyGroup) -> None:
        base = self._companions.get(node)
        if base is None:
            self._count("no_companion")
            return
        url = urlsplit(base)
        payload = group.encode()
        keys = len(group.keys)
        connection_class = (
            http.client.HTTPSConnection if url.scheme == "https" else http.client.HTTPConnection
        )
        connection = connection_class(url.netloc, timeout=self._settings.timeout_s)
        try:
            connection.request(
                "POST",
                url.path.rstrip("/") + self._settings.path,
                body=payload,
                headers={"Content-Type": "application/json"},
            )
            response = connection.getresponse()
            response.read()
            ok = 200 <= response.status < 300
            reason = f"HTTP {response.status}"
        except (OSError, http.client.HTTPException) as e:
            ok, reason = False, str(e) or type(e).__name__
        finally:
            connection.close()
        if ok:
            self._count("sent")
            log.debug("hook: metadata %s: %d keys to %s", metadata_key, keys, node)
        else:
            self._count("failed")
            self._rate_limited_warning(
                "hook: metadata %s: POST to %s (%s) failed: %s", metadata_key, node, base, reason
            )

    def _count(self, name: str, n: int = 1) -> None:
        with self._lock:
            setattr(self.counters, name, getattr(self.counters, name) + n)

    def _rate_limited_warning(self, message: str, *args: object) -> None:
        now = time.monotonic()
        with self._lock:
            if now - self._last_log < _LOG_EVERY_S:
                return
            self._last_log = now
        log.warning(message, *args)
