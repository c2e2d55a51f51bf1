"""Following a dc seconds behind real time, in order, resumable from a saved position.

The seed's real-time consumers (graphs, anomaly detection, A/B testing) read every
epoch a few seconds after it ends. :class:`Tail` does it::

    next = position file's next_epoch, or `start`, or the newest due epoch
           (now - lag_s - 1: a fresh tail begins at the present, so an `until`
           before it delivers nothing; the CLI then says so)
    loop (until `until`, if given):
        due = next + 1 + lag_s                       # the epoch has ended, plus the lag
        sleep until due
        metadata = GET <next>-<dc>
        while none and now < due + late_wait_s: sleep poll_s; GET again   # late metadata
        none: the epoch is SKIPPED: yielded with found=False, skipped=True, counted
              (consumer_tail_skipped_total), listed in Tail.skipped, logged at DEBUG and
              summed up at most once a minute per dc at WARNING (an idle dc skips one
              epoch a second: "no metadata for 60 epochs in [a, b]")
        else: read its kept chunks (verified, prefetched in parallel), yield the Epoch
              (tail_substream: the substream's results of its chunks, a SubstreamEpoch)
        when the consumer asks for the next one, the yielded epoch is DELIVERED:
              write next_epoch = next + 1 to the position file (atomically), next += 1

What is committed when: the position advances only past epochs the consumer has
finished with: it asked for the next one, or left the ``with`` block without an
exception. A consumer that dies while handling epoch E finds E again on restart
(at-least-once for the one in hand; nothing it finished is repeated, nothing is lost).

Failure scenarios:

1. **Consumer restart**: resumes at the saved ``next_epoch``; epochs that ended meanwhile
   are already due and are read at once (catch-up), then it follows real time again.
2. **Writer late** (relocator restarting, slow cluster): metadata appears within
   ``late_wait_s`` of the epoch's due time: delivered late, in order. The wait is counted
   from the due time, so during catch-up an epoch long overdue is skipped at once.
3. **Metadata merged after delivery** (a late blob): not re-delivered; raise ``lag_s``
   above the writers' grace window to avoid it.
4. **Riak unavailable**: :class:`~consumer_lib.errors.StoreUnavailable` is raised; the
   position holds the last delivered epoch; restart to resume.
5. **Position file unwritable or another dc's**: :class:`~consumer_lib.errors.PositionError`.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Generic, TypeVar

from prometheus_client import Counter

from consumer_lib.errors import PositionError
from consumer_lib.instants import utc
from consumer_lib.store import Store
from consumer_lib.types import Epoch, SubstreamEpoch
from eventstore.names import ChunkRef
from eventstore.ratelog import LogSummary

log = logging.getLogger(__name__)

__all__ = ["Position", "Tail"]

#: What a tail yields per epoch: a full-stream Epoch or a SubstreamEpoch.
T = TypeVar("T", Epoch, SubstreamEpoch)

SKIPPED_TOTAL = Counter(
    "consumer_tail_skipped_total", "Epochs tail moved past without metadata", ["dc"]
)


class Position:
    """A small JSON file holding where a tail resumes: ``{"dc", "next_epoch"}``.

    Written atomically (temporary file, fsync, rename, fsync of the directory), so a
    crash leaves the old or the new position, never a torn one.
    """

    def __init__(self, path: Path, dc: str) -> None:
        self.path = path
        self.dc = dc

    def load(self) -> int | None:
        """The saved next epoch, or None when there is no file yet.

        Raises:
            PositionError: unreadable, malformed, or saved for another dc.
        """
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:
            raise PositionError(f"position file {self.path} unreadable: {e}", dc=self.dc) from e
        if not isinstance(raw, dict) or not isinstance(raw.get("next_epoch"), int):
            raise PositionError(f"position file {self.path} is malformed", dc=self.dc)
        if raw.get("dc") != self.dc:
            raise PositionError(
                f"position file {self.path} is for dc {raw.get('dc')!r}", dc=self.dc
            )
        return int(raw["next_epoch"])

    def save(self, next_epoch: int) -> None:
        """Record that every epoch before ``next_epoch`` was delivered.

        Raises:
            PositionError: the file cannot be written.
        """
        data = json.dumps({"dc": self.dc, "next_epoch": next_epoch, "saved_at": time.time()})
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        try:
            with tmp.open("w", encoding="utf-8") as f:
                f.write(data + "\n")
                f.flush()
                os.fsync(f.fileno())
            tmp.replace(self.path)
            fd = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as e:
            raise PositionError(
                f"position file {self.path} not written: {e}", epoch=next_epoch, dc=self.dc
            ) from e


class Tail(Generic[T]):
    """Epochs of one dc as they become due, in order (see module docstring).

    Use as ``with client.tail(dc, position=path) as tail: for epoch in tail: ...``.

    Args:
        store: reads (metadata polling).
        dc: the data centre.
        read: reads a due epoch from its metadata (the full stream's chunks, or a
            substream's results); called with None for an epoch skipped.
        position: the position file, or None (no resume).
        start: first epoch when there is no saved position (default: now - lag_s).
        lag_s: seconds after an epoch's end before it is read.
        late_wait_s: how long after that to wait for late metadata before skipping.
        poll_s: interval between metadata reads while waiting.
        until: stop before this epoch (exclusive); None: follow forever.
        clock, sleep: wall clock (unix seconds) and sleep, injected for tests.
    """

    def __init__(
        self,
        store: Store,
        dc: str,
        read: Callable[[int, tuple[ChunkRef, ...] | None], T],
        *,
        position: Path | None,
        start: int | None,
        lag_s: float,
        late_wait_s: float,
        poll_s: float,
        until: int | None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._store = store
        self.dc = dc
        self._read_epoch: Callable[[int, tuple[ChunkRef, ...] | None], T] = read
        self._position = None if position is None else Position(position, dc)
        self._lag_s = lag_s
        self._late_wait_s = late_wait_s
        self._poll_s = poll_s
        self.until = until
        self._clock = clock
        self._sleep = sleep
        saved = None if self._position is None else self._position.load()
        #: Where the first epoch came from: "position" (the file), "start" (the
        #: argument) or "newest due" (a fresh position: now - lag_s - 1).
        self.origin: str
        if saved is not None:
            self.next_epoch, self.origin = saved, "position"
        elif start is not None:
            self.next_epoch, self.origin = start, "start"
        else:
            self.next_epoch = max(0, math.floor(clock() - lag_s) - 1)
            self.origin = "newest due"
        #: The first epoch this tail reads.
        self.first_epoch = self.next_epoch
        #: Epochs moved past without metadata, in order.
        self.skipped: list[int] = []
        self._in_hand: int | None = None
        self._skips = LogSummary(
            log,
            "consumer: tail dc=%(key)s: no metadata for %(count)d epoch(s) in "
            f"[%(first)s, %(last)s], skipped ({late_wait_s:g} s after each was due)",
            clock=clock,
        )

    def __iter__(self) -> Iterator[T]:
        # Say at once what is awaited: the first epoch is read lag_s after it ends, and
        # an idle dc's is skipped only late_wait_s after that (nothing to wait for when
        # the end is not after the first epoch: the CLI says why).
        if self.until is not None and self.next_epoch >= self.until:
            return
        log.info(
            "consumer: tail dc=%s: waiting for epoch %d (lag %g s, then up to %g s for "
            "late metadata; the epoch began at %s)",
            self.dc,
            self.next_epoch,
            self._lag_s,
            self._late_wait_s,
            utc(self.next_epoch),
        )
        while self.until is None or self.next_epoch < self.until:
            epoch = self._read(self.next_epoch)
            self._in_hand = epoch.epoch
            yield epoch
            self.commit()

    def commit(self) -> None:
        """Mark the epoch in hand delivered: the position moves past it."""
        if self._in_hand is None:
            return
        self.next_epoch = self._in_hand + 1
        self._in_hand = None
        if self._position is not None:
            self._position.save(self.next_epoch)

    def _read(self, epoch: int) -> T:
        due = epoch + 1 + self._lag_s
        self._wait_until(due)
        refs = self._store.metadata(epoch, self.dc)
        give_up = due + self._late_wait_s
        while refs is None and self._clock() < give_up:
            self._sleep(min(self._poll_s, max(0.0, give_up - self._clock())))
            refs = self._store.metadata(epoch, self.dc)
        if refs is None:
            self.skipped.append(epoch)
            SKIPPED_TOTAL.labels(self.dc).inc()
            log.debug(
                "consumer: tail epoch=%d dc=%s key=%d-%s: no metadata %.1fs after it was due; "
                "skipped",
                epoch,
                self.dc,
                epoch,
                self.dc,
                self._late_wait_s,
            )
            self._skips.note(self.dc, str(epoch))
        return self._read_epoch(epoch, refs)

    def _wait_until(self, when: float) -> None:
        while True:
            left = when - self._clock()
            if left <= 0:
                return
            self._sleep(min(left, 1.0))

    def __enter__(self) -> Tail[T]:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc_info: object) -> None:
        # Left normally (break, return): the epoch in hand was handled. Left by an
        # exception: it may not have been, so it is read again on restart.
        if exc_type is None:
            self.commit()
        self._in_hand = None
        self._skips.flush()
