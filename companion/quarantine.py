"""Quarantine: a substream that is new to this worker, or failed since its last ok run,
runs apart from the others, so that it costs only its own results.

Why: with one shared child per chunk (isolation ``"chunk"``), a chunk's thread waits for
every plugin of the chunk in turn. One plugin that loops until its deadline holds the
thread for its whole timeout on every chunk; with the hostile set of issue 13 beside
one good plugin, chunks queued behind those threads waited over ``max_wait_s`` and were
shed for every substream: the good plugin was ok on 8 of 60 chunks
(``bench/fairness_bench.py``). Disabling after ``disable_after`` failures in a row came
too late: the shedding happened while the failures were being counted.

Policy, per worker and per substream version::

    trusted(sub)  = ok_in_a_row[sub] >= needed[sub]  and  not failed_on_node(sub)
    failed(sub)   = needed[sub] > 1  or  failed_on_node(sub)
    needed[sub]   = 1 until sub fails in this worker, then rejoin_after
    failed_on_node(sub): <state_dir>/disabled/<name>.failures exists (disabled.py: any
                  worker's failure since the last ok run anywhere; one stat)
    a run of sub ends ok -> ok_in_a_row += 1;  fails -> ok_in_a_row = 0, needed = rejoin_after

What the chunk pipeline does with each matching substream of a chunk:

- trusted: in the chunk thread's shared child, with the others, as before;
- not trusted: handed to its **lane** here: a FIFO of at most ``depth`` chunks, served
  by a thread of its own (started when work arrives, ended after ``idle_s`` without
  work) that runs one chunk at a time in a child of its own and stores the result itself. So a
  plugin that loops or crashes never kills or holds up the others' child.
  - new here (not failed): the chunk thread then waits for its run, at most
    ``new_wait_s`` (``min(1 s, max_wait_s / 2)``): as long as a good new plugin's
    first run, as before (a chunk thread holds one chunk at a time, so a worker that
    dies loses no more, and a key group still spreads over the workers), but a new
    plugin that hangs holds each chunk thread at most that long, once;
  - failed: the chunk thread does not wait; the lane's child runs at a lower CPU
    priority (``nice``): a plugin that keeps looping gets the CPU the others leave.
  A full lane refuses (the caller marks that result ``shed``, reason
  ``quarantined: ...``); so does one whose thread cannot be started (out of
  processes), and the caller runs the substream with the others.

What that bounds: a substream that keeps failing has at most one run at a time per
worker, each within its own limits, until ``disable_after`` failures in a row disable
it (the marker is read again before each lane run): at most
``disable_after + threads x workers - 1`` runs per version per node (its first runs,
one per chunk thread at most, then one at a time per worker; bench/fairness_bench.py,
tests/integration/companion/test_companion_fairness.py), each bounded by its limits;
the shared children of the others are never killed or held up because of it, and each
chunk thread waits for it at most once (its first run, beside the others'). The
price: a new plugin version's first runs in each worker cost a fork more each (until
one ends ok) and, in ``chunk`` isolation, a decode more each (the lane's child decodes
the chunk's blob with the substream's own fields); a lane holds a chunk's blob (or its
decoded events in ``substream`` isolation) while it waits (at most ``depth + 1`` chunks
per failing substream and worker; the lanes mostly hold the same few recent chunks).

Module layout: :class:`Trust` is the policy (pure, in memory, told of every run by
``failures.py``); :class:`Lanes` are the threads; :func:`hand_off` sorts one chunk's
substreams between the shared child and the lanes and returns what it did, as a value
(:class:`HandOff`): the pipeline (``pipeline.py``) stores and tells the refusals.
What a lane's thread runs is ``apart.py``'s :class:`~companion.apart.LaneRunner`.

Failure semantics: :meth:`Lanes.submit` never blocks and never raises. Every item it
accepts is passed to ``run`` exactly once (from the lane's thread), unless the engine
stops first: items still waiting are then dropped and logged (the auditor, or the
consumer's fallback, covers them). An exception from ``run`` is logged; the lane goes on.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from eventstore.names import ChunkKey
from substreams.api import Event, Substream
from substreams.child import Loader

log = logging.getLogger(__name__)

__all__ = ["HandOff", "LaneItem", "Lanes", "Refusal", "Trust", "hand_off"]

#: Why a lane did not take an item: it holds ``depth`` waiting chunks already, or no
#: thread could be started for it.
Refusal = Literal["full", "no thread"]


@dataclass
class LaneItem:
    """One quarantined substream's run on one chunk, waiting for its lane.

    Mutable in one field only: the lane empties ``source`` once the item is run, so the
    chunk's blob or events are freed while the chunk thread still holds the item.

    Attributes:
        sub: the substream (the version matched when the chunk was processed).
        key: the chunk.
        source: the chunk's events as :func:`substreams.sandbox.run_substreams` takes
            them: a loader (the chunk's blob, decoded in the run's child) or decoded
            events (shared with the chunk's other runs); emptied by the lane once run,
            so they are freed.
        deadline: the run must start before this (clock time), else it is shed.
        audit: the auditor sent the chunk (only missing results are written).
        done: set once the item was run (and stored) or dropped.
    """

    sub: Substream
    key: ChunkKey
    source: list[Event] | Loader
    deadline: float
    audit: bool = False
    done: threading.Event = field(default_factory=threading.Event)


class Trust:
    """Which substreams may run in this worker's shared child (module docstring).

    Args:
        failing: whether a substream (by name) failed since its last ok run on the node.
        rejoin_after: ok runs in a row that bring back a substream that failed here.
    """

    def __init__(self, *, failing: Callable[[str], bool], rejoin_after: int) -> None:
        self._failing = failing
        self._rejoin_after = rejoin_after
        self._lock = threading.Lock()
        self._ok_in_a_row: dict[tuple[str, str], int] = {}
        self._needed: dict[tuple[str, str], int] = {}

    def trusted(self, sub: Substream) -> bool:
        """Whether ``sub`` may run in the shared child."""
        version = (sub.name, sub.version)
        ok = self._ok_in_a_row.get(version, 0)
        return ok >= self._needed.get(version, 1) and not self._failing(sub.name)

    def failed(self, sub: Substream) -> bool:
        """Whether ``sub`` failed since it was last trusted (else, when not trusted, it
        is only new here): a failed one goes to its lane."""
        needed = self._needed.get((sub.name, sub.version), 1)
        return needed > 1 or self._failing(sub.name)

    def note(self, sub: Substream, ok: bool) -> None:
        """Record how a run of ``sub`` in this worker ended (a run the sandbox could
        not start is nobody's: do not note it)."""
        version = (sub.name, sub.version)
        with self._lock:
            if ok:
                self._ok_in_a_row[version] = self._ok_in_a_row.get(version, 0) + 1
            else:
                self._ok_in_a_row[version] = 0
                self._needed[version] = self._rejoin_after


@dataclass
class _Lane:
    wakeup: threading.Condition  # on the lanes' lock
    waiting: collections.deque[LaneItem] = field(default_factory=collections.deque)
    thread: threading.Thread | None = None


class Lanes:
    """The lanes of this worker: one FIFO and thread per quarantined substream version.

    Args:
        run: runs one item and stores its result (called on the lane's thread;
            ``apart.LaneRunner.run``).
        depth: chunks that may wait per lane.
        idle_s: a lane's thread ends after this long without work (not at once: a
            thread made and ended per chunk would cost more, and the count of the
            worker's threads would come and go).
    """

    def __init__(
        self, *, run: Callable[[LaneItem], None], depth: int, idle_s: float = 60.0
    ) -> None:
        self._run = run
        self._depth = depth
        self._idle_s = idle_s
        self._lock = threading.Lock()
        self._lanes: dict[tuple[str, str], _Lane] = {}
        self._stopping = False

    def submit(self, item: LaneItem) -> Refusal | None:
        """Hand ``item`` to its substream's lane without blocking.

        Returns:
            None when the lane took it (it will be run and stored), else why not.
        """
        version = (item.sub.name, item.sub.version)
        with self._lock:
            lane = self._lanes.get(version)
            if lane is None:
                lane = self._lanes[version] = _Lane(threading.Condition(self._lock))
            if lane.thread is not None:
                if len(lane.waiting) >= self._depth:
                    return "full"
                lane.waiting.append(item)
                lane.wakeup.notify()
                return None
            if self._stopping:
                return "no thread"
            thread = threading.Thread(
                target=self._serve,
                args=(lane,),
                name=f"companion-quarantine-{item.sub.name}",
                daemon=True,
            )
            lane.waiting.append(item)
            lane.thread = thread
            try:
                # Started under the lock: the thread's first step takes the lock, so it
                # cannot miss an item appended meanwhile nor end while one waits.
                thread.start()
            except RuntimeError:  # no thread can be started (out of processes)
                lane.waiting.pop()
                lane.thread = None
                return "no thread"
        return None

    def _serve(self, lane: _Lane) -> None:
        while True:
            with self._lock:
                if not lane.waiting and not self._stopping:
                    lane.wakeup.wait(self._idle_s)
                if self._stopping or not lane.waiting:
                    lane.thread = None
                    return
                item = lane.waiting.popleft()
            try:
                self._run(item)
            except Exception:
                log.exception(
                    "companion: key=%s substream=%s: quarantined run failed",
                    item.key,
                    item.sub.name,
                )
            finally:
                item.source = []  # this lane's reference to the chunk's blob or events
                item.done.set()

    def apart(self) -> dict[str, int]:
        """Substreams whose lane has a thread now: name -> chunks waiting."""
        with self._lock:
            return {
                name: len(lane.waiting)
                for (name, _), lane in self._lanes.items()
                if lane.thread is not None
            }

    def stop(self, timeout_s: float) -> int:
        """Drop every waiting item and wait up to ``timeout_s`` for the runs in
        progress; returns how many items were dropped."""
        with self._lock:
            self._stopping = True
            dropped = sum(len(lane.waiting) for lane in self._lanes.values())
            for lane in self._lanes.values():
                for item in lane.waiting:
                    item.done.set()
                lane.waiting.clear()
                lane.wakeup.notify_all()
            threads = [lane.thread for lane in self._lanes.values() if lane.thread is not None]
        if dropped:
            log.warning("companion stopping: %d quarantined runs not started", dropped)
        deadline = time.monotonic() + timeout_s
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return dropped


@dataclass(frozen=True)
class HandOff:
    """Where :func:`hand_off` sent one chunk's substreams.

    Attributes:
        here: to run in the shared child (trusted, or their lane could not start a
            thread: run with the others, as before the quarantine).
        handed: names taken by their lanes (each lane stores its result).
        waits: the lane items of the substreams new here: waited for, for a while.
        refused: (substream, reason) of each one whose lane is full: its result is
            ``shed`` with that reason.
    """

    here: tuple[Substream, ...]
    handed: tuple[str, ...] = ()
    waits: tuple[LaneItem, ...] = ()
    refused: tuple[tuple[Substream, str], ...] = ()


def hand_off(
    trust: Trust,
    lanes: Lanes,
    key: ChunkKey,
    subs: Sequence[Substream],
    source: list[Event] | Loader,
    *,
    deadline: float,
    audit: bool,
) -> HandOff:
    """Give each of ``subs`` that ``trust`` does not trust to its lane; never blocks.

    Args:
        key, source: the chunk and its events (see :class:`LaneItem`).
        deadline: a lane's run must start before this (clock time).
        audit: the auditor sent the chunk.
    """
    here: list[Substream] = []
    handed: list[str] = []
    waits: list[LaneItem] = []
    refused: list[tuple[Substream, str]] = []
    for sub in subs:
        if trust.trusted(sub):
            here.append(sub)
            continue
        item = LaneItem(sub, key, source, deadline, audit)
        new = not trust.failed(sub)
        verdict = lanes.submit(item)
        if verdict is None:
            handed.append(sub.name)  # the lane stores it
            if new:
                waits.append(item)
        elif verdict == "no thread":
            here.append(sub)  # out of threads: run it with the others, as before
        else:
            reason = (
                f"quarantined: {sub.name} runs apart, one chunk at a time, since it is "
                "new here or failed recently; its queue of chunks is full"
            )
            refused.append((sub, reason))
    return HandOff(tuple(here), tuple(handed), tuple(waits), tuple(refused))
