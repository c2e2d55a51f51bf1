"""Aggregation: journaled frames grouped by (epoch, dc), closed after a grace window.

A **group** collects the event documents of one (epoch, dc), by (type, subtype), with
the journal positions they came from. It closes at ``epoch + 1 + grace_s`` (wall
clock), or ``max_hold_s`` after its first event arrived, whichever is first (a producer
clock far ahead must not hold the journal). An event for an (epoch, dc) that is already
closed is **late**: it starts a new group that closes at the next tick, becomes extra
chunks of its epoch, and its entries are merged into the existing metadata; it is
counted, never dropped. Frames replayed from the journal after a restart go the same
way (closed at once) but are not counted late.

A group handed out by ``due`` still counts in ``open_positions`` until the coordinator
says it is stored (``sealed``): between the two it exists only in memory, in the sealer,
and a status read then must not see "nothing open, no batch" (a false "drained": the
events are acknowledged but in no batch yet).

Thread-safety: ``add`` runs on the journal writer thread, ``due`` on the coordinator; a
lock guards the groups. Pure logic otherwise (the clock is injected).
"""

from __future__ import annotations

import array
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from relocator.errors import MalformedFrame
from relocator.journal import SEGMENT_SHIFT
from relocator.metrics import Metrics
from relocator.wire import Frame, FrameParser, Received, frame_positions

log = logging.getLogger(__name__)


@dataclass
class Group:
    """Events of one (epoch, dc) waiting to be sealed."""

    epoch: int
    dc: str
    close_at: float
    docs: dict[tuple[str, str], list[bytes]] = field(default_factory=dict)
    positions: array.array[int] = field(default_factory=lambda: array.array("Q"))
    segments: dict[int, int] = field(default_factory=dict)  # journal segment -> events
    late: int = 0

    @property
    def count(self) -> int:
        """Events in the group."""
        return len(self.positions)


class Aggregator:
    """Open groups by (epoch, dc)."""

    def __init__(
        self,
        *,
        grace_s: float,
        max_hold_s: float,
        metrics: Metrics,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._grace_s = grace_s
        self._max_hold_s = max_hold_s
        self._metrics = metrics
        self._clock = clock
        self._open: dict[tuple[int, str], Group] = {}
        self._sealing = 0  # events of groups handed out by due() and not yet sealed()
        self._lock = threading.Lock()

    def add_raw(self, positions: list[int], records: list[bytes]) -> None:
        """Put frames replayed from the journal into their groups (closed at once)."""
        parser = FrameParser()
        good_pos: list[int] = []
        frames: list[Frame] = []
        for pos, data in zip(positions, records, strict=True):
            try:
                frames.append(parser.parse(data))
                good_pos.append(pos)
            except MalformedFrame as e:  # intake checked it; only a foreign journal
                log.error("aggregator: journal record %d is not a frame: %s", pos, e)
                self._metrics.dropped.labels("malformed").inc()
        self.add(good_pos, frames, recovered=True)

    def _group(self, epoch: int, dc: str, now: float, recovered: bool) -> tuple[Group, bool]:
        """The open group of (epoch, dc), made when missing, and whether events for it
        now are late. Call with the lock held."""
        group = self._open.get((epoch, dc))
        natural = epoch + 1 + self._grace_s
        if group is None:
            ends = natural <= now or recovered
            close_at = now if ends else min(natural, now + self._max_hold_s)
            group = Group(epoch, dc, close_at)
            self._open[(epoch, dc)] = group
        return group, group.close_at <= now and not recovered and natural <= now

    def add_received(self, blocks: list[tuple[int, Received]]) -> None:
        """Put journaled blocks of frames into their groups: (base position, frames) each.

        Per header, not per frame: the documents are appended as a list, the positions
        computed in C into an array.
        """
        now = self._clock()
        with self._lock:
            for base, received in blocks:
                segment = base >> SEGMENT_SHIFT
                for fg in received.groups:
                    group, late = self._group(fg.epoch, fg.dc, now, False)
                    n = len(fg.documents)
                    if late:
                        group.late += n
                        self._metrics.late.inc(n)
                    docs = group.docs.get((fg.type, fg.subtype))
                    if docs is None:  # the list is the intake's fresh one: keep it
                        group.docs[(fg.type, fg.subtype)] = fg.documents
                    else:
                        docs += fg.documents
                    group.positions += frame_positions(fg.offsets, base)
                    group.segments[segment] = group.segments.get(segment, 0) + n

    def add(self, positions: list[int], frames: list[Frame], *, recovered: bool = False) -> None:
        """Put journaled frames into their groups, one by one (the recovery path)."""
        now = self._clock()
        with self._lock:
            # Frames come in runs of one (epoch, dc) and (type, subtype): look the group
            # and its list up once per run, not per event.
            key: tuple[int, str] | None = None
            kind: tuple[str, str] | None = None
            group: Group | None = None
            docs: list[bytes] = []
            late = False
            for pos, f in zip(positions, frames, strict=True):
                if key != (f.epoch, f.dc) or group is None:
                    key = (f.epoch, f.dc)
                    group, late = self._group(f.epoch, f.dc, now, recovered)
                    kind = None
                if late:
                    group.late += 1
                    self._metrics.late.inc()
                if kind != (f.type, f.subtype):
                    kind = (f.type, f.subtype)
                    docs = group.docs.setdefault(kind, [])
                docs.append(f.document)
                group.positions.append(pos)
                segment = pos >> SEGMENT_SHIFT
                group.segments[segment] = group.segments.get(segment, 0) + 1

    def due(self, now: float | None = None) -> list[Group]:
        """Remove and return the groups whose close time has come (all with ``now=inf``).

        Their events still count in :meth:`open_positions` until :meth:`sealed`.
        """
        t = self._clock() if now is None else now
        with self._lock:
            ready = [k for k, g in self._open.items() if g.close_at <= t]
            groups = [self._open.pop(k) for k in sorted(ready)]
            self._sealing += sum(g.count for g in groups)
            return groups

    def sealed(self, groups: list[Group]) -> None:
        """Groups from :meth:`due` are now stored batches: stop counting their events."""
        with self._lock:
            self._sealing -= sum(g.count for g in groups)

    def open_positions(self) -> int:
        """Events in memory only: in open groups, or handed out by :meth:`due` and not
        yet :meth:`sealed`."""
        with self._lock:
            return self._sealing + sum(g.count for g in self._open.values())
