"""Storing a chunk's results: every write of a chunk at once, one PUT call each.

The store commits concurrent writes together (the devnode in one fsync; Riak's vnodes in
parallel), so a chunk's results go out at once on a pool of writer threads.

One retry layer per write: the Riak client's. Each result is one ``RiakClient.put``,
which tries again on another node, with jittered backoff, only for errors that may
succeed elsewhere or later (connection failures, timeouts, 503, 5xx), at most
``[riak] retry_max_tries`` tries within ``retry_deadline_s`` (the ``Retry`` every
daemon uses). This module adds no loop of its own around it: two layers multiplied
(4 x 4 = up to 16 PUTs per result, each holding a writer thread for seconds) while a
node was down, and retried answers that cannot change (400, 412).

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
        riak: a client of the local node; its retry policy is the only one a write
            gets (``[riak] retry_max_tries``, ``retry_deadline_s``).
        signals: where ``result_stored`` and ``result_not_stored`` are sent.
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
        """Store one result (the client retries; see the module docstring); returns its
        CPU seconds."""
        cpu = time.thread_time()
        location = self.settings.namespaces.substream_location(sub.name, key)
        try:
            self.riak.put(*location, value)
        except (RiakError, OSError) as e:
            self.signals.result_not_stored.send(substream=sub.name, key=key, error=str(e))
            log.error(
                "companion: epoch=%d key=%s substream=%s: result not stored: %s",
                key.epoch,
                key,
                sub.name,
                e,
            )
        else:
            self.signals.result_stored.send(substream=sub.name, key=key, status=status)
        return time.thread_time() - cpu

    def shutdown(self) -> None:
        """Stop the threads without waiting; writes not started are dropped."""
        self._pool.shutdown(wait=False, cancel_futures=True)
