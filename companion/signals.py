"""Lifecycle signals of the engine (huey's pattern): metrics and statistics subscribe,
the engine does not know who listens.

    signals.run_finished.connect(lambda **kw: ...)

Receivers are called synchronously in the sending thread with keyword arguments; an
exception in a receiver is logged and never reaches the engine.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

Receiver = Callable[..., None]


class Signal:
    """One named event with any number of receivers."""

    def __init__(self, name: str) -> None:
        self.name = name
        # A tuple, replaced on (dis)connect: a send iterates what was connected when it
        # began, without copying it (sent ~30 times a chunk).
        self._receivers: tuple[Receiver, ...] = ()

    def connect(self, receiver: Receiver) -> Receiver:
        self._receivers = (*self._receivers, receiver)
        return receiver

    def disconnect(self, receiver: Receiver) -> None:
        receivers = list(self._receivers)
        receivers.remove(receiver)
        self._receivers = tuple(receivers)

    def send(self, **kwargs: Any) -> None:
        for receiver in self._receivers:
            try:
                receiver(**kwargs)
            except Exception:
                log.exception("signal %s: receiver %r failed", self.name, receiver)


class EngineSignals:
    """The engine's signals; one instance per engine.

    - ``key_group(epoch, dc, accepted, shed)``: a POST /v1/keys was admitted.
    - ``run_finished(substream, version, key, kind, status, wall_s, cpu_s, error)``.
    - ``chunk_shed(key, substreams, reason)``: a chunk was not processed.
    - ``chunk_unreadable(key, error)``.
    - ``chunk_processed(key, runs, stages, stages_cpu)``: every matching substream ran
      and was stored; ``stages``: wall seconds in wait, fetch, decode, sandbox, queries
      (the query plugins' walk, companion/queries.py), free, store; ``stages_cpu``: CPU
      seconds of the worker in fetch, decode, sandbox (fork, wait, reap), queries (beyond
      the walk), free, store (the writer threads), and the plugins' own (children, and
      the query walks).
    - ``result_stored(substream, key, status)`` / ``result_not_stored(substream, key, error)``.
    - ``chunk_failed(key, substreams, error)``: processing failed inside the companion
      (sandbox unavailable, a bug, out of memory); ``substreams`` get an error result.
    - ``substream_disabled(substream, version, reason)``.
    """

    def __init__(self) -> None:
        self.key_group = Signal("key_group")
        self.run_finished = Signal("run_finished")
        self.chunk_shed = Signal("chunk_shed")
        self.chunk_unreadable = Signal("chunk_unreadable")
        self.chunk_processed = Signal("chunk_processed")
        self.result_stored = Signal("result_stored")
        self.result_not_stored = Signal("result_not_stored")
        self.chunk_failed = Signal("chunk_failed")
        self.substream_disabled = Signal("substream_disabled")
