"""Storing a chunk's results: every write of a chunk at once, each retried with backoff.

The store commits concurrent writes together (the devnode in one fsync; Riak's vnodes in
parallel), so a chunk's results go out at once on a pool of writer threads. A write that
fails after the Riak client's own retries is tried again, ``RESULT_WRITE_TRIES`` in all,
the delay doubling from ``RESULT_WRITE_DELAY_S``: a node unreachable for a moment must
not leave a chunk without its result.

Failure semantics: a write that still fails is signalled ``result_not_stored`` and
logged (the auditor fills the hole later; consumers fall back meanwhile). When no writer
thread can be started (out of processes: threads count too), the write runs in the
calling thread instead. Nothing here raises for a failed write.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait

from companion import defaults
from companion.settings import CompanionSettings
from companion.signals import EngineSignals
from eventstore.names import ChunkKey
from eventstore.ratelog import LogSummary
from eventstore.riak import RiakClient, RiakError
from substreams.api import Substream
from substreams.results import Status

log = logging.getLogger(__name__)

__all__ = ["ResultWriter", "Write"]

#: One result to store: the substream, the value, its status.
Write = tuple[Substream, bytes, Status]


class ResultWriter:
    """Writes results under ``substreams/<name>/<key>`` on its own threads.

    Args:
        settings: the companion's settings (namespaces, threads).
        riak: a client of the local node.
        signals: where ``result_stored``, ``result_write_retried`` and
            ``result_not_stored`` are sent.
    """

    def __init__(
        self, settings: CompanionSettings, riak: RiakClient, signals: EngineSignals
    ) -> None:
        self.settings = settings
        self.riak = riak
        self.signals = signals
        self._pool = ThreadPoolExecutor(
            max(1, settings.threads) * defaults.RESULT_WRITERS, thread_name_prefix="companion-put"
        )
        # A failed try is logged at DEBUG (and counted); one WARNING a minute per substream.
        self._retries = LogSummary(
            log,
            "companion: substream=%(key)s: %(count)d result writes tried again in the last "
            "%(seconds).0f s; last: %(last)s",
        )

    def store_all(
        self, key: ChunkKey, writes: Sequence[Write], written: set[str] | None = None
    ) -> float:
        """Store a chunk's results; returns when every write has ended, with the CPU
        seconds the writer threads spent."""
        return self.finish(self.start(key, writes, written))

    def start(
        self, key: ChunkKey, writes: Sequence[Write], written: set[str] | None = None
    ) -> list[Future[float]]:
        """Start the writes; each substream is added to ``written`` as its write starts."""
        pending = []
        for write in writes:
            if written is not None:
                written.add(write[0].name)
            try:
                pending.append(self._pool.submit(self.store, key, *write))
            except RuntimeError:
                # No writer thread could be started (out of processes) or the pool is
                # shut down: write from this thread. A queued copy that a thread takes
                # later writes the same value again (idempotent).
                inline: Future[float] = Future()
                inline.set_result(self.store(key, *write))
                pending.append(inline)
        return pending

    @staticmethod
    def finish(pending: list[Future[float]]) -> float:
        """Wait for started writes; returns the CPU seconds they took."""
        wait(pending)
        return sum(f.result() for f in pending)

    def store(self, key: ChunkKey, sub: Substream, value: bytes, status: Status) -> float:
        """Store one result, trying again with backoff; returns its CPU seconds."""
        cpu = time.thread_time()
        location = self.settings.namespaces.substream_location(sub.name, key)
        delay = defaults.RESULT_WRITE_DELAY_S
        for attempt in range(1, defaults.RESULT_WRITE_TRIES + 1):
            try:
                self.riak.put(*location, value)
            except (RiakError, OSError) as e:
                if attempt == defaults.RESULT_WRITE_TRIES:
                    self.signals.result_not_stored.send(substream=sub.name, key=key, error=str(e))
                    log.error(
                        "companion: epoch=%d key=%s substream=%s: result not stored after "
                        "%d tries: %s",
                        key.epoch,
                        key,
                        sub.name,
                        attempt,
                        e,
                    )
                    return time.thread_time() - cpu
                self.signals.result_write_retried.send(substream=sub.name, key=key, error=str(e))
                log.debug(
                    "companion: epoch=%d key=%s substream=%s: result write failed (try %d), "
                    "again in %.2fs: %s",
                    key.epoch,
                    key,
                    sub.name,
                    attempt,
                    delay,
                    e,
                )
                self._retries.note(sub.name, f"key={key} try {attempt}: {e}")
                time.sleep(delay)
                delay *= 2
            else:
                break
        self.signals.result_stored.send(substream=sub.name, key=key, status=status)
        return time.thread_time() - cpu

    def shutdown(self) -> None:
        """Stop the threads without waiting; writes not started are dropped."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._retries.flush()
