"""The spool directory: whole per-epoch blobs dropped by an external aggregator.

A spool file is named ``<epoch>-<dc>-<type>-<subtype>[-<tag>].srl`` (subtype may be
empty; ``tag`` makes names unique between aggregators) and holds one Sereal document
whose body is an array of events (Perl's Sereal::Encoder output, any compression, with
or without our checksum postfix). Writers must write under a name starting with ``.``
and rename it into place, so a half-written file is never seen.

The relocator splits a file into a batch, pushes it to every cluster, and deletes the
file only once every cluster holds its chunks and metadata. A file already inside a
stored batch is not split again (after a restart). A file that cannot be used is moved
to ``.rejected/`` and counted. With ZooKeeper, files are assigned to work units
``crc32(name) % units`` and only the unit's owner splits them (``relocator.zk``).
"""

from __future__ import annotations

import logging
import os
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from relocator.errors import BadSpoolFile

log = logging.getLogger(__name__)

_NAME = re.compile(
    r"(0|[1-9][0-9]*)-([A-Za-z0-9_]+)-([A-Za-z0-9_.]+?)-([A-Za-z0-9_.]*?)(?:-([A-Za-z0-9_.]+))?\.srl"
)


@dataclass(frozen=True)
class SpoolFile:
    """A spool file's name, parsed, and its work unit."""

    name: str
    epoch: int
    dc: str
    type: str
    subtype: str
    unit: int


def parse_name(name: str, units: int) -> SpoolFile:
    """Parse a spool file name.

    Raises:
        BadSpoolFile: not of the form ``<epoch>-<dc>-<type>-<subtype>[-<tag>].srl``.
    """
    m = _NAME.fullmatch(name)
    if not m:
        raise BadSpoolFile(f"spool file name {name!r} is not <epoch>-<dc>-<type>-<subtype>.srl")
    return SpoolFile(name, int(m[1]), m[2], m[3], m[4], unit_of(name, units))


def unit_of(name: str, units: int) -> int:
    """The work unit of a spool file: ``crc32(name) % units``."""
    return zlib.crc32(name.encode()) % units


class Spool:
    """Lists the files waiting, reads them, deletes or rejects them."""

    def __init__(self, directory: Path, *, units: int, max_bytes: int) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self._units = units
        self._max_bytes = max_bytes

    def unit(self, name: str) -> int:
        """The work unit of the file ``name``."""
        return unit_of(name, self._units)

    def waiting(self, skip: Callable[[SpoolFile], bool]) -> list[SpoolFile]:
        """Files present, oldest name first, except those ``skip`` says are taken.

        Names that do not parse are rejected (moved aside) here.
        """
        out = []
        for entry in sorted(os.listdir(self.directory)):
            if entry.startswith(".") or not entry.endswith(".srl"):
                continue
            try:
                f = parse_name(entry, self._units)
            except BadSpoolFile as e:
                self.reject(entry, str(e))
                continue
            if not skip(f):
                out.append(f)
        return out

    def read(self, f: SpoolFile) -> bytes | None:
        """The file's bytes; None if it vanished (another relocator finished it).

        Raises:
            BadSpoolFile: larger than ``max_spool_bytes``.
        """
        path = self.directory / f.name
        try:
            if path.stat().st_size > self._max_bytes:
                raise BadSpoolFile(f"spool file {f.name} is larger than {self._max_bytes}")
            return path.read_bytes()
        except FileNotFoundError:
            return None

    def delete(self, name: str) -> None:
        """Remove a file every cluster holds (durably: the directory is fsynced)."""
        try:
            (self.directory / name).unlink()
        except FileNotFoundError:
            return
        fd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def reject(self, name: str, reason: str) -> None:
        """Move a file we cannot use to ``.rejected/``."""
        rejected = self.directory / ".rejected"
        rejected.mkdir(exist_ok=True)
        try:
            os.replace(self.directory / name, rejected / name)
        except FileNotFoundError:
            return
        log.error("spool: rejected %s: %s", name, reason)
