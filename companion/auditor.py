"""The auditor: find this node's chunks of recent epochs that lack results, and have
the missing ones written (a hook may fire twice or not at all; a worker may die with a
chunk in hand; a result may be lost). On by default.

Runs in gunicorn's master, one per node, every ``audit_interval_s``::

    dcs = audit_dcs + the dcs of key groups received within audit_lookback_s (SeenDcs)
    for epoch in [now - AUDIT_MIN_AGE_S .. now - audit_lookback_s], newest first,
                 resuming after the epoch where the last round hit its cap:
        for dc in dcs:
            keys = metadata(<epoch>-<dc>)         # 404: no such epoch, skip
            mine = keys whose first preflist node (events bucket, ring settings) is
                   this node; all keys when no ring is configured (one-node setups)
            stop when audit_max_keys keys were sent this round (the cap)
            POST {"epoch", "dc", "keys": mine} to this companion's /v1/audit
    a worker answers /v1/audit: a key lacking the result of some matching enabled
    substream (one GET each) is admitted as an audit item; the chunk thread that takes
    it reads again which results are missing and runs and writes only those

Bounded: at most ``audit_max_keys`` keys are checked per round (one GET per key and
substream at most), and ``audit_lookback_s`` metadata reads per dc.
Idempotent: it never overwrites a stored result, it only fills missing ones.
Failure semantics: every error is logged and the next round starts afresh; it never
blocks the master's main loop (own thread). A round that hits the cap leaves the rest
to the next, which starts where it stopped, so old epochs are not starved.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from companion.settings import CompanionSettings
from eventstore.errors import EventStoreError
from eventstore.names import ChunkKey, MetadataKey, parse_metadata
from eventstore.riak import NotFound, RiakClient, RiakError
from eventstore.ring import Ring

log = logging.getLogger(__name__)

__all__ = ["AUDIT_MIN_AGE_S", "Auditor", "SeenDcs"]

#: Epochs younger than this are left to the hook, seconds.
AUDIT_MIN_AGE_S = 10
#: Most dcs learned from key groups that are audited (the most recently seen).
MAX_SEEN_DCS = 64
#: A worker touches a dc's file at most this often, seconds.
_NOTE_EVERY_S = 30.0


class SeenDcs:
    """The dcs this node received key groups for, shared by the workers and the master
    through files: ``<directory>/<dc>``, touched when a key group of that dc arrives.

    dc names are tokens (``[A-Za-z0-9_]+``, checked by ``ChunkKey.parse`` before they
    get here), so each is a safe file name.

    Args:
        directory: usually ``<state_dir>/dcs``.
        clock: unix time (injected for tests).
    """

    def __init__(self, directory: Path, *, clock: Callable[[], float] = time.time) -> None:
        self.directory = directory
        self._clock = clock
        self._noted: dict[str, float] = {}

    def note(self, dc: str) -> None:
        """Record that a key group of ``dc`` arrived (a file touch at most every 30 s)."""
        now = self._clock()
        if now - self._noted.get(dc, float("-inf")) < _NOTE_EVERY_S:
            return
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            path = self.directory / dc
            path.touch()
            os.utime(path, (now, now))
        except OSError as e:
            log.warning("auditor: dc=%s could not be recorded: %s", dc, e)
            return
        self._noted[dc] = now

    def recent(self, max_age_s: float) -> list[str]:
        """The dcs seen within ``max_age_s`` (at most ``MAX_SEEN_DCS``, newest first);
        older files are removed."""
        now = self._clock()
        seen: list[tuple[float, str]] = []
        with contextlib.suppress(OSError):
            for path in self.directory.iterdir():
                with contextlib.suppress(OSError):
                    mtime = path.stat().st_mtime
                    if now - mtime > max_age_s + _NOTE_EVERY_S:
                        path.unlink()
                    else:
                        seen.append((mtime, path.name))
        return [dc for _, dc in sorted(seen, reverse=True)[:MAX_SEEN_DCS]]


Post = Callable[[int, str, list[str]], None]


class Auditor:
    """One node's auditor.

    Args:
        settings: the companion's settings (ring, node, dcs, lookback, cap).
        riak: a client of the local node.
        post: sends ``(epoch, dc, keys)`` to this node's ``/v1/audit``.
        seen: the dcs learned from key groups (default: ``<state_dir>/dcs``).
        clock: unix time (injected for tests).
    """

    def __init__(
        self,
        settings: CompanionSettings,
        riak: RiakClient,
        post: Post,
        *,
        seen: SeenDcs | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self._riak = riak
        self._post = post
        self._clock = clock
        self._seen = seen or SeenDcs(settings.state_dir / "dcs", clock=clock)
        self._ring = Ring(settings.ring_nodes, settings.ring_size) if settings.ring_nodes else None
        self._resume_at: int | None = None  # the epoch where the last round hit its cap
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

    def dcs(self) -> list[str]:
        """The configured ``audit_dcs``, then the dcs seen in recent key groups."""
        seen = self._seen.recent(self.settings.audit_lookback_s)
        return list(dict.fromkeys([*self.settings.audit_dcs, *seen]))

    def _epochs(self, now: int) -> list[int]:
        newest, oldest = now - AUDIT_MIN_AGE_S, now - self.settings.audit_lookback_s
        start = self._resume_at
        if start is None or not oldest <= start <= newest:
            start = newest
        return [*range(start, oldest - 1, -1), *range(newest, start, -1)]

    def run_once(self) -> int:
        """One round; returns how many owned keys were sent to be checked (at most
        ``audit_max_keys``, or one epoch-dc's keys when a single one holds more)."""
        now = int(self._clock())
        sent = 0
        ns = self.settings.namespaces
        dcs = self.dcs()
        epochs = self._epochs(now)
        self._resume_at = None
        for epoch in epochs:
            for dc in dcs:
                meta = MetadataKey(epoch, dc)
                try:
                    value = self._riak.get(*ns.metadata_location(meta)).value
                    refs = parse_metadata(value, key=meta.format())
                except NotFound:
                    continue
                except (RiakError, EventStoreError) as e:
                    log.warning("auditor: epoch=%d dc=%s: metadata unreadable: %s", epoch, dc, e)
                    continue
                mine = [k.format() for k in map(meta.chunk_key, refs) if self.owned(k)]
                if not mine:
                    continue
                if sent and sent + len(mine) > self.settings.audit_max_keys:
                    self._resume_at = epoch  # the next round starts here
                    log.info("auditor: cap of %d keys reached at epoch=%d", sent, epoch)
                    return sent
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
            except Exception:  # the next round starts afresh; never end the thread
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
