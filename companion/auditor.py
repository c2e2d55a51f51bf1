"""The auditor: find this node's chunks of recent epochs that have no results, and
process them (a hook may fire twice or not at all).

Runs in gunicorn's master, one per node, every ``audit_interval_s``::

    for epoch in [now - audit_lookback_s, now - AUDIT_MIN_AGE_S]:   # too-young epochs
        for dc in audit_dcs:                                         # are still in flight
            keys = metadata(<epoch>-<dc>)         # 404: no such epoch, skip
            mine = keys whose first preflist node (events bucket, ring settings) is
                   this node; all keys when no ring is configured (one-node setups)
            POST {"epoch", "dc", "keys": mine} to this companion's /v1/audit
    a worker answers /v1/audit: for each key, the matching enabled substreams whose
    result is missing (one GET each) -> the key is admitted like a hook's key group

Failure semantics: idempotent (a chunk is processed again only when a result is
missing; processing twice writes the same values); every error is logged and the next
round starts afresh; it never blocks the master's main loop (own thread). Epochs are
scanned newest first so a long backlog cannot starve the present.
"""

from __future__ import annotations

import http.client
import json
import logging
import threading
import time
from collections.abc import Callable

from companion.settings import CompanionSettings
from eventstore.names import ChunkKey, MetadataKey, parse_metadata
from eventstore.riak import NotFound, RiakClient, RiakError
from eventstore.ring import Ring

log = logging.getLogger(__name__)

__all__ = ["AUDIT_MIN_AGE_S", "Auditor"]

#: Epochs younger than this are left to the hook, seconds.
AUDIT_MIN_AGE_S = 10

Post = Callable[[int, str, list[str]], None]


class Auditor:
    """One node's auditor.

    Args:
        settings: the companion's settings (ring, node, dcs, lookback).
        riak: a client of the local node.
        post: sends ``(epoch, dc, keys)`` to this node's ``/v1/audit``.
        clock: unix time (injected for tests).
    """

    def __init__(
        self,
        settings: CompanionSettings,
        riak: RiakClient,
        post: Post,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self._riak = riak
        self._post = post
        self._clock = clock
        self._ring = Ring(settings.ring_nodes, settings.ring_size) if settings.ring_nodes else None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def owned(self, key: ChunkKey) -> bool:
        """Whether this node is the first primary of ``key`` (always, without a ring)."""
        if self._ring is None:
            return True
        ns = self.settings.namespaces
        preflist = self._ring.preflist(
            ns.events_bucket,
            key.format(),
            bucket_type=ns.events_bucket_type,
            n_val=self.settings.n_val,
        )
        return bool(preflist) and preflist[0].node == self.settings.node

    def run_once(self) -> int:
        """One round; returns how many owned keys were sent to be checked."""
        now = int(self._clock())
        sent = 0
        ns = self.settings.namespaces
        for epoch in range(now - AUDIT_MIN_AGE_S, now - self.settings.audit_lookback_s - 1, -1):
            for dc in self.settings.audit_dcs:
                meta = MetadataKey(epoch, dc)
                try:
                    value = self._riak.get(*ns.metadata_location(meta)).value
                except NotFound:
                    continue
                except RiakError as e:
                    log.warning("auditor: epoch=%d dc=%s: metadata unreadable: %s", epoch, dc, e)
                    continue
                keys = [meta.chunk_key(ref) for ref in parse_metadata(value, key=meta.format())]
                mine = [k.format() for k in keys if self.owned(k)]
                if mine:
                    self._post(epoch, dc, mine)
                    sent += len(mine)
        return sent

    def start(self) -> Auditor:
        self._thread = threading.Thread(target=self._loop, name="companion-auditor", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(self.settings.audit_interval_s):
            try:
                sent = self.run_once()
                log.debug("auditor: %d owned keys checked", sent)
            except Exception:
                log.exception("auditor: round failed")

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5.0)


def http_post(host: str, port: int, *, timeout_s: float = 30.0) -> Post:
    """A ``post`` that sends to a companion's ``/v1/audit`` over HTTP."""

    def post(epoch: int, dc: str, keys: list[str]) -> None:
        connection = http.client.HTTPConnection(host, port, timeout=timeout_s)
        try:
            body = json.dumps({"epoch": epoch, "dc": dc, "keys": keys}).encode()
            connection.request(
                "POST", "/v1/audit", body=body, headers={"Content-Type": "application/json"}
            )
            response = connection.getresponse()
            answer = response.read()
            if response.status != 200:
                log.warning(
                    "auditor: epoch=%d dc=%s: HTTP %d %r", epoch, dc, response.status, answer[:200]
                )
            elif json.loads(answer).get("missing"):
                log.info("auditor: epoch=%d dc=%s: %s", epoch, dc, answer.decode())
        except (OSError, http.client.HTTPException, ValueError) as e:
            log.warning("auditor: epoch=%d dc=%s: POST /v1/audit failed: %s", epoch, dc, e)
        finally:
            connection.close()

    return post
