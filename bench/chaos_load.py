"""The chaos campaign's load: acknowledged TCP producers and a spool writer, every event
with a unique ``chaos_id``, each recording exactly which ids were made durable.

:class:`AckedProducer` sends the realistic mix (:mod:`relocator.events`) through
:class:`relocator.producer.TcpEmitter` (with a producer id, or without one: a legacy,
at-least-once producer) and a :class:`relocator.ack_proxy.AckCutProxy`, which can swallow an
acknowledgement the relocator sent after its fdatasync and cut the connection, so the
producer resends frames the relocator already holds. :class:`SpoolWriter` drops
per-epoch blobs into the relocators' shared spool directory as an external aggregator
does, and on request files with an event at and above ``max_event_bytes``.
"""

from __future__ import annotations

import itertools
import os
import random
import threading
import time
from pathlib import Path

import sereal_codec as sereal
from fleet.harness import Background
from relocator import defaults
from relocator.ack_proxy import AckCutProxy
from relocator.events import iter_events
from relocator.producer import TcpEmitter

__all__ = ["ID_KEY", "AckedProducer", "SpoolWriter"]

#: The field every campaign event carries: an int unique in the run.
ID_KEY = "chaos_id"


class AckedProducer:
    """A TCP producer of the realistic mix, each event with a unique ``chaos_id``.

    ``acked_ids()`` is exact: :class:`TcpEmitter` acknowledges frames in the order
    they were handed over (unacked ones are resent first, in order), so the first
    ``emitter.acked`` handed-over ids are the acknowledged ones.

    Args:
        name: for reports.
        port: the relocator's TCP port (or its proxy's).
        dcs: dcs of the events.
        first_id: the first ``chaos_id``; the next ones count up.
        rate: events per second.
        seed: the event generator's seed.
        idempotent: a producer id and numbered frames (the default of ``TcpEmitter``);
            False: a legacy producer, at-least-once by design.
        proxy: the proxy ``port`` belongs to, if any (for the ack-cut fault).
    """

    def __init__(
        self,
        name: str,
        port: int,
        dcs: tuple[str, ...],
        *,
        first_id: int,
        rate: float,
        seed: int,
        idempotent: bool = True,
        proxy: AckCutProxy | None = None,
    ) -> None:
        self.name = name
        self.first_id = first_id
        self.idempotent = idempotent
        self.proxy = proxy
        self.emitter = TcpEmitter(
            "127.0.0.1", port, dc=dcs[0], queue_max=200_000, idempotent=idempotent
        )
        self._dcs = dcs
        self._next_id = first_id
        self._rate = rate
        self._seed = seed
        self._handed: list[int] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"producer-{name}", daemon=True)

    def start(self) -> AckedProducer:
        self._thread.start()
        return self

    def acked_count(self) -> int:
        """Events acknowledged so far."""
        return self.emitter.acked

    def acked_ids(self) -> list[int]:
        """The ids the relocator acknowledged, in order."""
        with self._lock:
            return self._handed[: self.emitter.acked]

    def handed_over(self) -> int:
        """Events handed to the emitter (acknowledged or not yet)."""
        with self._lock:
            return len(self._handed)

    def halt(self) -> None:
        """Stop producing (without waiting for anything)."""
        self._stop.set()

    def stop(self, flush_s: float) -> bool:
        """Stop producing; wait up to ``flush_s`` for every event to be acknowledged.

        Returns:
            Whether everything handed over was acknowledged.
        """
        self._stop.set()
        self._thread.join(10)
        done = self.emitter.flush(flush_s)
        # Cut the connection first: TcpEmitter.close joins its thread, which ends a
        # connection only once nothing is left unacknowledged.
        if self.proxy is not None:
            self.proxy.close()
        self.emitter.close(0.1)
        return done

    def _run(self) -> None:
        start = time.monotonic()
        sent = 0
        for event in iter_events(self._seed, epoch=None, dcs=self._dcs):
            if self._stop.is_set():
                return
            elapsed = time.monotonic() - start
            if sent >= self._rate * elapsed:
                time.sleep(min(0.02, sent / self._rate - elapsed))
                continue
            epoch = int(time.time())
            event["epoch"] = epoch
            with self._lock:
                event[ID_KEY] = self._next_id
                if self.emitter.emit(
                    event, event["type"], event["subtype"], event["dc"], epoch=epoch
                ):
                    self._handed.append(self._next_id)
                    self._next_id += 1
            sent += 1


