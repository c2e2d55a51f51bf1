"""What most relocator integration tests stand on, as one value: :class:`Rig`."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devnode.testing import DevnodeProcess
from eventstore.riak import RiakClient
from relocator.testing import RelocatorProcess, relocator_process, stored_events


@dataclass(frozen=True)
class Rig:
    """A relocator test's ground: its own directory (``tmp_path``), the session's
    devnode and a client of it, a dc of its own, and the relocator processes it starts
    (killed after the test, their logs printed if it failed: the ``relocators``
    fixture)."""

    tmp_path: Path
    devnode: DevnodeProcess
    riak: RiakClient
    dc: str
    relocators: list[RelocatorProcess]

    def relocator(
        self, clusters: dict[str, str] | None = None, **options: Any
    ) -> tuple[RelocatorProcess, int]:
        """A relocator in ``tmp_path`` pushing to ``clusters`` (default: cluster ``a``,
        the devnode), not started, killed after the test; ``options`` as for
        :func:`relocator.testing.relocator_process`.

        Returns:
            The process and its TCP intake port.
        """
        proc, tcp = relocator_process(self.tmp_path, clusters or {"a": self.devnode.url}, **options)
        self.relocators.append(proc)
        return proc, tcp

    def spool(self) -> Path:
        """A spool directory of this test's own (``tmp_path/spool``), made."""
        directory = self.tmp_path / "spool"
        directory.mkdir()
        return directory

    def stored_ids(self, epochs: range) -> list[Any]:
        """The ``id`` of every event stored for this dc in ``epochs``, repeats kept; fails
        the test if the metadata lists a chunk that cannot be read."""
        events, unreadable = stored_events(self.riak, self.dc, epochs)
        assert not unreadable, unreadable
        return [e["id"] for e in events]

    def wait_stored(self, epochs: range, want: set[Any], timeout_s: float = 30.0) -> list[Any]:
        """:meth:`stored_ids` once they include ``want``, or whatever is stored after
        ``timeout_s`` (the caller's assertions then say what is missing)."""
        deadline = time.monotonic() + timeout_s
        while True:
            ids = self.stored_ids(epochs)
            if want <= set(ids) or time.monotonic() > deadline:
                return ids
            time.sleep(0.2)
