"""The load generator behind ``riak-events loadgen``: the realistic event mix at a rate.

``generate(n, seed, epoch, dcs)`` yields ``(type, subtype, dc, event)`` for the events of
:mod:`relocator.events` (the one generator the tests and benchmarks use too), each also
carrying ``seq``, its index in the stream, so a reader can check that none was lost or
duplicated. Deterministic for a given seed.

``run`` sends them at a rate through :mod:`relocator.producer` and reports counts.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator
from typing import Any

from relocator.events import Event, iter_events
from relocator.producer import Emitter, TcpEmitter, UdpEmitter


def generate(
    n: int, seed: int = 1, epoch: int | None = None, dcs: tuple[str, ...] = ("ams1",)
) -> Iterator[tuple[str, str, str, Event]]:
    """``n`` events as (type, subtype, dc, event); ``epoch`` None: stamped when emitted."""
    events = iter_events(seed, epoch=epoch, dcs=dcs)
    for i, ev in enumerate(itertools.islice(events, n)):
        ev["seq"] = i
        yield ev["type"], ev["subtype"], ev["dc"], ev


def raw_size(event: Event) -> int:
    """The event's size as compact JSON: the "raw MB/s" the benchmarks report."""
    return len(json.dumps(event, separators=(",", ":"), ensure_ascii=False).encode())


def run(
    host: str,
    port: int,
    *,
    transport: str,
    rate: float,
    duration_s: float,
    dcs: tuple[str, ...],
    seed: int,
) -> dict[str, Any]:
    """Emit for ``duration_s`` at ``rate`` events/s; returns counts and achieved rate."""
    emitter: Emitter = (
        TcpEmitter(host, port, dc=dcs[0])
        if transport == "tcp"
        else UdpEmitter(host, port, dc=dcs[0])
    )
    start = time.monotonic()
    sent = 0
    raw = 0
    for type_, subtype, dc, ev in generate(10**12, seed, dcs=dcs):
        now = time.monotonic()
        if now - start >= duration_s:
            break
        if rate > 0 and sent >= rate * (now - start):
            time.sleep(min(0.01, sent / rate - (now - start)))
        # The event's epoch and its frame's agree: the second it was emitted in.
        ev["epoch"] = epoch = int(time.time())
        if emitter.emit(ev, type_, subtype, dc, epoch=epoch):
            sent += 1
            raw += raw_size(ev) if sent % 100 == 0 else 0
    elapsed = time.monotonic() - start
    if isinstance(emitter, TcpEmitter):
        emitter.flush(30.0)
    emitter.close()
    return {
        "sent": sent,
        "seconds": round(elapsed, 2),
        "events_per_s": round(sent / elapsed),
        "raw_mb_per_s_est": round(raw * 100 / elapsed / 1e6, 2),
        "counts": dict(emitter.counts),
    }
