"""A companion worker's fork server: its shared children are forked by a small helper
process (:mod:`substreams.forkserver`, shared with the consumer's fallback), not by
the worker.

Why (companion/DESIGN.md, "Performance"): a fork of the ~42 MB gunicorn worker copies
its page tables, and every page the worker's threads write while a child lives (HTTP,
buffers, counters) faults afterwards; both the worker and each child paid for it on
every chunk. The server does nothing between forks but wait; it is started from the
worker when the engine starts, loads the plugins from their files (each checked
against the version the worker loaded), and runs exactly what
:func:`substreams.sandbox.run_substreams` runs in the worker (the same loader:
``substreams.run.decode_chunk``; the same limits, deadlines, process
groups, rlimits, audit hook and seccomp filter).

Only the chunk threads' shared children go through it (isolation ``chunk``, every
substream loaded from a file or an entry point), a batch of chunks per request and per
child (``substreams/batch.py``, ``defaults.BATCH_CHUNKS``); the quarantine's lanes and
isolation ``substream`` fork in the worker as before.

Failure semantics: when the server cannot start, dies, is late (then killed) or cannot
fork, :meth:`ChunkServer.run` raises :class:`~substreams.sandbox.SandboxUnavailable`
naming the cause, with the outcomes of the runs that had ended, as the worker's own
fork would: the worker marks the other runs ``error``, not counted against the
plugins. A plugin the server cannot load (its file changed since the worker loaded it)
has no outcome (``None``): marked ``error`` naming why, not counted either. The next
chunk starts a new server. The server dies with the worker (``PR_SET_PDEATHSIG`` on the
thread that started it) and its children with it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from prometheus_client import Counter

from eventstore.blob import DecodeLimits
from eventstore.names import ChunkKey
from substreams.api import Substream
from substreams.forkserver import ForkServer, ForkServerUnavailable
from substreams.protocol import Limits, Outcome
from substreams.sandbox import SandboxUnavailable

log = logging.getLogger(__name__)

__all__ = ["FORK_SERVER_STARTS_TOTAL", "ChunkServer"]

FORK_SERVER_STARTS_TOTAL = Counter(
    "companion_fork_server_starts_total",
    "Fork servers started by the companion's workers (a restart after a death counts too)",
)


class ChunkServer:
    """One worker's fork server for its chunk threads (module docstring); lazy.

    Args:
        connections: requests in flight at once (the worker's chunk threads).
    """

    def __init__(self, connections: int) -> None:
        self.connections = connections
        self.server = ForkServer(
            "companion: the worker's fork server",
            max_connections=connections,
            on_start=FORK_SERVER_STARTS_TOTAL.inc,
        )

    @staticmethod
    def can_run(subs: Sequence[Substream]) -> bool:
        """Whether the server can load every one of ``subs`` itself."""
        return all(ForkServer.can_run(sub) for sub in subs)

    def start(self) -> None:
        """Start the server now, with a connection for each chunk thread (its
        interpreter and imports take ~0.5 s): a failure is logged, and the first chunk
        tries again."""
        try:
            self.server.start(self.connections)
        except ForkServerUnavailable as e:
            log.warning("companion: the worker's fork server could not start: %s", e)

    def close(self) -> None:
        """End the server and its children."""
        self.server.close()

    def run(
        self,
        chunks: Sequence[tuple[Sequence[Substream], bytes, ChunkKey]],
        *,
        decode_limits: DecodeLimits,
        cap: Limits | None,
        max_parallel: int,
    ) -> tuple[list[tuple[list[Outcome | None], dict[int, str]]], float]:
        """Run each chunk's substreams in the server's sandboxed child, the chunks of
        the batch in one child (``substreams.batch.run_batch``), each blob decoded
        there (checked by the caller: ``companion.chunks.check_chunk``).

        Args:
            chunks: (substreams, stored blob, key) of each chunk.
            decode_limits, cap, max_parallel: the companion's settings.

        Returns:
            For each chunk, one outcome per substream (``None``: not run) and why each
            ``None`` has none (by index: a child could not be started, or the server
            could not load that plugin); and the CPU seconds the server's thread spent
            on the request (its fork, wait and reap).

        Raises:
            SandboxUnavailable: see the module docstring.
        """
        key = chunks[0][2]
        where = f"companion: epoch={key.epoch} dc={key.dc} key={key} (+{len(chunks) - 1})"
        try:
            served = self.server.run_chunks(
                chunks, decode_limits=decode_limits, cap=cap, max_parallel=max_parallel, where=where
            )
        except ForkServerUnavailable as e:
            raise SandboxUnavailable(f"sandbox: {e}") from e
        results: list[tuple[list[Outcome | None], dict[int, str]]] = []
        for chunk in served.chunks:
            causes = {i: f"sandbox: {why}" for i, why in chunk.refused.items()}
            for i, outcome in enumerate(chunk.outcomes):
                if outcome is None and i not in causes:
                    causes[i] = str(served.unavailable)
            results.append((chunk.outcomes, causes))
        return results, served.server_cpu_s
