"""The post-commit hook twin: hand each metadata write to companions, off the put path.

Objectives, in order: (1) never block, slow down or fail the write that fired it;
(2) memory stays bounded whatever the companions do; (3) deliver each group once,
promptly, to the right companion; (4) count every outcome so /stats shows losses.

Algorithm: after the write is committed, the request handler calls :meth:`submit`,
which only does a non-blocking put into a bounded queue (full: the write is counted
``dropped`` and nothing else happens; else ``received``). ``workers`` threads take
writes from the queue, route them (``routing.route``) and POST each group as JSON to
``<companion URL><path>`` with a short timeout, one attempt, unless that companion's
circuit breaker (:mod:`devnode.breaker`, the Erlang hook's, with its
``breaker_failures`` and ``breaker_cooldown_ms``) is open. A 2xx answer counts
``posted``; anything else ``failed`` (of which ``timeouts``).

The counters carry the Erlang hook's names for the same meanings; the one table of
them is in erlang_hooks/README.md ("Counters"), which says which ones the twin keeps.

Failure scenarios:
1. A companion is down or slow: its POST fails after at most ``timeout_s``; counted
   ``failed``; the write was answered long before. After ``breaker_failures`` failures
   in a row its breaker opens (``breaker_open``) and its groups are not sent
   (``breaker_rejected``) until one probe after ``breaker_cooldown_ms`` succeeds.
2. All companions hang: workers are all busy for ``timeout_s`` each (until the breakers
   open), the queue fills, later writes are ``dropped``. Writes keep succeeding.
3. Malformed metadata: counted ``parse_errors``, logged (rate-limited); nothing sent.
4. A node has no companion URL configured: its group is counted ``no_companion``.
5. An unexpected exception in a worker: counted ``hook_errors``, logged; the worker
   goes on with the next write.
6. Devnode stops: queued, unsent writes are lost, counted ``lost`` (the hook is
   at-most-once, as in Riak, where a post-commit hook's work dies with the node).
"""

from __future__ import annotations

import http.client
import logging
import queue
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import asdict, dataclass
from urllib.parse import urlsplit

from devnode.breaker import Breaker, monotonic_ms
from devnode.routing import route
from devnode.settings import HookSettings
from eventstore.errors import InvalidName
from eventstore.keygroup import KeyGroup
from eventstore.ring import Ring

log = logging.getLogger(__name__)

_STOP = None
_LOG_EVERY_S = 10.0


