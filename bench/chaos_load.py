"""The chaos campaign's load: acknowledged TCP producers and a spool writer, every event
with a unique ``chaos_id``, each recording exactly which ids were made durable.

:class:`AckedProducer` sends the realistic mix (:mod:`relocator.events`) through
:class:`relocator.producer.TcpEmitter`; :class:`SpoolWriter` drops per-epoch blobs into
the relocators' shared spool directory as an external aggregator does.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from pathlib import Path

from eventstore import sereal
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
        port: the relocator's TCP port.
        dcs: dcs of the events.
        first_id: the first ``chaos_id``; the next ones count up.
        rate: events per second.
        seed: the event generator's seed.
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
    ) -> None:
        self.name = name
        self.emitter = TcpEmitter("127.0.0.1", port, dc=dcs[0], queue_max=200_000)
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

    def stop(self, flush_s: float) -> bool:
        """Stop producing; wait up to ``flush_s`` for every event to be acknowledged.

        Returns:
            Whether everything handed over was acknowledged.
        """
        self._stop.set()
        self._thread.join(10)
        done = self.emitter.flush(flush_s)
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


class SpoolWriter:
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
        self.directory = directory
        self._dcs = itertools.cycle(dcs)
        self._next_id = first_id
        self._events = events
        self._interval_s = interval_s
        self.written: list[int] = []
        self.files = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="spool-writer", daemon=True)

    def start(self) -> SpoolWriter:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            epoch, dc = int(time.time()), next(self._dcs)
            ids = list(range(self._next_id, self._next_id + self._events))
            body = sereal.encode(
                [
                    {
                        ID_KEY: i,
                        "type": "cron",
                        "subtype": "spool",
                        "dc": dc,
                        "epoch": epoch,
                        "job": "chaos.spool",
                        "host": f"cron-001.{dc}.example.com",
                    }
                    for i in ids
                ],
                compress="zstd",
            )
            name = f"{epoch}-{dc}-cron-spool-f{self.files}.srl"
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
            self.written.extend(ids)
            self._next_id += self._events
            self.files += 1
