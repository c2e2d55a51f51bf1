"""What a worker tells about its chunks and runs: the engine's signals and log lines.

Every signal and log line about a chunk, a run, a shed or a failure is sent from here,
whichever thread ends the run (a chunk thread, a quarantine lane, the shed thread), so
the metrics and statistics (``metrics.py``, ``stats.py``, subscribed to
``signals.py``) count a lane's run exactly as a chunk thread's. Nothing here stores a
result or changes state: the caller does, then tells.

Failure semantics: a receiver that raises is logged by :class:`~companion.signals.Signal`
and never reaches the caller; nothing here raises.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from companion.signals import EngineSignals
from eventstore.names import ChunkKey
from substreams.api import Substream
from substreams.protocol import Outcome

log = logging.getLogger(__name__)

__all__ = ["Reporter"]


class Reporter:
    """Sends one worker's signals and logs its lines about chunks and runs.

    Args:
        signals: the engine's signals.
    """

    def __init__(self, signals: EngineSignals) -> None:
        self.signals = signals

    def key_group(self, epoch: int, dc: str, keys: int, accepted: int, shed: int) -> None:
        """A key group was admitted: ``accepted`` of its ``keys`` queued, ``shed`` not."""
        self.signals.key_group.send(epoch=epoch, dc=dc, accepted=accepted, shed=shed)
        if shed:
            log.warning(
                "companion: epoch=%d dc=%s: %d of %d keys shed (inbox full)", epoch, dc, shed, keys
            )

    def ran(self, key: ChunkKey, sub: Substream, outcome: Outcome) -> None:
        """One run of ``sub`` on ``key`` ended (an ``unreadable`` outcome is no run: the
        chunk's error, told by :meth:`unreadable`)."""
        if outcome.kind == "unreadable":
            return
        self.signals.run_finished.send(
            substream=sub.name,
            version=sub.version,
            key=key,
            kind=outcome.kind,
            status=outcome.status,
            wall_s=outcome.wall_s,
            cpu_s=outcome.cpu_s,
            error=outcome.error,
        )
        if not outcome.ok:
            log.warning(
                "companion: epoch=%d dc=%s key=%s substream=%s: %s",
                *(key.epoch, key.dc, key, sub.name, outcome.error),
            )

    def shed(self, key: ChunkKey, sub: Substream, reason: str) -> None:
        """One substream's result of a chunk shed (not the whole chunk's)."""
        self.signals.run_finished.send(
            substream=sub.name, version=sub.version, key=key, kind="shed", status="shed",
            wall_s=0.0, cpu_s=0.0, error=f"shed: {reason}",
        )  # fmt: skip

    def failed(self, key: ChunkKey, subs: Sequence[Substream], cause: str, kind: str) -> None:
        """``subs`` of ``key`` got an ``error`` result for a cause of the companion's
        (``kind``: ``sandbox`` or ``internal``), not counted against the plugins."""
        log.error(
            "companion: epoch=%d dc=%s key=%s: %d results marked error: %s",
            key.epoch,
            key.dc,
            key,
            len(subs),
            cause,
        )
        self.signals.chunk_failed.send(key=key, substreams=[s.name for s in subs], error=cause)
        for sub in subs:
            self.signals.run_finished.send(
                substream=sub.name, version=sub.version, key=key, kind=kind, status="error",
                wall_s=0.0, cpu_s=0.0, error=cause,
            )  # fmt: skip

    def internal(self, key: ChunkKey, error: BaseException) -> None:
        """Processing ``key`` raised (a bug, MemoryError); logged with its traceback."""
        log.error(
            "companion: epoch=%d dc=%s key=%s: processing failed",
            *(key.epoch, key.dc, key),
            exc_info=error,
        )

    def unreadable(self, key: ChunkKey, error: str) -> None:
        """The chunk could not be read or decoded (``error`` names why)."""
        self.signals.chunk_unreadable.send(key=key, error=error)
        log.warning(
            "companion: key=%s epoch=%d dc=%s unreadable: %s", key, key.epoch, key.dc, error
        )

    def disabled(self, sub: Substream, reason: str) -> None:
        """This worker disabled ``sub`` on the node."""
        self.signals.substream_disabled.send(substream=sub.name, version=sub.version, reason=reason)
        log.error("companion: substream=%s version=%s disabled: %s", sub.name, sub.version, reason)

    def processed(
        self, key: ChunkKey, runs: int, wall: Mapping[str, float], cpu: Mapping[str, float]
    ) -> None:
        """Every run of ``key`` here ended and was stored; seconds per stage."""
        self.signals.chunk_processed.send(key=key, runs=runs, stages=wall, stages_cpu=cpu)