class SpoolWriter(Background):
    """Writes a spool file every ``interval_s`` as an external aggregator does (a
    dotfile, fsync, rename, fsync of the directory); its ids count as acknowledged once
    the rename is durable.

    Args:
        directory: the shared spool directory.
        dcs: dcs the files cycle through.
        first_id: the first ``chaos_id``.
        events: events per file.
        interval_s: seconds between files.
    """

    def __init__(
        self,
        directory: Path,
        dcs: tuple[str, ...],
        *,
        first_id: int,
        events: int,
        interval_s: float,
    ) -> None:
        super().__init__("spool-writer")
        self.directory = directory
        self._dcs = itertools.cycle(dcs)
        self._next_id = first_id
        self._events = events
        self._interval_s = interval_s
        self.written: list[int] = []
        #: ids of events in files the relocators must refuse whole (moved to
        #: ``.rejected/``): file name -> ids
        self.refused: dict[str, list[int]] = {}
        self.files = 0
        self._lock = threading.Lock()

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            epoch, dc = int(time.time()), next(self._dcs)
            with self._lock:
                ids = list(range(self._next_id, self._next_id + self._events))
                self._next_id += self._events
            body = sereal.encode([self._event(i, dc, epoch) for i in ids], compress="zstd")
            self._drop(f"{epoch}-{dc}-cron-spool-f{self.files}.srl", body, ids)

    @staticmethod
    def _event(i: int, dc: str, epoch: int) -> dict[str, object]:
        return {
            ID_KEY: i,
            "type": "cron",
            "subtype": "spool",
            "dc": dc,
            "epoch": epoch,
            "job": "chaos.spool",
            "host": f"cron-001.{dc}.example.com",
        }

    def _drop(self, name: str, body: bytes, ids: list[int], *, refused: bool = False) -> None:
        """Write ``name`` as an aggregator does; its ids count once the rename is durable."""
        tmp = self.directory / f".{name}.tmp"
        with tmp.open("wb") as f:
            f.write(body)
            f.flush()
            os.fsync(f.fileno())
        tmp.rename(self.directory / name)
        fd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        with self._lock:
            if refused:
                self.refused[name] = ids
            else:
                self.written.extend(ids)
            self.files += 1

    def write_big(self, rng: random.Random) -> dict[str, list[str]]:
        """Three spool files of 20 events around one big event (random hex, so it does
        not compress away): one of exactly ``max_event_bytes`` encoded (an uncompressed
        file), one of ``max_event_bytes + 1`` (zstd), both to be stored whole (the
        spool path takes whole blobs: relocator/DESIGN.md scenario 10 bounds a file by
        ``max_spool_bytes`` and an event by what fits a chunk); and one whose big event
        needs more than ``chunk_max_bytes`` stored, to be refused whole (moved to
        ``.rejected/``, none of its events stored). Returns the names by expectation."""
        epoch, dc = int(time.time()), next(self._dcs)
        out: dict[str, list[str]] = {"stored": [], "refused": []}
        cases = (
            (defaults.MAX_EVENT_BYTES, None, False),
            (defaults.MAX_EVENT_BYTES + 1, "zstd", False),
            (defaults.CHUNK_MAX_BYTES * 5 // 2, "zstd", True),
        )
        for size, compress, refused in cases:
            with self._lock:
                ids = list(range(self._next_id, self._next_id + 21))
                self._next_id += 21
            events = [self._event(i, dc, epoch) for i in ids]
            events[10] = _sized(events[10], size, rng)
            body = sereal.encode(events, compress=compress)
            name = f"{epoch}-{dc}-cron-spool-big{ids[0]}x{size}.srl"
            self._drop(name, body, ids, refused=refused)
            out["refused" if refused else "stored"].append(name)
        return out


def _sized(event: dict[str, object], size: int, rng: random.Random) -> dict[str, object]:
    """``event`` with a ``pad`` of random hex making it exactly ``size`` bytes encoded
    (uncompressed Sereal)."""
    text = rng.randbytes(size // 2 + 64).hex()
    length = size - len(sereal.encode({**event, "pad": ""}, compress=None))
    for _ in range(8):
        event = {**event, "pad": text[: max(0, length)]}
        n = len(sereal.encode(event, compress=None))
        if n == size:
            return event
        length += size - n
    raise ValueError(f"could not size an event to {size} bytes (got {n})")