@dataclass
class HookCounters:
    """What the hook did since start, by the Erlang hook's counter names (the table in
    erlang_hooks/README.md); /stats and /metrics show each as
    ``devnode_hook_<name>_total``."""

    received: int = 0  # metadata writes taken into the queue
    dropped: int = 0  # writes refused because the queue was full
    hook_errors: int = 0  # unexpected exceptions caught in a worker
    parse_errors: int = 0  # metadata keys or values that do not parse
    keys: int = 0  # chunk keys routed to a node
    unroutable_keys: int = 0  # chunk keys with every preflist node down
    no_companion: int = 0  # groups for a node with no companion URL
    posted: int = 0  # POSTs answered 2xx
    failed: int = 0  # POSTs that got anything else ...
    timeouts: int = 0  # ... of which the timeout hit
    breaker_open: int = 0  # breakers opened
    breaker_rejected: int = 0  # groups not sent because their breaker was open
    lost: int = 0  # writes still queued when the devnode stopped


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
        clock: Callable[[], float] = monotonic_ms,
    ) -> None:
        """Args:
        settings: queue size, workers, timeout, companion path, data bucket, breaker.
        ring: the ring of logical nodes.
        companions: logical node -> companion base URL.
        down: logical nodes treated as down.
        n_val: the data bucket type's n_val.
        clock: monotonic milliseconds, for the breakers (injected by tests).
        """
        self._settings = settings
        self._ring = ring
        self._companions = dict(companions)
        self._down = frozenset(down)
        self._n_val = n_val
        self._queue: queue.Queue[tuple[str, bytes] | None] = queue.Queue(settings.queue_max)
        self._clock = clock
        self._lock = threading.Lock()
        self._last_log: dict[str, float] = {}
        self._breakers: dict[str, Breaker] = {}
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
            self._rate_limited_warning(
                "overflow", "hook: queue full, dropped metadata %s", metadata_key
            )
            return
        self._count("received")

    def queued(self) -> int:
        """Writes waiting in the queue now."""
        return self._queue.qsize()

    def counts(self) -> dict[str, int]:
        """A consistent copy of the counters, by name."""
        with self._lock:
            return asdict(self.counters)

    def breakers(self) -> dict[str, dict[str, object]]:
        """Each companion's breaker, by URL: ``{"state": "open", "failures": 5}`` (as
        the Erlang hook's ``riak_events_notifier:status()`` reports them)."""
        with self._lock:
            return {
                url: {"state": b.state.value, "failures": b.failures}
                for url, b in sorted(self._breakers.items())
            }

    def close(self, timeout_s: float = 1.0) -> None:
        """Stop the workers; writes still queued are lost (and counted)."""
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not _STOP:
                self._count("lost")
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
                self._handle(metadata_key, value)
            except Exception as e:  # a worker must outlive any one write (scenario 5)
                self._count("hook_errors")
                log.debug("hook: metadata %s: unexpected error", metadata_key, exc_info=True)
                self._rate_limited_warning(
                    "hook_error", "hook: metadata %s: unexpected error: %r", metadata_key, e
                )

    def _handle(self, metadata_key: str, value: bytes) -> None:
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
            self._count("parse_errors")
            self._rate_limited_warning(
                "parse_error", "hook: metadata %s not routed: %s", metadata_key, e
            )
            return
        if routing.unroutable:
            self._count("unroutable_keys", len(routing.unroutable))
        for node in routing.groups:
            group = routing.group(node)
            self._count("keys", len(group.keys))
            self._post(metadata_key, node, group)

    def _post(self, metadata_key: str, node: str, group: KeyGroup) -> None:
        base = self._companions.get(node)
        if base is None:
            self._count("no_companion")
            return
        with self._lock:
            breaker = self._breakers.get(base)
            if breaker is None:
                breaker = self._breakers[base] = Breaker(
                    failures_to_open=self._settings.breaker_failures,
                    cooldown_ms=self._settings.breaker_cooldown_ms,
                    clock=self._clock,
                )
            allowed = breaker.allow()
            if not allowed:
                self.counters.breaker_rejected += 1
        if not allowed:
            log.debug("hook: metadata %s: breaker of %s (%s) open", metadata_key, node, base)
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
            timed_out = False
        except (OSError, http.client.HTTPException) as e:
            ok, reason = False, str(e) or type(e).__name__
            timed_out = isinstance(e, TimeoutError)
        finally:
            connection.close()
        with self._lock:
            if ok:
                self.counters.posted += 1
                breaker.success()
                opened = False
            else:
                self.counters.failed += 1
                self.counters.timeouts += int(timed_out)
                opened = breaker.failure()
                self.counters.breaker_open += int(opened)
        if ok:
            log.debug("hook: metadata %s: %d keys to %s", metadata_key, keys, node)
            return
        self._rate_limited_warning(
            "post_failed",
            "hook: metadata %s: POST of %d keys to %s (%s) failed: %s",
            metadata_key,
            keys,
            node,
            base,
            reason,
        )
        if opened:
            self._rate_limited_warning(
                "breaker",
                "hook: companion %s of %s: breaker open for %d ms",
                base,
                node,
                self._settings.breaker_cooldown_ms,
            )

    def _count(self, name: str, n: int = 1) -> None:
        with self._lock:
            setattr(self.counters, name, getattr(self.counters, name) + n)

    def _rate_limited_warning(self, kind: str, message: str, *args: object) -> None:
        """At most one warning per kind per interval, as the Erlang hook's log."""
        now = time.monotonic()
        with self._lock:
            if now - self._last_log.get(kind, -_LOG_EVERY_S) < _LOG_EVERY_S:
                return
            self._last_log[kind] = now
        log.warning(message, *args)
